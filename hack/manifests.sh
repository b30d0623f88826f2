#!/usr/bin/env bash
# Generates what controller-gen derives from the Go sources: deepcopy methods for the API
# packages, the CRDs (config/crd/bases) and the manager's RBAC roles (config/rbac): the
# hub's (role.yaml, from the markers in pkg/ and internal/app) and the one bound on each
# project's plane (project-role.yaml, from internal/planerbac alone).
#
#   hack/manifests.sh                 regenerate everything in place
#   hack/manifests.sh object crd      regenerate only some parts (object, crd, rbac)
#   OUT_DIR=/tmp/x hack/manifests.sh  write into /tmp/x instead, with the same layout
#                                     (api/<pkg>/zz_generated.deepcopy.go, config/...),
#                                     so a test can compare a fresh generation with the
#                                     checked-in files without touching them
#
# controller-gen runs through `go run` at a pinned version (CONTROLLER_GEN overrides
# the command), so no binary has to be installed first.
set -euo pipefail

CONTROLLER_GEN_VERSION=${CONTROLLER_GEN_VERSION:-v0.20.1}
root=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT_DIR:-$root}
cd "$root"

if [ -n "${CONTROLLER_GEN:-}" ]; then
  read -r -a cgen <<<"$CONTROLLER_GEN"
else
  cgen=(go run "sigs.k8s.io/controller-tools/cmd/controller-gen@$CONTROLLER_GEN_VERSION")
  # Offline once it has been fetched: `go run pkg@version` asks the proxy about the
  # module even when the module cache holds it, so serve the cache itself as the proxy
  # (its contents were checksum-verified when they were downloaded).
  cache="$(go env GOMODCACHE)/cache/download"
  if [ -f "$cache/sigs.k8s.io/controller-tools/@v/$CONTROLLER_GEN_VERSION.zip" ]; then
    cgen=(env GOPROXY="file://$cache" GOSUMDB=off "${cgen[@]}")
  fi
fi

parts=("$@")
[ ${#parts[@]} -gt 0 ] || parts=(object crd rbac)
want() { local p; for p in "${parts[@]}"; do [ "$p" = "$1" ] && return 0; done; return 1; }
for p in "${parts[@]}"; do
  case $p in object | crd | rbac) ;; *) echo "manifests.sh: unknown part $p (want object, crd or rbac)" >&2; exit 2 ;; esac
done

if want object; then
  # One run per API package: controller-gen's output:object:dir puts every package's file
  # in the one directory, so per-package runs keep the layout when OUT_DIR is set.
  while IFS= read -r pkg; do
    mkdir -p "$out/$pkg"
    "${cgen[@]}" object paths="./$pkg" output:object:dir="$out/$pkg"
  done < <(find api -name '*.go' ! -name '*_test.go' ! -name 'zz_generated*' | sed 's|/[^/]*$||' | sort -u)
fi

if want crd; then
  mkdir -p "$out/config/crd/bases"
  "${cgen[@]}" crd paths=./api/... output:crd:artifacts:config="$out/config/crd/bases"
fi

if want rbac; then
  mkdir -p "$out/config/rbac"
  "${cgen[@]}" rbac:roleName=anchorage-manager paths="{./pkg/...,./internal/app}" output:rbac:artifacts:config="$out/config/rbac"
  # The plane's role is generated on its own, from internal/planerbac alone, so no hub
  # marker ever reaches a tenant's plane. controller-gen always names its file
  # role.yaml: generate into a scratch directory and rename.
  plane=$(mktemp -d)
  trap 'rm -rf "$plane"' EXIT
  "${cgen[@]}" rbac:roleName=anchorage-project paths=./internal/planerbac output:rbac:artifacts:config="$plane"
  mv "$plane/role.yaml" "$out/config/rbac/project-role.yaml"
  # controller-gen writes no role at all (and keeps any old one) when pkg/ carries no
  # +kubebuilder:rbac markers: say so rather than leave a silently stale config/rbac.
  if ! grep -rqs '+kubebuilder:rbac' pkg; then
    echo "manifests.sh: no +kubebuilder:rbac markers under pkg/, config/rbac/role.yaml not generated" >&2
  fi
fi
