package gateway

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// The allow-list a hub route is built from (docs/design.md, Threat model). A route's
// copy on the hub is read by edges shared by every project, with the hub's own
// namespaces and objects around it: whatever it names, the edge reaches. So the copy
// names nothing but the objects this manager writes for that route, in the route's
// mapped namespace, and carries only the filters the previous manager let a tenant
// write.
//
// What the previous manager (network-services-operator) admitted, from its HTTPRoute
// and HTTPProxy webhooks (internal/validation, v0.26):
//
//   - on a route rule, and on an HTTPProxy rule, the filter types
//     RequestHeaderModifier, ResponseHeaderModifier, RequestRedirect, URLRewrite, CORS
//     and ExtensionRef;
//   - on a backendRef, and on an HTTPProxy backend, RequestHeaderModifier,
//     ResponseHeaderModifier and ExtensionRef;
//   - an ExtensionRef only to Envoy Gateway's HTTPRouteFilter (group
//     gateway.envoyproxy.io), which its resource replicator copied to the hub;
//   - never RequestMirror (nor ExternalAuth), so no filter could name a backend;
//   - backendRefs to an EndpointSlice or to Envoy Gateway's Backend (a Service only
//     under a test option), never into another namespace.
//
// This manager keeps those filter types, each with only the field its type names, and
// narrows what may be named to what it writes: a backendRef to a Service or an
// EndpointSlice of the route's own namespace becomes the hub Service it writes for that
// backendRef (route-<route UID>-rule-<i>-backendref-<j>); Envoy Gateway's Backend would
// name the platform's object, and it replicates no HTTPRouteFilter, so every
// ExtensionRef would name an object it did not write for the route.
var (
	ruleFilterTypes = []gatewayv1.HTTPRouteFilterType{
		gatewayv1.HTTPRouteFilterRequestHeaderModifier,
		gatewayv1.HTTPRouteFilterResponseHeaderModifier,
		gatewayv1.HTTPRouteFilterRequestRedirect,
		gatewayv1.HTTPRouteFilterURLRewrite,
		gatewayv1.HTTPRouteFilterCORS,
	}
	backendFilterTypes = []gatewayv1.HTTPRouteFilterType{
		gatewayv1.HTTPRouteFilterRequestHeaderModifier,
		gatewayv1.HTTPRouteFilterResponseHeaderModifier,
	}
)

// routeRefusal is one part of a route's spec its hub copy may not carry, and the condition
// that says so, Gateway API's way: a filter type (or a filter's fields) this manager
// does not program makes the route Accepted=False/UnsupportedValue; a reference to
// another namespace is ResolvedRefs=False/RefNotPermitted, to another kind
// ResolvedRefs=False/InvalidKind.
type routeRefusal struct {
	// rule, backendRef and filter locate the refused part: backendRef -1 for a filter
	// of the rule, filter -1 for the backendRef itself.
	rule, backendRef, filter int
	condition                gatewayv1.RouteConditionType
	reason                   gatewayv1.RouteConditionReason
	// detail names the refused filter or reference and says why.
	detail string
}

// message is the refusal located and explained; backends is what the backendRefs are
// called where the tenant wrote them ("backendRef" in a route, "backend" in a proxy).
func (r routeRefusal) message(backends string) string {
	at := fmt.Sprintf("rule %d", r.rule)
	if r.backendRef >= 0 {
		at += fmt.Sprintf(" %s %d", backends, r.backendRef)
	}
	if r.filter >= 0 {
		at += fmt.Sprintf(" filter %d", r.filter)
	}
	return at + ": " + r.detail
}

// notAccepted reports whether the refusal keeps the whole route off the hub.
func (r routeRefusal) notAccepted() bool { return r.condition == gatewayv1.RouteConditionAccepted }

// refusalMessages joins the messages of the refusals.
func refusalMessages(refused []routeRefusal, backends string) string {
	var out []string
	for _, r := range refused {
		out = append(out, r.message(backends))
	}
	return strings.Join(out, "; ")
}

// checkRouteReferences returns every part of spec, a route in namespace, that its hub
// copy may not carry (the allow-list above), in the order of the spec. The proxy
// reconciler runs it on the route a proxy produces, the route reconciler on every
// route before it is copied, so neither path can put on the hub what the other refuses.
func checkRouteReferences(spec *gatewayv1.HTTPRouteSpec, namespace string) []routeRefusal {
	var out []routeRefusal
	for i, rule := range spec.Rules {
		for k, f := range rule.Filters {
			if r, ok := judgeFilter(f, ruleFilterTypes, "a rule"); !ok {
				r.rule, r.backendRef, r.filter = i, -1, k
				out = append(out, r)
			}
		}
		for j, b := range rule.BackendRefs {
			if r, ok := judgeBackendRef(b.BackendObjectReference, namespace); !ok {
				r.rule, r.backendRef, r.filter = i, j, -1
				out = append(out, r)
			}
			for k, f := range b.Filters {
				if r, ok := judgeFilter(f, backendFilterTypes, "a backend"); !ok {
					r.rule, r.backendRef, r.filter = i, j, k
					out = append(out, r)
				}
			}
		}
	}
	return out
}

