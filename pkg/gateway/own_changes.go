package gateway

import (
	"context"
	"maps"
	"slices"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	mcbuilder "sigs.k8s.io/multicluster-runtime/pkg/builder"
	mchandler "sigs.k8s.io/multicluster-runtime/pkg/handler"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"
)

// ownChangeMatters reports whether an update changed what the reconciler acts on: UID,
// generation, labels, annotations, finalizers (but ours added alone), deletion timestamp
// or owner references. A resync (same resourceVersion) does too.
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

// parentChangesForRoutes filters the Gateway watch that brings its routes back: not on a
// status-only update, as routes read only a parent's existence, namespace and class.
func parentChangesForRoutes() predicate.Predicate { return ownChanges("") }

// terminatingPriority is the queue priority of an object that started terminating
// (docs/design.md, Finalizers): above the For watch's default (0) and the initial
// list's (LowPriority). Its requeues keep it.
const terminatingPriority = 100

// startedTerminating reports whether an update is the one where obj started
// terminating while carrying finalizer.
func startedTerminating(old, new client.Object, finalizer string) bool {
	return old != nil && new != nil &&
		old.GetDeletionTimestamp() == nil && new.GetDeletionTimestamp() != nil &&
		controllerutil.ContainsFinalizer(new, finalizer)
}

// enqueueTerminatingFirst is a handler, beside the For watch's, that adds an object
// that started terminating with finalizer at terminatingPriority (the queue keeps the
// higher of two priorities, so the order of the handlers does not matter).
func enqueueTerminatingFirst(finalizer string) mchandler.TypedEventHandlerFunc[client.Object, mcreconcile.Request] {
	return func(name multicluster.ClusterName, _ cluster.Cluster) handler.TypedEventHandler[client.Object, mcreconcile.Request] {
		return handler.TypedFuncs[client.Object, mcreconcile.Request]{
			UpdateFunc: func(_ context.Context, e event.TypedUpdateEvent[client.Object], q workqueue.TypedRateLimitingInterface[mcreconcile.Request]) {
				if !startedTerminating(e.ObjectOld, e.ObjectNew, finalizer) {
					return
				}
				req := mcreconcile.Request{ClusterName: name, Request: reconcile.Request{NamespacedName: client.ObjectKeyFromObject(e.ObjectNew)}}
				addFirst(q, req)
			},
		}
	}
}

// addFirst adds req at terminatingPriority when q is a priority queue.
func addFirst(q workqueue.TypedRateLimitingInterface[mcreconcile.Request], req mcreconcile.Request) {
	if pq, ok := q.(priorityqueue.PriorityQueue[mcreconcile.Request]); ok {
		pq.AddWithOpts(priorityqueue.AddOpts{Priority: ptr.To(terminatingPriority)}, req)
		return
	}
	q.Add(req)
}

// finalizersFirst adds to a controller of obj's kind the watch that puts its
// finalizer's requests first.
func finalizersFirst(b *mcbuilder.Builder, obj client.Object, finalizer string) *mcbuilder.Builder {
	return b.Watches(obj, enqueueTerminatingFirst(finalizer))
}
