package gateway

import (
	"strings"
	"testing"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"anchorage/api/v1alpha"
)

// TestBackendPolicyRefusesWhatATenantMayNotAimAt: hostile backend hosts, each in the
// form it reaches the check (a URL's host as url.Parse gives it, or an ExternalName).
func TestBackendPolicyRefusesWhatATenantMayNotAimAt(t *testing.T) {
	cases := []struct {
		host string
		want string // substring of the refusal; "" for allowed
	}{
		{"origin.example.org", ""},
		{"api.example.com", ""},
		{"xn--bcher-kva.example.com", ""}, // an IDN in its A-label form
		{"kubernetes.default", "is not a public DNS name"},
		{"a-b-c-d.default.pod", "is not a public DNS name"},
		{"metadata", "is not a public DNS name"},
		{"db.corp", "is not a public DNS name"},
		{"localhost", "a single label"},
		{"localhost.", "a single label"},
		{"backend.demo.localhost", "top-level domain \"localhost\""},
		{"LOCALHOST", "a single label"},
		{"metadata.google.internal", "top-level domain \"internal\""},
		{"kubernetes.default.svc", "top-level domain \"svc\""},
		{"kubernetes.default.svc.cluster.local", "top-level domain \"local\""},
		{"printer.local", "top-level domain \"local\""},
		{"1.0.0.127.in-addr.arpa", "arpa is the infrastructure domain"},
		{"notlocalhost.example.org", ""},
		{"127.1", "reads as an IP address"}, // the other spellings: netpolicy's TestRefusedName
		{"", "no host"},
	}
	for _, tc := range cases {
		got := refusedBackendHost(tc.host, DefaultBackendReservedDomains)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("refusedBackendHost(%q) = %q, want %q", tc.host, got, tc.want)
		}
	}
	// The list is the operator's, on top of the rule: without localhost, a .localhost
	// name is still no public name; with example.com, a public name in it is refused.
	if got := refusedBackendHost("backend.demo.localhost", []string{"svc"}); !strings.Contains(got, "is not a public DNS name") {
		t.Errorf("with localhost not reserved: %q", got)
	}
	if got := refusedBackendHost("db.corp.example.com", []string{"corp.example.com"}); !strings.Contains(got, "reserved domain corp.example.com") {
		t.Errorf("with corp.example.com reserved: %q", got)
	}
}

// A proxy's endpoints go through the same check, whatever else parseEndpoint says:
// userinfo tricks are refused there, numeric and reserved hosts here.
func TestRefusedBackends(t *testing.T) {
	proxy := func(endpoint string) *v1alpha.HTTPProxy {
		return &v1alpha.HTTPProxy{Spec: v1alpha.HTTPProxySpec{Hostnames: []gatewayv1.Hostname{"a.example.com"},
			Rules: []v1alpha.HTTPProxyRule{{Backends: []v1alpha.HTTPProxyBackend{{Endpoint: endpoint}}}}}}
	}
	for endpoint, want := range map[string]string{
		"https://origin.example.org":                      "",
		"http://metadata.google.internal/computeMetadata": `host "metadata.google.internal" is not a public DNS name`,
		"http://evil.example.org@localhost:8080":          `host "localhost" is not a public DNS name`,
		"http://0x7f.0.0.1:9000":                          "reads as an IP address",
		"http://kubernetes.default":                       `host "kubernetes.default" is not a public DNS name`,
		"http://KUBE-DNS.KUBE-SYSTEM.:53":                 `host "KUBE-DNS.KUBE-SYSTEM." is not a public DNS name`,
	} {
		got := refusedBackends(proxy(endpoint), DefaultBackendReservedDomains, nil)
		if (want == "") != (got == "") || !strings.Contains(got, want) {
			t.Errorf("%s: got %q, want %q", endpoint, got, want)
		}
	}
}
