package gateway

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"anchorage/api/v1alpha"
)

func proxy(name string, hosts []gatewayv1.Hostname, rules ...v1alpha.HTTPProxyRule) *v1alpha.HTTPProxy {
	return &v1alpha.HTTPProxy{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team", UID: "11111111-1111-1111-1111-111111111111"},
		Spec:       v1alpha.HTTPProxySpec{Hostnames: hosts, Rules: rules},
	}
}

func backendRule(endpoint string, matches ...gatewayv1.HTTPRouteMatch) v1alpha.HTTPProxyRule {
	return v1alpha.HTTPProxyRule{Matches: matches, Backends: []v1alpha.HTTPProxyBackend{{Endpoint: endpoint}}}
}

func prefix(p string) gatewayv1.HTTPRouteMatch {
	return gatewayv1.HTTPRouteMatch{Path: &gatewayv1.HTTPPathMatch{Type: ptr.To(gatewayv1.PathMatchPathPrefix), Value: ptr.To(p)}}
}

func httpsListener(gw string, name gatewayv1.SectionName, host gatewayv1.Hostname) gatewayv1.Listener {
	return gatewayv1.Listener{
		Name: name, Hostname: ptr.To(host), Port: 443, Protocol: gatewayv1.HTTPSProtocolType,
		TLS: &gatewayv1.ListenerTLSConfig{
			Mode: ptr.To(gatewayv1.TLSModeTerminate),
			CertificateRefs: []gatewayv1.SecretObjectReference{{
				Group: ptr.To(gatewayv1.Group("")), Kind: ptr.To(gatewayv1.Kind("Secret")),
				Name: gatewayv1.ObjectName(gw + "-" + string(name)),
			}},
		},
		AllowedRoutes: sameNamespaceRoutes(),
	}
}

func httpListener(name gatewayv1.SectionName, host gatewayv1.Hostname) gatewayv1.Listener {
	l := gatewayv1.Listener{Name: name, Port: 80, Protocol: gatewayv1.HTTPProtocolType, AllowedRoutes: sameNamespaceRoutes()}
	if host != "" {
		l.Hostname = ptr.To(host)
	}
	return l
}

// defaultListeners are a proxy Gateway's platform listeners for canonical ("": none yet).
func defaultListeners(gw string, canonical gatewayv1.Hostname) []gatewayv1.Listener {
	https := httpsListener(gw, "default-https", canonical)
	if canonical == "" {
		https.Hostname = nil
	}
	return []gatewayv1.Listener{httpListener("default-http", canonical), https}
}

