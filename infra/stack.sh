#!/usr/bin/env bash
# The local stack: a single-node Apache Kafka broker (KRaft, combined broker+controller, from
# the jars infra/fetch_jars.sh caches), a Confluent-compatible schema registry test server
# (infra/registry_server/) and a real Apicurio Registry (its Confluent-compatible API,
# in-memory storage, from Maven Central), all on 127.0.0.1, no Docker.
#
#   infra/stack.sh up       start kafka and registry when not running, wait until healthy, print the endpoints
#   infra/stack.sh down     stop what runs (SIGTERM, then SIGKILL after a timeout), apicurio included
#   infra/stack.sh status   what runs, where; exit 0 only when kafka and registry are up
#   infra/stack.sh up kafka|registry|apicurio|metastore|sqlserver|s3|postgres / down ...   one service only
#   (apicurio, s3 and postgres are started on demand: `make test` starts them for the tests that
#   use them; s3 is SeaweedFS's S3 gateway, see infra/s3.sh for its files, run/s3.env and its
#   variables; postgres is a PostgreSQL server for the metastore, see infra/postgres.sh)
#   `up` also starts the analysts' services, the metastore and the SQL endpoint (infra/catalog.sh
#   says how they run and which PROTOLAKE_METASTORE_* / PROTOLAKE_SQL_* variables place them)
#
# Everything lives in one run folder ($PROTOLAKE_RUN_DIR, default ./run):
#   run/logs/{kafka,registry}.log (kafka.stdout: JVM output before log4j)   run/pids/{kafka,registry}.pid
#   run/kafka-data/ (KRaft metadata + topics; kept across restarts)   run/kafka-cluster-id
#   run/kafka/server.properties, run/kafka/log4j2.properties (regenerated on every start)
#   run/registry.json (the registry's schemas; kept across restarts)
#   run/logs/apicurio.log (Apicurio keeps its schemas in memory: a restart forgets them)
#   run/metastore/ (the catalog's Derby database, kept across restarts), run/sqlserver/
#   run/postgres/ and run/postgres.env (PostgreSQL's cluster and generated credential, kept)
#
# Environment (all optional; nothing is exported, tests read the same variables):
#   PROTOLAKE_KAFKA_BOOTSTRAP   default 127.0.0.1:9092  (its port is the broker's port)
#   PROTOLAKE_KAFKA_PORT        overrides that port
#   PROTOLAKE_KAFKA_CONTROLLER_PORT  KRaft controller listener, default broker port + 1
#   PROTOLAKE_KAFKA_SASL_PORT   a SASL_PLAINTEXT (mechanism PLAIN) listener, default broker port + 2;
#                               its one user is the test credential protolake / protolake-test
#                               (a loopback broker for tests, not a secret)
#   PROTOLAKE_REGISTRY_URL      default http://127.0.0.1:8081 (its port is the registry's)
#   PROTOLAKE_REGISTRY_PORT     overrides that port
#   PROTOLAKE_APICURIO_PORT     default 8085 (Confluent API at http://127.0.0.1:8085/apis/ccompat/v7)
#   PROTOLAKE_KAFKA_HEAP        default 512m;  PROTOLAKE_APICURIO_HEAP  default 384m
#   PROTOLAKE_START_TIMEOUT     default 60 (seconds)
# A CI run that must not clash with a developer's stack sets other ports and another
# PROTOLAKE_RUN_DIR, e.g. PROTOLAKE_KAFKA_BOOTSTRAP=127.0.0.1:19092
# PROTOLAKE_REGISTRY_URL=http://127.0.0.1:18081 PROTOLAKE_RUN_DIR=/tmp/ci-run.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
run="${PROTOLAKE_RUN_DIR:-$root/run}"
case "$run" in /*) ;; *) run="$root/$run" ;; esac
jars="${PROTOLAKE_JAR_CACHE:-$root/infra/.cache/jars}/kafka"
python="${PROTOLAKE_PYTHON:-${PROTOLAKE_VENV:-$root/.venv}/bin/python}"
timeout="${PROTOLAKE_START_TIMEOUT:-60}"

bootstrap="${PROTOLAKE_KAFKA_BOOTSTRAP:-127.0.0.1:9092}"
kafka_port="${PROTOLAKE_KAFKA_PORT:-${bootstrap##*:}}"
controller_port="${PROTOLAKE_KAFKA_CONTROLLER_PORT:-$((kafka_port + 1))}"
sasl_port="${PROTOLAKE_KAFKA_SASL_PORT:-$((kafka_port + 2))}"
registry_url="${PROTOLAKE_REGISTRY_URL:-http://127.0.0.1:8081}"
registry_port="${registry_url##*:}"; registry_port="${registry_port%%/*}"
registry_port="${PROTOLAKE_REGISTRY_PORT:-$registry_port}"
kafka_heap="${PROTOLAKE_KAFKA_HEAP:-512m}"
apicurio_port="${PROTOLAKE_APICURIO_PORT:-8085}"
apicurio_heap="${PROTOLAKE_APICURIO_HEAP:-384m}"
apicurio_dir="${PROTOLAKE_JAR_CACHE:-$root/infra/.cache/jars}/apicurio-${PROTOLAKE_APICURIO_VERSION:-2.6.13.Final}"

logs="$run/logs"; pids="$run/pids"

die() { echo "stack: $*" >&2; exit 1; }

regex_of() { printf '%s' "$1" | sed 's/[][\.*^$()+?{}|]/\\&/g'; }  # literal -> pgrep regex

# pid_of NAME MARKER: print the pid of this stack's NAME process and return 0, or return 1.
# The pid file is checked against the process's command line, which must contain MARKER (a
# stale pid file, or a pid reused by another program, is not "running"). When the pid file
# is missing or stale, the process is looked up by MARKER (it names this run folder, so it
# matches no other stack) and the pid file is rewritten: a lost run/pids never orphans a
# broker.
pid_of() {
  local file="$pids/$1.pid" pid cmdline
  if [ -f "$file" ]; then
    pid="$(cat "$file")"
    # No `| grep -q` here: under pipefail an early-closing grep can fail the pipeline.
    cmdline="$(tr '\0' ' ' 2>/dev/null < "/proc/$pid/cmdline" || true)"
    if [ -n "$pid" ] && [[ "$cmdline" == *"$2"* ]]; then echo "$pid"; return 0; fi
  fi
  pid="$(pgrep -o -f -- "$(regex_of "$2")" || true)"
  [ -n "$pid" ] || return 1
  mkdir -p "$pids"; echo "$pid" > "$file"
  echo "$pid"
}

port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# stop_pid NAME PID: SIGTERM, wait up to 30 s, then SIGKILL; the process counts as gone once
# its pid has another command line (a pid reused meanwhile is never signalled).
stop_pid() {
  local name="$1" pid="$2" i cmd
  cmd="$(tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null || true)"
  kill -TERM "$pid" 2>/dev/null || true
  for i in $(seq 1 60); do
    if ! kill -0 "$pid" 2>/dev/null \
        || [ "$(tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null || true)" != "$cmd" ]; then
      rm -f "$pids/$name.pid"; echo "$name stopped (pid $pid)"; return 0
    fi
    sleep 0.5
  done
  if [ "$(tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null || true)" = "$cmd" ]; then
    echo "$name did not stop after 30 s: SIGKILL (pid $pid)" >&2
    kill -KILL "$pid" 2>/dev/null || true
  fi
  sleep 0.5
  rm -f "$pids/$name.pid"
}

# service_down NAME MARKER: stop this stack's NAME process if it runs.
service_down() {
  local pid
  if pid="$(pid_of "$1" "$2")"; then stop_pid "$1" "$pid"
  else rm -f "$pids/$1.pid"; echo "$1 not running"; fi
}

size_of() { stat -c %s "$1" 2>/dev/null || echo 0; }

# fail_start MESSAGE FILE:OFFSET...: print MESSAGE and, of each log file, the last lines
# written after OFFSET (this start's lines, not an older run's), then exit 1.
fail_start() {
  echo "stack: $1" >&2; shift
  local spec file offset
  for spec in "$@"; do
    file="${spec%:*}"; offset="${spec##*:}"
    [ "$(size_of "$file")" -gt "$offset" ] || continue
    echo "--- last lines of $file ---" >&2
    tail -c +"$((offset + 1))" "$file" | tail -n 25 >&2
  done
  exit 1
}

# await_start NAME KIND TARGET TIMEOUT MESSAGE FILE:OFFSET...: wait until infra/healthcheck.py
# KIND TARGET answers (at most TIMEOUT seconds; it gives up early when the process that spawn
# recorded in run/pids/NAME.pid dies) and print "NAME ready (pid PID)". Otherwise stop that
# process (stop_pid: it is gone after), remove its pid file and fail_start MESSAGE with the
# given logs (exit 1).
await_start() {
  local name="$1" kind="$2" target="$3" limit="$4" message="$5" pid; shift 5
  pid="$(cat "$pids/$name.pid")"
  if ! "$python" "$root/infra/healthcheck.py" "$kind" "$target" --timeout "$limit" --pid "$pid"; then
    # stopped for good (SIGKILL after 30 s), so that the next `up` finds no process of it
    # still shutting down, which it would take for a running one
    stop_pid "$name" "$pid" >&2
    fail_start "$message" "$@"
  fi
  echo "$name ready (pid $pid)"
}

# already_running NAME PID KIND TARGET TIMEOUT WHERE: a process of NAME found running (pid
# PID) is taken once infra/healthcheck.py KIND TARGET answers: "NAME already running (pid PID)
# on WHERE" is printed. A process younger than TIMEOUT seconds (still starting, from another
# `up`) is given that long, an older one 5 s. Returns 1 when the process ended meanwhile (the
# caller starts the service); one that runs but does not answer fails the start, saying how
# to replace it (exit 1).
already_running() {
  local name="$1" pid="$2" kind="$3" target="$4" limit="$5" where="$6" age
  age="$(ps -o etimes= -p "$pid" 2>/dev/null | tr -d ' ' || true)"
  [ "${age:-0}" -lt "$limit" ] || limit=5
  if ! "$python" "$root/infra/healthcheck.py" "$kind" "$target" --timeout "$limit" --pid "$pid"; then
    if ! kill -0 "$pid" 2>/dev/null; then
      rm -f "$pids/$name.pid"
      return 1
    fi
    die "$name runs (pid $pid) but does not answer at $target: infra/stack.sh down $name, then up again"
  fi
  echo "$name already running (pid $pid) on $where"
}

# ---------------------------------------------------------------- Kafka (KRaft, one node)
kafka_marker="kafka.Kafka $run/kafka/server.properties"

write_kafka_config() {
  mkdir -p "$run/kafka" "$run/kafka-data" "$logs"
  cat > "$run/kafka/server.properties" <<EOF
# Generated by infra/stack.sh on every start; edit the script, not this file.
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$controller_port
listeners=PLAINTEXT://127.0.0.1:$kafka_port,CONTROLLER://127.0.0.1:$controller_port,SASL_PLAINTEXT://127.0.0.1:$sasl_port
advertised.listeners=PLAINTEXT://127.0.0.1:$kafka_port,SASL_PLAINTEXT://127.0.0.1:$sasl_port
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT
# SASL/PLAIN on its own listener, so clients can be tested with Kafka security settings. The
# one user is a fixed test credential of this loopback broker (documented in infra/README.md).
sasl.enabled.mechanisms=PLAIN
listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_protolake="protolake-test";
log.dirs=$run/kafka-data
num.partitions=3
auto.create.topics.enable=true
# One node: every internal topic has one replica, and a small partition count keeps start-up
# and memory small.
offsets.topic.replication.factor=1
offsets.topic.num.partitions=10
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=10
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
num.network.threads=2
num.io.threads=4
num.recovery.threads.per.data.dir=1
log.retention.hours=-1
log.segment.bytes=67108864
EOF
  cat > "$run/kafka/log4j2.properties" <<EOF
# Generated by infra/stack.sh: every broker log line goes to one file (rolled at 50 MB, 3 kept).
status = warn
appender.file.type = RollingFile
appender.file.name = FILE
appender.file.fileName = $logs/kafka.log
appender.file.filePattern = $logs/kafka.log.%i
appender.file.append = true
appender.file.policies.type = Policies
appender.file.policies.size.type = SizeBasedTriggeringPolicy
appender.file.policies.size.size = 50MB
appender.file.strategy.type = DefaultRolloverStrategy
appender.file.strategy.max = 3
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
logger.kafka.name = kafka
logger.kafka.level = INFO
logger.state.name = state.change.logger
logger.state.level = WARN
logger.request.name = kafka.request.logger
logger.request.level = WARN
logger.controller.name = org.apache.kafka.controller
logger.controller.level = INFO
EOF
}

# The broker's JVM options: small heap, log4j to run/logs/kafka.log; the C1 compiler alone (as
# Apicurio and the metastore) and the serial collector. On loopback, with a few thousand
# records a second at most, a broker's CPU is mostly its start-up and the optimising JIT
# compiler: on 2 cores, a start, 3,000 demo records and a minute idle take 12-15 s of CPU
# this way, 24-28 s with G1 and C2.
kafka_java_args() {
  java_args=(java -Xms64m -Xmx"$kafka_heap" -XX:TieredStopAtLevel=1 -XX:+UseSerialGC
    -XX:+ExitOnOutOfMemoryError -Djava.awt.headless=true
    -Dlog4j2.configurationFile="$run/kafka/log4j2.properties" -Dkafka.logs.dir="$logs"
    -cp "$jars/*")
}

# spawn NAME MARKER LOG CMD...: start CMD in its own session (it outlives this shell and the
# terminal), stdin closed, stdout/stderr appended to LOG; write its pid to run/pids/NAME.pid.
spawn() {
  local name="$1" marker="$2" log="$3"; shift 3
  mkdir -p "$pids" "$logs"
  setsid nohup "$@" >> "$log" 2>&1 < /dev/null &
  local pid=$!
  # setsid forks when it is a process-group leader; then $! is the short-lived parent, so
  # find the real process by its exact command-line marker.
  sleep 0.2
  local cmdline
  cmdline="$(tr '\0' ' ' 2>/dev/null < "/proc/$pid/cmdline" || true)"
  if [[ "$cmdline" != *"$marker"* ]]; then
    pid="$(pgrep -n -f -- "$(regex_of "$marker")" || echo "$pid")"
  fi
  echo "$pid" > "$pids/$name.pid"
}

kafka_up() {
  local pid
  if pid="$(pid_of kafka "$kafka_marker")"; then
    already_running kafka "$pid" kafka "127.0.0.1:$kafka_port" "$timeout" "127.0.0.1:$kafka_port" && return 0
  fi
  [ -f "$jars/.complete" ] || die "Kafka jars missing in $jars: run infra/fetch_jars.sh (or make setup)"
  command -v java >/dev/null || die "java (JDK 17+) is required"
  for p in "$kafka_port" "$controller_port" "$sasl_port"; do
    port_busy "$p" && die "port $p is in use by another process (not this stack's broker); set PROTOLAKE_KAFKA_BOOTSTRAP / PROTOLAKE_KAFKA_CONTROLLER_PORT / PROTOLAKE_KAFKA_SASL_PORT to free ports"
  done
  write_kafka_config
  # Format the storage once, with a cluster id kept in the run folder (a restart keeps data).
  if [ ! -f "$run/kafka-data/meta.properties" ]; then
    # Never an id starting with "-", which the storage tool would read as an option (Kafka's
    # own Uuid.randomUuid draws again for the same reason): 1 draw in 64 would fail the start.
    # Written whole or not at all: an empty file (an interrupted draw) would be read as the id.
    if [ ! -s "$run/kafka-cluster-id" ]; then
      "$python" -c 'import base64, uuid
while (i := base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")).startswith("-"): pass
print(i)' > "$run/kafka-cluster-id.tmp" && [ -s "$run/kafka-cluster-id.tmp" ] \
        || die "could not draw a Kafka cluster id with $python"
      mv "$run/kafka-cluster-id.tmp" "$run/kafka-cluster-id"
    fi
    echo "formatting Kafka storage in $run/kafka-data (cluster id $(cat "$run/kafka-cluster-id"))"
    kafka_java_args
    "${java_args[@]}" kafka.tools.StorageTool format --ignore-formatted \
      -t "$(cat "$run/kafka-cluster-id")" -c "$run/kafka/server.properties" \
      > "$logs/kafka-format.log" 2>&1 \
      || fail_start "formatting Kafka storage failed" "$logs/kafka-format.log:0"
  fi
  echo "starting kafka on 127.0.0.1:$kafka_port (controller $controller_port, SASL_PLAINTEXT $sasl_port, heap $kafka_heap)"
  kafka_java_args
  local log_mark stdout_mark
  log_mark="$(size_of "$logs/kafka.log")"; stdout_mark="$(size_of "$logs/kafka.stdout")"
  spawn kafka "$kafka_marker" "$logs/kafka.stdout" "${java_args[@]}" kafka.Kafka "$run/kafka/server.properties"
  await_start kafka kafka "127.0.0.1:$kafka_port" "$timeout" "kafka failed to start (logs in $logs)" \
    "$logs/kafka.stdout:$stdout_mark" "$logs/kafka.log:$log_mark"
}

kafka_down() { service_down kafka "$kafka_marker"; }

# ---------------------------------------------------------------- schema registry
# The marker is the arguments naming this run folder's data file: only this stack's registry
# has them, however the program itself is spelled on its command line.
registry_marker="--data $run/registry.json"

registry_up() {
  local pid
  if pid="$(pid_of registry "$registry_marker")"; then
    already_running registry "$pid" registry "http://127.0.0.1:$registry_port" "$timeout" \
      "http://127.0.0.1:$registry_port" && return 0
  fi
  port_busy "$registry_port" && die "port $registry_port is in use by another process (not this stack's registry); set PROTOLAKE_REGISTRY_URL to a free port"
  echo "starting schema registry on http://127.0.0.1:$registry_port"
  local log_mark; log_mark="$(size_of "$logs/registry.log")"
  # Run from the repo root: `-m infra.registry_server` imports the package from there.
  cd "$root"
  spawn registry "$registry_marker" "$logs/registry.log" "$python" -m infra.registry_server \
    --port "$registry_port" --data "$run/registry.json"
  await_start registry registry "http://127.0.0.1:$registry_port" 30 "registry failed to start" \
    "$logs/registry.log:$log_mark"
}

registry_down() { service_down registry "$registry_marker"; }

# ---------------------------------------------------------------- Apicurio Registry
# The marker names this run folder (a system property nobody else sets), so two stacks with
# different run folders never mistake each other's registry.
apicurio_marker="-Dprotolake.run=$run/apicurio"

apicurio_up() {
  local pid jar
  if pid="$(pid_of apicurio "$apicurio_marker")"; then
    already_running apicurio "$pid" registry "http://127.0.0.1:$apicurio_port/apis/ccompat/v7" \
      "$timeout" "http://127.0.0.1:$apicurio_port/apis/ccompat/v7" && return 0
  fi
  [ -f "$apicurio_dir/.complete" ] || die "Apicurio Registry missing in $apicurio_dir: run infra/fetch_jars.sh (or make setup)"
  jar="$(ls "$apicurio_dir"/apicurio-registry-app-*-runner.jar)"
  port_busy "$apicurio_port" && die "port $apicurio_port is in use by another process (not this stack's Apicurio); set PROTOLAKE_APICURIO_PORT to a free port"
  echo "starting apicurio registry on http://127.0.0.1:$apicurio_port/apis/ccompat/v7 (heap $apicurio_heap)"
  local log_mark; log_mark="$(size_of "$logs/apicurio.log")"
  mkdir -p "$run/apicurio"
  spawn apicurio "$apicurio_marker" "$logs/apicurio.log" java -Xms32m -Xmx"$apicurio_heap" \
    -XX:+ExitOnOutOfMemoryError -XX:TieredStopAtLevel=1 "$apicurio_marker" \
    -Dquarkus.http.host=127.0.0.1 -Dquarkus.http.port="$apicurio_port" \
    -Dquarkus.log.console.color=false -Djava.io.tmpdir="$run/apicurio" -jar "$jar"
  await_start apicurio registry "http://127.0.0.1:$apicurio_port/apis/ccompat/v7" "$timeout" \
    "apicurio failed to start" "$logs/apicurio.log:$log_mark"
}

apicurio_down() { service_down apicurio "$apicurio_marker"; }

# ---------------------------------------------------------------- metastore, SQL endpoint
# shellcheck source=infra/catalog.sh
. "$root/infra/catalog.sh"

# ---------------------------------------------------------------- S3 (SeaweedFS)
# shellcheck source=infra/s3.sh
. "$root/infra/s3.sh"

# ---------------------------------------------------------------- PostgreSQL (for the metastore)
# shellcheck source=infra/postgres.sh
. "$root/infra/postgres.sh"

# ---------------------------------------------------------------- commands
status() {
  local pid rc=0
  if pid="$(pid_of kafka "$kafka_marker")"; then
    echo "kafka     running  pid $pid  bootstrap 127.0.0.1:$kafka_port  log $logs/kafka.log"
  else echo "kafka     stopped  (127.0.0.1:$kafka_port)"; rc=1; fi
  if pid="$(pid_of registry "$registry_marker")"; then
    echo "registry  running  pid $pid  url http://127.0.0.1:$registry_port  log $logs/registry.log"
  else echo "registry  stopped  (http://127.0.0.1:$registry_port)"; rc=1; fi
  if pid="$(pid_of apicurio "$apicurio_marker")"; then
    echo "apicurio  running  pid $pid  url http://127.0.0.1:$apicurio_port/apis/ccompat/v7  log $logs/apicurio.log"
  else echo "apicurio  stopped  (http://127.0.0.1:$apicurio_port/apis/ccompat/v7; started on demand)"; fi
  catalog_status
  s3_status
  postgres_status
  return $rc
}

endpoints() {
  echo "stack up:"
  echo "  PROTOLAKE_KAFKA_BOOTSTRAP=127.0.0.1:$kafka_port"
  echo "  PROTOLAKE_KAFKA_SASL_PORT=$sasl_port (SASL_PLAINTEXT, PLAIN, test user protolake)"
  echo "  PROTOLAKE_REGISTRY_URL=http://127.0.0.1:$registry_port"
  echo "  metastore thrift://127.0.0.1:$metastore_port   SQL endpoint jdbc:hive2://$sql_host:$sql_port/"
  echo "  run folder $run (logs in $logs)"
}

cmd="${1:-status}"; what="${2:-all}"
services="kafka|registry|apicurio|metastore|sqlserver|s3|postgres"
case "$what" in all|kafka|registry|apicurio|metastore|sqlserver|s3|postgres) ;; *) die "unknown service '$what' ($services)" ;; esac
case "$cmd" in
  up)
    case "$what" in
      all) kafka_up; registry_up; metastore_up; sqlserver_up; endpoints ;;
      kafka) kafka_up ;; registry) registry_up ;; apicurio) apicurio_up ;;
      metastore) metastore_up ;; sqlserver) sqlserver_up ;; s3) s3_up ;;
      postgres) postgres_up ;;
    esac ;;
  down)
    case "$what" in
      all) s3_down; sqlserver_down; metastore_down; postgres_down; apicurio_down; registry_down
        kafka_down ;;
      kafka) kafka_down ;; registry) registry_down ;; apicurio) apicurio_down ;;
      metastore) metastore_down ;; sqlserver) sqlserver_down ;; s3) s3_down ;;
      postgres) postgres_down ;;
    esac ;;
  status) status ;;
  *) die "usage: infra/stack.sh up|down|status [$services]" ;;
esac
