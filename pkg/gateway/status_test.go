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
	}
	for _, tc := range cases {
		got, reason, msg := proxyProgrammed(tc.gw, tc.route, testController)
		if got != tc.want || reason != tc.wantReason || msg == "" {
			t.Errorf("%s: got (%v, %q, %q), want (%v, %q, a message)", tc.reason, got, reason, msg, tc.want, tc.wantReason)
		}
	}
}

func TestSetRouteParentStatusKeepsOtherControllers(t *testing.T) {
	route := acceptedRoute(5, 4, "other.example/x", "web", metav1.ConditionTrue, "Accepted")
	stale := acceptedRoute(5, 4, testController, "gone", metav1.ConditionTrue, "Accepted").Status.Parents[0]
	route.Status.Parents = append(route.Status.Parents, stale)
	parent := gatewayv1.ParentReference{Name: "web"}

	setRouteParentStatus(route, []gatewayv1.ParentReference{parent}, testController, true, "Accepted", "written")

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
	setGatewayStatus(gw, false, v1alpha.ReasonHubWriteFailed, "no")
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
