package gateway

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

const hubNS = "ns-22222222-2222-2222-2222-222222222222"

func upstreamGateway(listeners ...gatewayv1.Listener) *gatewayv1.Gateway {
	return &gatewayv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "team"},
		Spec:       gatewayv1.GatewaySpec{GatewayClassName: "anchorage", Listeners: listeners},
	}
}

func TestDownstreamGateway(t *testing.T) {
	l := httpsListener("web", "https-a.example.com", "a.example.com")
	l.TLS.CertificateRefs[0].Namespace = ptr.To(gatewayv1.Namespace("team"))
	other := httpsListener("web", "https-b.example.com", "b.example.com")
	other.TLS.CertificateRefs[0].Namespace = ptr.To(gatewayv1.Namespace("elsewhere"))
	other.TLS.CertificateRefs[0].Name = "someone-elses"
	bare := httpsListener("web", "https-c.example.com", "c.example.com")
	bare.TLS = &gatewayv1.ListenerTLSConfig{Mode: ptr.To(gatewayv1.TLSModeTerminate)} // the previous manager's shape
	platformHost := httpsListener("web", "default-https", "abc.edge.example")
	up := upstreamGateway(httpListener("http", "h.example.com"), l, other, bare, platformHost)

	got := downstreamGateway(up, hubNS, "edge", listenerCertificates{})

	if got.Name != "web" || got.Namespace != hubNS {
		t.Errorf("got %s/%s, want %s/web", got.Namespace, got.Name, hubNS)
	}
	if got.Spec.GatewayClassName != "edge" {
		t.Errorf("class %q, want the downstream class", got.Spec.GatewayClassName)
	}
	if got.Spec.Listeners[0].TLS != nil {
		t.Errorf("an HTTP listener has no TLS, got %+v", got.Spec.Listeners[0].TLS)
	}
	for i, want := range []string{"web-https-a.example.com", "web-https-b.example.com", "web-https-c.example.com", "web-default-https"} {
		got := got.Spec.Listeners[i+1].TLS
		if diff := cmp.Diff(httpsListener("web", gatewayv1.SectionName(strings.TrimPrefix(want, "web-")), "x").TLS, got); diff != "" {
			t.Errorf("listener %d terminates with the Secret its Certificate writes, %s, whatever the tenant named (-want +got):\n%s", i+1, want, diff)
		}
	}
	if up.Spec.GatewayClassName != "anchorage" || up.Spec.Listeners[1].TLS.CertificateRefs[0].Namespace == nil {
		t.Error("the upstream Gateway must not be changed")
	}

	shared := downstreamGateway(up, hubNS, "edge", listenerCertificates{platformHosts: []string{"abc.edge.example"}, shared: "platform-wildcard"})
	if name := shared.Spec.Listeners[4].TLS.CertificateRefs[0].Name; name != "platform-wildcard" {
		t.Errorf("the platform hostname's listener: Secret %s, want the shared one", name)
	}
	if name := shared.Spec.Listeners[1].TLS.CertificateRefs[0].Name; name != "web-https-a.example.com" {
		t.Errorf("a tenant hostname's listener: Secret %s, want its own", name)
	}
}

