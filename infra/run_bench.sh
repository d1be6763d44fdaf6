#!/usr/bin/env bash
# Run every benchmark script bench/*.py in turn with the project's Python, printing each one's
# output under a header. Expects the stack to be up (`make bench` starts it). A missing or
# empty bench/ folder is not an error. Exits non-zero if any benchmark failed (all still run).
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
python="${PROTOLAKE_VENV:-$root/.venv}/bin/python"
export SPARK_LOCAL_IP="${SPARK_LOCAL_IP:-127.0.0.1}"
shopt -s nullglob
# Files starting with "_" are helpers (bench/_common.py, __init__.py), not benchmarks.
scripts=()
for f in bench/*.py; do case "$(basename "$f")" in _*) ;; *) scripts+=("$f") ;; esac; done
if [ ${#scripts[@]} -eq 0 ]; then echo "no benchmarks in bench/"; exit 0; fi
failed=()
for script in "${scripts[@]}"; do
  echo "== $script"
  "$python" "$script" || failed+=("$script")
  echo
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "failed: ${failed[*]}" >&2
  exit 1
fi
