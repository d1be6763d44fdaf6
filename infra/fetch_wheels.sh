#!/usr/bin/env bash
# Wheels, kept once per machine, of the pinned dependencies PyPI serves as source only
# (pyspark, pyspark-client, PyHive): infra/fetch_wheels.sh PYTHON prints their folder, for
# `pip install --find-links`. Without it every install downloads those sources again and
# builds them (pyspark: 400 MB, about 30 s on 2 cores): the index here answers a cache's
# revalidation with a new copy, so neither uv nor pip reuses what it built, and uv keeps each
# build in its cache. Built with PYTHON's pip (a virtualenv's), versions from pyproject.toml.
# A wheel that cannot be built is left out, with a warning: the install then builds that
# package from source. Nothing prunes the wheels of older pins (pyspark's is 430 MB).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
python="$1"
# shellcheck source=infra/machine_cache.sh
. "$root/infra/machine_cache.sh"
wheels="$(machine_cache wheels)"

# "name==version" of each source-only pin in pyproject.toml (extras dropped)
pins="$(grep -oiE '"(pyspark|pyspark-client|pyhive)(\[[^]"]*\])?==[^"]+"' "$root/pyproject.toml" |
  tr -d '"' | sed -E 's/\[[^]]*\]//' | sort -u || true)"
[ -n "$pins" ] || echo "fetch_wheels: no pin of pyspark, pyspark-client or PyHive in pyproject.toml" >&2
scratch=""
trap '[ -z "$scratch" ] || rm -rf "$scratch"' EXIT
for pin in $pins; do
  name="${pin%%==*}" version="${pin#*==}"
  # a wheel's file name spells the project with underscores, in any case
  [ -z "$(find "$wheels" -maxdepth 1 -iname "${name//-/_}-${version}-*.whl" -print -quit)" ] || continue
  echo "building a wheel of $pin (once per machine, into $wheels)" >&2
  [ -n "$scratch" ] || scratch="$(mktemp -d "$wheels/.building-XXXXXX")"
  if "$python" -m pip wheel -q --no-deps -w "$scratch" "$pin" >&2; then
    for wheel in "$scratch"/*.whl; do
      chmod 0644 "$wheel"
      mv -f "$wheel" "$wheels"/  # whole: a rename within the folder
    done
  else
    echo "fetch_wheels: could not build $pin; the install builds it from source" >&2
  fi
done
echo "$wheels"
