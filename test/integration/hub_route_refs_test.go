package integration

import (
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"anchorage/api/v1alpha"
	"anchorage/pkg/anchor"
	"anchorage/pkg/gateway"
)

// objRef is a reference as an attacker spells it. A group of "-", a kind or a namespace
// of "" are left out (nil), so a Service is tried both bare (the plane's schema then
// defaults group and kind) and spelled out.
type objRef struct{ group, kind, namespace, name string }

func (r objRef) backend(port gatewayv1.PortNumber) gatewayv1.BackendObjectReference {
	ref := gatewayv1.BackendObjectReference{Name: gatewayv1.ObjectName(r.name)}
	if r.group != "-" {
		ref.Group = ptr.To(gatewayv1.Group(r.group))
	}
	if r.kind != "" {
		ref.Kind = ptr.To(gatewayv1.Kind(r.kind))
	}
	if r.namespace != "" {
		ref.Namespace = ptr.To(gatewayv1.Namespace(r.namespace))
	}
	if port != 0 {
		ref.Port = ptr.To(port)
	}
	return ref
}

func mirrorTo(r objRef) gatewayv1.HTTPRouteFilter {
	return gatewayv1.HTTPRouteFilter{Type: gatewayv1.HTTPRouteFilterRequestMirror,
		RequestMirror: &gatewayv1.HTTPRequestMirrorFilter{BackendRef: r.backend(443)}}
}

func extensionTo(group, kind, name string) gatewayv1.HTTPRouteFilter {
	return gatewayv1.HTTPRouteFilter{Type: gatewayv1.HTTPRouteFilterExtensionRef,
		ExtensionRef: &gatewayv1.LocalObjectReference{Group: gatewayv1.Group(group), Kind: gatewayv1.Kind(kind), Name: gatewayv1.ObjectName(name)}}
}

func backendTo(r objRef, filters ...gatewayv1.HTTPRouteFilter) gatewayv1.HTTPBackendRef {
	port := gatewayv1.PortNumber(80)
	if r.kind != "" && r.kind != "Service" {
		port = 0
	}
	return gatewayv1.HTTPBackendRef{BackendRef: gatewayv1.BackendRef{BackendObjectReference: r.backend(port)}, Filters: filters}
}

