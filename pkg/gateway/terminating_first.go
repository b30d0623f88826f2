package gateway

import (
	"context"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	mcbuilder "sigs.k8s.io/multicluster-runtime/pkg/builder"
	mchandler "sigs.k8s.io/multicluster-runtime/pkg/handler"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"
)

// Finalizers first. A controller's queue hands out ready requests by priority, then in
// the order they became ready; every event of the For watch has the same (normal)
// priority. Under load a replica's queue holds a backlog of routine passes (a Gateway
// programmed again after its status write, a downstream object's event), and the
// request that an object started terminating waits behind all of them: in the 20 × 1000
// data-path run a loaded replica's Gateway finalizers deleted nothing on the hub for the
// first 120 s of the deletes, while 229 program passes of live Gateways ran. Only a
// finalizer's pass cleans the hub, and it makes no further work of its own, so it goes
// first: the request of an object that has just started terminating and carries our
// finalizer is added at terminatingPriority. The request a finalizer requeues keeps the
// priority it was handed out with (controller-runtime's default), so a finalizer that
// waits stays ahead too.

// terminatingPriority is the queue priority of an object that started terminating:
// above the For watch's default (0) and far above the initial list's (LowPriority).
const terminatingPriority = 100

// startedTerminating reports whether an update is the one where obj started
// terminating while carrying finalizer: only then is a finalizer's pass waiting.
func startedTerminating(old, new client.Object, finalizer string) bool {
	return old != nil && new != nil &&
		old.GetDeletionTimestamp() == nil && new.GetDeletionTimestamp() != nil &&
		controllerutil.ContainsFinalizer(new, finalizer)
}

// enqueueTerminatingFirst is an event handler, beside the For watch's on the same
// informer, that adds the request of an object that started terminating with
// finalizer at terminatingPriority. The priority queue keeps the higher of two
// priorities given for one request, so it does not matter which handler adds first. A
// queue without priorities gets a plain Add (the For watch adds it too).
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
