package gateway

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"anchorage/api/v1alpha"
)

// Filters and references as a tenant writes them, for the allow-list's tables.
var (
	setHeader    = &gatewayv1.HTTPHeaderFilter{Set: []gatewayv1.HTTPHeader{{Name: "X-Tenant", Value: "a"}}}
	headerFilter = gatewayv1.HTTPRouteFilter{Type: gatewayv1.HTTPRouteFilterRequestHeaderModifier, RequestHeaderModifier: setHeader}
	respFilter   = gatewayv1.HTTPRouteFilter{Type: gatewayv1.HTTPRouteFilterResponseHeaderModifier, ResponseHeaderModifier: setHeader}
	redirect     = gatewayv1.HTTPRouteFilter{Type: gatewayv1.HTTPRouteFilterRequestRedirect, RequestRedirect: &gatewayv1.HTTPRequestRedirectFilter{Scheme: ptr.To("https")}}
	rewrite      = gatewayv1.HTTPRouteFilter{Type: gatewayv1.HTTPRouteFilterURLRewrite, URLRewrite: &gatewayv1.HTTPURLRewriteFilter{Hostname: ptr.To(gatewayv1.PreciseHostname("api.example.com"))}}
	cors         = gatewayv1.HTTPRouteFilter{Type: gatewayv1.HTTPRouteFilterCORS, CORS: &gatewayv1.HTTPCORSFilter{AllowOrigins: []gatewayv1.CORSOrigin{"https://a.example.com"}}}
)

func svcRef(namespace, name string) gatewayv1.BackendObjectReference {
	ref := gatewayv1.BackendObjectReference{Group: ptr.To(gatewayv1.Group("")), Kind: ptr.To(gatewayv1.Kind("Service")), Name: gatewayv1.ObjectName(name), Port: ptr.To(gatewayv1.PortNumber(443))}
	if namespace != "" {
		ref.Namespace = ptr.To(gatewayv1.Namespace(namespace))
	}
	return ref
}

func kindRef(group, kind, namespace, name string) gatewayv1.BackendObjectReference {
	ref := svcRef(namespace, name)
	ref.Group, ref.Kind, ref.Port = ptr.To(gatewayv1.Group(group)), ptr.To(gatewayv1.Kind(kind)), nil
	return ref
}

func mirror(ref gatewayv1.BackendObjectReference) gatewayv1.HTTPRouteFilter {
	return gatewayv1.HTTPRouteFilter{Type: gatewayv1.HTTPRouteFilterRequestMirror, RequestMirror: &gatewayv1.HTTPRequestMirrorFilter{BackendRef: ref}}
}

func extension(group, kind, name string) gatewayv1.HTTPRouteFilter {
	return gatewayv1.HTTPRouteFilter{Type: gatewayv1.HTTPRouteFilterExtensionRef,
		ExtensionRef: &gatewayv1.LocalObjectReference{Group: gatewayv1.Group(group), Kind: gatewayv1.Kind(kind), Name: gatewayv1.ObjectName(name)}}
}

func to(ref gatewayv1.BackendObjectReference, filters ...gatewayv1.HTTPRouteFilter) gatewayv1.HTTPBackendRef {
	return gatewayv1.HTTPBackendRef{BackendRef: gatewayv1.BackendRef{BackendObjectReference: ref, Weight: ptr.To[int32](1)}, Filters: filters}
}

func rule(filters []gatewayv1.HTTPRouteFilter, backends ...gatewayv1.HTTPBackendRef) gatewayv1.HTTPRouteRule {
	return gatewayv1.HTTPRouteRule{Matches: []gatewayv1.HTTPRouteMatch{prefix("/")}, Filters: filters, BackendRefs: backends}
}

func filters(fs ...gatewayv1.HTTPRouteFilter) []gatewayv1.HTTPRouteFilter { return fs }

