package gateway

import (
	"cmp"
	"context"
	"fmt"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"anchorage/api/v1alpha"
)

// Reasons this package writes besides those of v1alpha and Gateway API.
const (
	// ReasonConflict: an upstream object the proxy would produce exists and is not the
	// proxy's. Nothing is overwritten.
	ReasonConflict = "Conflict"
	// ReasonUpstreamWriteFailed: writing an upstream object to the project plane failed.
	ReasonUpstreamWriteFailed = "UpstreamWriteFailed"
)

// edgeCondition returns the edge's condition typ in conds for generation, or nil.
func edgeCondition(conds []metav1.Condition, typ string, generation int64) *metav1.Condition {
	c := meta.FindStatusCondition(conds, typ)
	if c == nil || c.ObservedGeneration != generation {
		return nil
	}
	return c
}

// verdict is one condition as decided, before it is stamped with a generation.
type verdict struct {
	ok      bool
	reason  string
	message string
}

func (v verdict) condition(typ string, generation int64) metav1.Condition {
	status := metav1.ConditionFalse
	if v.ok {
		status = metav1.ConditionTrue
	}
	return metav1.Condition{Type: typ, Status: status, Reason: v.reason, Message: boundedMessage(v.message), ObservedGeneration: generation}
}

// gatewayEdgeVerdict judges an upstream Gateway's Programmed from its hub copy down:
// the edge's for down's generation, else Pending; assume counts the written copy.
func gatewayEdgeVerdict(down *gatewayv1.Gateway, assume bool) verdict {
	if assume {
		return verdict{true, string(gatewayv1.GatewayReasonProgrammed), "The downstream Gateway and its Certificates are written to the hub (assumed programmed: no edge controller reports status)"}
	}
	c := edgeCondition(down.Status.Conditions, string(gatewayv1.GatewayConditionProgrammed), down.Generation)
	if c == nil {
		return verdict{false, v1alpha.ReasonPending, fmt.Sprintf("Waiting for the edge's gateway controller to program the downstream Gateway (generation %d)", down.Generation)}
	}
	return verdict{c.Status == metav1.ConditionTrue, c.Reason, "Edge: " + c.Message}
}

// setGatewayStatus sets gw's Accepted and Programmed, and mirrors the listener status
// the edge reported for down's generation (nil down: the hub write failed).
func setGatewayStatus(gw *gatewayv1.Gateway, programmed verdict, down *gatewayv1.Gateway) {
	accepted := verdict{true, string(gatewayv1.GatewayReasonAccepted), "The Gateway is of this manager's class"}
	if down != nil {
		if c := edgeCondition(down.Status.Conditions, string(gatewayv1.GatewayConditionAccepted), down.Generation); c != nil && c.Status == metav1.ConditionFalse {
			accepted = verdict{false, c.Reason, "Edge: " + c.Message}
		}
	}
	meta.SetStatusCondition(&gw.Status.Conditions, accepted.condition(string(gatewayv1.GatewayConditionAccepted), gw.Generation))
	meta.SetStatusCondition(&gw.Status.Conditions, programmed.condition(string(gatewayv1.GatewayConditionProgrammed), gw.Generation))
	if down == nil {
		return
	}
	gw.Status.Listeners = nil
	if edgeCondition(down.Status.Conditions, string(gatewayv1.GatewayConditionProgrammed), down.Generation) == nil {
		return
	}
	for _, l := range down.Status.Listeners {
		l := *l.DeepCopy()
		for i := range l.Conditions {
			l.Conditions[i].ObservedGeneration = gw.Generation
		}
		gw.Status.Listeners = append(gw.Status.Listeners, l)
	}
}

// routeEdgeVerdict judges one parent's Accepted and ResolvedRefs from the edge's entry
// for downParent in down's status (any controller but ours, down's generation) and from
// resolved, this manager's own verdict; assume counts the written route as accepted.
func routeEdgeVerdict(down *gatewayv1.HTTPRoute, downParent gatewayv1.ParentReference, ours gatewayv1.GatewayController, resolved verdict, assume bool) (accepted, refs verdict) {
	refs = resolved
	if assume {
		return verdict{true, string(gatewayv1.RouteReasonAccepted), "The downstream HTTPRoute is written to the hub (assumed accepted: no edge controller reports status)"}, refs
	}
	accepted = verdict{false, v1alpha.ReasonPending, fmt.Sprintf("Waiting for the edge's gateway controller to accept the downstream HTTPRoute (generation %d)", down.Generation)}
	for _, ps := range down.Status.Parents {
		if ps.ControllerName == ours || !sameParent(ps.ParentRef, downParent, down.Namespace) {
			continue
		}
		a := edgeCondition(ps.Conditions, string(gatewayv1.RouteConditionAccepted), down.Generation)
		if a == nil {
			continue
		}
		accepted = verdict{a.Status == metav1.ConditionTrue, a.Reason, "Edge: " + a.Message}
		if r := edgeCondition(ps.Conditions, string(gatewayv1.RouteConditionResolvedRefs), down.Generation); r != nil && r.Status != metav1.ConditionTrue && refs.ok {
			refs = verdict{false, r.Reason, "Edge: " + r.Message}
		}
	}
	return accepted, refs
}

// parentVerdict is what setRouteParentStatus writes for one parent.
type parentVerdict struct {
	parent   gatewayv1.ParentReference
	accepted verdict
	refs     verdict
}

