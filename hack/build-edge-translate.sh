#!/usr/bin/env bash
# Builds bin/edge-translate, the data-plane oracle of the tests and the demo: Envoy
# Gateway's own translator run over the hub's objects (hack/edge-translate/main.go says
# why not egctl). It comes from the Go module proxy like the control-plane binaries.
#
#   hack/build-edge-translate.sh     build (or reuse) and print the binary's path
#
# Output: bin/edge-translate in the checkout (git-ignored), or EDGE_TRANSLATE. The built
# binary is cached outside the checkout, keyed by the wrapper module's files
# (hack/lib/cached-build.sh). A cold build takes about 3 minutes on 2 cores.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/hack/lib/cached-build.sh"
cached_build edge-translate "$root/hack/edge-translate" "${EDGE_TRANSLATE:-$root/bin/edge-translate}" . 3