// refusedAt reports whether refused holds a refusal of backendRef j of rule i, or of a
// filter of rule i itself: either way that backendRef gets nothing on the hub.
func refusedAt(refused []routeRefusal, i, j int) bool {
	return slices.ContainsFunc(refused, func(r routeRefusal) bool { return r.rule == i && (r.backendRef == -1 || r.backendRef == j) })
}

// judgeFilter judges one filter where allowed are the types that may stand (where says
// where, for the message). A tenant may have loosened its plane's schema, so nothing
// the Gateway API schema promises is taken for granted: a filter must carry the field
// of its type and no other.
func judgeFilter(f gatewayv1.HTTPRouteFilter, allowed []gatewayv1.HTTPRouteFilterType, where string) (routeRefusal, bool) {
	unsupported := routeRefusal{condition: gatewayv1.RouteConditionAccepted, reason: gatewayv1.RouteReasonUnsupportedValue}
	switch {
	case f.Type != gatewayv1.HTTPRouteFilterExtensionRef && !slices.Contains(allowed, f.Type):
		unsupported.detail = fmt.Sprintf("%s is not allowed on %s (allowed: %s)", describeFilter(f), where, joinTypes(allowed))
		return unsupported, false
	case !equality.Semantic.DeepEqual(typeFieldOnly(f), f):
		unsupported.detail = fmt.Sprintf("a %s filter must carry the field of its type and no other; it carries %s", f.Type, cmp.Or(strings.Join(filterFields(f), ", "), "none"))
		return unsupported, false
	case f.Type == gatewayv1.HTTPRouteFilterExtensionRef:
		return routeRefusal{condition: gatewayv1.RouteConditionResolvedRefs, reason: gatewayv1.RouteReasonInvalidKind, detail: fmt.Sprintf(
			"%s: this manager writes no object a filter could name on the hub (extension filters are not replicated), so the edge answers what the filter would have handled with an error",
			describeFilter(f))}, false
	}
	return routeRefusal{}, true
}

// typeFieldOnly is f with only the field its type names (a copy): what the hub copy
// carries of an allowed filter. One lacking that field comes back without its type, so
// it never equals f.
func typeFieldOnly(f gatewayv1.HTTPRouteFilter) gatewayv1.HTTPRouteFilter {
	only := gatewayv1.HTTPRouteFilter{
		RequestHeaderModifier:  keepIf(f.Type == gatewayv1.HTTPRouteFilterRequestHeaderModifier, f.RequestHeaderModifier),
		ResponseHeaderModifier: keepIf(f.Type == gatewayv1.HTTPRouteFilterResponseHeaderModifier, f.ResponseHeaderModifier),
		RequestRedirect:        keepIf(f.Type == gatewayv1.HTTPRouteFilterRequestRedirect, f.RequestRedirect),
		URLRewrite:             keepIf(f.Type == gatewayv1.HTTPRouteFilterURLRewrite, f.URLRewrite),
		CORS:                   keepIf(f.Type == gatewayv1.HTTPRouteFilterCORS, f.CORS),
		ExtensionRef:           keepIf(f.Type == gatewayv1.HTTPRouteFilterExtensionRef, f.ExtensionRef),
	}
	if only != (gatewayv1.HTTPRouteFilter{}) {
		only.Type = f.Type
	}
	return *only.DeepCopy()
}

func keepIf[T any](keep bool, field *T) *T {
	if keep {
		return field
	}
	return nil
}

// judgeBackendRef judges a backendRef of a route in namespace: a Service or an
// EndpointSlice there, which this manager writes its own hub objects for.
func judgeBackendRef(ref gatewayv1.BackendObjectReference, namespace string) (routeRefusal, bool) {
	group, kind := string(ptr.Deref(ref.Group, "")), string(ptr.Deref(ref.Kind, kindService))
	what := describeBackendRef(ref)
	if !(group == "" && kind == kindService) && !(group == discoveryv1.GroupName && kind == kindEndpointSlice) {
		return routeRefusal{condition: gatewayv1.RouteConditionResolvedRefs, reason: gatewayv1.RouteReasonInvalidKind,
			detail: what + ": only a Service or an EndpointSlice.discovery.k8s.io is programmed on the hub"}, false
	}
	if ref.Namespace != nil && string(*ref.Namespace) != namespace {
		return routeRefusal{condition: gatewayv1.RouteConditionResolvedRefs, reason: gatewayv1.RouteReasonRefNotPermitted,
			detail: what + ": only the route's own namespace is programmed on the hub (no ReferenceGrant is honoured)"}, false
	}
	return routeRefusal{}, true
}

