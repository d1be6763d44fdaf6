#!/usr/bin/env bash
# Install what is missing, and nothing that is already there: the Python virtualenv with the
# project and its extras, the JVM jars (Maven Central), the SeaweedFS object store (built from
# the Go module proxy), Debian's gcc when no C compiler is
# there (the compiled decoder), Debian's postgresql (a metastore on PostgreSQL) and Debian's
# chromium for the Data Docs test.
# Safe to repeat; a no-op when everything is current.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
venv="${PROTOLAKE_VENV:-$root/.venv}"
python="${PYTHON:-python3}"

# SeaweedFS, the stack's S3-compatible store (infra/stack.sh up s3), built from the Go module
# proxy. PROTOLAKE_SKIP_SEAWEEDFS=1 skips it (no s3a:// tests nor `make demo-s3` then). Its
# build (minutes of CPU) runs in the background while the Python packages, the jars and the
# Debian packages install; its output is shown once it is done. It runs in a session of its
# own, so that a set-up that fails before waiting for it stops it too (no build left running).
weed_pid=""
weed_log="$(mktemp)"
stop_weed_build() {
  if [ -n "$weed_pid" ] && kill -0 "$weed_pid" 2>/dev/null; then
    kill -TERM -- "-$weed_pid" 2>/dev/null || true
  fi
  rm -f "$weed_log"
}
trap stop_weed_build EXIT
if [ "${PROTOLAKE_SKIP_SEAWEEDFS:-0}" != "1" ]; then
  setsid -w "$root/infra/fetch_seaweedfs.sh" > "$weed_log" 2>&1 &
  weed_pid=$!
fi

# Debian's packages for what the machine lacks: the package index is read once, before the
# first install; another user than root installs through `sudo -n` (never a password prompt).
# Returns non-zero when apt-get is missing or fails.
apt_updated=0
apt_get() {
  if [ "$(id -u)" = 0 ]; then
    DEBIAN_FRONTEND=noninteractive apt-get "$@"
  elif command -v sudo >/dev/null; then
    sudo -n env DEBIAN_FRONTEND=noninteractive apt-get "$@"
  else
    return 1
  fi
}
apt_install() {  # apt_install PACKAGE...
  command -v apt-get >/dev/null || return 1
  if [ "$apt_updated" = 0 ]; then
    apt_get update -qq || return 1
    apt_updated=1
  fi
  apt_get install -y -qq "$@" >/dev/null
}

if [ -x "$venv/bin/python" ] && ! "$venv/bin/python" -m pip --version >/dev/null 2>&1; then
  # a virtualenv without pip (made by `uv venv`, or an interrupted attempt): given one
  "$venv/bin/python" -m ensurepip --upgrade >/dev/null 2>&1 || true
fi
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -m pip --version >/dev/null 2>&1; then
  # none, or one whose pip could not be installed
  echo "creating virtualenv $venv"
  rm -rf "$venv"
  if ! "$python" -m venv "$venv"; then
    # Debian's python3 comes without ensurepip: its pythonX.Y-venv package has it
    rm -rf "$venv"
    version="$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
    echo "installing python$version-venv (Debian): $python cannot make a virtualenv"
    apt_install "python$version-venv" || apt_install python3-venv || {
      echo "setup: could not install python$version-venv (Debian); install it, then retry" >&2
      exit 1
    }
    "$python" -m venv "$venv"
  fi
