# The analysts' services of the local stack, sourced by infra/stack.sh (which defines run,
# logs, pids, python, timeout, spawn, pid_of, await_start, port_busy, size_of, service_down):
#
#   metastore  a Hive 2.3 metastore thrift service (the jars of the pyspark wheel) on
#              127.0.0.1:$PROTOLAKE_METASTORE_PORT (9083), backed by an embedded Derby database
#              in run/metastore/db that only this process opens: every Spark application of the
#              deployment shares the catalog over thrift (hive.metastore.uris).
#              PROTOLAKE_METASTORE_DB=postgres puts its tables in PostgreSQL instead, as a
#              production metastore has them: the database, role and password of the libpq
#              variables (PGHOST, PGPORT, PGUSER, PGPASSWORD, PGDATABASE) in the file
#              PROTOLAKE_METASTORE_DB_ENV, by default run/postgres.env (the stack's own server,
#              `infra/stack.sh up postgres`, infra/postgres.sh); with the JDBC driver of
#              infra/.cache/jars/postgres. The password is written only to the 0600
#              run/metastore/hive-site.xml, the file Hive reads it from.
#   sqlserver  the Spark Thrift Server (HiveServer2 protocol, JDBC/ODBC) on
#              127.0.0.1:$PROTOLAKE_SQL_PORT (10000), with Delta and that metastore. No password
#              on loopback by default; PROTOLAKE_SQL_PASSWORD_FILE (or PROTOLAKE_SQL_PASSWORD)
#              turns username+password authentication on (user PROTOLAKE_SQL_USER, default
#              protolake). Bound to another address than loopback, it refuses to start without.
#              It reads tables on an object store (s3a://) with the S3A jars of
#              infra/.cache/jars/s3 and the store named by the standard AWS variables it starts
#              with (AWS_ENDPOINT_URL, AWS_REGION, AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY,
#              AWS_PROFILE, a role: the AWS SDK's default chain); without any of them and on
#              loopback, this stack's own store (run/s3.env, generated when missing: the s3
#              service keeps the same credential). The credential is in the driver's
#              environment: a cluster master (PROTOLAKE_SQL_MASTER) needs its executors given
#              the same (spark.executorEnv.*, or a role).
#
# Files: run/metastore/{hive-site.xml,db/,warehouse/} (hive-site.xml is 0600: it may hold the
# database password), run/sqlserver/{hive-site.xml,tmp/}, run/s3.env (infra/s3.sh),
# run/logs/{metastore,sqlserver}.log, run/pids/{metastore,sqlserver}.pid. The two small Java
# classes (infra/hive/) are compiled with javac on first start into infra/.cache/hive-classes-<hash of the sources>.

pyspark_jars=""; spark_home=""
# One folder per version of the sources (their hash): checkouts of different versions that
# share the cache never run each other's classes.
hive_classes="${PROTOLAKE_CACHE_DIR:-$root/infra/.cache}/hive-classes-$(find "$root/infra/hive" -name '*.java' -print0 | sort -z | xargs -0 cat | sha256sum | cut -c1-12)"
spark_jars="${PROTOLAKE_SPARK_JARS_DIR:-${PROTOLAKE_JAR_CACHE:-$root/infra/.cache/jars}/spark}"
metastore_port="${PROTOLAKE_METASTORE_PORT:-9083}"
metastore_db="${PROTOLAKE_METASTORE_DB:-derby}"
metastore_db_env="${PROTOLAKE_METASTORE_DB_ENV:-$run/postgres.env}"
postgres_jars="${PROTOLAKE_JAR_CACHE:-$root/infra/.cache/jars}/postgres"
s3_jars="${PROTOLAKE_S3_JARS_DIR:-${PROTOLAKE_JAR_CACHE:-$root/infra/.cache/jars}/s3}"
metastore_heap="${PROTOLAKE_METASTORE_HEAP:-256m}"
sql_host="${PROTOLAKE_SQL_HOST:-127.0.0.1}"
sql_port="${PROTOLAKE_SQL_PORT:-10000}"
sql_heap="${PROTOLAKE_SQL_HEAP:-768m}"
metastore_marker="-Dprotolake.run=$run/metastore"
sqlserver_marker="-Dprotolake.run=$run/sqlserver"