// TestHubRoutesCarryOnlyTheManagersOwnReferences: a tenant with full admin on its plane
// aims every reference a route can carry past the objects this manager writes for it: a
// RequestMirror or ExtensionRef filter in an HTTPProxy rule and in a backend's filters,
// naming the hub API server's Service (with and without namespace), the other project's
// hub backend Service, or Envoy Gateway's kinds; and, on routes of its own attached to a
// Gateway of this manager's class, backendRefs, mirrors and ExtensionRefs to other
// namespaces (the other project's mapped namespace among them) and other kinds
// (Envoy Gateway's Backend, a Secret, a Service of a made-up "core" group, the defaulted
// and the bare spelling of a Service). Each proxy is Accepted=False/Invalid naming the
// filter and what it names, and writes no route; each route is refused the Gateway API
// way, naming the reference: a filter type the previous manager never allowed is
// Accepted=False/UnsupportedValue and the route has no hub copy (never written, and the
// copy of a route that turns bad is deleted), a reference elsewhere is
// ResolvedRefs=False/RefNotPermitted and one of another kind InvalidKind, the hub copy
// carrying the manager's own names only. After the attacks every hub route of both
// projects names nothing but a Service in its own namespace that the manager wrote for
// it, and the second project's hub objects kept their UID and resourceVersion.
func TestHubRoutesCarryOnlyTheManagersOwnReferences(t *testing.T) {
	a := newGatewayTest(t, planeA)
	g, ctx, pc := a.g, a.ctx, a.plane.Client
	m := a.startManager("hubrefs")
	b := newBystander(a)
	_, victimRoute := b.upstream("web")
	victimSvc := gateway.BackendObjectName(victimRoute.UID, 0, 0)

	apiServer := objRef{"", "Service", "default", "kubernetes"}
	apiServerBare := objRef{"-", "", "default", "kubernetes"}
	local := objRef{"", "Service", "", "kubernetes"}
	victim := objRef{"", "Service", b.hubNS(), victimSvc}
	egBackend := objRef{"gateway.envoyproxy.io", "Backend", "envoy-gateway-system", "egress"}
	egBackendLocal := objRef{"gateway.envoyproxy.io", "Backend", "", "egress"}

	// Proxies: one attack each, in the rule's filters or the backend's.
	proxyAttacks := []struct {
		name            string
		rule, onBackend *gatewayv1.HTTPRouteFilter
		want            string
	}{
		{name: "mirror-rule-ns", rule: ptr.To(mirrorTo(apiServer)), want: "rule 0 filter 0: RequestMirror to Service default/kubernetes is not allowed"},
		{name: "mirror-rule-local", rule: ptr.To(mirrorTo(local)), want: "rule 0 filter 0: RequestMirror to Service kubernetes is not allowed"},
		{name: "mirror-rule-victim", rule: ptr.To(mirrorTo(victim)), want: fmt.Sprintf("RequestMirror to Service %s/%s is not allowed", b.hubNS(), victimSvc)},
		{name: "mirror-rule-eg", rule: ptr.To(mirrorTo(egBackend)), want: "RequestMirror to Backend.gateway.envoyproxy.io envoy-gateway-system/egress is not allowed"},
		{name: "mirror-backend-ns", onBackend: ptr.To(mirrorTo(apiServer)), want: "rule 0 backend 0 filter 0: RequestMirror to Service default/kubernetes is not allowed"},
		{name: "mirror-backend-bare", onBackend: ptr.To(mirrorTo(apiServerBare)), want: "rule 0 backend 0 filter 0: RequestMirror to Service default/kubernetes is not allowed"},
		{name: "extension-rule", rule: ptr.To(extensionTo("gateway.envoyproxy.io", "HTTPRouteFilter", "inject")), want: "rule 0 filter 0: ExtensionRef to HTTPRouteFilter.gateway.envoyproxy.io inject"},
		{name: "extension-backend", onBackend: ptr.To(extensionTo("", "Service", "kubernetes")), want: "rule 0 backend 0 filter 0: ExtensionRef to Service kubernetes"},
	}
	for _, at := range proxyAttacks {
		p := a.newProxy(at.name, gatewayv1.Hostname(at.name+"-"+a.project+".example.com"))
		if at.rule != nil {
			p.Spec.Rules[0].Filters = []gatewayv1.HTTPRouteFilter{*at.rule}
		}
		if at.onBackend != nil {
			p.Spec.Rules[0].Backends[0].Filters = []gatewayv1.HTTPRouteFilter{*at.onBackend}
		}
		a.createProxy(p)
	}

	// Routes of the tenant's own on a Gateway of this manager's class; "origin" is a
	// backend the hub may carry.
	host := gatewayv1.Hostname("direct-" + a.project + ".example.com")
	g.Expect(pc.Create(ctx, a.directGateway("direct", []gatewayv1.Hostname{host}))).To(Succeed())
	g.Expect(pc.Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: a.ns.Name, Name: "origin"}, Spec: corev1.ServiceSpec{
		Type: corev1.ServiceTypeExternalName, ExternalName: "origin.example.org", Ports: []corev1.ServicePort{{Name: "http", Port: 80}},
	}})).To(Succeed())
	origin := objRef{"", "Service", "", "origin"}
	accepted, resolvedRefs := gatewayv1.RouteConditionAccepted, gatewayv1.RouteConditionResolvedRefs
	unsupported, notPermitted, invalidKind := gatewayv1.RouteReasonUnsupportedValue, gatewayv1.RouteReasonRefNotPermitted, gatewayv1.RouteReasonInvalidKind
	routeAttacks := []struct {
		name   string
		rules  []gatewayv1.HTTPRouteRule
		typ    gatewayv1.RouteConditionType
		reason gatewayv1.RouteConditionReason
		want   string
	}{
		{"direct-backend-apiserver", []gatewayv1.HTTPRouteRule{{BackendRefs: []gatewayv1.HTTPBackendRef{backendTo(apiServer)}}}, resolvedRefs, notPermitted, "rule 0 backendRef 0: Service default/kubernetes"},
		{"direct-backend-apiserver-bare", []gatewayv1.HTTPRouteRule{{BackendRefs: []gatewayv1.HTTPBackendRef{backendTo(apiServerBare)}}}, resolvedRefs, notPermitted, "rule 0 backendRef 0: Service default/kubernetes"},
		{"direct-backend-victim", []gatewayv1.HTTPRouteRule{{BackendRefs: []gatewayv1.HTTPBackendRef{backendTo(victim)}}}, resolvedRefs, notPermitted, fmt.Sprintf("rule 0 backendRef 0: Service %s/%s", b.hubNS(), victimSvc)},
		{"direct-backend-eg", []gatewayv1.HTTPRouteRule{{BackendRefs: []gatewayv1.HTTPBackendRef{backendTo(egBackend)}}}, resolvedRefs, invalidKind, "rule 0 backendRef 0: Backend.gateway.envoyproxy.io envoy-gateway-system/egress"},
		{"direct-backend-eg-local", []gatewayv1.HTTPRouteRule{{BackendRefs: []gatewayv1.HTTPBackendRef{backendTo(egBackendLocal)}}}, resolvedRefs, invalidKind, "rule 0 backendRef 0: Backend.gateway.envoyproxy.io egress"},
		{"direct-backend-secret", []gatewayv1.HTTPRouteRule{{BackendRefs: []gatewayv1.HTTPBackendRef{backendTo(objRef{"", "Secret", "", "token"})}}}, resolvedRefs, invalidKind, "rule 0 backendRef 0: Secret token"},
		{"direct-backend-core-group", []gatewayv1.HTTPRouteRule{{BackendRefs: []gatewayv1.HTTPBackendRef{backendTo(objRef{"core", "Service", "", "origin"})}}}, resolvedRefs, invalidKind, "rule 0 backendRef 0: Service.core origin"},
		{"direct-mirror-rule", []gatewayv1.HTTPRouteRule{{Filters: []gatewayv1.HTTPRouteFilter{mirrorTo(apiServer)}, BackendRefs: []gatewayv1.HTTPBackendRef{backendTo(origin)}}}, accepted, unsupported, "rule 0 filter 0: RequestMirror to Service default/kubernetes is not allowed"},
		{"direct-mirror-rule-local", []gatewayv1.HTTPRouteRule{{Filters: []gatewayv1.HTTPRouteFilter{mirrorTo(objRef{"", "Service", "", "origin"})}, BackendRefs: []gatewayv1.HTTPBackendRef{backendTo(origin)}}}, accepted, unsupported, "rule 0 filter 0: RequestMirror to Service origin is not allowed"},
		{"direct-mirror-backend", []gatewayv1.HTTPRouteRule{{BackendRefs: []gatewayv1.HTTPBackendRef{backendTo(origin, mirrorTo(egBackend))}}}, accepted, unsupported, "rule 0 backendRef 0 filter 0: RequestMirror to Backend.gateway.envoyproxy.io envoy-gateway-system/egress is not allowed"},
		{"direct-mirror-backend-victim", []gatewayv1.HTTPRouteRule{{BackendRefs: []gatewayv1.HTTPBackendRef{backendTo(origin, mirrorTo(victim))}}}, accepted, unsupported, fmt.Sprintf("rule 0 backendRef 0 filter 0: RequestMirror to Service %s/%s is not allowed", b.hubNS(), victimSvc)},
		{"direct-extension-rule", []gatewayv1.HTTPRouteRule{{Filters: []gatewayv1.HTTPRouteFilter{extensionTo("gateway.envoyproxy.io", "HTTPRouteFilter", "inject")}, BackendRefs: []gatewayv1.HTTPBackendRef{backendTo(origin)}}}, resolvedRefs, invalidKind, "rule 0 filter 0: ExtensionRef to HTTPRouteFilter.gateway.envoyproxy.io inject"},
		{"direct-extension-backend", []gatewayv1.HTTPRouteRule{{BackendRefs: []gatewayv1.HTTPBackendRef{backendTo(origin, extensionTo("", "Service", "kubernetes"))}}}, resolvedRefs, invalidKind, "rule 0 backendRef 0 filter 0: ExtensionRef to Service kubernetes"},
		{"direct-mixed", []gatewayv1.HTTPRouteRule{
			{BackendRefs: []gatewayv1.HTTPBackendRef{backendTo(origin)}},
			{Matches: []gatewayv1.HTTPRouteMatch{{Path: &gatewayv1.HTTPPathMatch{Type: ptr.To(gatewayv1.PathMatchPathPrefix), Value: ptr.To("/x")}}},
				Filters: []gatewayv1.HTTPRouteFilter{extensionTo("gateway.envoyproxy.io", "Backend", "egress")}, BackendRefs: []gatewayv1.HTTPBackendRef{backendTo(origin)}},
		}, resolvedRefs, invalidKind, "rule 1 filter 0: ExtensionRef to Backend.gateway.envoyproxy.io egress"},
	}
	for _, at := range routeAttacks {
		g.Expect(pc.Create(ctx, &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: a.ns.Name, Name: at.name}, Spec: gatewayv1.HTTPRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Name: "direct"}}},
			Hostnames:       []gatewayv1.Hostname{host},
			Rules:           at.rules,
		}})).To(Succeed(), at.name)
	}

	// Every attack refused, naming what it names; when one is not, all are listed, and
	// what the hub's routes then name.
	var pending []string
	g.Eventually(func(g Gomega) []string {
		pending = nil
		for _, at := range proxyAttacks {
			p := &v1alpha.HTTPProxy{}
			g.Expect(pc.Get(ctx, client.ObjectKey{Namespace: a.ns.Name, Name: at.name}, p)).To(Succeed())
			c := meta.FindStatusCondition(p.Status.Conditions, v1alpha.ConditionAccepted)
			if c == nil || c.Status != metav1.ConditionFalse || c.Reason != v1alpha.ReasonInvalid || !strings.Contains(c.Message, at.want) {
				pending = append(pending, fmt.Sprintf("proxy %s: Accepted %s, want False/Invalid %q", at.name, describe(c), at.want))
			}
		}
		for _, at := range routeAttacks {
			if c := a.routeCondition(g, at.name, at.typ); c == nil || c.Status != metav1.ConditionFalse || c.Reason != string(at.reason) || !strings.Contains(c.Message, at.want) {
				pending = append(pending, fmt.Sprintf("route %s: %s %s, want False/%s %q", at.name, at.typ, describe(c), at.reason, at.want))
			}
		}
		return pending
	}, gwProgrammedWithin, gwPoll).Should(BeEmpty(), func() string {
		return fmt.Sprintf("not refused:\n%s\nhub route references:\n%s", strings.Join(pending, "\n"), strings.Join(hubRouteReferenceFaults(a, a, b.gatewayTest), "\n"))
	})
	for _, at := range proxyAttacks {
		g.Expect(gone(ctx, pc, &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: a.ns.Name, Name: at.name}})).To(BeTrue(), "a route for the refused proxy %s", at.name)
	}
	for _, at := range routeAttacks {
		if at.typ == accepted {
			g.Expect(hubWritesBy(g, m.User, []string{"create", "update", "patch"}, []string{"httproutes"}, a.hubNS())).NotTo(ContainElement(
				HaveField("ObjectRef.Name", at.name)), "route %s is not accepted: never written to the hub", at.name)
		} else {
			g.Expect(goneFromHub(ctx, &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: a.hubNS(), Name: at.name}})).To(BeFalse(), "route %s is written without the refused reference", at.name)
		}
	}
	// The rule whose extension filter names nothing of this manager's answers with an
	// error (no filter, no backend); the other rule still reaches its Service.
	mixed := &gatewayv1.HTTPRoute{}
	g.Expect(hub.Client.Get(ctx, client.ObjectKey{Namespace: a.hubNS(), Name: "direct-mixed"}, mixed)).To(Succeed())
	g.Expect(mixed.Spec.Rules).To(HaveLen(2))
	g.Expect(mixed.Spec.Rules[0].BackendRefs).To(HaveLen(1))
	g.Expect(mixed.Spec.Rules[1].Filters).To(BeEmpty())
	g.Expect(mixed.Spec.Rules[1].BackendRefs).To(BeEmpty())
	b.unchanged()

	// A route served as written, then given a mirror: its hub copy goes.
	g.Expect(pc.Create(ctx, &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: a.ns.Name, Name: "turned"}, Spec: gatewayv1.HTTPRouteSpec{
		CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Name: "direct"}}},
		Hostnames:       []gatewayv1.Hostname{host},
		Rules:           []gatewayv1.HTTPRouteRule{{BackendRefs: []gatewayv1.HTTPBackendRef{backendTo(origin)}}},
	}})).To(Succeed())
	turnedOnHub := &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: a.hubNS(), Name: "turned"}}
	g.Eventually(func() bool { return goneFromHub(ctx, turnedOnHub) }, gwProgrammedWithin, gwPoll).Should(BeFalse(), "the good route is written")
	turned := &gatewayv1.HTTPRoute{}
	g.Expect(pc.Get(ctx, client.ObjectKey{Namespace: a.ns.Name, Name: "turned"}, turned)).To(Succeed())
	turned.Spec.Rules[0].Filters = []gatewayv1.HTTPRouteFilter{mirrorTo(apiServer)}
	g.Expect(pc.Update(ctx, turned)).To(Succeed())
	g.Eventually(func(g Gomega) {
		c := a.routeCondition(g, "turned", accepted)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.ObservedGeneration).To(Equal(turned.Generation))
		g.Expect(c.Reason).To(Equal(string(unsupported)), c.Message)
		g.Expect(goneFromHub(ctx, turnedOnHub)).To(BeTrue(), "the hub copy of a route no longer accepted")
	}, gwProgrammedWithin, gwPoll).Should(Succeed())
	b.unchanged()

	g.Expect(hubRouteReferenceFaults(a, a, b.gatewayTest)).To(BeEmpty())
	b.unchanged()
}

