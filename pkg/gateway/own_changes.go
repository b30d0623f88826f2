package gateway

import (
	"maps"
	"slices"

	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// ownChangeMatters reports whether an update from old to new changed anything the
// object's reconciler acts on: generation, labels, annotations, finalizers (but ours
// added alone), deletion timestamp, owner references or UID. A status-only change does
// not; an informer resync (same resourceVersion) does.
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

// ownChanges is the For watch's filter, which drops the reconcile's own status and
// finalizer writes (docs/design.md, Programmed means served): updates pass when
// ownChangeMatters; create, delete and generic events always pass.
func ownChanges(ours string) predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool { return ownChangeMatters(e.ObjectOld, e.ObjectNew, ours) },
	}
}

// parentChangesForRoutes is the filter of the Gateway watch that brings its routes
// back: a status-only update does not, since routes read only a parent's existence,
// namespace and class (ourParents).
func parentChangesForRoutes() predicate.Predicate { return ownChanges("") }
