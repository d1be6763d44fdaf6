#!/usr/bin/env bash
# Wheels, kept once per machine, of the pinned dependencies PyPI serves as source only
# (pyspark, pyspark-client, PyHive): infra/fetch_wheels.sh PYTHON prints their folder, for
# `pip install --find-links`. Without it every install downloads those sources again and
# builds them (pyspark: 400 MB, about 30 s on 2 cores): the index here answers a cache's
# revalidation with a new copy, so neither uv nor pip reuses what it built, and uv keeps each
# build in its cache. Built with PYTHON's pip (a virtualenv's), versions from pyproject.toml.
# A wheel that cannot be built is left out: the install then builds that package from source.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
python="$1"
# shellcheck source=infra/machine_cache.sh
. "$root/infra/machine_cache.sh"
wheels="$(machine_cache wheels)"

# "name==version" of each source-only pin in pyproject.toml (extras dropped)
pins="$(grep -oiE '"(pyspark|pyspark-client|pyhive)(\[[^]"]*\])?==[^"]+"' "$root/pyproject.toml" |
  tr -d '"' | sed -E 's/\[[^]]*\]//')"
missing=()
for pin in $pins; do
  name="${pin%%==*}" version="${pin#*==}"
  # a wheel's file name spells the project with underscores, in any case
  if ! find "$wheels" -maxdepth 1 -iname "${name//-/_}-${version}-*.whl" | grep -q .; then
    missing+=("$pin")
  fi
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "building wheels of ${missing[*]} (once per machine, into $wheels)" >&2
  scratch="$(mktemp -d "$wheels/.building-XXXXXX")"
  trap 'rm -rf "$scratch"' EXIT
  if "$python" -m pip wheel -q --no-deps -w "$scratch" "${missing[@]}" >&2; then
    chmod 0644 "$scratch"/*.whl
    mv -f "$scratch"/*.whl "$wheels"/  # each file whole: a rename within the folder
  else
    echo "fetch_wheels: could not build ${missing[*]}; the install builds them from source" >&2
  fi
fi
echo "$wheels"
