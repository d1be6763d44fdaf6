# shellcheck shell=bash
# The machine's cache of what set-up fetches and builds once (the jars, infra/fetch_jars.sh;
# SeaweedFS, infra/fetch_seaweedfs.sh; wheels, infra/fetch_wheels.sh): $PROTOLAKE_SHARED_CACHE,
# default ${XDG_CACHE_HOME:-~/.cache}/protolake. A checkout links to what is kept there.
# Sourced by those scripts; pipelines/machine_cache.py names the same folder for Python.

machine_cache() {  # machine_cache SUBFOLDER: its absolute path, created when missing
  local dir="${PROTOLAKE_SHARED_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/protolake}/$1"
  mkdir -p "$dir"
  (cd "$dir" && pwd)  # absolute: the links must resolve from anywhere
}

link_to() {  # link_to TARGET LINK: LINK points at TARGET, replaced in one rename
  ln -sfn "$1" "$2.$$"
  [ ! -d "$2" ] || [ -L "$2" ] || rm -rf "$2"  # a folder an earlier set-up filled in place
  mv -Tf "$2.$$" "$2"
}
