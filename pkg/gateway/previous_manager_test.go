package gateway

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"anchorage/api/v1alpha"
	"anchorage/pkg/anchor"
	"anchorage/pkg/platform"
)

func TestUnsupportedBackend(t *testing.T) {
	proxy := func(backends ...v1alpha.HTTPProxyBackend) *v1alpha.HTTPProxy {
		return &v1alpha.HTTPProxy{Spec: v1alpha.HTTPProxySpec{Rules: []v1alpha.HTTPProxyRule{
			{Backends: []v1alpha.HTTPProxyBackend{{Endpoint: "http://a.example.org"}}},
			{Backends: backends},
		}}}
	}
	cases := []struct {
		reason string
		proxy  *v1alpha.HTTPProxy
		want   string // substring; "" for supported
	}{
		{"endpoints only", proxy(v1alpha.HTTPProxyBackend{Endpoint: "https://b.example.org"}), ""},
		{"a redirect rule has no backend", proxy(), ""},
		{"a connector", proxy(v1alpha.HTTPProxyBackend{Endpoint: "http://localhost:8080", Connector: &v1alpha.ConnectorReference{Name: "tunnel"}}), "rule 1: a connector backend (tunnel)"},
		{"an instance", proxy(v1alpha.HTTPProxyBackend{Instance: &v1alpha.InstanceBackendRef{Name: "vm", Port: 80}}), "rule 1: an instance backend (vm)"},
	}
	for _, tc := range cases {
		got := unsupportedBackend(tc.proxy)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s: got %q, want %q", tc.reason, got, tc.want)
		}
	}
}

// A Gateway in the previous manager's shape keeps its canonical-hostname listeners
// (written this manager's way) and its listener names; the route serves the canonical
// hostname too.
func TestBuildProxyObjectsKeepThePreviousCanonicalListeners(t *testing.T) {
	canonical, custom := gatewayv1.Hostname("word-word-abcde.prism.example.net"), gatewayv1.Hostname("app.example.com")
	issuer := &gatewayv1.ListenerTLSConfig{Mode: ptr.To(gatewayv1.TLSModeTerminate), Options: map[gatewayv1.AnnotationKey]gatewayv1.AnnotationValue{"gateway.networking.datumapis.com/certificate-issuer": "auto"}}
	existing := &gatewayv1.Gateway{Spec: gatewayv1.GatewaySpec{Listeners: []gatewayv1.Listener{
		{Name: "default-http", Port: 80, Protocol: gatewayv1.HTTPProtocolType, Hostname: &canonical},
		{Name: "default-https", Port: 443, Protocol: gatewayv1.HTTPSProtocolType, Hostname: &canonical, TLS: issuer},
		{Name: "http-hostname-0", Port: 80, Protocol: gatewayv1.HTTPProtocolType, Hostname: &custom},
		{Name: "https-hostname-0", Port: 443, Protocol: gatewayv1.HTTPSProtocolType, Hostname: &custom, TLS: issuer},
	}}}
	proxy := &v1alpha.HTTPProxy{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "team"}, Spec: v1alpha.HTTPProxySpec{
		Hostnames: []gatewayv1.Hostname{custom},
		Rules:     []v1alpha.HTTPProxyRule{{Backends: []v1alpha.HTTPProxyBackend{{Endpoint: "http://origin.example.org"}}}},
	}}
	names := platform.Settings{TargetDomain: "new.example.net", LegacyTargetDomains: []string{"prism.example.net"}, Families: []platform.Family{platform.IPv4}}
	out, err := buildProxyObjects(proxy, existing, "datum-external-global-proxy", names)
	if err != nil {
		t.Fatal(err)
	}
	var listeners []string
	for _, l := range out.Gateway.Spec.Listeners {
		listeners = append(listeners, string(l.Name))
		if l.Hostname == nil {
			t.Errorf("listener %s has no hostname", l.Name)
		}
		if l.Protocol == gatewayv1.HTTPSProtocolType {
			if l.TLS == nil || len(l.TLS.CertificateRefs) != 1 || string(l.TLS.CertificateRefs[0].Name) != "web-"+string(l.Name) {
				t.Errorf("listener %s: TLS %+v, want termination with Secret web-%s", l.Name, l.TLS, l.Name)
			}
		}
	}
	if want := []string{"default-http", "default-https", "http-hostname-0", "https-hostname-0"}; !slices.Equal(listeners, want) {
		t.Errorf("listeners %v, want %v", listeners, want)
	}
	if want := []gatewayv1.Hostname{custom, canonical}; !slices.Equal(out.Route.Spec.Hostnames, want) {
		t.Errorf("route hostnames %v, want %v", out.Route.Spec.Hostnames, want)
	}

	// A proxy whose Gateway is not created yet: the default listeners wait for its UID.
	plain, err := buildProxyObjects(proxy, nil, "anchorage", names)
	if err != nil {
		t.Fatal(err)
	}
	if len(plain.Gateway.Spec.Listeners) != 4 || plain.Gateway.Spec.Listeners[0].Hostname != nil || len(plain.Route.Spec.Hostnames) != 1 {
		t.Errorf("a new proxy's Gateway %v and route hostnames %v", plain.Gateway.Spec.Listeners, plain.Route.Spec.Hostnames)
	}
}

