// Package resync collects anchors whose upstream owner is gone: the periodic resync
// each replica runs over the projects it holds, and the one-off sweep (`manager sweep`).
// Anchor identity, attaching and the precondition delete are package anchor's.
//
// Resync (resync.go) is engaged by the shard with every project this replica holds
// (the shard has engaged it) and runs one loop per engagement: a first pass after a random delay below
// InitialJitter, then one every Period, and one as soon as a proof of absence can be
// confirmed. A pass (pass.go) is a short list of phases; every request it makes runs in
// its own admission step (the shard's Enter), so a pass stops at the next request once
// the project is lost or validity ends, and no step outlasts one validity window:
//
//  1. examine: find the project's kubeconfig Secret (none: the pass ends, a project
//     without a Secret belongs to no shard), read the plane identity (the UID of the
//     plane's "default" Namespace) and compare it with the record in the lease namespace
//     (ConfigMap PlaneIdentityName, owned by the Secret, written once when first seen);
//     read the project's anchors from the metadata-only hub cache (AnchorCache) and
//     decide each from the owner's cache, read in a mode that never starts an informer
//     (StrictCacheOption). An owner found there is kept with no API call.
//  2. prove: for suspects, read the upstream namespace (once per pass and namespace)
//     and, unless its UID already proves the owner gone, the owner itself, live and
//     rate-limited. Three failed reads in a row make the plane unreachable for the rest
//     of the pass.
//  3. remember: a proof of absence is recorded with the time first seen; it must hold
//     again ConfirmAfter later (a later pass) before anything is collected.
//  4. collect: above HaltAbove candidates, halt (Warning Event, metric). Otherwise,
//     oldest first and namespace by namespace, read the namespace's objects live (every
//     namespaced kind the hub serves), judge the candidates' dependents, enqueue live
//     owners that claim one, read the runtime switch, and delete what is still Collect,
//     at most MaxDeletionsPerPass, rate-limited, with UID and resourceVersion
//     preconditions, through the shard's validity-guarded writer; each deletion is
//     logged and evented with the anchor's labels, UID and dependents.
//
// Decide (decide.go) holds every rule and is pure. What the resync does not guarantee:
// a delete sent just before validity ends can commit after it (the UID precondition
// still pins the exact anchor that was judged); proofs are kept in memory, so a project
// that changes hands starts confirming again (which only delays); a plane repointed
// before the project was ever held is recorded as it is then; anchors of a project
// with no Secret are reported (anchorage_resync_unowned_anchors, the sweep) and never
// deleted, and the tombstone policy that would collect them is not implemented.
//
// The operator's controls, none of which needs a restart, are described in
// docs/recovery.md: the AnnotationDeletion switch on the lease namespace, the
// AnnotationExclude annotation on a project's Secret, dry-run, and `manager sweep`.
package resync
