#!/usr/bin/env bash
# Builds bin/edge-translate, the data-plane oracle of the tests and the demo: Envoy
# Gateway's own translator run over the hub's objects (hack/edge-translate/main.go says
# why not egctl). It comes from the Go module proxy like the control-plane binaries.
#
#   hack/build-edge-translate.sh     build (or reuse) and print the binary's path
#
# Output: bin/edge-translate in the checkout (git-ignored). The built binary is kept in a
# cache outside the checkout (ANCHORAGE_CACHE, default ~/.cache/anchorage), keyed by the
# hash of the wrapper's go.mod, go.sum and main.go, so a fresh clone on the same machine
# reuses it; a flock makes concurrent callers wait for one build. A cold build takes
# about 3 minutes on 2 cores.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
src=$root/hack/edge-translate
out=${EDGE_TRANSLATE:-$root/bin/edge-translate}
cache_root=${ANCHORAGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/anchorage}
key=$(cat "$src/go.mod" "$src/go.sum" "$src"/*.go | sha256sum | cut -c1-16)
cached=$cache_root/edge-translate/$key/edge-translate

log() { echo "build-edge-translate: $*" >&2; }

if [ -x "$out" ] && [ "$(cat "$out.key" 2>/dev/null)" = "$key" ]; then echo "$out"; exit 0; fi

mkdir -p "$cache_root"
exec 9>"$cache_root/edge-translate.lock"
flock 9

if [ ! -x "$cached" ]; then
  log "building Envoy Gateway's translator from the Go module proxy (one time, ~3 min on 2 cores)"
  mkdir -p "$(dirname "$cached")"
  (cd "$src" && CGO_ENABLED=0 go build -trimpath -o "$cached.tmp" .)
  mv "$cached.tmp" "$cached"
fi
mkdir -p "$(dirname "$out")"
ln -f "$cached" "$out" 2>/dev/null || cp -f "$cached" "$out"
echo "$key" >"$out.key"
echo "$out"