func TestBuildProxyObjectsRefuseAnIPHostname(t *testing.T) {
	proxy := &v1alpha.HTTPProxy{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: v1alpha.HTTPProxySpec{
		Hostnames: []gatewayv1.Hostname{"192.0.2.10"},
		Rules:     []v1alpha.HTTPProxyRule{{Backends: []v1alpha.HTTPProxyBackend{{Endpoint: "http://origin.example.org"}}}},
	}}
	_, err := buildProxyObjects(proxy, nil, "anchorage", DefaultConfig().Platform)
	if inv := (*invalidError)(nil); err == nil || !strings.Contains(err.Error(), "192.0.2.10 is an IP address") {
		t.Fatalf("got %v (%T), want an invalidError naming the IP hostname", err, inv)
	}
}

func TestBuildHubBackendFromSlice(t *testing.T) {
	slice := func(typ discoveryv1.AddressType, addr, appProtocol string, port int32, certHost string) *discoveryv1.EndpointSlice {
		s := &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Name: "web-0-0", Namespace: "team"},
			AddressType: typ,
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{addr}}},
			Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("httpproxy-0-0"), Port: ptr.To(port), AppProtocol: ptr.To(appProtocol)}},
		}
		if certHost != "" {
			s.Annotations = map[string]string{BackendCertHostnameAnnotation: certHost}
		}
		return s
	}
	cases := []struct {
		reason     string
		slice      *discoveryv1.EndpointSlice
		port       gatewayv1.PortNumber
		wantErr    string
		wantPolicy string
	}{
		{"http FQDN backend", slice(discoveryv1.AddressTypeFQDN, "origin.example.org", "http", 8080, "origin.example.org"), 8080, "", ""},
		{"https FQDN backend: its certificate hostname", slice(discoveryv1.AddressTypeFQDN, "origin.example.org", "https", 443, "cert.example.org"), 443, "", "cert.example.org"},
		{"a connector's slice", slice(discoveryv1.AddressTypeFQDN, "connector.local", "http", 8080, ""), 8080, "a connector's", ""},
		{"the previous manager's IPv4 slice", slice(discoveryv1.AddressTypeIPv4, "192.0.2.1", "http", 80, ""), 80, "", ""},
		{"the previous manager's IPv6 slice over https", slice(discoveryv1.AddressTypeIPv6, "2001:db8::1", "https", 443, "cert.example.org"), 443, "", "cert.example.org"},
		{"https to an IP slice with no certificate hostname", slice(discoveryv1.AddressTypeIPv4, "192.0.2.1", "https", 443, ""), 443, "needs the " + BackendCertHostnameAnnotation + " annotation", ""},
		{"an IPv4 slice holding an IPv6 address", slice(discoveryv1.AddressTypeIPv4, "2001:db8::1", "http", 80, ""), 80, "not an address of type IPv4", ""},
		{"an address with leading zeros", slice(discoveryv1.AddressTypeIPv4, "192.000.2.1", "http", 80, ""), 80, "not an address of type IPv4", ""},
		{"no slice", nil, 80, "EndpointSlice not found", ""},
		{"a port the slice lacks", slice(discoveryv1.AddressTypeFQDN, "origin.example.org", "http", 80, ""), 81, "has no port 81", ""},
	}
	for _, tc := range cases {
		b, err := buildHubBackendFromSlice(tc.slice, tc.port, "route-x-rule-0-backendref-0", "ns-1")
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: err %v, want %q", tc.reason, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.reason, err)
			continue
		}
		if got := b.Slice.Endpoints[0].Addresses[0]; got != tc.slice.Endpoints[0].Addresses[0] {
			t.Errorf("%s: hub slice names %s", tc.reason, got)
		}
		if got := b.Service.Spec.Ports[0].Name; got != "httpproxy-0-0" {
			t.Errorf("%s: hub Service port %q, want the slice's port name", tc.reason, got)
		}
		switch {
		case tc.wantPolicy == "" && b.Policy != nil:
			t.Errorf("%s: a BackendTLSPolicy for an http backend", tc.reason)
		case tc.wantPolicy != "" && (b.Policy == nil || string(b.Policy.Spec.Validation.Hostname) != tc.wantPolicy):
			t.Errorf("%s: policy %+v, want hostname %s", tc.reason, b.Policy, tc.wantPolicy)
		}
	}
}

