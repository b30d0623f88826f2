#!/usr/bin/env bash
# Builds the control-plane binaries the tests and the demo run (etcd, kube-apiserver,
# kube-controller-manager) from the Go module proxy, because no binary download works
# on the machines this project is built on.
#
#   hack/build-k8s.sh            build (or reuse) and print the directory holding them
#
# Output: bin/k8s/<version>/ in the checkout (git-ignored). Built binaries are kept in a
# cache outside the checkout (ANCHORAGE_CACHE, default ~/.cache/anchorage) so that a
# fresh clone on the same machine reuses them. A flock makes concurrent callers wait for
# one build instead of racing.
#
# Why a wrapper module: k8s.io/kubernetes replaces its staging modules (k8s.io/api, ...)
# with local paths, so `go install k8s.io/kubernetes/cmd/...@v` is refused. A throw-away
# module that requires k8s.io/kubernetes and replaces each staging module with the
# published k8s.io/<name> v0.<minor>.<patch> builds it.
set -euo pipefail

K8S_VERSION=${K8S_VERSION:-1.35.4}
root=$(cd "$(dirname "$0")/.." && pwd)
out=${K8S_BIN_DIR:-$root/bin/k8s/$K8S_VERSION}
cache_root=${ANCHORAGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/anchorage}
cache=$cache_root/k8s/$K8S_VERSION
bins=(etcd kube-apiserver kube-controller-manager)

log() { echo "build-k8s: $*" >&2; }

# complete DIR: all binaries present and stamped with this version.
complete() {
  local dir=$1
  [ "$(cat "$dir/.version" 2>/dev/null)" = "$K8S_VERSION" ] || return 1
  for b in "${bins[@]}"; do [ -x "$dir/$b" ] || return 1; done
}

install_from_cache() {
  mkdir -p "$out"
  for b in "${bins[@]}"; do
    ln -f "$cache/$b" "$out/$b" 2>/dev/null || cp -f "$cache/$b" "$out/$b"
  done
  echo "$K8S_VERSION" >"$out/.version"
}

if complete "$out"; then echo "$out"; exit 0; fi

mkdir -p "$cache_root"
exec 9>"$cache_root/k8s-$K8S_VERSION.lock"
flock 9

if ! complete "$cache"; then
  log "building Kubernetes v$K8S_VERSION control plane from the Go module proxy (one time, ~4 min on 2 cores)"
  minor_patch=${K8S_VERSION#*.}
  staging_version=v0.$minor_patch
  major=${K8S_VERSION%%.*}
  minor=${minor_patch%%.*}

  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  k8s_mod=$(go mod download -json "k8s.io/kubernetes@v$K8S_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  etcd_version=$(awk '$1 == "go.etcd.io/etcd/server/v3" {print $2; exit}' "$k8s_mod")
  go_line=$(awk '$1 == "go" {print; exit}' "$k8s_mod")
  [ -n "$etcd_version" ] || { log "cannot find the etcd version pinned by k8s.io/kubernetes v$K8S_VERSION"; exit 1; }

  {
    echo "module anchorage.invalid/k8sbuild"
    echo
    echo "$go_line"
    echo
    echo "require ("
    echo "	k8s.io/kubernetes v$K8S_VERSION"
    echo "	go.etcd.io/etcd/server/v3 $etcd_version"
    echo ")"
    echo
    echo "replace ("
    awk '$2 == "=>" && $3 ~ /^\.\/staging\// {print "\t" $1 " => " $1 " '"$staging_version"'"}' "$k8s_mod"
    echo ")"
  } >"$work/go.mod"
  mkdir -p "$work/etcd"
  cat >"$work/etcd/main.go" <<'GO'
// Command etcd runs the etcd server pinned by k8s.io/kubernetes.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
  cat >"$work/tools.go" <<'GO'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
)
GO
  (cd "$work" && GOFLAGS=-mod=mod go mod tidy >&2)

  ver_flags=""
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ver_flags+=" -X $pkg.gitVersion=v$K8S_VERSION -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
  done
  staging=$cache.partial
  rm -rf "$staging"; mkdir -p "$staging"
  (cd "$work" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w$ver_flags" -o "$staging/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver)
  (cd "$work" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w$ver_flags" -o "$staging/kube-controller-manager" k8s.io/kubernetes/cmd/kube-controller-manager)
  (cd "$work" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$staging/etcd" ./etcd)
  echo "$K8S_VERSION" >"$staging/.version"
  rm -rf "$cache"; mv "$staging" "$cache"
  log "built into $cache"
fi

install_from_cache
complete "$out" || { log "install into $out failed"; exit 1; }
echo "$out"
