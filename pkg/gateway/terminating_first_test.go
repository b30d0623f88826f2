package gateway

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	mchandler "sigs.k8s.io/multicluster-runtime/pkg/handler"
)

// gatewayAt is a Gateway named name at resourceVersion rv, terminating when deleting,
// carrying finalizers.
func gatewayAt(name, rv string, deleting bool, finalizers ...string) *gatewayv1.Gateway {
	gw := &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, ResourceVersion: rv, Finalizers: finalizers}}
	if deleting {
		gw.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
	}
	return gw
}

func TestStartedTerminating(t *testing.T) {
	for _, tc := range []struct {
		name     string
		old, new client.Object
		want     bool
	}{
		{"deletion requested with our finalizer", gatewayAt("a", "1", false, GatewayFinalizer), gatewayAt("a", "2", true, GatewayFinalizer), true},
		{"deletion requested with another finalizer only", gatewayAt("a", "1", false, "other/f"), gatewayAt("a", "2", true, "other/f"), false},
		{"already terminating", gatewayAt("a", "2", true, GatewayFinalizer), gatewayAt("a", "3", true, GatewayFinalizer), false},
		{"live update", gatewayAt("a", "1", false, GatewayFinalizer), gatewayAt("a", "2", false, GatewayFinalizer), false},
		{"no old object", nil, gatewayAt("a", "2", true, GatewayFinalizer), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := startedTerminating(tc.old, tc.new, GatewayFinalizer); got != tc.want {
				t.Errorf("startedTerminating = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestTerminatingRequestGoesFirst feeds a controller's queue (the fair queue, which the
// controller uses as its priority queue unwrapped) the way its watches do (the For watch's handler for every update, finalizersFirst's handler
// beside it) with a backlog of live updates, then one more update: the request handed
// out first is that update's only when it is the one where the object started
// terminating with our finalizer; otherwise the backlog goes first, in order.
func TestTerminatingRequestGoesFirst(t *testing.T) {
	for _, tc := range []struct {
		name     string
		old, new *gatewayv1.Gateway
		first    string
	}{
		{"started terminating", gatewayAt("last", "1", false, GatewayFinalizer), gatewayAt("last", "2", true, GatewayFinalizer), "last"},
		{"live update", gatewayAt("last", "1", false, GatewayFinalizer), gatewayAt("last", "2", false, GatewayFinalizer), "backlog-0"},
		{"terminating without our finalizer", gatewayAt("last", "1", false, "other/f"), gatewayAt("last", "2", true, "other/f"), "backlog-0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			q, _ := newTestFairQueue(1)
			defer q.ShutDown()
			forWatch := mchandler.WithLowPriorityWhenUnchanged(mchandler.EnqueueRequestForObject)("p", nil)
			first := enqueueTerminatingFirst(GatewayFinalizer)("p", nil)
			update := func(old, new client.Object) {
				e := event.TypedUpdateEvent[client.Object]{ObjectOld: old, ObjectNew: new}
				forWatch.Update(ctx, e, q)
				first.Update(ctx, e, q)
			}
			for _, name := range []string{"backlog-0", "backlog-1", "backlog-2"} {
				update(gatewayAt(name, "1", false, GatewayFinalizer), gatewayAt(name, "2", false, GatewayFinalizer))
			}
			update(tc.old, tc.new)
			if n := q.Len(); n != 4 {
				t.Fatalf("queue holds %d requests, want 4 (one per object)", n)
			}
			got, priority, _ := q.GetWithPriority()
			if want := (types.NamespacedName{Namespace: "ns", Name: tc.first}); got.NamespacedName != want || got.ClusterName != "p" {
				t.Errorf("first request %v, want %s in p", got, want)
			}
			if wantFirst := tc.first == "last"; (priority == terminatingPriority) != wantFirst {
				t.Errorf("first request handed out at priority %d", priority)
			}
		})
	}
}
