package gateway

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"anchorage/api/v1alpha"
)

const testController = gatewayv1.GatewayController("example.com/gw")

func programmedGateway(gen, observed int64, status metav1.ConditionStatus, reason, msg string) *gatewayv1.Gateway {
	gw := &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "team", Generation: gen}}
	gw.Status.Conditions = []metav1.Condition{{Type: "Programmed", Status: status, Reason: reason, Message: msg, ObservedGeneration: observed}}
	return gw
}

func acceptedRoute(gen, observed int64, controller gatewayv1.GatewayController, parent string, status metav1.ConditionStatus, reason string) *gatewayv1.HTTPRoute {
	r := &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "team", Generation: gen}}
	r.Status.Parents = []gatewayv1.RouteParentStatus{{
		ParentRef:      gatewayv1.ParentReference{Group: ptr.To(gatewayv1.Group(gatewayv1.GroupName)), Kind: ptr.To(gatewayv1.Kind("Gateway")), Name: gatewayv1.ObjectName(parent)},
		ControllerName: controller,
		Conditions:     []metav1.Condition{{Type: "Accepted", Status: status, Reason: reason, Message: "m", ObservedGeneration: observed}},
	}}
	return r
}

func TestProxyProgrammed(t *testing.T) {
	okGW := programmedGateway(2, 2, metav1.ConditionTrue, "Programmed", "")
	okRoute := acceptedRoute(3, 3, testController, "web", metav1.ConditionTrue, "Accepted")
	cases := []struct {
		reason     string
		gw         *gatewayv1.Gateway
		route      *gatewayv1.HTTPRoute
		want       bool
		wantReason string
	}{
		{"both written for their generation", okGW, okRoute, true, v1alpha.ReasonProgrammed},
		{"no Gateway yet", nil, okRoute, false, v1alpha.ReasonPending},
		{"no route yet", okGW, nil, false, v1alpha.ReasonPending},
		{"Gateway reported for an older generation", programmedGateway(3, 2, metav1.ConditionTrue, "Programmed", ""), okRoute, false, v1alpha.ReasonPending},
		{"Gateway still at the API server's default", programmedGateway(1, 0, metav1.ConditionUnknown, "Pending", ""), okRoute, false, v1alpha.ReasonPending},
		{"hub refused the Gateway: passed through", programmedGateway(1, 1, metav1.ConditionFalse, v1alpha.ReasonHubWriteFailed, "forbidden"), okRoute, false, v1alpha.ReasonHubWriteFailed},
		{"route reported for an older generation", okGW, acceptedRoute(4, 3, testController, "web", metav1.ConditionTrue, "Accepted"), false, v1alpha.ReasonPending},
		{"route accepted by another controller only", okGW, acceptedRoute(1, 1, "other.example/x", "web", metav1.ConditionTrue, "Accepted"), false, v1alpha.ReasonPending},
		{"route accepted for another parent only", okGW, acceptedRoute(1, 1, testController, "other", metav1.ConditionTrue, "Accepted"), false, v1alpha.ReasonPending},
		{"hub refused the route: passed through", okGW, acceptedRoute(1, 1, testController, "web", metav1.ConditionFalse, v1alpha.ReasonHubWriteFailed), false, v1alpha.ReasonHubWriteFailed},
		{"route accepted with a backend unresolved: its reason passed through", okGW, withResolvedRefs(acceptedRoute(3, 3, testController, "web", metav1.ConditionTrue, "Accepted"), metav1.ConditionFalse, "BackendNotFound"), false, "BackendNotFound"},
		{"route accepted with every backend resolved", okGW, withResolvedRefs(acceptedRoute(3, 3, testController, "web", metav1.ConditionTrue, "Accepted"), metav1.ConditionTrue, "ResolvedRefs"), true, v1alpha.ReasonProgrammed},
		{"the edge refused the route: its reason passed through", okGW, acceptedRoute(1, 1, testController, "web", metav1.ConditionFalse, "NotAllowedByListeners"), false, "NotAllowedByListeners"},
		{"a listener the edge has not programmed", withListener(programmedGateway(2, 2, metav1.ConditionTrue, "Programmed", ""), metav1.ConditionFalse, "Invalid"), okRoute, false, "Invalid"},
		{"every listener programmed", withListener(programmedGateway(2, 2, metav1.ConditionTrue, "Programmed", ""), metav1.ConditionTrue, "Programmed"), okRoute, true, v1alpha.ReasonProgrammed},
		{"the edge has not programmed the Gateway", programmedGateway(2, 2, metav1.ConditionFalse, v1alpha.ReasonPending, "waiting"), okRoute, false, v1alpha.ReasonPending},
	}
	for _, tc := range cases {
		got, reason, msg := proxyProgrammed(tc.gw, tc.route, testController)
		if got != tc.want || reason != tc.wantReason || msg == "" {
			t.Errorf("%s: got (%v, %q, %q), want (%v, %q, a message)", tc.reason, got, reason, msg, tc.want, tc.wantReason)
		}
	}
}