// describe is a condition in a line, for a failure message.
func describe(c *metav1.Condition) string {
	if c == nil {
		return "(none)"
	}
	return fmt.Sprintf("%s/%s %q", c.Status, c.Reason, c.Message)
}

// hubRouteReferenceFaults lists every reference of every hub HTTPRoute in the mapped
// namespaces of the projects that is not to an object the manager wrote for that
// route: a backendRef must name, in the route's own namespace, the Service of the
// manager's name for that rule and backendRef (route-<route UID>-rule-<i>-backendref-<j>,
// the UID the route's anchor names), hanging on the route's anchor if it exists (an
// unresolved backend names nothing), and so must any object a filter names.
func hubRouteReferenceFaults(gt *gatewayTest, projects ...*gatewayTest) []string {
	ctx, g := gt.ctx, gt.g
	var faults []string
	for _, p := range projects {
		namespaces := &corev1.NamespaceList{}
		g.Expect(hub.Client.List(ctx, namespaces, client.MatchingLabels{anchor.LabelClusterName: anchor.ClusterNameValue(p.project)})).To(Succeed())
		g.Expect(namespaces.Items).NotTo(BeEmpty(), "project %s has a mapped namespace", p.project)
		for _, ns := range namespaces.Items {
			routes := &gatewayv1.HTTPRouteList{}
			g.Expect(hub.Client.List(ctx, routes, client.InNamespace(ns.Name))).To(Succeed())
			for i := range routes.Items {
				faults = append(faults, routeReferenceFaults(gt, &routes.Items[i])...)
			}
		}
	}
	return faults
}

