#!/usr/bin/env bash
# Build SeaweedFS's `weed` (the stack's S3-compatible object store, infra/s3.sh) from the Go
# module proxy, once per machine and version, linked from infra/.cache/bin/weed. Safe to
# repeat: a binary of the pinned version is kept (infra/.cache/bin/weed.version names it); it
# works offline after.
#
# `go install module@version` refuses SeaweedFS (its go.mod has `replace` directives), so the
# module's source is downloaded through the proxy and built as the main module. The build
# takes a few minutes and ~1 GB of Go caches; it runs niced.
#   PROTOLAKE_SEAWEEDFS_VERSION   the module version (a pseudo-version of its main branch)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
version="${PROTOLAKE_SEAWEEDFS_VERSION:-v0.0.0-20261109003541-7506e5f91cd6}"
bin="${PROTOLAKE_BIN_CACHE:-$here/.cache/bin}"
module="github.com/seaweedfs/seaweedfs"

# The binary is kept once per machine and version in $PROTOLAKE_SHARED_CACHE/bin (default
# ${XDG_CACHE_HOME:-~/.cache}/protolake/bin, as the jars are: infra/fetch_jars.sh); $bin/weed
# is a link to it. Another clone links it instead of building.
. "$here/machine_cache.sh"
shared="$(machine_cache bin)"
kept="$shared/weed-$version"
mkdir -p "$bin"
link_kept() {  # the link and the version file replace what was there, each in one rename
  link_to "$kept" "$bin/weed"
  echo "$version" > "$bin/weed.version.$$"
  mv -f "$bin/weed.version.$$" "$bin/weed.version"
}
if [ -x "$kept" ]; then
  [ "$(readlink -- "$bin/weed" || true)" = "$kept" ] && [ -f "$bin/weed.version" ] || link_kept
  exit 0
fi
# a binary of this version built in place by an earlier set-up becomes the kept one
if [ "$(cat "$bin/weed.version" 2>/dev/null || true)" = "$version" ] && [ -x "$bin/weed" ] &&
  [ ! -L "$bin/weed" ]; then
  mv -f "$bin/weed" "$kept"
  link_kept
  exit 0
fi
command -v go >/dev/null || { echo "go (1.26+) is required to build SeaweedFS" >&2; exit 1; }
echo "building SeaweedFS $version from the Go module proxy into $kept (a few minutes)"
# On failure `go mod download -json` prints the reason as the JSON's "Error" and exits non-zero.
if ! info="$(go mod download -json "$module@$version")"; then
  why="$(sed -n 's/^\s*"Error": "\(.*\)",\{0,1\}$/\1/p' <<< "$info")"
  echo "go mod download $module@$version failed: ${why:-no reason given}" >&2
  exit 1
fi
src="$(sed -n 's/^\s*"Dir": "\(.*\)",$/\1/p' <<< "$info")"
[ -d "$src" ] || { echo "go mod download $module@$version gave no source folder" >&2; exit 1; }
work="$(mktemp -d)"
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
cp -r "$src" "$work/src"; chmod -R u+w "$work/src"
# A name of its own: two set-ups building at once never move each other's half-written file.
tmp_bin="$(mktemp -p "$shared" .weed.XXXXXX)"
(cd "$work/src" && CGO_ENABLED=0 nice -n 10 go build -trimpath -ldflags "-s -w" -o "$tmp_bin" ./weed) \
  || { rm -f "$tmp_bin"; exit 1; }
chmod 755 "$tmp_bin"
mv "$tmp_bin" "$kept"
link_kept