# compile_hive_classes: javac infra/hive/**/*.java into $hive_classes, once per version.
compile_hive_classes() {
  # The wheel's jars and spark-submit: where the project's Python finds pyspark.
  spark_home="$("$python" -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))' 2>/dev/null || true)"
  pyspark_jars="$spark_home/jars"
  [ -n "$spark_home" ] && [ -d "$pyspark_jars" ] || die "pyspark is not installed in $python's environment (make setup)"
  local stamp="$hive_classes/.complete" src
  if [ -f "$stamp" ]; then return 0; fi
  command -v javac >/dev/null || die "javac (JDK 17+) is required to build infra/hive"
  rm -rf "$hive_classes.tmp"; mkdir -p "$hive_classes.tmp"
  mapfile -t src < <(find "$root/infra/hive" -name '*.java')
  javac -nowarn -d "$hive_classes.tmp" -cp "$pyspark_jars/*" "${src[@]}" \
    || die "compiling infra/hive failed"
  rm -rf "$hive_classes"; mv "$hive_classes.tmp" "$hive_classes"; touch "$stamp"
}

# hive_property NAME VALUE: one <property> of a hive-site.xml (XML's special characters escaped).
hive_property() {
  local value="$2"
  value="${value//&/&amp;}"; value="${value//</&lt;}"; value="${value//>/&gt;}"
  printf '  <property><name>%s</name><value>%s</value></property>\n' "$1" "$value"
}

# db_env_get NAME: a libpq variable of $metastore_db_env (empty when missing).
db_env_get() { sed -n "s/^$1=//p" "$metastore_db_env" | tail -n 1; }

# metastore_connection: the JDBC properties of the metastore's database.
metastore_connection() {
  case "$metastore_db" in
    derby)
      hive_property javax.jdo.option.ConnectionURL "jdbc:derby:;databaseName=$run/metastore/db;create=true"
      hive_property javax.jdo.option.ConnectionDriverName org.apache.derby.jdbc.EmbeddedDriver ;;
    postgres)
      hive_property javax.jdo.option.ConnectionURL \
        "jdbc:postgresql://$(db_env_get PGHOST):$(db_env_get PGPORT)/$(db_env_get PGDATABASE)"
      hive_property javax.jdo.option.ConnectionDriverName org.postgresql.Driver
      hive_property javax.jdo.option.ConnectionUserName "$(db_env_get PGUSER)"
      hive_property javax.jdo.option.ConnectionPassword "$(db_env_get PGPASSWORD)" ;;
  esac
}

# check_metastore_db: what the configured database needs is there (and answers).
check_metastore_db() {
  case "$metastore_db" in
    derby) ;;
    postgres)
      [ -f "$postgres_jars/.complete" ] \
        || die "PostgreSQL's JDBC driver is missing in $postgres_jars: run infra/fetch_jars.sh (or make setup)"
      [ -r "$metastore_db_env" ] \
        || die "PROTOLAKE_METASTORE_DB=postgres: no credential file $metastore_db_env (infra/stack.sh up postgres writes it; or set PROTOLAKE_METASTORE_DB_ENV)"
      local v
      for v in PGHOST PGPORT PGUSER PGPASSWORD PGDATABASE; do
        [ -n "$(db_env_get "$v")" ] || die "$metastore_db_env does not set $v"
      done
      port_on "$(db_env_get PGHOST)" "$(db_env_get PGPORT)" \
        || die "no PostgreSQL answers on $(db_env_get PGHOST):$(db_env_get PGPORT) (infra/stack.sh up postgres first)" ;;
    *) die "PROTOLAKE_METASTORE_DB must be derby or postgres, not '$metastore_db'" ;;
  esac
}

port_on() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }

write_metastore_config() {
  mkdir -p "$run/metastore/warehouse" "$logs"
  # 0600: with PostgreSQL it holds the database password.
  (umask 077; {
    echo '<?xml version="1.0"?>'
    echo '<!-- Generated by infra/stack.sh on every start; edit infra/catalog.sh, not this file. -->'
    echo '<configuration>'
    metastore_connection
    # Hive's schema tool and scripts are not in the wheel: DataNucleus creates the metastore's
    # tables on first start (Derby or PostgreSQL alike).
    hive_property datanucleus.schema.autoCreateAll true
    # Hive's default pool (BoneCP) is not in the wheel; commons-dbcp is (the transaction
    # handler's own pool, used when a database or table is dropped, fails without it).
    hive_property datanucleus.connectionPoolingType DBCP
    hive_property hive.metastore.schema.verification false
    hive_property hive.metastore.warehouse.dir "$run/metastore/warehouse"
    # Hive's asynchronous log4j needs the LMAX disruptor, which the wheel does not ship.
    hive_property hive.async.log.enabled false
    hive_property hive.metastore.event.db.notification.api.auth false
    echo '</configuration>'
  } > "$run/metastore/hive-site.xml.tmp")
  mv "$run/metastore/hive-site.xml.tmp" "$run/metastore/hive-site.xml"
}

metastore_up() {
  local pid
  if pid="$(pid_of metastore "$metastore_marker")"; then
    already_running metastore "$pid" tcp "127.0.0.1:$metastore_port" "$timeout" \
      "thrift://127.0.0.1:$metastore_port" && return 0
  fi
  command -v java >/dev/null || die "java (JDK 17+) is required"
  compile_hive_classes
  port_busy "$metastore_port" && die "port $metastore_port is in use by another process (not this stack's metastore); set PROTOLAKE_METASTORE_PORT to a free port"
  check_metastore_db
  write_metastore_config
  local where="Derby in $run/metastore/db" cp="$run/metastore:$hive_classes:$pyspark_jars/*"
  if [ "$metastore_db" = postgres ]; then
    where="PostgreSQL $(db_env_get PGHOST):$(db_env_get PGPORT)/$(db_env_get PGDATABASE)"
    cp="$cp:$postgres_jars/*"
  fi
  echo "starting metastore on thrift://127.0.0.1:$metastore_port ($where, heap $metastore_heap)"
  local log_mark; log_mark="$(size_of "$logs/metastore.log")"
  spawn metastore "$metastore_marker" "$logs/metastore.log" java -Xms32m -Xmx"$metastore_heap" \
    -XX:+ExitOnOutOfMemoryError -XX:TieredStopAtLevel=1 "$metastore_marker" \
    -Dderby.system.home="$run/metastore" -Djava.io.tmpdir="$run/metastore" \
    -cp "$cp" \
    protolake.hive.MetaStoreServer 127.0.0.1 "$metastore_port"
  await_start metastore tcp "127.0.0.1:$metastore_port" "$timeout" "metastore failed to start" \
    "$logs/metastore.log:$log_mark"
}

metastore_down() { service_down metastore "$metastore_marker"; }

is_loopback() { case "$1" in 127.*|localhost|::1) return 0 ;; *) return 1 ;; esac; }

# The SQL endpoint's JVM: the C1 compiler alone (as the metastore's) and the serial collector.
# It answers analysts' queries over the local lakehouse on a small machine, where its start-up
# and the optimising JIT compiler cost more CPU than they win back: on 2 cores it is ready
# after about 9 s of CPU this way, 16-19 s with G1 and C2. Long queries lose C2's faster code.
sqlserver_jvm="-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"