// allowListCases are routes in namespace "team" and what checkRouteReferences refuses
// of each: "<condition>/<reason> <message>" per refusal, a message given in part.
var allowListCases = []struct {
	name  string
	rules []gatewayv1.HTTPRouteRule
	want  []string
}{
	{name: "what a proxy produces: the manager's rewrite, its own Service and EndpointSlice",
		rules: []gatewayv1.HTTPRouteRule{
			rule(filters(rewrite), to(svcRef("", "web-backend-0"))),
			rule(nil, to(kindRef("discovery.k8s.io", "EndpointSlice", "", "web-backend-1"))),
		}},
	{name: "every filter type the previous manager allowed, where it allowed it",
		rules: []gatewayv1.HTTPRouteRule{
			rule(filters(headerFilter, respFilter, rewrite, cors), to(svcRef("team", "origin"), headerFilter, respFilter)),
			rule(filters(redirect)),
		}},
	{name: "a Service by kind with the group left out, and by nothing but its name",
		rules: []gatewayv1.HTTPRouteRule{rule(nil, to(gatewayv1.BackendObjectReference{Kind: ptr.To(gatewayv1.Kind("Service")), Name: "a"}), to(gatewayv1.BackendObjectReference{Name: "b"}))}},
	{name: "a mirror to the API server's Service",
		rules: []gatewayv1.HTTPRouteRule{rule(filters(mirror(svcRef("default", "kubernetes"))), to(svcRef("", "origin")))},
		want:  []string{"Accepted/UnsupportedValue rule 0 filter 0: RequestMirror to Service default/kubernetes is not allowed on a rule"}},
	{name: "a mirror spelled bare, to the route's own namespace, on a backend",
		rules: []gatewayv1.HTTPRouteRule{rule(nil, to(svcRef("", "origin"), mirror(gatewayv1.BackendObjectReference{Name: "origin"})))},
		want:  []string{"Accepted/UnsupportedValue rule 0 backendRef 0 filter 0: RequestMirror to Service origin is not allowed on a backend"}},
	{name: "a mirror to Envoy Gateway's Backend in the platform's namespace",
		rules: []gatewayv1.HTTPRouteRule{rule(filters(mirror(kindRef("gateway.envoyproxy.io", "Backend", "envoy-gateway-system", "egress"))))},
		want:  []string{"Accepted/UnsupportedValue rule 0 filter 0: RequestMirror to Backend.gateway.envoyproxy.io envoy-gateway-system/egress"}},
	{name: "external authorization names a backend too",
		rules: []gatewayv1.HTTPRouteRule{rule(filters(gatewayv1.HTTPRouteFilter{Type: gatewayv1.HTTPRouteFilterExternalAuth,
			ExternalAuth: &gatewayv1.HTTPExternalAuthFilter{ExternalAuthProtocol: gatewayv1.HTTPRouteExternalAuthHTTPProtocol, BackendRef: svcRef("kube-system", "authz")}}))},
		want: []string{"Accepted/UnsupportedValue rule 0 filter 0: ExternalAuth to Service kube-system/authz is not allowed"}},
	{name: "a rewrite, a redirect or CORS on a backend: never allowed there",
		rules: []gatewayv1.HTTPRouteRule{rule(nil, to(svcRef("", "a"), rewrite), to(svcRef("", "b"), redirect, cors))},
		want: []string{
			`Accepted/UnsupportedValue rule 0 backendRef 0 filter 0: "URLRewrite" is not allowed on a backend (allowed: RequestHeaderModifier, ResponseHeaderModifier)`,
			`Accepted/UnsupportedValue rule 0 backendRef 1 filter 0: "RequestRedirect" is not allowed on a backend`,
			`Accepted/UnsupportedValue rule 0 backendRef 1 filter 1: "CORS" is not allowed on a backend`,
		}},
	{name: "a type Gateway API does not know",
		rules: []gatewayv1.HTTPRouteRule{rule(filters(gatewayv1.HTTPRouteFilter{Type: "Lua"}))},
		want:  []string{`Accepted/UnsupportedValue rule 0 filter 0: "Lua" is not allowed on a rule`}},
	{name: "an allowed type smuggling a mirror past a loosened schema",
		rules: []gatewayv1.HTTPRouteRule{rule(filters(gatewayv1.HTTPRouteFilter{Type: gatewayv1.HTTPRouteFilterRequestHeaderModifier, RequestHeaderModifier: setHeader,
			RequestMirror: &gatewayv1.HTTPRequestMirrorFilter{BackendRef: svcRef("default", "kubernetes")}}))},
		want: []string{"Accepted/UnsupportedValue rule 0 filter 0: a RequestHeaderModifier filter must carry the field of its type and no other; it carries requestHeaderModifier, requestMirror (to Service default/kubernetes)"}},
	{name: "an allowed type without its field",
		rules: []gatewayv1.HTTPRouteRule{rule(filters(gatewayv1.HTTPRouteFilter{Type: gatewayv1.HTTPRouteFilterURLRewrite}))},
		want:  []string{"Accepted/UnsupportedValue rule 0 filter 0: a URLRewrite filter must carry the field of its type and no other; it carries none"}},
	{name: "an extension filter: the previous manager's HTTPRouteFilter, and other kinds",
		rules: []gatewayv1.HTTPRouteRule{
			rule(filters(extension("gateway.envoyproxy.io", "HTTPRouteFilter", "inject")), to(svcRef("", "origin"))),
			rule(nil, to(svcRef("", "origin"), extension("", "Service", "kubernetes"))),
		},
		want: []string{
			"ResolvedRefs/InvalidKind rule 0 filter 0: ExtensionRef to HTTPRouteFilter.gateway.envoyproxy.io inject: this manager writes no object",
			"ResolvedRefs/InvalidKind rule 1 backendRef 0 filter 0: ExtensionRef to Service kubernetes",
		}},
	{name: "backends in other namespaces: the API server's, another project's mapped namespace, an EndpointSlice",
		rules: []gatewayv1.HTTPRouteRule{rule(nil,
			to(svcRef("default", "kubernetes")),
			to(gatewayv1.BackendObjectReference{Namespace: ptr.To(gatewayv1.Namespace("default")), Name: "kubernetes"}),
			to(svcRef("ns-33333333-3333-3333-3333-333333333333", "route-x-rule-0-backendref-0")),
			to(kindRef("discovery.k8s.io", "EndpointSlice", "other", "s")),
			to(svcRef("team", "mine")),
		)},
		want: []string{
			"ResolvedRefs/RefNotPermitted rule 0 backendRef 0: Service default/kubernetes: only the route's own namespace",
			"ResolvedRefs/RefNotPermitted rule 0 backendRef 1: Service default/kubernetes",
			"ResolvedRefs/RefNotPermitted rule 0 backendRef 2: Service ns-33333333-3333-3333-3333-333333333333/route-x-rule-0-backendref-0",
			"ResolvedRefs/RefNotPermitted rule 0 backendRef 3: EndpointSlice.discovery.k8s.io other/s",
		}},
	{name: "backends of other kinds",
		rules: []gatewayv1.HTTPRouteRule{rule(nil,
			to(kindRef("gateway.envoyproxy.io", "Backend", "envoy-gateway-system", "egress")),
			to(kindRef("gateway.envoyproxy.io", "Backend", "", "egress")),
			to(kindRef("core", "Service", "", "origin")),
			to(kindRef("", "service", "", "origin")),
			to(kindRef("", "Secret", "", "token")),
			to(kindRef("", "EndpointSlice", "", "s")),
		)},
		want: []string{
			"ResolvedRefs/InvalidKind rule 0 backendRef 0: Backend.gateway.envoyproxy.io envoy-gateway-system/egress: only a Service or an EndpointSlice.discovery.k8s.io",
			"ResolvedRefs/InvalidKind rule 0 backendRef 1: Backend.gateway.envoyproxy.io egress",
			"ResolvedRefs/InvalidKind rule 0 backendRef 2: Service.core origin",
			"ResolvedRefs/InvalidKind rule 0 backendRef 3: service origin",
			"ResolvedRefs/InvalidKind rule 0 backendRef 4: Secret token",
			"ResolvedRefs/InvalidKind rule 0 backendRef 5: EndpointSlice s",
		}},
}