// describeFilter names a filter's type and, for one that names an object, the object.
func describeFilter(f gatewayv1.HTTPRouteFilter) string {
	switch {
	case f.Type == gatewayv1.HTTPRouteFilterRequestMirror && f.RequestMirror != nil:
		return fmt.Sprintf("%s to %s", f.Type, describeBackendRef(f.RequestMirror.BackendRef))
	case f.Type == gatewayv1.HTTPRouteFilterExternalAuth && f.ExternalAuth != nil:
		return fmt.Sprintf("%s to %s", f.Type, describeBackendRef(f.ExternalAuth.BackendRef))
	case f.Type == gatewayv1.HTTPRouteFilterExtensionRef && f.ExtensionRef != nil:
		return fmt.Sprintf("%s to %s", f.Type, describeRef(string(f.ExtensionRef.Group), string(f.ExtensionRef.Kind), nil, f.ExtensionRef.Name))
	}
	return fmt.Sprintf("%q", f.Type)
}

// filterFields names the fields f sets besides its type, one that names an object
// with the object.
func filterFields(f gatewayv1.HTTPRouteFilter) []string {
	var out []string
	add := func(set bool, name string) {
		if set {
			out = append(out, name)
		}
	}
	add(f.RequestHeaderModifier != nil, "requestHeaderModifier")
	add(f.ResponseHeaderModifier != nil, "responseHeaderModifier")
	add(f.RequestRedirect != nil, "requestRedirect")
	add(f.URLRewrite != nil, "urlRewrite")
	add(f.CORS != nil, "cors")
	if f.RequestMirror != nil {
		out = append(out, "requestMirror (to "+describeBackendRef(f.RequestMirror.BackendRef)+")")
	}
	if f.ExternalAuth != nil {
		out = append(out, "externalAuth (to "+describeBackendRef(f.ExternalAuth.BackendRef)+")")
	}
	if r := f.ExtensionRef; r != nil {
		out = append(out, "extensionRef (to "+describeRef(string(r.Group), string(r.Kind), nil, r.Name)+")")
	}
	return out
}

// describeBackendRef is describeRef of a backend reference, defaults applied.
func describeBackendRef(r gatewayv1.BackendObjectReference) string {
	return describeRef(string(ptr.Deref(r.Group, "")), string(ptr.Deref(r.Kind, kindService)), r.Namespace, r.Name)
}

// describeRef names an object the way kubectl does (Kind.group, the core group left
// out), with its namespace when the reference gives one.
func describeRef(group, kind string, namespace *gatewayv1.Namespace, name gatewayv1.ObjectName) string {
	if group != "" {
		kind += "." + group
	}
	if namespace != nil {
		return fmt.Sprintf("%s %s/%s", kind, *namespace, name)
	}
	return fmt.Sprintf("%s %s", kind, name)
}

func joinTypes(types []gatewayv1.HTTPRouteFilterType) string {
	var out []string
	for _, t := range types {
		out = append(out, string(t))
	}
	return strings.Join(out, ", ")
}

// hubRules returns up's rules as its hub copy in hubNS carries them, built from the
// allow-list rather than copied: a rule keeps its name, matches, timeouts, retry and
// session persistence; its filters and each backendRef's are the allowed ones, each with
// only its type's field; every backendRef names the hub Service this manager writes for
// it (written only when it resolves: one refused or unresolved names nothing, so the
// edge answers that share with an error). A rule with a filter that may not stand keeps
// neither filters nor backendRefs, so the edge answers it with an error instead of
// skipping the filter; a backendRef with one keeps no filter (it names nothing).
func hubRules(up *gatewayv1.HTTPRoute, hubNS string) []gatewayv1.HTTPRouteRule {
	var out []gatewayv1.HTTPRouteRule
	for i, rule := range up.Spec.Rules {
		down := gatewayv1.HTTPRouteRule{Name: rule.Name, Timeouts: rule.Timeouts.DeepCopy(), Retry: rule.Retry.DeepCopy(), SessionPersistence: rule.SessionPersistence.DeepCopy()}
		for _, m := range rule.Matches {
			down.Matches = append(down.Matches, *m.DeepCopy())
		}
		filters, ok := hubFilters(rule.Filters, ruleFilterTypes)
		if ok {
			down.Filters = filters
			for j, ref := range rule.BackendRefs {
				b := hubBackendRef(ref, BackendObjectName(up.UID, i, j), hubNS)
				b.Filters, _ = hubFilters(ref.Filters, backendFilterTypes)
				down.BackendRefs = append(down.BackendRefs, b)
			}
		}
		out = append(out, down)
	}
	return out
}

// hubFilters returns filters as the hub carries them (typeFieldOnly), or none and false
// when one of them may not stand (judgeFilter).
func hubFilters(filters []gatewayv1.HTTPRouteFilter, allowed []gatewayv1.HTTPRouteFilterType) ([]gatewayv1.HTTPRouteFilter, bool) {
	var out []gatewayv1.HTTPRouteFilter
	for _, f := range filters {
		if _, ok := judgeFilter(f, allowed, ""); !ok {
			return nil, false
		}
		out = append(out, typeFieldOnly(f))
	}
	return out, true
}
