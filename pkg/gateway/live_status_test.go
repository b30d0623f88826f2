package gateway

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"anchorage/api/v1alpha"
)

func TestAdoptLiveStatus(t *testing.T) {
	failed := []metav1.Condition{{Type: "Programmed", Status: metav1.ConditionFalse, Reason: v1alpha.ReasonHubWriteFailed}}
	programmed := []metav1.Condition{{Type: "Programmed", Status: metav1.ConditionTrue, Reason: "Programmed"}}
	meta := func(rv string, gen int64) metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: "ns", Name: "x", UID: "u1", ResourceVersion: rv, Generation: gen}
	}
	for _, tc := range []struct {
		name      string
		obj, live client.Object
		want      client.Object // obj afterwards
	}{
		{"proxy: live status and resourceVersion, cached spec",
			&v1alpha.HTTPProxy{ObjectMeta: meta("1", 1), Spec: v1alpha.HTTPProxySpec{Hostnames: []gatewayv1.Hostname{"a"}}, Status: v1alpha.HTTPProxyStatus{Conditions: programmed}},
			&v1alpha.HTTPProxy{ObjectMeta: meta("3", 2), Spec: v1alpha.HTTPProxySpec{Hostnames: []gatewayv1.Hostname{"b"}}, Status: v1alpha.HTTPProxyStatus{Conditions: failed}},
			&v1alpha.HTTPProxy{ObjectMeta: meta("3", 1), Spec: v1alpha.HTTPProxySpec{Hostnames: []gatewayv1.Hostname{"a"}}, Status: v1alpha.HTTPProxyStatus{Conditions: failed}}},
		{"gateway: the failure the cache has not seen yet",
			&gatewayv1.Gateway{ObjectMeta: meta("1", 1), Status: gatewayv1.GatewayStatus{Conditions: programmed}},
			&gatewayv1.Gateway{ObjectMeta: meta("2", 1), Status: gatewayv1.GatewayStatus{Conditions: failed}},
			&gatewayv1.Gateway{ObjectMeta: meta("2", 1), Status: gatewayv1.GatewayStatus{Conditions: failed}}},
		{"route: live parents, another controller's entry included",
			&gatewayv1.HTTPRoute{ObjectMeta: meta("1", 1)},
			&gatewayv1.HTTPRoute{ObjectMeta: meta("2", 1), Status: gatewayv1.HTTPRouteStatus{RouteStatus: gatewayv1.RouteStatus{Parents: []gatewayv1.RouteParentStatus{{ControllerName: "other.example.com/c", Conditions: programmed}}}}},
			&gatewayv1.HTTPRoute{ObjectMeta: meta("2", 1), Status: gatewayv1.HTTPRouteStatus{RouteStatus: gatewayv1.RouteStatus{Parents: []gatewayv1.RouteParentStatus{{ControllerName: "other.example.com/c", Conditions: programmed}}}}}},
		{"no live object: left alone",
			&gatewayv1.Gateway{ObjectMeta: meta("1", 1), Status: gatewayv1.GatewayStatus{Conditions: programmed}},
			nil,
			&gatewayv1.Gateway{ObjectMeta: meta("1", 1), Status: gatewayv1.GatewayStatus{Conditions: programmed}}},
		{"live of another kind: left alone",
			&gatewayv1.Gateway{ObjectMeta: meta("1", 1), Status: gatewayv1.GatewayStatus{Conditions: programmed}},
			&gatewayv1.HTTPRoute{ObjectMeta: meta("2", 1)},
			&gatewayv1.Gateway{ObjectMeta: meta("1", 1), Status: gatewayv1.GatewayStatus{Conditions: programmed}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			adoptLiveStatus(tc.obj, tc.live)
			if !equality.Semantic.DeepEqual(tc.obj, tc.want) {
				t.Errorf("after adoptLiveStatus:\n got %+v\nwant %+v", tc.obj, tc.want)
			}
		})
	}
}

// TestAdoptLiveStatusCopies: a status condition set on obj afterwards does not reach
// the live object (which may be shared with the guard).
func TestAdoptLiveStatusCopies(t *testing.T) {
	live := &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "2"}, Status: gatewayv1.GatewayStatus{Conditions: []metav1.Condition{{Type: "Programmed", Status: metav1.ConditionFalse}}}}
	obj := &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "1"}}
	adoptLiveStatus(obj, live)
	obj.Status.Conditions[0].Status = metav1.ConditionTrue
	if live.Status.Conditions[0].Status != metav1.ConditionFalse {
		t.Error("the live object's status was changed through obj")
	}
}