fi
# Reinstall only when pyproject.toml changed since the last install.
stamp="$venv/.protolake-installed"
# (the stamp also names how the packages are installed: a virtualenv installed without their
# bytecode, below, is installed again)
want="$(sha256sum pyproject.toml | cut -d' ' -f1) compile-bytecode"
# The packages go in with uv (PyPI's `uv`, into the virtualenv first): about half of pip's
# time on a clean clone (30 s against 62 s on 2 cores, warm caches), and the same versions
# (`pip freeze` of the two virtualenvs differs only by uv). pip does it when uv cannot be
# installed. Both write the packages' bytecode (.pyc) at install, as pip does by default and uv
# only when asked (--compile-bytecode): without it, a machine with PYTHONDONTWRITEBYTECODE=1
# (CI images often set it) compiles every module from source in every process, and a job's
# processes (its driver, Spark's Python workers, Airflow's tasks) import thousands of modules:
# `import great_expectations` alone took 9.4 s of CPU without bytecode and 4.8 s with it.
# The dependencies PyPI has as source only come from wheels built once per machine
# (infra/fetch_wheels.sh: otherwise each install downloads and builds pyspark again).
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "installing protolake and its dependencies into $venv"
  kept=()
  if wheels="$("$root/infra/fetch_wheels.sh" "$venv/bin/python")"; then
    kept=(--find-links "$wheels")
  else
    echo "setup: no kept wheels; the install builds pyspark from source" >&2
  fi
  if "$venv/bin/python" -m pip install -q uv; then
    "$venv/bin/uv" pip install -q --compile-bytecode "${kept[@]}" \
      --python "$venv/bin/python" -e ".[all,dev]"
  else
    echo "setup: no uv; installing with pip" >&2
    "$venv/bin/python" -m pip install -q --upgrade pip
    "$venv/bin/python" -m pip install -q "${kept[@]}" -e ".[all,dev]"
  fi
  echo "$want" > "$stamp"
fi
# The project's own modules (an editable install: they are read from this checkout) get their
# bytecode the same way; compileall skips what is current and Python ignores a .pyc whose
# source changed since (it compiles that module in memory), so this is only ever a saving.
"$venv/bin/python" -m compileall -q -j 0 codec dags infra lakehouse pipelines quality tests bench >/dev/null ||
  echo "setup: could not write the project's bytecode; running from source" >&2

command -v java >/dev/null || { echo "java (JDK 17+) is required: apt-get install openjdk-17-jdk-headless" >&2; exit 1; }
# the metastore's and SQL endpoint's own classes are compiled at their first start
command -v javac >/dev/null || { echo "javac (JDK 17+, not a JRE alone) is required: apt-get install openjdk-17-jdk-headless" >&2; exit 1; }

if ! command -v mvn >/dev/null; then
  echo "installing maven (Debian)"
  apt_install maven || { echo "setup: could not install maven (Debian), needed for the jars" >&2; exit 1; }
fi
"$root/infra/fetch_jars.sh"

# The silver job's compiled decoder (pipelines/proto_types/wire2arrow.c) is built on first use
# with the system C compiler; without one, silver still runs, on the slower upb path.
if ! command -v "${CC:-cc}" >/dev/null && ! command -v gcc >/dev/null; then
  echo "installing gcc (Debian) for the compiled protobuf decoder"
  apt_install gcc libc6-dev || echo "warning: could not install gcc; silver will decode on the upb path" >&2
fi

# PostgreSQL (Debian's packages) for a metastore on a real database (infra/stack.sh up postgres,
# PROTOLAKE_METASTORE_DB=postgres); its JDBC driver comes with the jars above.
if ! command -v psql >/dev/null || ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  echo "installing postgresql (Debian) for the metastore's database"
  apt_install postgresql || echo "warning: could not install postgresql; infra/stack.sh up postgres will fail" >&2
fi

if [ "${PROTOLAKE_SKIP_CHROMIUM:-0}" != "1" ] && ! command -v chromium >/dev/null; then
  echo "installing chromium (Debian) for the Data Docs browser test"
  apt_install chromium || echo "warning: could not install chromium; the Data Docs browser test will fail" >&2
fi

# SeaweedFS last: on a machine without Go's build cache its build takes longer than everything
# above, which runs meanwhile.
if [ -n "$weed_pid" ]; then
  built=0
  wait "$weed_pid" && built=1
  weed_pid=""  # ended: nothing for the trap to stop
  if [ "$built" != 1 ]; then
    cat "$weed_log" >&2
    echo "setup: building SeaweedFS failed (PROTOLAKE_SKIP_SEAWEEDFS=1 skips it)" >&2
    exit 1
  fi
  cat "$weed_log"
fi
