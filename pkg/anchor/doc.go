// Package anchor is what the gateway path and the resync need of anchors: identity (names,
// labels, legacy decoding), attaching to them, and deleting, always through DeleteAsChecked
// (docs/design.md: Anchors; Wire formats; Gateway path). Sub-package resync collects orphans.
//
// Open identity.go first. The files:
//
//   - identity.go: Owner, the labels, names, Decode and IsAnchor
//   - attach.go: EnsureMappedNamespace, Attach, anchor ownerReferences
//   - delete.go: DeleteAsChecked, and the checks before it
//   - indexed.go: DeleteIndexed, the finalizers' two-call delete
//   - absence.go: NotFoundProvesAbsence
//
// Glossary:
//
//   - owner: the upstream object, in a project's plane, an anchor stands for.
//   - anchor: the empty ConfigMap anchor-<owner UID> on the hub that every downstream
//     object of the owner hangs on.
//   - mapped namespace: ns-<upstream Namespace UID>, the hub namespace mirroring one.
//   - malformed: anchor-named but not exactly an anchor; decoding never guesses, and
//     callers keep what they cannot decode.
//
// Attach and EnsureMappedNamespace take any client (a cached one converges slower);
// DeleteIndexed needs an uncached one: it must see the hub as it is now.
package anchor