func withResolvedRefs(r *gatewayv1.HTTPRoute, status metav1.ConditionStatus, reason string) *gatewayv1.HTTPRoute {
	c := &r.Status.Parents[0].Conditions
	*c = append(*c, metav1.Condition{Type: "ResolvedRefs", Status: status, Reason: reason, Message: "m", ObservedGeneration: r.Generation})
	return r
}

func withListener(gw *gatewayv1.Gateway, status metav1.ConditionStatus, reason string) *gatewayv1.Gateway {
	gw.Status.Listeners = append(gw.Status.Listeners, gatewayv1.ListenerStatus{Name: "https-x", Conditions: []metav1.Condition{{Type: "Programmed", Status: status, Reason: reason, Message: "m"}}})
	return gw
}

// TestGatewayEdgeVerdict: the upstream Gateway's Programmed follows the edge's
// Programmed for the downstream Gateway's current generation, and waits without one.
func TestGatewayEdgeVerdict(t *testing.T) {
	down := func(gen, observed int64, status metav1.ConditionStatus, reason string) *gatewayv1.Gateway {
		gw := &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Generation: gen}}
		if observed > 0 {
			gw.Status.Conditions = []metav1.Condition{{Type: "Programmed", Status: status, Reason: reason, Message: "edge says", ObservedGeneration: observed}}
		}
		return gw
	}
	cases := []struct {
		reason     string
		down       *gatewayv1.Gateway
		assume     bool
		want       bool
		wantReason string
	}{
		{"the edge has said nothing", down(1, 0, "", ""), false, false, v1alpha.ReasonPending},
		{"the edge spoke of an older generation", down(3, 2, metav1.ConditionTrue, "Programmed"), false, false, v1alpha.ReasonPending},
		{"the edge programmed the current generation", down(3, 3, metav1.ConditionTrue, "Programmed"), false, true, "Programmed"},
		{"the edge refused the current generation", down(3, 3, metav1.ConditionFalse, "AddressNotAssigned"), false, false, "AddressNotAssigned"},
		{"no edge reports status: written counts", down(1, 0, "", ""), true, true, "Programmed"},
	}
	for _, tc := range cases {
		got := gatewayEdgeVerdict(tc.down, tc.assume)
		if got.ok != tc.want || got.reason != tc.wantReason || got.message == "" {
			t.Errorf("%s: got %+v, want ok=%v reason %q", tc.reason, got, tc.want, tc.wantReason)
		}
	}
}

// TestRouteEdgeVerdict: a parent's Accepted follows the edge's entry for the downstream
// parent and generation; ResolvedRefs is this manager's resolution, turned False by the
// edge's.
func TestRouteEdgeVerdict(t *testing.T) {
	parent := gatewayv1.ParentReference{Name: "web"}
	resolved := verdict{true, "ResolvedRefs", "on the hub"}
	unresolved := verdict{false, "BackendNotFound", "Service not found"}
	down := func(gen int64, controller gatewayv1.GatewayController, parentName string, conds ...metav1.Condition) *gatewayv1.HTTPRoute {
		r := &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "ns-x", Generation: gen}}
		if len(conds) > 0 {
			r.Status.Parents = []gatewayv1.RouteParentStatus{{ParentRef: gatewayv1.ParentReference{Name: gatewayv1.ObjectName(parentName)}, ControllerName: controller, Conditions: conds}}
		}
		return r
	}
	cond := func(typ string, status metav1.ConditionStatus, reason string, gen int64) metav1.Condition {
		return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: "m", ObservedGeneration: gen}
	}
	cases := []struct {
		reason               string
		down                 *gatewayv1.HTTPRoute
		resolved             verdict
		assume               bool
		wantAccepted, wantOK bool
		wantAcceptedReason   string
		wantRefsReason       string
	}{
		{"the edge has said nothing", down(1, "", ""), resolved, false, false, true, v1alpha.ReasonPending, "ResolvedRefs"},
		{"the edge accepted and resolved", down(2, "edge/x", "web", cond("Accepted", "True", "Accepted", 2), cond("ResolvedRefs", "True", "ResolvedRefs", 2)), resolved, false, true, true, "Accepted", "ResolvedRefs"},
		{"the edge accepted an older generation", down(3, "edge/x", "web", cond("Accepted", "True", "Accepted", 2)), resolved, false, false, true, v1alpha.ReasonPending, "ResolvedRefs"},
		{"our own entry is no verdict of the edge", down(2, testController, "web", cond("Accepted", "True", "Accepted", 2)), resolved, false, false, true, v1alpha.ReasonPending, "ResolvedRefs"},
		{"the edge's entry for another parent", down(2, "edge/x", "other", cond("Accepted", "True", "Accepted", 2)), resolved, false, false, true, v1alpha.ReasonPending, "ResolvedRefs"},
		{"the edge could not resolve a backend", down(2, "edge/x", "web", cond("Accepted", "True", "Accepted", 2), cond("ResolvedRefs", "False", "BackendNotFound", 2)), resolved, false, true, false, "Accepted", "BackendNotFound"},
		{"our resolution failed: it stands whatever the edge says", down(2, "edge/x", "web", cond("Accepted", "True", "Accepted", 2), cond("ResolvedRefs", "True", "ResolvedRefs", 2)), unresolved, false, true, false, "Accepted", "BackendNotFound"},
		{"no edge reports status: written counts as accepted", down(1, "", ""), unresolved, true, true, false, "Accepted", "BackendNotFound"},
	}
	for _, tc := range cases {
		accepted, refs := routeEdgeVerdict(tc.down, parent, testController, tc.resolved, tc.assume)
		if accepted.ok != tc.wantAccepted || accepted.reason != tc.wantAcceptedReason || refs.ok != tc.wantOK || refs.reason != tc.wantRefsReason {
			t.Errorf("%s: got accepted %+v refs %+v", tc.reason, accepted, refs)
		}
	}
}

