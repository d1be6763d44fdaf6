#!/usr/bin/env bash
# Fetch the JVM jars protolake needs from Maven Central, once, into infra/.cache/jars/{spark,kafka,s3},
# and the SeaweedFS server binary (the local S3-compatible store) into infra/.cache/bin.
# Safe to repeat: a folder with its .complete marker is not fetched again (works offline after).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cache="${PROTOLAKE_JAR_CACHE:-$here/.cache/jars}"
settings="$here/maven/settings.xml"

fetch() {  # fetch NAME [maven args...]
  local name="$1"; shift
  local out="$cache/$name"
  if [ -f "$out/.complete" ]; then return 0; fi
  echo "fetching $name jars from Maven Central into $out"
  rm -rf "$out.tmp"
  mvn -q -B -s "$settings" -f "$here/maven/$name/pom.xml" dependency:copy-dependencies \
      -DincludeScope=runtime -DoutputDirectory="$out.tmp" "$@"
  rm -rf "$out"; mv "$out.tmp" "$out"; touch "$out/.complete"
}

# Only what pyspark's own jars lack: the Kafka source and Delta (and their own dependencies).
fetch spark -DincludeArtifactIds=spark-sql-kafka-0-10_2.13,spark-token-provider-kafka-0-10_2.13,kafka-clients,commons-pool2,delta-spark_4.2_2.13,delta-storage,delta-kernel-api,delta-kernel-defaults,delta-kernel-unitycatalog,unitycatalog-client,unitycatalog-hadoop
fetch kafka
# The s3a:// file system (hadoop-aws + the AWS SDK v2 modules it uses; infra/maven/s3/pom.xml),
# without what pyspark's jars already hold.
fetch s3 -DexcludeGroupIds=io.netty \
  -DexcludeArtifactIds=slf4j-api,httpclient,httpcore,commons-codec,commons-logging

# Apicurio Registry (a real registry with a Confluent-compatible REST API under
# /apis/ccompat/v7): its Quarkus distribution, published on Maven Central as the `all` tar.gz
# of io.apicurio:apicurio-registry-app. 2.6.x runs on Java 17 (3.x needs Java 21).
APICURIO_VERSION="${PROTOLAKE_APICURIO_VERSION:-2.6.13.Final}"
fetch_apicurio() {
  local out="$cache/apicurio-$APICURIO_VERSION"
  if [ -f "$out/.complete" ]; then return 0; fi
  echo "fetching Apicurio Registry $APICURIO_VERSION from Maven Central into $out"
  rm -rf "$out.tmp"; mkdir -p "$out.tmp"
  # dependency:copy, then tar: `unpack` would keep a marker file and skip a second unpack.
  mvn -q -B -s "$settings" -f "$here/maven/kafka/pom.xml" dependency:copy \
      -Dartifact="io.apicurio:apicurio-registry-app:$APICURIO_VERSION:tar.gz:all" \
      -DoutputDirectory="$out.tmp"
  tar -xzf "$out.tmp/apicurio-registry-app-$APICURIO_VERSION-all.tar.gz" -C "$out.tmp"
  rm -f "$out.tmp/apicurio-registry-app-$APICURIO_VERSION-all.tar.gz"
  ls "$out.tmp"/apicurio-registry-app-*-runner.jar >/dev/null
  rm -rf "$out"; mv "$out.tmp" "$out"; touch "$out/.complete"
}
fetch_apicurio