func TestCheckRouteReferences(t *testing.T) {
	for _, tc := range allowListCases {
		t.Run(tc.name, func(t *testing.T) {
			got := checkRouteReferences(&gatewayv1.HTTPRouteSpec{Rules: tc.rules}, "team")
			if len(got) != len(tc.want) {
				t.Fatalf("got %d refusals, want %d:\n%s", len(got), len(tc.want), describeRefusals(got))
			}
			for i, r := range got {
				if line := fmt.Sprintf("%s/%s %s", r.condition, r.reason, r.message("backendRef")); !strings.HasPrefix(line, tc.want[i]) {
					t.Errorf("refusal %d:\n got %s\nwant %s…", i, line, tc.want[i])
				}
			}
		})
	}
}

func describeRefusals(rs []routeRefusal) string {
	var out []string
	for _, r := range rs {
		out = append(out, fmt.Sprintf("%s/%s %s", r.condition, r.reason, r.message("backendRef")))
	}
	return strings.Join(out, "\n")
}

// TestHubRulesCarryNothingTheAllowListRefuses: whatever a route carries, its hub copy
// passes the allow-list in its own namespace, and each backendRef names the manager's
// Service for it there.
func TestHubRulesCarryNothingTheAllowListRefuses(t *testing.T) {
	for _, tc := range allowListCases {
		t.Run(tc.name, func(t *testing.T) {
			up := &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "team", UID: "uid"}, Spec: gatewayv1.HTTPRouteSpec{Rules: tc.rules}}
			down := hubRules(up, hubNS)
			if got := checkRouteReferences(&gatewayv1.HTTPRouteSpec{Rules: down}, hubNS); len(got) > 0 {
				t.Errorf("the hub copy carries what the allow-list refuses:\n%s", describeRefusals(got))
			}
			for i, r := range down {
				for j, b := range r.BackendRefs {
					if want := BackendObjectName("uid", i, j); string(b.Name) != want || string(ptr.Deref(b.Namespace, "")) != hubNS || b.Port == nil {
						t.Errorf("rule %d backendRef %d names %s/%s (port %v), want %s/%s", i, j, ptr.Deref(b.Namespace, ""), b.Name, b.Port, hubNS, want)
					}
				}
			}
		})
	}
}

