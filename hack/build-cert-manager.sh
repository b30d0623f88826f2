#!/usr/bin/env bash
# Builds bin/cert-manager-controller: cert-manager's controller (the version of
# github.com/cert-manager/cert-manager that hack/cert-manager/go.mod requires, the
# release whose CRDs internal/testenv serves), which tests run against a real API server
# to issue the Certificates the hub holds.
#
#   hack/build-cert-manager.sh     build (or reuse) and print the binary's path
#
# Why hack/cert-manager holds upstream sources: the controller's main package lives in
# the nested module github.com/cert-manager/cert-manager/controller-binary (cmd/controller
# in cert-manager's repository), which cert-manager never tags, so the Go module proxy
# does not serve it. Its four files (main.go, app/, app/options/) and its go.mod and
# go.sum are copied unchanged from the v1.17.2 tag (commit f3ffb86641f7), except that
# go.mod requires the published root module instead of replacing it with ../../; every
# other dependency is the release's own. Their module path keeps them inside
# cert-manager's tree, so they may import its internal packages as upstream does.
#
# Output: bin/cert-manager-controller in the checkout (git-ignored), or
# CERT_MANAGER_CONTROLLER. The built binary is cached outside the checkout, keyed by
# the wrapper module's files (hack/lib/cached-build.sh). A cold build took 5 minutes
# on 2 cores busy with other work (5 minutes of CPU; measured under nice).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
src=$root/hack/cert-manager
. "$root/hack/lib/cached-build.sh"
version=$(awk '$1 == "github.com/cert-manager/cert-manager" {print $2; exit}' "$src/go.mod")
cached_build cert-manager-controller "$src" "${CERT_MANAGER_CONTROLLER:-$root/bin/cert-manager-controller}" . 5 \
  "-s -w -X github.com/cert-manager/cert-manager/pkg/util.AppVersion=$version"