// A tenant's own Gateway (not a proxy's) reaches the hub through an allow-list: each
// field past it, in every spelling a tenant may try (a schema loosened on the plane
// included), is left out; what is copied is a listener's name, hostname, port, protocol
// and TLS mode, its routes from its own namespace, and for a terminating listener the
// Secret of its own Certificate.
func TestDownstreamGatewayWritesOnlyTheAllowList(t *testing.T) {
	secretRef := func(group, kind, namespace, name string) gatewayv1.SecretObjectReference {
		ref := gatewayv1.SecretObjectReference{Name: gatewayv1.ObjectName(name), Group: ptr.To(gatewayv1.Group(group))}
		if kind != "" {
			ref.Kind = ptr.To(gatewayv1.Kind(kind))
		}
		if namespace != "" {
			ref.Namespace = ptr.To(gatewayv1.Namespace(namespace))
		}
		return ref
	}
	ownSecret := []gatewayv1.SecretObjectReference{secretRef("", "Secret", "", "web-https-a")}
	selector := &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "envoy-gateway-system"}}
	cases := []struct {
		name   string
		attack func(gw *gatewayv1.Gateway, l *gatewayv1.Listener)
		// tls is the hub listener's TLS (nil: the terminating listener's own Secret).
		tls *gatewayv1.ListenerTLSConfig
	}{
		{name: "an IP address", attack: func(gw *gatewayv1.Gateway, _ *gatewayv1.Listener) {
			gw.Spec.Addresses = []gatewayv1.GatewaySpecAddress{{Type: ptr.To(gatewayv1.IPAddressType), Value: "10.0.0.1"}}
		}},
		{name: "a hostname address and a named one", attack: func(gw *gatewayv1.Gateway, _ *gatewayv1.Listener) {
			gw.Spec.Addresses = []gatewayv1.GatewaySpecAddress{{Type: ptr.To(gatewayv1.HostnameAddressType), Value: "lb.internal"}, {Type: ptr.To(gatewayv1.NamedAddressType), Value: "platform-ip"}}
		}},
		{name: "infrastructure annotations (an internal load balancer)", attack: func(gw *gatewayv1.Gateway, _ *gatewayv1.Listener) {
			gw.Spec.Infrastructure = &gatewayv1.GatewayInfrastructure{Annotations: map[gatewayv1.AnnotationKey]gatewayv1.AnnotationValue{"service.beta.kubernetes.io/aws-load-balancer-internal": "true"}}
		}},
		{name: "infrastructure labels and parameters (another EnvoyProxy)", attack: func(gw *gatewayv1.Gateway, _ *gatewayv1.Listener) {
			gw.Spec.Infrastructure = &gatewayv1.GatewayInfrastructure{Labels: map[gatewayv1.LabelKey]gatewayv1.LabelValue{"app": "edge"},
				ParametersRef: &gatewayv1.LocalParametersReference{Group: "gateway.envoyproxy.io", Kind: "EnvoyProxy", Name: "privileged"}}
		}},
		{name: "a backend client certificate of another namespace", attack: func(gw *gatewayv1.Gateway, _ *gatewayv1.Listener) {
			gw.Spec.TLS = &gatewayv1.GatewayTLSConfig{Backend: &gatewayv1.GatewayBackendTLS{ClientCertificateRef: ptr.To(secretRef("", "Secret", "envoy-gateway-system", "envoy"))}}
		}},
		{name: "listeners allowed from every namespace, and the default scope", attack: func(gw *gatewayv1.Gateway, _ *gatewayv1.Listener) {
			gw.Spec.AllowedListeners = &gatewayv1.AllowedListeners{Namespaces: &gatewayv1.ListenerNamespaces{From: ptr.To(gatewayv1.NamespacesFromAll)}}
			gw.Spec.DefaultScope = gatewayv1.GatewayDefaultScopeAll
		}},
		{name: "TLS options (an old minimum version)", attack: func(_ *gatewayv1.Gateway, l *gatewayv1.Listener) {
			l.TLS.Options = map[gatewayv1.AnnotationKey]gatewayv1.AnnotationValue{"gateway.envoyproxy.io/tls-minimum-version": "1.0"}
		}},
		{name: "a certificate of another namespace", attack: func(_ *gatewayv1.Gateway, l *gatewayv1.Listener) {
			l.TLS.CertificateRefs = []gatewayv1.SecretObjectReference{secretRef("", "Secret", "envoy-gateway-system", "envoy-gateway")}
		}},
		{name: "a certificate of another kind, and a second one", attack: func(_ *gatewayv1.Gateway, l *gatewayv1.Listener) {
			l.TLS.CertificateRefs = []gatewayv1.SecretObjectReference{secretRef("", "ConfigMap", "", "ca"), secretRef("example.com", "Secret", "kube-system", "token")}
		}},
		{name: "routes from every namespace", attack: func(_ *gatewayv1.Gateway, l *gatewayv1.Listener) {
			l.AllowedRoutes = &gatewayv1.AllowedRoutes{Namespaces: &gatewayv1.RouteNamespaces{From: ptr.To(gatewayv1.NamespacesFromAll)}}
		}},
		{name: "routes from selected namespaces, of other kinds", attack: func(_ *gatewayv1.Gateway, l *gatewayv1.Listener) {
			l.AllowedRoutes = &gatewayv1.AllowedRoutes{Namespaces: &gatewayv1.RouteNamespaces{From: ptr.To(gatewayv1.NamespacesFromSelector), Selector: selector},
				Kinds: []gatewayv1.RouteGroupKind{{Kind: "TCPRoute"}, {Group: ptr.To(gatewayv1.Group("gateway.envoyproxy.io")), Kind: "Backend"}}}
		}},
		{name: "passthrough, with a certificate and options besides", attack: func(_ *gatewayv1.Gateway, l *gatewayv1.Listener) {
			l.TLS.Mode = ptr.To(gatewayv1.TLSModePassthrough)
			l.TLS.CertificateRefs = []gatewayv1.SecretObjectReference{secretRef("", "Secret", "elsewhere", "cert")}
			l.TLS.Options = map[gatewayv1.AnnotationKey]gatewayv1.AnnotationValue{"x": "y"}
		}, tls: &gatewayv1.ListenerTLSConfig{Mode: ptr.To(gatewayv1.TLSModePassthrough)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			up := upstreamGateway(httpsListener("web", "https-a", "a.example.com"))
			tc.attack(up, &up.Spec.Listeners[0])

			got := downstreamGateway(up, hubNS, "edge", listenerCertificates{})

			tls := tc.tls
			if tls == nil {
				tls = &gatewayv1.ListenerTLSConfig{Mode: ptr.To(gatewayv1.TLSModeTerminate), CertificateRefs: ownSecret}
			}
			want := gatewayv1.GatewaySpec{GatewayClassName: "edge", Listeners: []gatewayv1.Listener{{
				Name: "https-a", Hostname: ptr.To(gatewayv1.Hostname("a.example.com")), Port: 443, Protocol: gatewayv1.HTTPSProtocolType,
				TLS: tls, AllowedRoutes: sameNamespaceRoutes(),
			}}}
			if diff := cmp.Diff(want, got.Spec); diff != "" {
				t.Errorf("the hub copy carries more than the allow-list (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDownstreamCertificates(t *testing.T) {
	passthrough := httpsListener("web", "tls-pass", "p.example.com")
	passthrough.TLS.Mode = ptr.To(gatewayv1.TLSModePassthrough)
	noHost := httpsListener("web", "https-any", "x")
	noHost.Hostname = nil
	cases := []struct {
		reason       string
		gw           *gatewayv1.Gateway
		certificates listenerCertificates
		want         []string // name dnsName
	}{
		{
			reason: "one per HTTPS listener with a hostname; HTTP, passthrough and hostless listeners get none",
			gw:     upstreamGateway(httpListener("http", ""), httpsListener("web", "https-a.example.com", "a.example.com"), passthrough, noHost, httpsListener("web", "https-0", "b.example.com")),
			want:   []string{"web-https-a.example.com a.example.com", "web-https-0 b.example.com"},
		},
		{
			reason: "no HTTPS listener: no Certificate",
			gw:     upstreamGateway(httpListener("http", "")),
		},
		{
			reason:       "the platform hostname on the shared Secret: no Certificate of its own",
			gw:           upstreamGateway(httpsListener("web", "default-https", "abc.edge.example"), httpsListener("web", "https-0", "b.example.com")),
			certificates: listenerCertificates{platformHosts: []string{"abc.edge.example"}, shared: "platform-wildcard"},
			want:         []string{"web-https-0 b.example.com"},
		},
	}
	issuer := IssuerRef{Name: "le", Kind: "ClusterIssuer", Group: "cert-manager.io"}
	for _, tc := range cases {
		t.Run(tc.reason, func(t *testing.T) {
			certs, err := downstreamCertificates(tc.gw, hubNS, issuers{fallback: issuer}, tc.certificates)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, c := range certs {
				if c.GroupVersionKind() != CertificateGVK || c.GetNamespace() != hubNS {
					t.Errorf("%s: kind %v in %s", c.GetName(), c.GroupVersionKind(), c.GetNamespace())
				}
				dns, _, _ := unstructured.NestedStringSlice(c.Object, "spec", "dnsNames")
				secret, _, _ := unstructured.NestedString(c.Object, "spec", "secretName")
				ref, _, _ := unstructured.NestedStringMap(c.Object, "spec", "issuerRef")
				if secret != c.GetName() {
					t.Errorf("%s: secretName %q, want the certificate's name", c.GetName(), secret)
				}
				if diff := cmp.Diff(map[string]string{"name": "le", "kind": "ClusterIssuer", "group": "cert-manager.io"}, ref); diff != "" {
					t.Errorf("issuerRef -want +got:\n%s", diff)
				}
				got = append(got, c.GetName()+" "+strings.Join(dns, ","))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\n-want +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestDownstreamCertificatesRefusesAnInvalidName(t *testing.T) {
	gw := upstreamGateway(httpsListener("web", gatewayv1.SectionName(strings.Repeat("l", 250)), "a.example.com"))
	if _, err := downstreamCertificates(gw, hubNS, issuers{}, listenerCertificates{}); err == nil {
		t.Fatal("want an error for a certificate name longer than 253 characters")
	}
}

func TestSetCertificateSpecKeepsFieldsItDoesNotOwn(t *testing.T) {
	existing := newCertificate("web-https-0", hubNS, "old.example.com", IssuerRef{Name: "old", Kind: "Issuer", Group: "cert-manager.io"})
	_ = unstructured.SetNestedField(existing.Object, "Always", "spec", "privateKey", "rotationPolicy")
	desired := newCertificate("web-https-0", hubNS, "a.example.com", IssuerRef{Name: "le", Kind: "ClusterIssuer", Group: "cert-manager.io"})

	if err := setCertificateSpec(existing, desired); err != nil {
		t.Fatal(err)
	}
	dns, _, _ := unstructured.NestedStringSlice(existing.Object, "spec", "dnsNames")
	issuer, _, _ := unstructured.NestedString(existing.Object, "spec", "issuerRef", "name")
	policy, _, _ := unstructured.NestedString(existing.Object, "spec", "privateKey", "rotationPolicy")
	if diff := cmp.Diff([]string{"a.example.com", "le", "Always"}, append(dns, issuer, policy)); diff != "" {
		t.Errorf("-want +got:\n%s", diff)
	}
}

func TestDownstreamRoute(t *testing.T) {
	gwRef := func(ns *gatewayv1.Namespace, name string) gatewayv1.ParentReference {
		return gatewayv1.ParentReference{Group: ptr.To(gatewayv1.Group(gatewayv1.GroupName)), Kind: ptr.To(gatewayv1.Kind("Gateway")), Namespace: ns, Name: gatewayv1.ObjectName(name), SectionName: ptr.To(gatewayv1.SectionName("http"))}
	}
	up := &gatewayv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "team"},
		Spec: gatewayv1.HTTPRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{
				gwRef(nil, "web"), gwRef(ptr.To(gatewayv1.Namespace("team")), "also"), gwRef(ptr.To(gatewayv1.Namespace("shared")), "edge"), gwRef(nil, "foreign"),
			}},
			Hostnames: []gatewayv1.Hostname{"a.example.com"},
		},
	}
	ours := up.Spec.ParentRefs[:3]

	got, err := downstreamRoute(up, hubNS, ours, map[string]string{"shared": "ns-shared"})
	if err != nil {
		t.Fatal(err)
	}
	want := []gatewayv1.ParentReference{gwRef(nil, "web"), gwRef(nil, "also"), gwRef(ptr.To(gatewayv1.Namespace("ns-shared")), "edge")}
	if diff := cmp.Diff(want, got.Spec.ParentRefs); diff != "" {
		t.Errorf("parentRefs -want +got:\n%s", diff)
	}
	if got.Namespace != hubNS || got.Name != "web" || len(got.Spec.Hostnames) != 1 {
		t.Errorf("got %s/%s hostnames %v", got.Namespace, got.Name, got.Spec.Hostnames)
	}
	if len(up.Spec.ParentRefs) != 4 {
		t.Error("the upstream route must not be changed")
	}
	if _, err := downstreamRoute(up, hubNS, ours, nil); err == nil {
		t.Error("a parent in a namespace with no known hub namespace must be an error")
	}
}
