#!/usr/bin/env bash
# A variant of the manager that never ships, made by applying one patch of bench/mutants
# to a scratch copy of this tree (the tree itself is never changed):
#
#   hack/mutant.sh NAME OUT          build cmd/manager with bench/mutants/NAME.patch into OUT
#   hack/mutant.sh NAME -- CMD ...   run CMD in the patched copy (go test ./test/integration ...)
#
# The patches put back a guard's removal (nogate, suspectexpires) or give the replica a
# clock set off by $ANCHORAGE_BENCH_CLOCK_OFFSET (skew). bench-smoke and the integration
# tests named in bench/README.md show that each guard's removal is caught. A patch that no
# longer applies fails here, loudly: update it with the code it changes.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
name=${1:?usage: hack/mutant.sh NAME OUT | NAME -- CMD ...}
shift
patch=$root/bench/mutants/$name.patch
[ -f "$patch" ] || { echo "mutant: no patch $patch" >&2; exit 1; }
scratch=$(mktemp -d "${TMPDIR:-/tmp}/anchorage-mutant-$name.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
# The working tree as it is (tracked and untracked files, not ignored ones such as bin/).
git ls-files -z --cached --others --exclude-standard | while IFS= read -r -d '' f; do
  if [ -e "$f" ]; then printf '%s\0' "$f"; fi # a tracked file deleted in the tree is left out
done | tar --null -T - -cf - | tar -xf - -C "$scratch"
(cd "$scratch" && git apply --whitespace=nowarn "$patch") || { echo "mutant: bench/mutants/$name.patch does not apply to this tree" >&2; exit 1; }
if [ "${1:-}" = "--" ]; then
  shift
  cd "$scratch" && "$@"
else
  out=${1:?usage: hack/mutant.sh NAME OUT}
  case "$out" in /*) ;; *) out=$root/$out ;; esac
  (cd "$scratch" && CGO_ENABLED=0 go build -ldflags "${LDFLAGS:-}" -o "$out" ./cmd/manager)
fi
