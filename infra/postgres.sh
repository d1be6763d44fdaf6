# shellcheck shell=bash
# The stack's PostgreSQL: a database server for the metastore, as a production deployment has
# one (PROTOLAKE_METASTORE_DB=postgres, infra/catalog.sh), from Debian's packages (infra/setup.sh
# installs them). Started only when named: `infra/stack.sh up postgres`. Sourced by
# infra/stack.sh (which defines spawn, pid_of, stop_pid, await_start, port_busy, ...).
#
#   run/postgres/data/   the cluster (initdb on first start; kept across restarts)
#   run/postgres.env     PGHOST, PGPORT, PGUSER, PGPASSWORD and PGDATABASE as shell assignments
#                        (libpq's own variables: `. run/postgres.env && export PGHOST PGPORT
#                        PGUSER PGPASSWORD PGDATABASE && psql`), mode 0600
#   run/logs/postgres.log
#
# One role, `protolake` (the cluster's superuser), with a password generated at initdb and kept
# in run/postgres.env only: initdb reads it from a file deleted at once, and no command line or
# log shows it. The server listens on TCP 127.0.0.1 only (no Unix socket), every connection
# authenticates with scram-sha-256, and the database PGDATABASE (`metastore`) is created on
# first start. PostgreSQL refuses to run as root: a stack run by root runs the server as the
# `postgres` user of Debian's package, which then owns run/postgres/data (the run folder must
# be one that user can reach).
#
# Environment:
#   PROTOLAKE_POSTGRES_PORT  the server's port, default 5433 (5432 is left to a system cluster)
#   PROTOLAKE_POSTGRES_BIN   the folder of initdb and postgres, default `pg_config --bindir`,
#                            else the newest /usr/lib/postgresql/*/bin

pg_port="${PROTOLAKE_POSTGRES_PORT:-5433}"
pg_dir="$run/postgres"
pg_data="$pg_dir/data"
pg_env="$run/postgres.env"
pg_marker="-D $pg_data"

# pg_bin: the folder of PostgreSQL's server programs.
pg_bin() {
  local dir="${PROTOLAKE_POSTGRES_BIN:-}"
  if [ -z "$dir" ]; then
    dir="$(pg_config --bindir 2>/dev/null || true)"
    [ -x "$dir/initdb" ] || dir="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)"
  fi
  [ -n "$dir" ] && [ -x "$dir/initdb" ] && [ -x "$dir/postgres" ] \
    || die "PostgreSQL's server programs are missing: run infra/setup.sh (Debian's postgresql) or set PROTOLAKE_POSTGRES_BIN"
  echo "$dir"
}

# pg_as CMD...: CMD as the user that runs the server (postgres when this shell is root);
# pg_user_prefix is the same as a command prefix (empty when not root), for spawn.
pg_user_prefix=()
[ "$(id -u)" = 0 ] && pg_user_prefix=(setpriv --reuid=postgres --regid=postgres --init-groups --)
pg_as() { "${pg_user_prefix[@]+"${pg_user_prefix[@]}"}" "$@"; }

# pg_env_get NAME: a variable of run/postgres.env (empty when missing).
pg_env_get() { [ -f "$pg_env" ] && sed -n "s/^$1=//p" "$pg_env" || true; }

pg_write_env() {
  local password="$1"
  (umask 077; cat > "$pg_env" <<EOF
# Written by infra/stack.sh up postgres: this loopback server's generated credential.
PGHOST=127.0.0.1
PGPORT=$pg_port
PGUSER=protolake
PGPASSWORD=$password
PGDATABASE=metastore
EOF
  )
}

# pg_init BIN: a new cluster in run/postgres/data, owned by the user that runs the server.
# initdb fills a folder beside it, renamed into place when done: a PG_VERSION in
# run/postgres/data is always a whole cluster. The password is kept first (run/postgres.env).
pg_init() {
  local bin="$1" password pwfile new="$pg_data.new"
  mkdir -p "$pg_dir" "$logs"
  password="$(pg_env_get PGPASSWORD)"
  [ -n "$password" ] || password="$(od -An -N24 -tx1 /dev/urandom | tr -d ' \n')"
  pg_write_env "$password"
  rm -rf "$pg_data" "$new"; mkdir -m 700 "$new"
  pwfile="$pg_dir/.initdb-password"
  (umask 077; printf '%s\n' "$password" > "$pwfile")
  if [ "$(id -u)" = 0 ]; then
    chown postgres:postgres "$new" "$pwfile"
    pg_as test -w "$new" || {
      rm -f "$pwfile"
      die "PostgreSQL runs as the user postgres, which cannot reach $pg_dir: use a run folder every user can traverse (PROTOLAKE_RUN_DIR)"
    }
  fi
  echo "initialising PostgreSQL in $pg_data"
  if ! pg_as "$bin/initdb" -D "$new" -U protolake --pwfile="$pwfile" --auth=scram-sha-256 \
      -E UTF8 --no-locale >> "$logs/postgres.log" 2>&1; then
    rm -f "$pwfile"; die "initdb failed (log in $logs/postgres.log)"
  fi
  rm -f "$pwfile"
  mv "$new" "$pg_data"
}