func TestHubRules(t *testing.T) {
	timeouts := &gatewayv1.HTTPRouteTimeouts{Request: ptr.To(gatewayv1.Duration("10s"))}
	up := &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "team", UID: "uid"}, Spec: gatewayv1.HTTPRouteSpec{Rules: []gatewayv1.HTTPRouteRule{
		{Name: ptr.To(gatewayv1.SectionName("api")), Matches: []gatewayv1.HTTPRouteMatch{prefix("/api")}, Timeouts: timeouts,
			Filters: filters(headerFilter, rewrite), BackendRefs: []gatewayv1.HTTPBackendRef{to(svcRef("", "origin"), respFilter)}},
		rule(filters(extension("gateway.envoyproxy.io", "HTTPRouteFilter", "inject")), to(svcRef("", "origin"))),
		rule(nil, to(svcRef("", "a"), extension("", "Service", "kubernetes")), to(kindRef("gateway.envoyproxy.io", "Backend", "envoy-gateway-system", "egress"), headerFilter)),
	}}}
	hubRef := func(rule, ref int, port gatewayv1.PortNumber, filters ...gatewayv1.HTTPRouteFilter) gatewayv1.HTTPBackendRef {
		return gatewayv1.HTTPBackendRef{BackendRef: gatewayv1.BackendRef{BackendObjectReference: gatewayv1.BackendObjectReference{
			Group: ptr.To(gatewayv1.Group("")), Kind: ptr.To(gatewayv1.Kind("Service")), Namespace: ptr.To(gatewayv1.Namespace(hubNS)),
			Name: gatewayv1.ObjectName(BackendObjectName("uid", rule, ref)), Port: ptr.To(port),
		}, Weight: ptr.To[int32](1)}, Filters: filters}
	}
	want := []gatewayv1.HTTPRouteRule{
		{Name: ptr.To(gatewayv1.SectionName("api")), Matches: []gatewayv1.HTTPRouteMatch{prefix("/api")}, Timeouts: timeouts,
			Filters: filters(headerFilter, rewrite), BackendRefs: []gatewayv1.HTTPBackendRef{hubRef(0, 0, 443, respFilter)}},
		// A refused extension filter: the rule answers with an error, its backend unused.
		{Matches: []gatewayv1.HTTPRouteMatch{prefix("/")}},
		// A backend with a refused filter names nothing and carries no filter; one of
		// another kind names nothing, on the http port.
		{Matches: []gatewayv1.HTTPRouteMatch{prefix("/")}, BackendRefs: []gatewayv1.HTTPBackendRef{hubRef(2, 0, 443), hubRef(2, 1, 80, headerFilter)}},
	}
	if diff := cmp.Diff(want, hubRules(up, hubNS)); diff != "" {
		t.Errorf("-want +got:\n%s", diff)
	}
}