// setRouteParentStatus writes controller's status.parents entries for parents, dropping
// its others; other controllers' entries are kept.
func setRouteParentStatus(route *gatewayv1.HTTPRoute, parents []parentVerdict, controller gatewayv1.GatewayController) {
	var out []gatewayv1.RouteParentStatus
	for _, ps := range route.Status.Parents {
		if ps.ControllerName != controller {
			out = append(out, ps)
		}
	}
	for _, p := range parents {
		entry := gatewayv1.RouteParentStatus{ParentRef: p.parent, ControllerName: controller}
		for _, ps := range route.Status.Parents {
			if ps.ControllerName == controller && sameParent(ps.ParentRef, p.parent, route.Namespace) {
				entry.Conditions = append([]metav1.Condition(nil), ps.Conditions...)
			}
		}
		meta.SetStatusCondition(&entry.Conditions, p.accepted.condition(string(gatewayv1.RouteConditionAccepted), route.Generation))
		meta.SetStatusCondition(&entry.Conditions, p.refs.condition(string(gatewayv1.RouteConditionResolvedRefs), route.Generation))
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

// proxyProgrammed judges a proxy's Programmed from its Gateway and HTTPRoute (nil: not
// there yet): the Gateway and every listener programmed, the route accepted with its
// references resolved, each for its generation; a refusal's reason passes through.
func proxyProgrammed(gw *gatewayv1.Gateway, route *gatewayv1.HTTPRoute, controller gatewayv1.GatewayController) (bool, string, string) {
	if gw == nil || route == nil {
		return false, v1alpha.ReasonPending, "Waiting for the upstream Gateway and HTTPRoute to be created"
	}
	c := meta.FindStatusCondition(gw.Status.Conditions, string(gatewayv1.GatewayConditionProgrammed))
	if c == nil || c.ObservedGeneration != gw.Generation || c.Status == metav1.ConditionUnknown {
		return false, v1alpha.ReasonPending, fmt.Sprintf("Waiting for Gateway %s (generation %d) to be programmed", gw.Name, gw.Generation)
	}
	if c.Status != metav1.ConditionTrue {
		return false, cmp.Or(c.Reason, v1alpha.ReasonPending), fmt.Sprintf("Gateway %s: %s", gw.Name, c.Message)
	}
	for _, l := range gw.Status.Listeners {
		if lc := meta.FindStatusCondition(l.Conditions, string(gatewayv1.ListenerConditionProgrammed)); lc != nil && lc.Status != metav1.ConditionTrue {
			return false, cmp.Or(lc.Reason, v1alpha.ReasonPending), fmt.Sprintf("Gateway %s listener %s: %s", gw.Name, l.Name, lc.Message)
		}
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
			return false, cmp.Or(a.Reason, v1alpha.ReasonPending), fmt.Sprintf("HTTPRoute %s: %s", route.Name, a.Message)
		}
		if r := meta.FindStatusCondition(ps.Conditions, string(gatewayv1.RouteConditionResolvedRefs)); r != nil && r.Status != metav1.ConditionTrue {
			return false, cmp.Or(r.Reason, v1alpha.ReasonPending), fmt.Sprintf("HTTPRoute %s: %s", route.Name, r.Message)
		}
		return true, v1alpha.ReasonProgrammed, "The edge serves the Gateway and HTTPRoute"
	}
	return false, v1alpha.ReasonPending, fmt.Sprintf("Waiting for HTTPRoute %s (generation %d) to be accepted", route.Name, route.Generation)
}

// adoptLiveStatus gives obj, read from the cache, the status and resourceVersion of
// live, as the live guard just read it (docs/design.md, Programmed means served). The
// rest of obj is kept; other kinds and a nil live are left alone.
func adoptLiveStatus(obj, live client.Object) {
	switch o := obj.(type) {
	case *v1alpha.HTTPProxy:
		if l, ok := live.(*v1alpha.HTTPProxy); ok && l != nil {
			o.Status, o.ResourceVersion = *l.Status.DeepCopy(), l.ResourceVersion
		}
	case *gatewayv1.Gateway:
		if l, ok := live.(*gatewayv1.Gateway); ok && l != nil {
			o.Status, o.ResourceVersion = *l.Status.DeepCopy(), l.ResourceVersion
		}
	case *gatewayv1.HTTPRoute:
		if l, ok := live.(*gatewayv1.HTTPRoute); ok && l != nil {
			o.Status, o.ResourceVersion = *l.Status.DeepCopy(), l.ResourceVersion
		}
	}
}

// admittedEvents limits next to ctx, the admitted context: an event recorded after it
// ended is dropped, and every note is bounded (docs/design.md, Open work, 2).
type admittedEvents struct {
	ctx  context.Context
	next events.EventRecorder
}

func (a admittedEvents) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...interface{}) {
	if a.ctx.Err() != nil {
		return
	}
	a.next.Eventf(regarding, related, eventtype, reason, action, "%s", boundedMessage(fmt.Sprintf(note, args...)))
}

// maxMessage bounds a condition message or an Event note: a huge error from a plane
// must not make the write fail, and the events API refuses notes over 1 KiB.
const maxMessage = 1000

// boundedMessage returns s cut to maxMessage bytes on a rune boundary, saying so.
func boundedMessage(s string) string {
	if len(s) <= maxMessage {
		return s
	}
	const mark = " … (truncated)"
	cut := maxMessage - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}
