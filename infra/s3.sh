# shellcheck shell=bash
# The stack's S3-compatible object store: SeaweedFS (master, volume, filer and S3 gateway in
# one `weed server` process) on 127.0.0.1, linked by infra/setup.sh from infra/.cache/bin.
# Sourced by infra/stack.sh (which defines spawn, pid_of, service_down, await_start, ...).
#
#   run/s3/                  SeaweedFS data (volumes, filer store; kept across restarts)
#   run/s3/identities.json   the S3 gateway's one identity (regenerated on every start)
#   run/s3.env               (also read by the SQL server, infra/catalog.sh) AWS_ACCESS_KEY_ID,
#                            AWS_SECRET_ACCESS_KEY, AWS_ENDPOINT_URL and
#                            AWS_REGION as shell assignments, for protolake's [s3] section
#                            (${env:...}), delta-rs, DuckDB and the AWS CLI: `. run/s3.env`
#   run/logs/s3.log
#
# The access key and secret are generated once per run folder (kept in run/s3.env) and are
# this loopback store's only credential. Buckets named in PROTOLAKE_S3_BUCKETS are created at
# start when missing.
#
# Environment:
#   PROTOLAKE_S3_PORT      the S3 API port, default 8333 (http://127.0.0.1:8333). SeaweedFS's
#                          own master, volume and filer ports are PORT+1, +2, +3, and each of
#                          those has a gRPC port 10000 higher.
#   PROTOLAKE_S3_BUCKETS   buckets to create, default "protolake-demo"
#   PROTOLAKE_S3_REGION    the region written to run/s3.env, default us-east-1
#   PROTOLAKE_WEED         the SeaweedFS binary, default infra/.cache/bin/weed

s3_port="${PROTOLAKE_S3_PORT:-8333}"
s3_master_port=$((s3_port + 1)); s3_volume_port=$((s3_port + 2)); s3_filer_port=$((s3_port + 3))
s3_buckets="${PROTOLAKE_S3_BUCKETS:-protolake-demo}"
s3_region="${PROTOLAKE_S3_REGION:-us-east-1}"
weed="${PROTOLAKE_WEED:-$root/infra/.cache/bin/weed}"
s3_dir="$run/s3"
s3_env="$run/s3.env"
s3_marker="-dir=$s3_dir"

# Keep (or create) this run folder's credential, and write run/s3.env.
s3_write_env() {
  local key="" secret=""
  if [ -f "$s3_env" ]; then
    key="$(sed -n 's/^AWS_ACCESS_KEY_ID=//p' "$s3_env")"
    secret="$(sed -n 's/^AWS_SECRET_ACCESS_KEY=//p' "$s3_env")"
  fi
  if [ -z "$key" ] || [ -z "$secret" ]; then
    key="PL$(od -An -N9 -tx1 /dev/urandom | tr -d ' \n' | tr 'a-f' 'A-F')"
    secret="$(od -An -N30 -tx1 /dev/urandom | tr -d ' \n')"
  fi
  mkdir -p "$run"
  (umask 077; cat > "$s3_env" <<EOF
# Written by infra/stack.sh (up s3, or up sqlserver first): this loopback store's generated credential.
AWS_ACCESS_KEY_ID=$key
AWS_SECRET_ACCESS_KEY=$secret
AWS_ENDPOINT_URL=http://127.0.0.1:$s3_port
AWS_REGION=$s3_region
EOF
  )
  (umask 077; cat > "$s3_dir/identities.json" <<EOF
{"identities": [{"name": "protolake",
  "credentials": [{"accessKey": "$key", "secretKey": "$secret"}],
  "actions": ["Admin", "Read", "List", "Tagging", "Write"]}]}
EOF
  )
}

s3_create_buckets() {
  local bucket
  for bucket in $s3_buckets; do
    # `weed shell` reaches the master; an existing bucket is left as it is. The list is read
    # whole first (grep -q would end the pipe early and fail it under pipefail), and a line
    # must name the bucket itself, not one whose name begins with it.
    local listed
    listed="$(printf 's3.bucket.list\n' | "$weed" shell -master="127.0.0.1:$s3_master_port" 2>/dev/null || true)"
    if ! awk -v b="$bucket" '$1 == b { found = 1 } END { exit !found }' <<< "$listed"; then
      printf 's3.bucket.create -name %s\n' "$bucket" \
        | "$weed" shell -master="127.0.0.1:$s3_master_port" >> "$logs/s3.log" 2>&1 \
        || die "could not create bucket $bucket (log in $logs/s3.log)"
      echo "s3 bucket $bucket created"
    fi
  done
}

s3_up() {
  local pid p
  if pid="$(pid_of s3 "$s3_marker")"; then
    already_running s3 "$pid" s3 "http://127.0.0.1:$s3_port" "$timeout" "http://127.0.0.1:$s3_port" \
      && return 0
  fi
  [ -x "$weed" ] || die "SeaweedFS missing at $weed: run infra/setup.sh (or make setup)"
  for p in "$s3_port" "$s3_master_port" "$s3_volume_port" "$s3_filer_port"; do
    port_busy "$p" && die "port $p is in use by another process (not this stack's s3); set PROTOLAKE_S3_PORT to a free range"
  done
  mkdir -p "$s3_dir" "$logs"
  s3_write_env
  echo "starting s3 (SeaweedFS) on http://127.0.0.1:$s3_port"
  local log_mark; log_mark="$(size_of "$logs/s3.log")"
  # One node on loopback: its single master elects itself after 1 s (not 10), and its volume
  # server stops at once (no load balancer to drain for 10 s first).
  spawn s3 "$s3_marker" "$logs/s3.log" "$weed" server "$s3_marker" -ip=127.0.0.1 -ip.bind=127.0.0.1 \
    -master.port="$s3_master_port" -volume.port="$s3_volume_port" -filer -filer.port="$s3_filer_port" \
    -s3 -s3.port="$s3_port" -s3.config="$s3_dir/identities.json" \
    -master.volumeSizeLimitMB=128 -volume.max=64 -master.raftHashicorp=false -volume.preStopSeconds=0 \
    -master.electionTimeout=1s
  await_start s3 s3 "http://127.0.0.1:$s3_port" "$timeout" "s3 failed to start (log in $logs/s3.log)" \
    "$logs/s3.log:$log_mark"
  s3_create_buckets
}

s3_down() { service_down s3 "$s3_marker"; }

s3_status() {
  local pid
  if pid="$(pid_of s3 "$s3_marker")"; then
    echo "s3        running  pid $pid  url http://127.0.0.1:$s3_port  env $s3_env  log $logs/s3.log"
  else echo "s3        stopped  (http://127.0.0.1:$s3_port; started on demand)"; fi
}