sqlserver_up() {
  local pid auth=() jars
  if pid="$(pid_of sqlserver "$sqlserver_marker")"; then
    already_running sqlserver "$pid" tcp "$sql_host:$sql_port" "$((timeout * 2))" \
      "jdbc:hive2://$sql_host:$sql_port/" && return 0
  fi
  [ -f "$spark_jars/.complete" ] || [ -n "$(ls "$spark_jars"/delta-spark_*.jar 2>/dev/null)" ] \
    || die "Delta jars missing in $spark_jars: run infra/fetch_jars.sh (or make setup)"
  compile_hive_classes
  port_busy "$sql_port" && die "port $sql_port is in use by another process (not this stack's SQL server); set PROTOLAKE_SQL_PORT to a free port"
  # The metastore it uses answers on its port (this stack's, or another run folder's).
  port_busy "$metastore_port" \
    || die "no metastore answers on 127.0.0.1:$metastore_port: infra/stack.sh up metastore first"
  if [ -n "${PROTOLAKE_SQL_PASSWORD_FILE:-}" ] || [ -n "${PROTOLAKE_SQL_PASSWORD:-}" ]; then
    if [ -n "${PROTOLAKE_SQL_PASSWORD_FILE:-}" ] && [ ! -r "$PROTOLAKE_SQL_PASSWORD_FILE" ]; then
      die "PROTOLAKE_SQL_PASSWORD_FILE names a file that cannot be read: $PROTOLAKE_SQL_PASSWORD_FILE"
    fi
    auth=(--hiveconf hive.server2.authentication=CUSTOM
      --hiveconf hive.server2.custom.authentication.class=protolake.hive.PasswordAuthenticator)
  elif ! is_loopback "$sql_host"; then
    die "PROTOLAKE_SQL_HOST=$sql_host is not loopback: set PROTOLAKE_SQL_PASSWORD_FILE (or PROTOLAKE_SQL_PASSWORD) first"
  fi
  mkdir -p "$run/sqlserver/tmp" "$logs"
  # Delta and what it needs (delta-storage, the kernel and Unity Catalog client classes its
  # catalog links against): every jar of the cache, as the jobs' sessions have them. They are
  # on the driver's class path too: the Thrift Server's session threads resolve Delta's
  # catalog classes through the system class loader, which --jars alone does not reach.
  jars="$( (ls "$spark_jars"/*.jar; ls "$s3_jars"/*.jar 2>/dev/null || true) | paste -sd, -)"
  [ -n "$(ls "$s3_jars"/*.jar 2>/dev/null)" ] \
    || echo "sqlserver: no S3A jars in $s3_jars (infra/fetch_jars.sh): s3a:// tables will not be readable" >&2
  echo "starting sqlserver on jdbc:hive2://$sql_host:$sql_port/ (metastore thrift://127.0.0.1:$metastore_port, $([ ${#auth[@]} -gt 0 ] && echo "password required" || echo "no password"), heap $sql_heap)"
  local log_mark; log_mark="$(size_of "$logs/sqlserver.log")"
  # Run from the run folder: Spark writes nothing relative to the current directory then but
  # its own files, which land there.
  # The object store's credential is exported in this subshell only (sqlserver_store_env).
  (sqlserver_store_env; mapfile -t store < <(sqlserver_store_conf)
    cd "$run/sqlserver" && SPARK_HOME="$spark_home" SPARK_LOCAL_IP=127.0.0.1 \
    spawn sqlserver "$sqlserver_marker" "$logs/sqlserver.log" "$spark_home/bin/spark-submit" \
      --class org.apache.spark.sql.hive.thriftserver.HiveThriftServer2 \
      --name protolake-sqlserver --master "${PROTOLAKE_SQL_MASTER:-local[2]}" \
      --driver-memory "$sql_heap" --jars "$jars" \
      --driver-class-path "$hive_classes:$spark_jars/*:$s3_jars/*" \
      --conf "spark.driver.extraJavaOptions=\"$sqlserver_marker\" \"-Djava.io.tmpdir=$run/sqlserver/tmp\" $sqlserver_jvm" \
      --conf spark.sql.extensions=io.delta.sql.DeltaSparkSessionExtension \
      --conf spark.sql.catalog.spark_catalog=org.apache.spark.sql.delta.catalog.DeltaCatalog \
      --conf spark.sql.catalogImplementation=hive \
      --conf "spark.hadoop.hive.metastore.uris=thrift://127.0.0.1:$metastore_port" \
      --conf "spark.sql.warehouse.dir=$run/metastore/warehouse" \
      --conf "spark.local.dir=$run/sqlserver/tmp" \
      --conf spark.ui.enabled=false --conf spark.driver.host=127.0.0.1 \
      --conf spark.sql.shuffle.partitions=4 --conf spark.sql.session.timeZone=UTC \
      --conf spark.databricks.delta.snapshotPartitions=2 \
      "${store[@]+"${store[@]}"}" \
      spark-internal \
      --hiveconf "hive.server2.thrift.bind.host=$sql_host" \
      --hiveconf "hive.server2.thrift.port=$sql_port" \
      --hiveconf hive.server2.transport.mode=binary \
      "${auth[@]+"${auth[@]}"}")
  await_start sqlserver tcp "$sql_host:$sql_port" "$((timeout * 2))" "sqlserver failed to start" \
    "$logs/sqlserver.log:$log_mark"
}

