#!/usr/bin/env bash
# Builds bin/pebble: Pebble, Let's Encrypt's ACME test server (the version of
# github.com/letsencrypt/pebble/v2 that hack/pebble/go.mod requires), which tests run as
# the ACME server of an ACME ClusterIssuer that cert-manager's controller orders from.
#
#   hack/build-pebble.sh     build (or reuse) and print the binary's path
#
# Output: bin/pebble in the checkout (git-ignored), or PEBBLE. The built binary is cached
# outside the checkout, keyed by the wrapper module's files (hack/lib/cached-build.sh).
# A cold build took 13 seconds on 2 cores (measured under nice).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/hack/lib/cached-build.sh"
cached_build pebble "$root/hack/pebble" "${PEBBLE:-$root/bin/pebble}" github.com/letsencrypt/pebble/v2/cmd/pebble 1 "-s -w"