func TestBuildGatewaySpec(t *testing.T) {
	long := strings.Repeat("h", 60) + "." + strings.Repeat("o", 60) + "." + strings.Repeat("s", 60) + "." + strings.Repeat("t", 50) + ".example.com"
	const uid = "22222222-3333-4444-5555-666666666666"
	derived := gatewayv1.Hostname("22222222333344445555666666666666.edge.anchorage.test")
	created := func(listeners ...gatewayv1.Listener) *gatewayv1.Gateway {
		return &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{UID: uid}, Spec: gatewayv1.GatewaySpec{Listeners: listeners}}
	}
	cases := []struct {
		reason    string
		proxy     *v1alpha.HTTPProxy
		existing  *gatewayv1.Gateway
		want      []gatewayv1.Listener
		canonical string
	}{
		{
			reason: "no hostnames, the Gateway not created yet: the platform listeners, waiting for its UID",
			proxy:  proxy("web", nil, backendRule("http://a.example")),
			want:   defaultListeners("web", ""),
		},
		{
			reason:    "the Gateway exists: its platform hostname, derived from its UID",
			proxy:     proxy("web", nil, backendRule("http://a.example")),
			existing:  created(defaultListeners("web", "")...),
			want:      defaultListeners("web", derived),
			canonical: string(derived),
		},
		{
			reason: "one HTTP and one HTTPS listener per hostname, named after it, TLS from <gateway>-<listener>",
			proxy:  proxy("web", []gatewayv1.Hostname{"a.example.com", "b.example.com"}),
			want: append(defaultListeners("web", ""),
				httpListener("http-a.example.com", "a.example.com"),
				httpsListener("web", "https-a.example.com", "a.example.com"),
				httpListener("http-b.example.com", "b.example.com"),
				httpsListener("web", "https-b.example.com", "b.example.com"),
			),
		},
		{
			reason: "a certificate name too long for an object name falls back to a digest",
			proxy:  proxy("web", []gatewayv1.Hostname{gatewayv1.Hostname(long)}),
			want: append(defaultListeners("web", ""),
				httpListener(gatewayv1.SectionName("http-"+long), gatewayv1.Hostname(long)),
				httpsListener("web", gatewayv1.SectionName("https-"+digest(long, 16)), gatewayv1.Hostname(long)),
			),
		},
		{
			reason: "listener names of the existing Gateway are kept (take-over), new hostnames get derived names",
			proxy:  proxy("web", []gatewayv1.Hostname{"a.example.com", "b.example.com"}),
			existing: created(
				httpListener("plain", ""),
				httpListener("http-hostname-0", "a.example.com"),
				httpsListener("web", "https-hostname-0", "a.example.com"),
				httpsListener("web", "https-hostname-1", "gone.example.com"),
			),
			want: append(defaultListeners("web", derived),
				httpListener("http-hostname-0", "a.example.com"),
				httpsListener("web", "https-hostname-0", "a.example.com"),
				httpListener("http-b.example.com", "b.example.com"),
				httpsListener("web", "https-b.example.com", "b.example.com"),
			),
			canonical: string(derived),
		},
		{
			reason: "an existing name already taken is not reused twice",
			proxy:  proxy("web", []gatewayv1.Hostname{"a.example.com"}),
			existing: created(
				httpListener("x", "a.example.com"),
				httpsListener("web", "x", "a.example.com"),
			),
			want: append(defaultListeners("web", derived),
				httpListener("x", "a.example.com"),
				httpsListener("web", "https-a.example.com", "a.example.com"),
			),
			canonical: string(derived),
		},
	}
	for _, tc := range cases {
		t.Run(tc.reason, func(t *testing.T) {
			got, canonical, err := buildGatewaySpec(tc.proxy, tc.existing, "cls", DefaultConfig().Platform)
			if err != nil {
				t.Fatalf("buildGatewaySpec: %v", err)
			}
			if got.GatewayClassName != "cls" {
				t.Errorf("class %q, want cls", got.GatewayClassName)
			}
			if canonical != tc.canonical {
				t.Errorf("canonical %q, want %q", canonical, tc.canonical)
			}
			if diff := cmp.Diff(tc.want, got.Listeners); diff != "" {
				t.Errorf("%s\nlisteners -want +got:\n%s", tc.reason, diff)
			}
			for _, l := range got.Listeners {
				if errs := validation.IsDNS1123Subdomain(CertificateName(tc.proxy.Name, l.Name)); l.TLS != nil && len(errs) > 0 {
					t.Errorf("certificate name for listener %s invalid: %v", l.Name, errs)
				}
			}
		})
	}
}

func TestBuildGatewaySpecRefusesANameNoCertificateCanCarry(t *testing.T) {
	p := proxy(strings.Repeat("p", 240), []gatewayv1.Hostname{"a.example.com"})
	_, _, err := buildGatewaySpec(p, nil, "cls", DefaultConfig().Platform)
	var inv *invalidError
	if !errors.As(err, &inv) {
		t.Fatalf("got %v, want an invalidError", err)
	}
}