# sqlserver_store_env: the object store the SQL server reads. The environment's when it names
# one (an endpoint, keys, a profile, a role: the AWS SDK's default chain); otherwise, on a
# loopback SQL host, this stack's own store: run/s3.env (created when missing, the s3 service
# keeps the same credential) is exported into this shell, so that the credential reaches the
# server's environment and never a command line.
sqlserver_store_env() {
  local v
  for v in AWS_ENDPOINT_URL AWS_ACCESS_KEY_ID AWS_PROFILE AWS_WEB_IDENTITY_TOKEN_FILE \
    AWS_ROLE_ARN AWS_CONTAINER_CREDENTIALS_RELATIVE_URI AWS_CONTAINER_CREDENTIALS_FULL_URI; do
    [ -z "${!v:-}" ] || return 0
  done
  is_loopback "$sql_host" || return 0
  [ -f "$s3_env" ] || { mkdir -p "$s3_dir"; s3_write_env; }
  set -a
  # shellcheck source=/dev/null
  . "$s3_env"
  set +a
}

# sqlserver_store_conf: the S3A settings of that store, one spark-submit argument per line (as
# pipelines.settings.clients.s3a_hadoop_conf sets them for the jobs, for every bucket here).
sqlserver_store_conf() {
  local endpoint="${AWS_ENDPOINT_URL:-}" region="${AWS_REGION:-${AWS_DEFAULT_REGION:-}}"
  endpoint="${endpoint%/}"
  echo --conf
  echo "spark.hadoop.fs.s3a.aws.credentials.provider=software.amazon.awssdk.auth.credentials.DefaultCredentialsProvider"
  # tables registered at s3:// (a lakehouse.path spelled so): S3A serves that scheme too
  printf '%s\n' --conf spark.hadoop.fs.s3.impl=org.apache.hadoop.fs.s3a.S3AFileSystem \
    --conf spark.hadoop.fs.AbstractFileSystem.s3.impl=org.apache.hadoop.fs.s3a.S3A
  if [ -n "$endpoint" ]; then
    # an S3-compatible store: its endpoint, path-style requests, TLS as its URL says; any
    # region signs
    printf '%s\n' --conf "spark.hadoop.fs.s3a.endpoint=$endpoint" \
      --conf spark.hadoop.fs.s3a.path.style.access=true \
      --conf "spark.hadoop.fs.s3a.connection.ssl.enabled=$([[ $endpoint == https:* ]] && echo true || echo false)"
    region="${region:-us-east-1}"
  fi
  [ -z "$region" ] || printf '%s\n' --conf "spark.hadoop.fs.s3a.endpoint.region=$region"
  return 0
}

sqlserver_down() { service_down sqlserver "$sqlserver_marker"; }

catalog_status() {
  local pid
  if pid="$(pid_of metastore "$metastore_marker")"; then
    local db=derby
    grep -q 'jdbc:postgresql:' "$run/metastore/hive-site.xml" 2>/dev/null && db=postgres
    echo "metastore running  pid $pid  uri thrift://127.0.0.1:$metastore_port  ($db)  log $logs/metastore.log"
  else echo "metastore stopped  (thrift://127.0.0.1:$metastore_port)"; fi
  if pid="$(pid_of sqlserver "$sqlserver_marker")"; then
    echo "sqlserver running  pid $pid  url jdbc:hive2://$sql_host:$sql_port/  log $logs/sqlserver.log"
  else echo "sqlserver stopped  (jdbc:hive2://$sql_host:$sql_port/)"; fi
}
