#!/usr/bin/env bash
# Run the whole suite against the local stack: the static checks of infra/lint.sh (ruff, mypy,
# lint-imports), the class archive of the suite's Spark JVMs, then pytest (tests/unit,
# tests/spark, tests/integration).
#   infra/run_tests.sh [pytest args...]      e.g. infra/run_tests.sh -k registry -x
#   PROTOLAKE_TEST_WORKERS=0 infra/run_tests.sh   one process (default 3, pytest-xdist)
# Starts what of the stack is not running (infra/stack.sh up) while the static checks run and,
# on exit, stops only what it started: a stack that was already up before stays up. Exits with
# pytest's code, or 1 without running pytest when a static check fails or a service does not
# start.
# The same environment variables as infra/stack.sh choose ports and the run folder.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
venv="${PROTOLAKE_VENV:-$root/.venv}"
export SPARK_LOCAL_IP="${SPARK_LOCAL_IP:-127.0.0.1}"

# The services, in three chains that start at once while the static checks run (below): most
# of a start is waiting for a JVM to answer. Within a chain, `up s3` writes the store's
# credential file (run/s3.env) that the SQL server reads, and the SQL server needs the
# metastore; the chains share no files.
chains=("kafka" "registry apicurio" "s3 metastore sqlserver")
if [ "${PROTOLAKE_SKIP_SEAWEEDFS:-0}" = "1" ]; then
  # no object store (infra/setup.sh built none): the rest of the suite runs, its s3a:// tests
  # fail (the SQL server writes the store's credential file itself, infra/catalog.sh)
  chains=("kafka" "registry apicurio" "metastore sqlserver")
  echo "run_tests: PROTOLAKE_SKIP_SEAWEEDFS=1: no object store; the s3a:// tests will fail" >&2
fi
started=()   # the services this run starts, and stops on exit
to_start=()  # per chain, its services that are not running (space-separated)
# Read `status` whole before matching: `status | grep -q` would let grep close the pipe early,
# and under pipefail the SIGPIPE would read as "not running" (and we would stop a stack that
# someone else started).
before="$(infra/stack.sh status 2>/dev/null || true)"
for chain in "${chains[@]}"; do
  ours=""
  for service in $chain; do
    if ! grep -q "^$service *running" <<< "$before"; then
      started+=("$service")
      ours+="$service "
    fi
  done
  [ -z "$ours" ] || to_start+=("$ours")
done
chain_pids=()  # services starting in the background (below)
chain_logs=()
stop_flag="$(mktemp -u)"  # present: the chains start no further service
cleanup() {
  local s
  trap '' INT TERM  # a second signal must not cut the clean-up short
  # A chain still running finishes the start under way (within its timeout) and starts no
  # other, so that `down` finds what it started.
  touch "$stop_flag"
  for s in "${chain_pids[@]+"${chain_pids[@]}"}"; do wait "$s" 2>/dev/null || true; done
  rm -f "$stop_flag" "${chain_logs[@]+"${chain_logs[@]}"}"
  for s in "${started[@]+"${started[@]}"}"; do infra/stack.sh down "$s" || true; done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Each chain's output is shown when it is done.
start_chain() {
  local s
  for s in "$@"; do
    [ ! -e "$stop_flag" ] || return 1
    infra/stack.sh up "$s" || { echo "run_tests: could not start $s" >&2; return 1; }
  done
}
for ours in "${to_start[@]+"${to_start[@]}"}"; do
  log="$(mktemp)"
  # shellcheck disable=SC2086 # the chain's names, one argument each
  start_chain $ours > "$log" 2>&1 &
  chain_pids+=("$!")
  chain_logs+=("$log")
done

checks_ok=1
infra/lint.sh || checks_ok=0
stack_ok=1
for i in "${!chain_pids[@]}"; do
  if wait "${chain_pids[$i]}"; then
    cat "${chain_logs[$i]}"
  else
    stack_ok=0
    cat "${chain_logs[$i]}" >&2
  fi
  rm -f "${chain_logs[$i]}"
done
chain_pids=()  # all ended: nothing for cleanup to wait for
chain_logs=()
[ "$checks_ok" = 1 ] || { echo "run_tests: static checks failed" >&2; exit 1; }
[ "$stack_ok" = 1 ] || exit 1
infra/stack.sh status
echo "run_tests: static checks and stack in ${SECONDS} s"
# The class archive of the suite's Spark JVMs (tests/support/jvm_archive.py: a quarter less CPU
# per JVM start), built when missing or stale; the suite runs without it when that fails. Not
# alongside the services' start: on 2 cores it would push them past their start timeout.
"$venv/bin/python" -m tests.support.jvm_archive || echo "run_tests: running without the class archive" >&2

# Extra arguments go to pytest; when they name test paths, those replace the default `tests`.
targets=(tests)
for arg in "$@"; do
  case "$arg" in -*) ;; *) if [ -e "${arg%%::*}" ]; then targets=(); break; fi ;; esac
done
# Three test processes by default (PROTOLAKE_TEST_WORKERS; 0 runs in this process), on two
# cores too: much of the suite waits on Kafka, subprocesses and stream triggers, and a third
# process keeps both cores busy through those waits (a fourth only adds contention). Files go
# out longest first (tests/conftest.py); a whole file stays on one process, so its module
# fixtures run once.
workers="${PROTOLAKE_TEST_WORKERS:-3}"
parallel=()
[ "$workers" = "0" ] || parallel=(-n "$workers" --dist loadfile --no-loadscope-reorder)
# The report lists the 30 slowest tests and the 30 that used the most CPU time: the suite is
# CPU-bound, and a test's CPU time (its processes') is what it costs the run.
report=(--durations=30 -p tests.support.cpu_report --cpu-report=30)
echo "== pytest ${targets[*]} ${parallel[*]} $*  (${SECONDS} s after the start)"
"$venv/bin/python" -m pytest "${targets[@]}" -q "${report[@]}" "${parallel[@]}" "$@"
exit $?
