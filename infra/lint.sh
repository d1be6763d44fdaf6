#!/usr/bin/env bash
# The static checks of `make lint` and `make test`: ruff (every Python folder), mypy (the typed
# packages) and lint-imports (the import contracts of pyproject.toml). Runs all three and
# exits non-zero when any of them fails, naming which.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
venv="${PROTOLAKE_VENV:-$root/.venv}"

typed=(codec lakehouse pipelines quality)

failed=()
echo "== ruff check"
"$venv/bin/ruff" check "${typed[@]}" dags tests infra bench || failed+=(ruff)
echo "== mypy ${typed[*]}"
"$venv/bin/mypy" "${typed[@]}" || failed+=(mypy)
echo "== lint-imports"
"$venv/bin/lint-imports" || failed+=(lint-imports)

if [ ${#failed[@]} -gt 0 ]; then
  echo "lint: failed: ${failed[*]}" >&2
  exit 1
fi
