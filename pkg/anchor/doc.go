// Package anchor holds the identity of anchors, the code that attaches downstream
// objects to them, and the resync that collects anchors whose upstream owner is gone.
//
// Kubernetes ownerReferences cannot cross clusters, so every object the manager writes
// on the hub hangs (through a non-controller ownerReference) on an anchor: an empty
// ConfigMap on the hub named after the UID of the upstream object it stands for.
// Deleting the anchor lets the hub's garbage collector delete everything hanging on it.
//
// # Wire format
//
// The names and labels below are shared with hubs that exist today and with the
// manager this one replaces; they must not change.
//
//   - Mapped namespace: the hub namespace "ns-<upstream Namespace UID>", labelled with
//     LabelNamespace and LabelClusterName. Older mapped namespaces carry no labels, so
//     nothing here ever relies on namespace labels to find anchors.
//   - Anchor: ConfigMap "anchor-<upstream object UID>" in a mapped namespace, with no
//     data, no ownerReferences and the five labels of Owner.Labels.
//   - Downstream object: carries the same five labels and exactly one ownerReference
//     to its current anchor (apiVersion v1, kind ConfigMap, non-controller).
//
// The project is encoded in LabelClusterName as "cluster-<project>" with "/" written as
// "_". Two legacy encodings are still read: "cluster-_proj" (the project was once named
// with a leading slash) means "proj", and "cluster-org_proj" means "org/proj".
//
// # Identity is strict
//
// A wrong delete takes live traffic down on every edge, so decoding never guesses:
// anything that is not exactly an anchor (see IsAnchor) is reported as malformed, and
// callers keep what they cannot decode.
//
// # Clients
//
// Attach and EnsureMappedNamespace work with any client, but a cached client makes
// them slower to converge (a Get that misses an object the cache has not seen yet turns
// into AlreadyExists and an error the caller retries). Delete and DeleteNamed must be
// given an uncached client: they find anchors with a field selector on metadata.name
// across all namespaces, which only the API server answers, and they must see what is
// on the hub now, not what a cache saw.
//
// # Resync
//
// Resync (resync.go) is engaged by the shard with every project this replica has
// claimed and runs one loop per engagement: a first pass after a random delay below
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
// before the project was ever claimed is recorded as it is then; anchors of a project
// with no Secret are reported (anchorage_resync_unowned_anchors, the sweep) and never
// deleted, and the tombstone policy that would collect them is not implemented.
//
// The operator's controls, none of which needs a restart, are described in
// docs/recovery.md: the AnnotationDeletion switch on the lease namespace, the
// AnnotationExclude annotation on a project's Secret, dry-run, and `manager sweep`.
package anchor