# pg_psql SQL...: run SQL against the server's `postgres` database as the role of run/postgres.env.
pg_psql() {
  PGHOST=127.0.0.1 PGPORT="$pg_port" PGUSER=protolake PGPASSWORD="$(pg_env_get PGPASSWORD)" \
    PGDATABASE=postgres PGCONNECT_TIMEOUT=5 psql -X -q -v ON_ERROR_STOP=1 -tA "$@"
}

# pg_await_ready: until the server accepts a login (at most $timeout seconds).
pg_await_ready() {
  local i
  for i in $(seq 1 $((timeout * 2))); do
    pg_psql -c 'SELECT 1' >/dev/null 2>&1 && return 0
    sleep 0.5
  done
  return 1
}

postgres_up() {
  local pid bin db
  if pid="$(pid_of postgres "$pg_marker")"; then
    if already_running postgres "$pid" tcp "127.0.0.1:$pg_port" "$timeout" "127.0.0.1:$pg_port"; then
      pg_await_ready || die "postgres (pid $pid) does not accept logins"
      return 0
    fi
  fi
  bin="$(pg_bin)"
  command -v psql >/dev/null || die "psql is missing: run infra/setup.sh (Debian's postgresql)"
  port_busy "$pg_port" && die "port $pg_port is in use by another process (not this stack's PostgreSQL); set PROTOLAKE_POSTGRES_PORT to a free port"
  if [ ! -f "$pg_data/PG_VERSION" ]; then pg_init "$bin"
  elif [ -z "$(pg_env_get PGPASSWORD)" ]; then
    # the cluster holds the metastore's tables: never replaced for a lost password file
    die "$pg_env is missing or has no PGPASSWORD, and $pg_data holds a cluster made with it: restore that file, or remove $pg_data for a new, empty cluster"
  else pg_write_env "$(pg_env_get PGPASSWORD)"; fi
  echo "starting postgres on 127.0.0.1:$pg_port (data in $pg_data)"
  local log_mark; log_mark="$(size_of "$logs/postgres.log")"
  spawn postgres "$pg_marker" "$logs/postgres.log" \
    "${pg_user_prefix[@]+"${pg_user_prefix[@]}"}" "$bin/postgres" -D "$pg_data" \
    -c listen_addresses=127.0.0.1 -c port="$pg_port" -c unix_socket_directories= \
    -c max_connections=50 -c shared_buffers=32MB
  await_start postgres tcp "127.0.0.1:$pg_port" "$timeout" "postgres failed to start" \
    "$logs/postgres.log:$log_mark"
  pg_await_ready || fail_start "postgres does not accept logins" "$logs/postgres.log:$log_mark"
  db="$(pg_env_get PGDATABASE)"
  if [ -z "$(pg_psql -c "SELECT 1 FROM pg_database WHERE datname = '$db'")" ]; then
    pg_psql -c "CREATE DATABASE \"$db\"" || die "could not create database $db"
    echo "postgres database $db created"
  fi
}

# Fast shutdown (SIGINT): the metastore keeps connections open, which SIGTERM's smart shutdown
# would wait for.
postgres_down() {
  local pid
  if pid="$(pid_of postgres "$pg_marker")"; then
    kill -INT "$pid" 2>/dev/null || true
    stop_pid postgres "$pid"
  else rm -f "$pids/postgres.pid"; echo "postgres not running"; fi
}

postgres_status() {
  local pid
  if pid="$(pid_of postgres "$pg_marker")"; then
    echo "postgres  running  pid $pid  127.0.0.1:$pg_port  env $pg_env  log $logs/postgres.log"
  else echo "postgres  stopped  (127.0.0.1:$pg_port; started on demand)"; fi
}