// TestProxiesAreRefusedWhatTheirRouteMayNotCarry: the route a proxy produces, with the
// manager's own rewrite and backend objects, passes the allow-list; a filter of the
// proxy's that it refuses makes the proxy invalid, naming the filter where the proxy
// has it.
func TestProxiesAreRefusedWhatTheirRouteMayNotCarry(t *testing.T) {
	withFilters := func(ruleFilters, backendFilters []gatewayv1.HTTPRouteFilter, endpoint string) *v1alpha.HTTPProxy {
		r := backendRule(endpoint, prefix("/api"))
		r.Filters, r.Backends[0].Filters = ruleFilters, backendFilters
		return proxy("web", []gatewayv1.Hostname{"a.example.com"}, r, v1alpha.HTTPProxyRule{Filters: filters(redirect)})
	}
	r := &HTTPProxyReconciler{Config: DefaultConfig()}
	for _, tc := range []struct {
		proxy *v1alpha.HTTPProxy
		want  string // "": programmed
	}{
		{proxy: withFilters(nil, nil, "https://api.example.com/v1")},
		{proxy: withFilters(filters(headerFilter, respFilter, cors), filters(headerFilter, respFilter), "http://203.0.113.10:8080")},
		{proxy: withFilters(filters(mirror(svcRef("default", "kubernetes"))), nil, "https://api.example.com"),
			want: "rule 0 filter 0: RequestMirror to Service default/kubernetes is not allowed on a rule"},
		{proxy: withFilters(nil, filters(mirror(svcRef("", "kubernetes"))), "https://api.example.com"),
			want: "rule 0 backend 0 filter 0: RequestMirror to Service kubernetes is not allowed on a backend"},
		{proxy: withFilters(nil, filters(extension("gateway.envoyproxy.io", "HTTPRouteFilter", "inject")), "https://api.example.com"),
			want: "rule 0 backend 0 filter 0: ExtensionRef to HTTPRouteFilter.gateway.envoyproxy.io inject"},
		{proxy: withFilters(nil, filters(rewrite), "https://api.example.com"),
			want: `rule 0 backend 0 filter 0: "URLRewrite" is not allowed on a backend`},
	} {
		desired, err := buildProxyObjects(tc.proxy, nil, "anchorage", DefaultConfig().Platform)
		if err == nil {
			err = r.refused(tc.proxy, desired)
		}
		var inv *invalidError
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.proxy.Spec.Rules[0].Backends[0].Endpoint, err)
		case tc.want != "" && (!errors.As(err, &inv) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("got %v, want an invalidError with %q", err, tc.want)
		}
	}
}
