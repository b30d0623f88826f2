package harness

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"anchorage/internal/app"
	"anchorage/internal/testenv"
)

// TestPublishWritesEachObjectOnItsOwn: a route whose status the hub refuses (Envoy
// Gateway's joined reasons, which the HTTPRoute schema rejects), and a route that is
// gone, hold up no other route's status: the edge of one tenant's mistake does not leave
// every route sorted after it Pending.
func TestPublishWritesEachObjectOnItsOwn(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an API server")
	}
	g := NewWithT(t)
	crds, err := testenv.HubCRDs()
	g.Expect(err).NotTo(HaveOccurred())
	hub, err := client.New(testenv.StartAPIServer(t, crds...), client.Options{Scheme: app.Scheme()})
	g.Expect(err).NotTo(HaveOccurred())
	ctx := t.Context()
	g.Expect(hub.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns-edge"}})).To(Succeed())
	route := func(name string) *gatewayv1.HTTPRoute {
		return &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "ns-edge", Name: name},
			Spec: gatewayv1.HTTPRouteSpec{CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Name: "gw"}}}}}
	}
	for _, name := range []string{"a-refused", "b-served"} {
		g.Expect(hub.Create(ctx, route(name))).To(Succeed())
	}
	verdict := func(name, reason string) gatewayv1.HTTPRoute {
		r := route(name)
		r.Status.Parents = []gatewayv1.RouteParentStatus{{ParentRef: gatewayv1.ParentReference{Name: "gw"}, ControllerName: EdgeControllerName,
			Conditions: []metav1.Condition{{Type: "ResolvedRefs", Status: metav1.ConditionFalse, Reason: reason, Message: "m", LastTransitionTime: metav1.Now()}}}}
		return *r
	}
	edge := &Edge{Hub: hub}
	err = edge.Publish(ctx, &EdgeVerdict{HTTPRoutes: []gatewayv1.HTTPRoute{
		verdict("a-gone", "BackendNotFound"), verdict("a-refused", "BackendNotFound, RefNotPermitted"), verdict("b-served", "BackendNotFound"),
	}})
	g.Expect(err).To(MatchError(ContainSubstring("a-refused")), "the refusal is reported")
	served := &gatewayv1.HTTPRoute{}
	g.Expect(hub.Get(ctx, client.ObjectKey{Namespace: "ns-edge", Name: "b-served"}, served)).To(Succeed())
	g.Expect(served.Status.Parents).To(HaveLen(1), "the route after the refused one is published")
	g.Expect(served.Status.Parents[0].Conditions[0].Reason).To(Equal("BackendNotFound"))
}