func TestBuildRouteSpec(t *testing.T) {
	rewrite := func(host, path string) gatewayv1.HTTPRouteFilter {
		f := gatewayv1.HTTPRouteFilter{Type: gatewayv1.HTTPRouteFilterURLRewrite, URLRewrite: &gatewayv1.HTTPURLRewriteFilter{Hostname: ptr.To(gatewayv1.PreciseHostname(host))}}
		if path != "" {
			f.URLRewrite.Path = &gatewayv1.HTTPPathModifier{Type: gatewayv1.PrefixMatchHTTPPathModifier, ReplacePrefixMatch: ptr.To(path)}
		}
		return f
	}
	backendRef := func(name string, port int32, filters ...gatewayv1.HTTPRouteFilter) gatewayv1.HTTPBackendRef {
		return gatewayv1.HTTPBackendRef{
			BackendRef: gatewayv1.BackendRef{
				BackendObjectReference: gatewayv1.BackendObjectReference{
					Group: ptr.To(gatewayv1.Group("")), Kind: ptr.To(gatewayv1.Kind("Service")),
					Name: gatewayv1.ObjectName(name), Port: ptr.To(port),
				},
				Weight: ptr.To[int32](1),
			},
			Filters: filters,
		}
	}
	userRewrite := gatewayv1.HTTPRouteFilter{Type: gatewayv1.HTTPRouteFilterURLRewrite, URLRewrite: &gatewayv1.HTTPURLRewriteFilter{Hostname: ptr.To(gatewayv1.PreciseHostname("mine.example"))}}

	ownHeader := gatewayv1.HTTPRouteFilter{Type: gatewayv1.HTTPRouteFilterRequestHeaderModifier, RequestHeaderModifier: &gatewayv1.HTTPHeaderFilter{Set: []gatewayv1.HTTPHeader{{Name: "X-Tenant", Value: "a"}}}}
	cases := []struct {
		reason       string
		proxy        *v1alpha.HTTPProxy
		wantRules    []gatewayv1.HTTPRouteRule
		wantServices []string // name=externalName:port/appProtocol
		wantInvalid  string
	}{
		{
			reason: "a rule without matches gets the default prefix match; the Host header is rewritten to the backend",
			proxy:  proxy("web", []gatewayv1.Hostname{"a.example.com"}, backendRule("https://api.example.com")),
			wantRules: []gatewayv1.HTTPRouteRule{{
				Matches:     []gatewayv1.HTTPRouteMatch{prefix("/")},
				Filters:     []gatewayv1.HTTPRouteFilter{rewrite("api.example.com", "")},
				BackendRefs: []gatewayv1.HTTPBackendRef{backendRef("web-backend-0", 443)},
			}},
			wantServices: []string{"web-backend-0=api.example.com:443/https"},
		},
		{
			reason: "an endpoint path replaces the matched prefix; port and case are taken from the URL",
			proxy:  proxy("web", nil, backendRule("http://API.example.com:8080/v1/", prefix("/api"))),
			wantRules: []gatewayv1.HTTPRouteRule{{
				Matches:     []gatewayv1.HTTPRouteMatch{prefix("/api")},
				Filters:     []gatewayv1.HTTPRouteFilter{rewrite("api.example.com", "/v1")},
				BackendRefs: []gatewayv1.HTTPBackendRef{backendRef("web-backend-0", 8080)},
			}},
			wantServices: []string{"web-backend-0=api.example.com:8080/http"},
		},
		{
			reason: "a URLRewrite of the proxy's own wins over the host rewrite",
			proxy: proxy("web", nil, v1alpha.HTTPProxyRule{
				Filters:  []gatewayv1.HTTPRouteFilter{userRewrite},
				Backends: []v1alpha.HTTPProxyBackend{{Endpoint: "http://b.example"}},
			}),
			wantRules: []gatewayv1.HTTPRouteRule{{
				Matches:     []gatewayv1.HTTPRouteMatch{prefix("/")},
				Filters:     []gatewayv1.HTTPRouteFilter{userRewrite},
				BackendRefs: []gatewayv1.HTTPBackendRef{backendRef("web-backend-0", 80)},
			}},
			wantServices: []string{"web-backend-0=b.example:80/http"},
		},
		{
			reason: "a rule without backends (a redirect) has no backendRefs and no Service; indexes follow the rules",
			proxy: proxy("web", nil,
				v1alpha.HTTPProxyRule{Filters: []gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterRequestRedirect, RequestRedirect: &gatewayv1.HTTPRequestRedirectFilter{Scheme: ptr.To("https")}}}},
				backendRule("http://b.example"),
			),
			wantRules: []gatewayv1.HTTPRouteRule{
				{Matches: []gatewayv1.HTTPRouteMatch{prefix("/")}, Filters: []gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterRequestRedirect, RequestRedirect: &gatewayv1.HTTPRequestRedirectFilter{Scheme: ptr.To("https")}}}},
				{Matches: []gatewayv1.HTTPRouteMatch{prefix("/")}, Filters: []gatewayv1.HTTPRouteFilter{rewrite("b.example", "")}, BackendRefs: []gatewayv1.HTTPBackendRef{backendRef("web-backend-1", 80)}},
			},
			wantServices: []string{"web-backend-1=b.example:80/http"},
		},
		{
			reason: "a backend's own filters stay on its backendRef; the rewrite goes on the rule",
			proxy: proxy("web", nil, v1alpha.HTTPProxyRule{
				Backends: []v1alpha.HTTPProxyBackend{{Endpoint: "http://b.example", Filters: []gatewayv1.HTTPRouteFilter{ownHeader}}},
			}),
			wantRules: []gatewayv1.HTTPRouteRule{{
				Matches:     []gatewayv1.HTTPRouteMatch{prefix("/")},
				Filters:     []gatewayv1.HTTPRouteFilter{rewrite("b.example", "")},
				BackendRefs: []gatewayv1.HTTPBackendRef{backendRef("web-backend-0", 80, ownHeader)},
			}},
			wantServices: []string{"web-backend-0=b.example:80/http"},
		},
		{reason: "https to an IP address needs tls.hostname", proxy: proxy("web", nil, backendRule("https://203.0.113.10")), wantInvalid: "https to the IP address 203.0.113.10 needs tls.hostname"},
		{reason: "a single-label host cannot be an FQDN endpoint", proxy: proxy("web", nil, backendRule("http://localhost:8080")), wantInvalid: "single DNS label"},
		{reason: "user information is refused", proxy: proxy("web", nil, backendRule("http://u:p@b.example")), wantInvalid: "user information"},
		{reason: "a query is refused", proxy: proxy("web", nil, backendRule("http://b.example/?x=1")), wantInvalid: "query"},
		{reason: "a bad port is refused", proxy: proxy("web", nil, backendRule("http://b.example:0")), wantInvalid: "port"},
		{reason: "a path needs exactly one PathPrefix match", proxy: proxy("web", nil, backendRule("http://b.example/v1", prefix("/a"), prefix("/b"))), wantInvalid: "exactly one PathPrefix"},
		{
			reason: "a path with an Exact match is refused",
			proxy: proxy("web", nil, backendRule("http://b.example/v1", gatewayv1.HTTPRouteMatch{Path: &gatewayv1.HTTPPathMatch{
				Type: ptr.To(gatewayv1.PathMatchExact), Value: ptr.To("/a"),
			}})),
			wantInvalid: "exactly one PathPrefix",
		},
		{
			reason: "a path with a URLRewrite of the proxy's own is refused",
			proxy: proxy("web", nil, v1alpha.HTTPProxyRule{
				Backends: []v1alpha.HTTPProxyBackend{{Endpoint: "http://b.example/v1", Filters: []gatewayv1.HTTPRouteFilter{userRewrite}}},
			}),
			wantInvalid: "URLRewrite",
		},
	}
	for _, tc := range cases {
		t.Run(tc.reason, func(t *testing.T) {
			spec, services, _, err := buildRouteSpec(tc.proxy)
			if tc.wantInvalid != "" {
				var inv *invalidError
				if !errors.As(err, &inv) || !strings.Contains(err.Error(), tc.wantInvalid) {
					t.Fatalf("%s: got error %v, want an invalidError mentioning %q", tc.reason, err, tc.wantInvalid)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s: %v", tc.reason, err)
			}
			wantParents := []gatewayv1.ParentReference{{Group: ptr.To(gatewayv1.Group(gatewayv1.GroupName)), Kind: ptr.To(gatewayv1.Kind("Gateway")), Name: "web"}}
			if diff := cmp.Diff(wantParents, spec.ParentRefs); diff != "" {
				t.Errorf("parentRefs -want +got:\n%s", diff)
			}
			if diff := cmp.Diff(tc.proxy.Spec.Hostnames, spec.Hostnames); diff != "" {
				t.Errorf("hostnames -want +got:\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantRules, spec.Rules); diff != "" {
				t.Errorf("%s\nrules -want +got:\n%s", tc.reason, diff)
			}
			var got []string
			for _, s := range services {
				p := s.Spec.Ports[0]
				if s.Spec.Type != corev1.ServiceTypeExternalName || p.TargetPort != intstr.FromInt32(p.Port) {
					t.Errorf("service %s: type %s, targetPort %v", s.Name, s.Spec.Type, p.TargetPort)
				}
				got = append(got, s.Name+"="+s.Spec.ExternalName+":"+strconv.Itoa(int(p.Port))+"/"+ptr.Deref(p.AppProtocol, ""))
			}
			if diff := cmp.Diff(tc.wantServices, got); diff != "" {
				t.Errorf("services -want +got:\n%s", diff)
			}
		})
	}
}

func TestBuildProxyObjectsAreControlledByTheProxy(t *testing.T) {
	p := proxy("web", []gatewayv1.Hostname{"a.example.com"}, backendRule("http://b.example"))
	objs, err := buildProxyObjects(p, nil, "cls", DefaultConfig().Platform)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range []metav1.Object{objs.Gateway, objs.Route, objs.Services[0]} {
		if !metav1.IsControlledBy(o, p) || o.GetNamespace() != p.Namespace {
			t.Errorf("%s: not controlled by the proxy in its namespace: %+v", o.GetName(), o.GetOwnerReferences())
		}
	}
	if objs.Gateway.Name != "web" || objs.Route.Name != "web" {
		t.Errorf("gateway %q, route %q: want both named after the proxy", objs.Gateway.Name, objs.Route.Name)
	}
}

func TestNames(t *testing.T) {
	listener, err := pickListenerName("web", httpsKind, "a.example.com", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		reason, got, want string
	}{
		{"certificate: <gateway>-<listener>", CertificateName("web", "https-a.example.com"), "web-https-a.example.com"},
		{"listener: https-<hostname>", string(listener), "https-a.example.com"},
		{"service: <proxy>-backend-<rule>", backendServiceName("web", 3), "web-backend-3"},
		{"service: a dotted proxy name is no DNS-1035 label", backendServiceName("web.v2", 0), "backend-" + digest("web.v2", 12) + "-0"},
		{"service: a proxy name starting with a digit", backendServiceName("1web", 0), "backend-" + digest("1web", 12) + "-0"},
		{"service: too long for a label", backendServiceName(strings.Repeat("a", 60), 1), "backend-" + digest(strings.Repeat("a", 60), 12) + "-1"},
	}
	for _, tc := range cases {
		if tc.got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.reason, tc.got, tc.want)
		}
	}
}
