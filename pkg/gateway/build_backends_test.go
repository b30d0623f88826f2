package gateway

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"anchorage/api/v1alpha"
)

func TestBuildHubBackend(t *testing.T) {
	external := func(host, scheme string, port int32, annotations map[string]string) *corev1.Service {
		return &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "web-backend-0", Annotations: annotations},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: host,
				Ports: []corev1.ServicePort{{Name: scheme, Port: port, AppProtocol: ptr.To(scheme)}}},
		}
	}
	cases := []struct {
		reason     string
		svc        *corev1.Service
		port       gatewayv1.PortNumber
		wantErr    string
		wantHost   string
		wantPolicy string // validation hostname; "" for no policy
	}{
		{"http backend: Service and FQDN slice, no policy", external("origin.example.org", "http", 8080, nil), 8080, "", "origin.example.org", ""},
		{"https backend: a policy validating the host", external("api.example.org", "https", 443, nil), 443, "", "api.example.org", "api.example.org"},
		{"https backend with a certificate hostname of its own", external("10-0-0-1.example.org", "https", 443, map[string]string{BackendCertHostnameAnnotation: "origin.internal.example"}), 443, "", "10-0-0-1.example.org", "origin.internal.example"},
		{"no Service", nil, 80, "Service not found", "", ""},
		{"a Service of the plane's own pods", &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "app"}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, Ports: []corev1.ServicePort{{Port: 80}}}}, 80, "only an ExternalName Service", "", ""},
		{"a port the Service lacks", external("origin.example.org", "http", 80, nil), 81, "has no port 81", "", ""},
	}
	for _, tc := range cases {
		name := BackendObjectName("6f1c8f4e-93b0-4d2c-9d53-2c8f5a7e1b11", 15, 0)
		b, err := buildHubBackend(tc.svc, tc.port, name, "ns-1")
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: got error %v, want one saying %q", tc.reason, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.reason, err)
			continue
		}
		if errs := validation.IsDNS1035Label(b.Service.Name); len(errs) > 0 {
			t.Errorf("%s: Service name %q: %v", tc.reason, b.Service.Name, errs)
		}
		if b.Service.Spec.ClusterIP != corev1.ClusterIPNone || len(b.Service.Spec.Ports) != 1 || b.Service.Spec.Ports[0].Port != int32(tc.port) {
			t.Errorf("%s: Service spec %+v, want headless on port %d", tc.reason, b.Service.Spec, tc.port)
		}
		s := b.Slice
		if s.AddressType != discoveryv1.AddressTypeFQDN || s.Labels[discoveryv1.LabelServiceName] != b.Service.Name ||
			len(s.Endpoints) != 1 || s.Endpoints[0].Addresses[0] != tc.wantHost || *s.Ports[0].Name != b.Service.Spec.Ports[0].Name {
			t.Errorf("%s: EndpointSlice %+v does not name %s behind the Service's port", tc.reason, s, tc.wantHost)
		}
		switch {
		case tc.wantPolicy == "" && b.Policy != nil:
			t.Errorf("%s: a BackendTLSPolicy for a plain HTTP backend", tc.reason)
		case tc.wantPolicy != "" && (b.Policy == nil || string(b.Policy.Spec.Validation.Hostname) != tc.wantPolicy ||
			string(*b.Policy.Spec.TargetRefs[0].SectionName) != b.Service.Spec.Ports[0].Name):
			t.Errorf("%s: policy %+v, want one validating %s on the Service's port", tc.reason, b.Policy, tc.wantPolicy)
		}
	}
}