func TestSetRouteParentStatusKeepsOtherControllers(t *testing.T) {
	route := acceptedRoute(5, 4, "other.example/x", "web", metav1.ConditionTrue, "Accepted")
	stale := acceptedRoute(5, 4, testController, "gone", metav1.ConditionTrue, "Accepted").Status.Parents[0]
	route.Status.Parents = append(route.Status.Parents, stale)
	parent := gatewayv1.ParentReference{Name: "web"}

	setRouteParentStatus(route, []parentVerdict{{parent: parent, accepted: verdict{true, "Accepted", "written"}, refs: verdict{true, "ResolvedRefs", "on the hub"}}}, testController)

	var got []string
	for _, ps := range route.Status.Parents {
		a := meta.FindStatusCondition(ps.Conditions, "Accepted")
		got = append(got, fmt.Sprintf("%s %s %s %d", ps.ControllerName, ps.ParentRef.Name, a.Status, a.ObservedGeneration))
	}
	want := []string{"other.example/x web True 4", "example.com/gw web True 5"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("parents -want +got:\n%s", diff)
	}
}

func TestSetGatewayStatus(t *testing.T) {
	gw := programmedGateway(7, 6, metav1.ConditionUnknown, "Pending", "")
	setGatewayStatus(gw, verdict{false, v1alpha.ReasonHubWriteFailed, "no"}, nil)
	p := meta.FindStatusCondition(gw.Status.Conditions, "Programmed")
	a := meta.FindStatusCondition(gw.Status.Conditions, "Accepted")
	if p.Status != metav1.ConditionFalse || p.Reason != v1alpha.ReasonHubWriteFailed || p.ObservedGeneration != 7 || a == nil || a.Status != metav1.ConditionTrue {
		t.Errorf("got programmed %+v accepted %+v", p, a)
	}
}

func TestJudgeLive(t *testing.T) {
	const uid = types.UID("u1")
	obj := func(uid types.UID, deleting bool, finalizers ...string) *corev1.ConfigMap {
		o := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{UID: uid, Finalizers: finalizers}}
		if deleting {
			o.DeletionTimestamp = ptr.To(metav1.Now())
		}
		return o
	}
	cases := []struct {
		reason string
		live   *corev1.ConfigMap
		want   guardVerdict
	}{
		{"same UID, live, finalized: pass", obj(uid, false, "f"), guardPass},
		{"NotFound: finalized since the cache saw it", nil, guardGone},
		{"another UID: recreated under the same name", obj("u2", false, "f"), guardReplaced},
		{"terminating", obj(uid, true, "f"), guardTerminating},
		{"our finalizer missing", obj(uid, false, "other"), guardUnfinalized},
	}
	for _, tc := range cases {
		var live client.Object // a nil *ConfigMap in an interface is not a nil interface
		if tc.live != nil {
			live = tc.live
		}
		if got := judgeLive(live, uid, "f"); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.reason, judgeLive(live, uid, "f"), tc.want)
		}
	}
}
