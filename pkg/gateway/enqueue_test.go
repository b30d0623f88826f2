package gateway

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	"anchorage/pkg/anchor"
)

const ownerUID = "33333333-3333-3333-3333-333333333333"

func downstreamLabelled(labels map[string]string, refs ...metav1.OwnerReference) *gatewayv1.Gateway {
	return &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: hubNS, Labels: labels, OwnerReferences: refs}}
}

func TestUpstreamOf(t *testing.T) {
	owner := anchor.Owner{Project: "org/proj", Group: gatewayv1.GroupName, Kind: "Gateway", Namespace: "team", Name: "web", UID: ownerUID}
	anchorRef := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: anchor.Name(ownerUID), UID: "x"}
	legacy := owner.Labels()
	legacy[anchor.LabelClusterName] = "cluster-_proj"
	route := owner.Labels()
	route[anchor.LabelKind] = "HTTPRoute"
	missing := owner.Labels()
	delete(missing, anchor.LabelNamespace)
	want := func(project string) []mcreconcile.Request {
		return []mcreconcile.Request{{ClusterName: multiclusterName(project), Request: reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "team", Name: "web"}}}}
	}
	cases := []struct {
		reason string
		obj    *gatewayv1.Gateway
		want   []mcreconcile.Request
	}{
		{"labels and anchor reference: the owner in its project", downstreamLabelled(owner.Labels(), anchorRef), want("org/proj")},
		{"no anchor reference: the labels still name the owner", downstreamLabelled(owner.Labels()), want("org/proj")},
		{"legacy cluster-_proj means proj", downstreamLabelled(legacy, anchorRef), want("proj")},
		{"labels of another kind: not this controller's", downstreamLabelled(route, anchorRef), nil},
		{"a missing label: nothing, never a guess", downstreamLabelled(missing, anchorRef), nil},
		{"no labels", downstreamLabelled(nil), nil},
	}
	mapFn := upstreamOf(gatewayv1.GroupName, "Gateway")
	for _, tc := range cases {
		if diff := cmp.Diff(tc.want, mapFn(context.Background(), tc.obj)); diff != "" {
			t.Errorf("%s: -want +got:\n%s", tc.reason, diff)
		}
	}
}

func TestEnqueueRoutesByKindAndKeepsRequestsUntilStart(t *testing.T) {
	s := &Setup{proxies: &enqueuer{}, gateways: &enqueuer{}, routes: &enqueuer{}}
	gw := anchor.Owner{Project: "p", Group: gatewayv1.GroupName, Kind: "Gateway", Namespace: "team", Name: "web", UID: ownerUID}
	if err := s.Enqueue(gw); err != nil {
		t.Fatal(err)
	}
	if err := s.Enqueue(anchor.Owner{Project: "p", Group: "", Kind: "ConfigMap", Namespace: "team", Name: "x"}); err == nil {
		t.Error("a kind no reconciler handles must be an error")
	}

	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[mcreconcile.Request]())
	defer q.ShutDown()
	if err := s.gateways.source().Start(context.Background(), q); err != nil {
		t.Fatal(err)
	}
	route := gw
	route.Kind = "HTTPRoute"
	if err := s.Enqueue(route); err != nil {
		t.Fatal(err)
	}
	if err := s.Enqueue(gw); err != nil { // after start: straight into the queue (deduplicated)
		t.Fatal(err)
	}
	if q.Len() != 1 {
		t.Fatalf("gateway queue holds %d requests, want 1", q.Len())
	}
	got, _ := q.Get()
	if diff := cmp.Diff(requestFor(gw), got); diff != "" {
		t.Errorf("-want +got:\n%s", diff)
	}
	if len(s.routes.pending) != 1 {
		t.Errorf("route requests before start: %d, want 1 kept", len(s.routes.pending))
	}
}

func multiclusterName(p string) multicluster.ClusterName { return multicluster.ClusterName(p) }