func TestIsPreviousBackendSliceOf(t *testing.T) {
	route := anchor.Owner{Project: "acme", Group: gatewayv1.GroupName, Kind: kindHTTPRoute, Namespace: "team", Name: "web", UID: "11111111-1111-1111-1111-111111111111"}
	prevLabels := func(cluster, ns string) map[string]string {
		return map[string]string{anchor.LabelClusterName: cluster, anchor.LabelGroup: discoveryv1.GroupName, anchor.LabelKind: kindEndpointSlice, anchor.LabelNamespace: ns, anchor.LabelName: "web-0-0"}
	}
	hubSlice := func(name string, labels map[string]string) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	}
	own := BackendObjectName(types.UID(route.UID), 0, 0)
	cases := []struct {
		reason string
		obj    *discoveryv1.EndpointSlice
		want   bool
	}{
		{"the route's backend slice, legacy cluster label", hubSlice(own, prevLabels("cluster-_acme", "team")), true},
		{"the route's backend slice", hubSlice(own, prevLabels("cluster-acme", "team")), true},
		{"another route's name", hubSlice(BackendObjectName("22222222-2222-2222-2222-222222222222", 0, 0), prevLabels("cluster-acme", "team")), false},
		{"another project's", hubSlice(own, prevLabels("cluster-other", "team")), false},
		{"another namespace's", hubSlice(own, prevLabels("cluster-acme", "other")), false},
		{"labelled for a Gateway", hubSlice(own, map[string]string{anchor.LabelClusterName: "cluster-acme", anchor.LabelGroup: gatewayv1.GroupName, anchor.LabelKind: "Gateway", anchor.LabelNamespace: "team"}), false},
	}
	for _, tc := range cases {
		if got := isPreviousBackendSliceOf(tc.obj, route); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.reason, got, tc.want)
		}
	}
}

// TestIsPreviousBackendOf: the previous manager's Service and BackendTLSPolicy of a
// route's backend (controlled by the hub route, labelled for nothing) and its backend
// slice are deleted when the backend is refused; this manager's own objects, another
// route's, and a kind a backend does not have are not the previous manager's.
func TestIsPreviousBackendOf(t *testing.T) {
	route := anchor.Owner{Project: "acme", Group: gatewayv1.GroupName, Kind: kindHTTPRoute, Namespace: "team", Name: "web", UID: "11111111-1111-1111-1111-111111111111"}
	own := BackendObjectName(route.UID, 0, 0)
	byRoute := func(name string) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: "gateway.networking.k8s.io/v1", Kind: kindHTTPRoute, Name: name, UID: "hub-route", Controller: ptr.To(true)}}
	}
	meta := func(name string, owners []metav1.OwnerReference, labels map[string]string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, OwnerReferences: owners, Labels: labels}
	}
	ours := map[string]string{anchor.LabelKind: kindHTTPRoute, anchor.LabelNamespace: "team", anchor.LabelName: "web"}
	prevSlice := map[string]string{anchor.LabelClusterName: "cluster-acme", anchor.LabelGroup: discoveryv1.GroupName, anchor.LabelKind: kindEndpointSlice, anchor.LabelNamespace: "team", anchor.LabelName: "web-0-0"}
	cases := []struct {
		reason string
		obj    client.Object
		want   bool
	}{
		{"the previous manager's Service", &corev1.Service{ObjectMeta: meta(own, byRoute("web"), nil)}, true},
		{"the previous manager's BackendTLSPolicy", &gatewayv1.BackendTLSPolicy{ObjectMeta: meta(own, byRoute("web"), nil)}, true},
		{"the previous manager's slice", &discoveryv1.EndpointSlice{ObjectMeta: meta(own, byRoute("web"), prevSlice)}, true},
		{"this manager's Service", &corev1.Service{ObjectMeta: meta(own, nil, ours)}, false},
		{"labelled, though controlled by the route", &corev1.Service{ObjectMeta: meta(own, byRoute("web"), ours)}, false},
		{"controlled by another hub route", &corev1.Service{ObjectMeta: meta(own, byRoute("other"), nil)}, false},
		{"controlled by nothing", &corev1.Service{ObjectMeta: meta(own, nil, nil)}, false},
		{"another route's name", &corev1.Service{ObjectMeta: meta(BackendObjectName("22222222-2222-2222-2222-222222222222", 0, 0), byRoute("web"), nil)}, false},
		{"a kind a backend does not have", &corev1.ConfigMap{ObjectMeta: meta(own, byRoute("web"), nil)}, false},
	}
	for _, tc := range cases {
		if got := isPreviousBackendOf(tc.obj, route); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.reason, got, tc.want)
		}
	}
}