// TestIPBackendsFromProxyToHub: a proxy's IPv4 and IPv6 endpoints become upstream
// EndpointSlices of their family named by the route, and those become hub slices of
// the same family holding the address behind a headless Service; https to an IP
// address validates and sends tls.hostname.
func TestIPBackendsFromProxyToHub(t *testing.T) {
	p := proxy("web", []gatewayv1.Hostname{"a.example.com"},
		backendRule("http://203.0.113.10:8080"),
		v1alpha.HTTPProxyRule{Backends: []v1alpha.HTTPProxyBackend{{Endpoint: "https://[2001:DB8::1]", TLS: &v1alpha.HTTPProxyBackendTLS{Hostname: ptr.To("origin.example.org")}}}},
	)
	objs, err := buildProxyObjects(p, nil, "cls", DefaultConfig().Platform)
	if err != nil {
		t.Fatal(err)
	}
	if len(objs.Services) != 0 || len(objs.Slices) != 2 {
		t.Fatalf("got %d Services and %d EndpointSlices, want no Service and a slice per IP backend", len(objs.Services), len(objs.Slices))
	}
	cases := []struct {
		reason      string
		addressType discoveryv1.AddressType
		address     string
		port        int32
		rewriteHost string // the route's Host rewrite; "" for none
		policyHost  string // the hub policy's hostname; "" for no policy
	}{
		{"http to IPv4: the client's Host passes", discoveryv1.AddressTypeIPv4, "203.0.113.10", 8080, "", ""},
		{"https to IPv6: canonical address, tls.hostname checked and sent", discoveryv1.AddressTypeIPv6, "2001:db8::1", 443, "origin.example.org", "origin.example.org"},
	}
	for i, tc := range cases {
		up := objs.Slices[i]
		if !metav1.IsControlledBy(up, p) || up.Labels[discoveryv1.LabelManagedBy] != endpointSliceManagedBy || up.Name != backendServiceName("web", i) {
			t.Errorf("%s: upstream slice %s not the proxy's, labelled managed by us: %+v", tc.reason, up.Name, up.ObjectMeta)
		}
		if up.AddressType != tc.addressType || up.Endpoints[0].Addresses[0] != tc.address {
			t.Errorf("%s: upstream slice %s %v, want %s %s", tc.reason, up.AddressType, up.Endpoints[0].Addresses, tc.addressType, tc.address)
		}
		rule := objs.Route.Spec.Rules[i]
		ref := rule.BackendRefs[0].BackendObjectReference
		if !isSliceRef(ref) || string(ref.Name) != up.Name || int32(*ref.Port) != tc.port {
			t.Errorf("%s: route backendRef %+v, want the slice %s on port %d", tc.reason, ref, up.Name, tc.port)
		}
		var rewrite string
		for _, f := range rule.Filters {
			if f.URLRewrite != nil && f.URLRewrite.Hostname != nil {
				rewrite = string(*f.URLRewrite.Hostname)
			}
		}
		if rewrite != tc.rewriteHost {
			t.Errorf("%s: Host rewritten to %q, want %q", tc.reason, rewrite, tc.rewriteHost)
		}

		name := BackendObjectName("6f1c8f4e-93b0-4d2c-9d53-2c8f5a7e1b11", i, 0)
		b, err := buildHubBackendFromSlice(up, gatewayv1.PortNumber(tc.port), name, "ns-1")
		if err != nil {
			t.Errorf("%s: %v", tc.reason, err)
			continue
		}
		if b.Service.Spec.ClusterIP != corev1.ClusterIPNone || b.Service.Spec.Ports[0].Port != tc.port {
			t.Errorf("%s: hub Service %+v, want headless on %d", tc.reason, b.Service.Spec, tc.port)
		}
		s := b.Slice
		if s.AddressType != tc.addressType || len(s.Endpoints) != 1 || len(s.Endpoints[0].Addresses) != 1 || s.Endpoints[0].Addresses[0] != tc.address ||
			s.Labels[discoveryv1.LabelServiceName] != name || *s.Ports[0].Port != tc.port || *s.Ports[0].Name != b.Service.Spec.Ports[0].Name {
			t.Errorf("%s: hub slice %+v, want %s %s behind the Service's port", tc.reason, s, tc.addressType, tc.address)
		}
		switch {
		case tc.policyHost == "" && b.Policy != nil:
			t.Errorf("%s: a BackendTLSPolicy for plain HTTP", tc.reason)
		case tc.policyHost != "" && (b.Policy == nil || string(b.Policy.Spec.Validation.Hostname) != tc.policyHost):
			t.Errorf("%s: policy %+v, want one validating %s", tc.reason, b.Policy, tc.policyHost)
		}
	}

	// https to an IP address without tls.hostname is refused at the proxy.
	_, err = buildProxyObjects(proxy("web", nil, backendRule("https://203.0.113.10")), nil, "cls", DefaultConfig().Platform)
	if inv := (*invalidError)(nil); !errors.As(err, &inv) || !strings.Contains(err.Error(), "https to the IP address 203.0.113.10 needs tls.hostname") {
		t.Errorf("https without tls.hostname: %v", err)
	}
}

// A hub slice whose backend moved between a DNS name and an IP address is replaced, not
// updated: its address type is immutable.
func TestCopyEndpointSliceRefusesAnotherAddressType(t *testing.T) {
	have := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "s"}, AddressType: discoveryv1.AddressTypeFQDN}
	want := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "s"}, AddressType: discoveryv1.AddressTypeIPv4}
	var changed *addressTypeChangedError
	if err := copyEndpointSlice(have, want); !errors.As(err, &changed) {
		t.Errorf("got %v, want an addressTypeChangedError", err)
	}
	if err := copyBackendSlice(have, want); !errors.As(err, &changed) {
		t.Errorf("upstream: got %v, want an addressTypeChangedError", err)
	}
}
