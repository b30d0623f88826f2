// Package anchor holds the identity of anchors (names, labels, legacy decoding), the
// code that attaches downstream objects to them, and the one way an anchor is deleted
// (DeleteAsChecked). The resync that collects anchors whose upstream owner is gone is
// its sub-package resync; the checks both share live here: NotFoundProvesAbsence,
// IsAnchorReference and HangsOn.
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
// into AlreadyExists and an error the caller retries). Delete, DeleteNamed and
// DeleteIndexed must be given an uncached client: they must see what is on the hub now,
// not what a cache saw. Delete and DeleteNamed find anchors with a field selector on
// metadata.name across all namespaces, which only the API server answers, at the cost
// of a scan of every ConfigMap on the hub; DeleteIndexed, which the finalizers use, reads
// the one anchor in its mapped namespace and takes only its ambiguity check from a cache
// (a NameIndex), which its doc argues can only make it more cautious.
package anchor
