package gateway

import (
	"maps"
	"slices"

	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// Own changes only. Every reconcile of an HTTPProxy, Gateway or HTTPRoute ends by
// patching the object's status, and the first one also adds our finalizer; each write
// comes back through the For watch as an update of the object the reconcile just
// handled. Neither needs another pass. The pass that added the finalizer goes on, in
// the same reconcile, with the object as patched (and if it fails it is retried with
// backoff anyway). And none of the three reconcilers
// decides anything from its own object's status. They read it only to write it back
// (the conditions' transition times, another controller's route parent entries kept
// as they are) and, for the HTTPProxy, to tell a first Programmed from a repeated one
// in an Event. So a status-only update is a second pass over unchanged input, which
// on a loaded replica means one more live guard read of the owner chain and namespace
// and more hub reads per object, for nothing.
//
// Nothing is lost by dropping them:
//   - Our own finalizer added, and nothing else: the pass that added it acts on it.
//     Any other finalizer change (ours removed, someone else's) passes.
//   - Our own status patch: the pass that wrote it already acted on everything it
//     reads; the next pass would compute the same status and write nothing. A later
//     pass that reads the object from a cache still behind that patch does not skip a
//     needed correction of it: statuses are judged on the live guard's read
//     (live_status.go), not on the cache.
//   - A status someone else edited: we do not act on it; our conditions are written
//     again, from the same inputs, by the next pass any real trigger brings (a spec,
//     metadata or child change, the hub copy's events, a requeue or a resync).
//   - The status of another object this one depends on (the HTTPProxy's Gateway and
//     HTTPRoute, a route's Gateways, the hub copies) arrives through that object's own
//     watch, which is not filtered.
//   - An informer resync redelivers an object unchanged (same resourceVersion) and
//     still passes, so the periodic safety net is kept.
//
// Create, delete and generic events always pass.

// ownChangeMatters reports whether an update of an object from old to new changed
// anything the reconciler of that object, whose finalizer is ours, acts on: its
// generation (the spec), labels, annotations, finalizers (but ours added alone),
// deletion timestamp, owner references or UID. A status, managedFields or
// resourceVersion change alone does not matter. An unchanged resourceVersion is an
// informer resync, which passes.
func ownChangeMatters(old, new client.Object, ours string) bool {
	if old == nil || new == nil {
		return true
	}
	if old.GetResourceVersion() == new.GetResourceVersion() {
		return true // a resync: redelivered on purpose
	}
	return old.GetUID() != new.GetUID() ||
		old.GetGeneration() != new.GetGeneration() ||
		!maps.Equal(old.GetLabels(), new.GetLabels()) ||
		!maps.Equal(old.GetAnnotations(), new.GetAnnotations()) ||
		finalizersChanged(old.GetFinalizers(), new.GetFinalizers(), ours) ||
		!old.GetDeletionTimestamp().Equal(new.GetDeletionTimestamp()) ||
		!equality.Semantic.DeepEqual(old.GetOwnerReferences(), new.GetOwnerReferences())
}

// finalizersChanged reports whether the finalizers went from old to new other than by
// ours being appended to them (controllerutil.AddFinalizer appends).
func finalizersChanged(old, new []string, ours string) bool {
	if slices.Equal(old, new) {
		return false
	}
	oursAdded := !slices.Contains(old, ours) && slices.Equal(append(slices.Clone(old), ours), new)
	return !oursAdded
}

// ownChanges is the filter of the For watch of a controller whose finalizer is ours:
// updates pass when ownChangeMatters; create, delete and generic events always pass.
func ownChanges(ours string) predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool { return ownChangeMatters(e.ObjectOld, e.ObjectNew, ours) },
	}
}

// parentChangesForRoutes is the filter of the watch that brings a Gateway's routes back
// when the Gateway changes. Of a parent Gateway the route reconciler reads only whether
// it exists, its namespace and its class (ourParents): what a route writes to the hub
// never depends on the Gateway's status, which the Gateway's own reconciles patch and
// the hub copy's events keep changing. So a status-only update of a Gateway brings no
// route back; a spec change (its class), a metadata change (any finalizer, ours
// included), its deletion and its creation do.
func parentChangesForRoutes() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool { return ownChangeMatters(e.ObjectOld, e.ObjectNew, "") },
	}
}
