package gateway

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
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