// routeReferenceFaults is hubRouteReferenceFaults for one hub route.
func routeReferenceFaults(gt *gatewayTest, route *gatewayv1.HTTPRoute) []string {
	var anchorName string
	for _, o := range route.OwnerReferences {
		if o.Kind == "ConfigMap" && strings.HasPrefix(o.Name, anchor.NamePrefix) {
			anchorName = o.Name
		}
	}
	where := route.Namespace + "/" + route.Name
	if anchorName == "" {
		return []string{where + ": hangs on no anchor"}
	}
	routeUID := types.UID(strings.TrimPrefix(anchorName, anchor.NamePrefix))
	var faults []string
	check := func(at string, group *gatewayv1.Group, kind *gatewayv1.Kind, namespace *gatewayv1.Namespace, name gatewayv1.ObjectName, want string) {
		fault := func(format string, args ...any) {
			faults = append(faults, where+" "+at+": "+fmt.Sprintf(format, args...))
		}
		grp, k, ns := ptr.Deref(group, ""), ptr.Deref(kind, "Service"), string(ptr.Deref(namespace, gatewayv1.Namespace(route.Namespace)))
		switch {
		case grp != "" || k != "Service":
			fault("names %s of group %q", k, grp)
			return
		case ns != route.Namespace:
			fault("names a Service in namespace %s", ns)
			return
		case want != "" && string(name) != want:
			fault("names Service %s, not the manager's %s", name, want)
			return
		}
		svc, slice := &corev1.Service{}, &discoveryv1.EndpointSlice{}
		key := client.ObjectKey{Namespace: ns, Name: string(name)}
		err := hub.Client.Get(gt.ctx, key, svc)
		switch {
		case err == nil && !anchor.HangsOn(svc, anchorName):
			fault("Service %s hangs on another anchor than the route's %s", name, anchorName)
		case err != nil && want == "":
			fault("names Service %s, which the manager did not write for it", name)
		}
		if hub.Client.Get(gt.ctx, key, slice) == nil && !anchor.HangsOn(slice, anchorName) {
			fault("EndpointSlice %s hangs on another anchor than the route's %s", name, anchorName)
		}
	}
	filters := func(at string, fs []gatewayv1.HTTPRouteFilter) {
		for k, f := range fs {
			fat := fmt.Sprintf("%s filter %d", at, k)
			if r := f.RequestMirror; r != nil {
				check(fat+" (mirror)", r.BackendRef.Group, r.BackendRef.Kind, r.BackendRef.Namespace, r.BackendRef.Name, "")
			}
			if r := f.ExtensionRef; r != nil {
				check(fat+" (extensionRef)", ptr.To(r.Group), ptr.To(r.Kind), nil, r.Name, "")
			}
			if r := f.ExternalAuth; r != nil {
				check(fat+" (externalAuth)", r.BackendRef.Group, r.BackendRef.Kind, r.BackendRef.Namespace, r.BackendRef.Name, "")
			}
		}
	}
	for i, rule := range route.Spec.Rules {
		filters(fmt.Sprintf("rule %d", i), rule.Filters)
		for j, ref := range rule.BackendRefs {
			at := fmt.Sprintf("rule %d backendRef %d", i, j)
			check(at, ref.Group, ref.Kind, ref.Namespace, ref.Name, gateway.BackendObjectName(routeUID, i, j))
			filters(at, ref.Filters)
		}
	}
	return faults
}
