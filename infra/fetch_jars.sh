#!/usr/bin/env bash
# Fetch the JVM jars protolake needs from Maven Central, once, into
# infra/.cache/jars/{spark,kafka,s3,postgres,apicurio-VERSION} (SeaweedFS, the stack's object
# store, is infra/fetch_seaweedfs.sh's).
# Safe to repeat: a folder with its .complete marker is not fetched again (works offline after).
# Maven runs with strict checksums (-C): a download that does not match its .sha1 fails the
# fetch instead of being kept for every clone on the machine.
#
# Each folder is kept once per machine, in $PROTOLAKE_SHARED_CACHE/jars (default
# ${XDG_CACHE_HOME:-~/.cache}/protolake/jars), under a name that digests what it is fetched
# from (the pom, the arguments and the recipe below); the checkout's folder is a link to it.
# So another clone of the project on the same machine fetches nothing (each `mvn` run costs
# seconds even with Maven's repository warm), and a changed pom is a new folder, never a stale
# one. A checkout's folder that is not a link to the current one (an older key, or a folder an
# earlier set-up fetched in place) is replaced by the link.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cache="${PROTOLAKE_JAR_CACHE:-$here/.cache/jars}"
. "$here/machine_cache.sh"
shared="$(machine_cache jars)"
mkdir -p "$cache"
settings="$here/maven/settings.xml"

# Link $cache/NAME to the kept folder NAME-KEY, fetching that first when it is missing: the
# command after KEY fills a new folder (its last argument), which then appears whole (a rename).
keep() {  # keep NAME KEY COMMAND...
  local name="$1" key="$2"; shift 2
  local out="$cache/$name" kept="$shared/$name-$key"
  if [ "$(readlink -- "$out" || true)" = "$kept" ] && [ -f "$kept/.complete" ]; then return 0; fi
  if [ ! -f "$kept/.complete" ]; then
    echo "fetching $name from Maven Central into $kept"
    local tmp; tmp="$(mktemp -d -p "$shared" ".$name.XXXXXX")"
    chmod 755 "$tmp"
    if ! "$@" "$tmp"; then rm -rf "$tmp"; return 1; fi
    touch "$tmp/.complete"
    # another set-up may have kept the same folder meanwhile: then ours goes
    mv -T "$tmp" "$kept" 2>/dev/null || rm -rf "$tmp"
    [ -f "$kept/.complete" ] || { echo "fetch_jars: $kept is incomplete; remove it" >&2; return 1; }
  fi
  link_to "$kept" "$out"  # one rename: a concurrent set-up sees the old link or the new
}

digest() {  # digest FILE [words...]: 16 hex digits of the file and the words
  { cat "$1"; shift; printf '%s\n' "$@"; } | sha256sum | cut -c1-16
}

copy_dependencies() {  # copy_dependencies NAME [maven args...] OUT
  local name="$1"; shift
  local out="${*: -1}"
  mvn -q -B -C -s "$settings" -f "$here/maven/$name/pom.xml" dependency:copy-dependencies \
      -DincludeScope=runtime -DoutputDirectory="$out" "${@:1:$#-1}"
}

fetch() {  # fetch NAME [maven args...]
  local name="$1"; shift
  local key; key="$(digest "$here/maven/$name/pom.xml" "$@" "$(declare -f copy_dependencies)")"
  keep "$name" "$key" copy_dependencies "$name" "$@"
}

# Only what pyspark's own jars lack: the Kafka source and Delta (and their own dependencies).
fetch spark -DincludeArtifactIds=spark-sql-kafka-0-10_2.13,spark-token-provider-kafka-0-10_2.13,kafka-clients,commons-pool2,delta-spark_4.2_2.13,delta-storage,delta-kernel-api,delta-kernel-defaults,delta-kernel-unitycatalog,unitycatalog-client,unitycatalog-hadoop
fetch kafka
# The s3a:// file system (hadoop-aws + the AWS SDK v2 modules it uses; infra/maven/s3/pom.xml),
# without what pyspark's jars already hold.
fetch s3 -DexcludeGroupIds=io.netty \
  -DexcludeArtifactIds=slf4j-api,httpclient,httpcore,commons-codec,commons-logging
# PostgreSQL's JDBC driver, for a metastore backed by PostgreSQL (infra/catalog.sh).
fetch postgres

# Apicurio Registry (a real registry with a Confluent-compatible REST API under
# /apis/ccompat/v7): its Quarkus distribution, published on Maven Central as the `all` tar.gz
# of io.apicurio:apicurio-registry-app. 2.6.x runs on Java 17 (3.x needs Java 21).
APICURIO_VERSION="${PROTOLAKE_APICURIO_VERSION:-2.6.13.Final}"
# (keep runs it where `set -e` does not hold: each step says whether it failed)
fetch_apicurio() {  # fetch_apicurio OUT
  local out="$1" archive="apicurio-registry-app-$APICURIO_VERSION-all.tar.gz"
  # dependency:copy, then tar: `unpack` would keep a marker file and skip a second unpack.
  mvn -q -B -C -s "$settings" -f "$here/maven/kafka/pom.xml" dependency:copy \
      -Dartifact="io.apicurio:apicurio-registry-app:$APICURIO_VERSION:tar.gz:all" \
      -DoutputDirectory="$out" || return 1
  tar -xzf "$out/$archive" -C "$out" || return 1
  rm -f "$out/$archive" || return 1
  ls "$out"/apicurio-registry-app-*-runner.jar >/dev/null
}
apicurio_key="$(digest "$here/maven/kafka/pom.xml" "$APICURIO_VERSION" \
  "$(declare -f fetch_apicurio)")"
keep "apicurio-$APICURIO_VERSION" "$apicurio_key" fetch_apicurio
