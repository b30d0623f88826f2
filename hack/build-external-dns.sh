#!/usr/bin/env bash
# Builds bin/external-dns: external-dns (the version of sigs.k8s.io/external-dns that
# hack/external-dns/go.mod requires), which tests run against a real API server with
# its RFC 2136 provider writing to a real DNS server (hack/install-dns-server.sh).
#
#   hack/build-external-dns.sh     build (or reuse) and print the binary's path
#
# Why v0.21.0: it is the newest release this Go builds whose dependencies the Go module
# proxy serves (v0.23 needs a newer Go; v0.22's egoscale and openshift/api versions are
# not served), and its k8s.io libraries are the minor go.mod and the API server run.
#
# Output: bin/external-dns in the checkout (git-ignored), or EXTERNAL_DNS. The built
# binary is cached outside the checkout, keyed by the wrapper module's files
# (hack/lib/cached-build.sh). A cold build took 11 minutes
# on 2 cores busy with other work (7 minutes of CPU; measured under nice).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
src=$root/hack/external-dns
. "$root/hack/lib/cached-build.sh"
version=$(awk '$1 == "sigs.k8s.io/external-dns" {print $2; exit}' "$src/go.mod")
cached_build external-dns "$src" "${EXTERNAL_DNS:-$root/bin/external-dns}" sigs.k8s.io/external-dns 11 \
  "-s -w -X sigs.k8s.io/external-dns/pkg/apis/externaldns.Version=$version"
