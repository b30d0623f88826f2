package gateway

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"anchorage/api/v1alpha"
)

// Reasons this package writes besides those of v1alpha and Gateway API.
const (
	// ReasonConflict: an upstream object the proxy would produce exists and is not the
	// proxy's (another controller's, or the user's). Nothing is overwritten.
	ReasonConflict = "Conflict"
	// ReasonUpstreamWriteFailed: writing an upstream object to the project plane failed.
	ReasonUpstreamWriteFailed = "UpstreamWriteFailed"
)

// The Programmed signal: the Gateway and HTTPRoute reconcilers report, in Gateway API's
// own status fields, that the downstream copies of the current generation are on the
// hub. The HTTPProxy reconciler reads them back.
//
//   - Gateway: status.conditions Programmed=True with observedGeneration equal to the
//     Gateway's generation (Accepted=True beside it); Programmed=False with reason
//     HubWriteFailed and the hub's message when the hub refused a write.
//   - HTTPRoute: status.parents entry with this controller's name for the parent
//     Gateway, Accepted=True with observedGeneration equal to the route's generation.

// setGatewayStatus records on gw whether its downstream copies are written.
func setGatewayStatus(gw *gatewayv1.Gateway, programmed bool, reason, message string) {
	meta.SetStatusCondition(&gw.Status.Conditions, metav1.Condition{
		Type:               string(gatewayv1.GatewayConditionAccepted),
		Status:             metav1.ConditionTrue,
		Reason:             string(gatewayv1.GatewayReasonAccepted),
		Message:            "The Gateway is of this manager's class",
		ObservedGeneration: gw.Generation,
	})
	meta.SetStatusCondition(&gw.Status.Conditions, metav1.Condition{
		Type:               string(gatewayv1.GatewayConditionProgrammed),
		Status:             conditionStatus(programmed),
		Reason:             reason,
		Message:            message,
		ObservedGeneration: gw.Generation,
	})
}

// setRouteParentStatus records, for each of parents, whether route's downstream copy
// is written. Entries of other controllers are kept; this controller's entries for
// parents no longer in parents are dropped.
func setRouteParentStatus(route *gatewayv1.HTTPRoute, parents []gatewayv1.ParentReference, controller gatewayv1.GatewayController, accepted bool, reason, message string) {
	var out []gatewayv1.RouteParentStatus
	for _, ps := range route.Status.Parents {
		if ps.ControllerName != controller {
			out = append(out, ps)
		}
	}
	for _, p := range parents {
		entry := gatewayv1.RouteParentStatus{ParentRef: p, ControllerName: controller}
		for _, ps := range route.Status.Parents {
			if ps.ControllerName == controller && sameParent(ps.ParentRef, p, route.Namespace) {
				entry.Conditions = append([]metav1.Condition(nil), ps.Conditions...)
			}
		}
		meta.SetStatusCondition(&entry.Conditions, metav1.Condition{
			Type:               string(gatewayv1.RouteConditionAccepted),
			Status:             conditionStatus(accepted),
			Reason:             reason,
			Message:            message,
			ObservedGeneration: route.Generation,
		})
		meta.SetStatusCondition(&entry.Conditions, metav1.Condition{
			Type:               string(gatewayv1.RouteConditionResolvedRefs),
			Status:             metav1.ConditionTrue,
			Reason:             string(gatewayv1.RouteReasonResolvedRefs),
			Message:            "References are passed to the hub as written",
			ObservedGeneration: route.Generation,
		})
		out = append(out, entry)
	}
	route.Status.Parents = out
}

// sameParent reports whether a and b name the same parent of a route in routeNS.
func sameParent(a, b gatewayv1.ParentReference, routeNS string) bool {
	return ptr.Deref(a.Group, gatewayv1.GroupName) == ptr.Deref(b.Group, gatewayv1.GroupName) &&
		ptr.Deref(a.Kind, kindGateway) == ptr.Deref(b.Kind, kindGateway) &&
		parentNamespace(a, routeNS) == parentNamespace(b, routeNS) &&
		a.Name == b.Name &&
		ptr.Deref(a.SectionName, "") == ptr.Deref(b.SectionName, "") &&
		ptr.Deref(a.Port, 0) == ptr.Deref(b.Port, 0)
}

// proxyProgrammed judges a proxy's Programmed condition from its upstream Gateway and
// HTTPRoute (nil: not there yet), as their reconcilers reported them.
func proxyProgrammed(gw *gatewayv1.Gateway, route *gatewayv1.HTTPRoute, controller gatewayv1.GatewayController) (bool, string, string) {
	if gw == nil || route == nil {
		return false, v1alpha.ReasonPending, "Waiting for the upstream Gateway and HTTPRoute to be created"
	}
	c := meta.FindStatusCondition(gw.Status.Conditions, string(gatewayv1.GatewayConditionProgrammed))
	if c == nil || c.ObservedGeneration != gw.Generation || c.Status == metav1.ConditionUnknown {
		return false, v1alpha.ReasonPending, fmt.Sprintf("Waiting for Gateway %s (generation %d) to be written to the hub", gw.Name, gw.Generation)
	}
	if c.Status != metav1.ConditionTrue {
		return false, pendingUnless(c.Reason), fmt.Sprintf("Gateway %s: %s", gw.Name, c.Message)
	}
	parent := gatewayv1.ParentReference{Name: gatewayv1.ObjectName(gw.Name)}
	for _, ps := range route.Status.Parents {
		if ps.ControllerName != controller || !sameParent(ps.ParentRef, parent, route.Namespace) {
			continue
		}
		a := meta.FindStatusCondition(ps.Conditions, string(gatewayv1.RouteConditionAccepted))
		if a == nil || a.ObservedGeneration != route.Generation {
			break
		}
		if a.Status != metav1.ConditionTrue {
			return false, pendingUnless(a.Reason), fmt.Sprintf("HTTPRoute %s: %s", route.Name, a.Message)
		}
		return true, v1alpha.ReasonProgrammed, "The Gateway, HTTPRoute and Certificates are written to the hub"
	}
	return false, v1alpha.ReasonPending, fmt.Sprintf("Waiting for HTTPRoute %s (generation %d) to be written to the hub", route.Name, route.Generation)
}

// pendingUnless passes a hub failure through to the proxy and reads anything else as
// pending.
func pendingUnless(reason string) string {
	if reason == v1alpha.ReasonHubWriteFailed {
		return reason
	}
	return v1alpha.ReasonPending
}

func conditionStatus(ok bool) metav1.ConditionStatus {
	if ok {
		return metav1.ConditionTrue
	}
	return metav1.ConditionFalse
}
