package v1alpha_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"anchorage/api/v1alpha"
)

// validProxy returns a proxy the API server must accept. Every field the server would
// default is set explicitly, so the proxy reads back exactly as written.
func validProxy(name string) *v1alpha.HTTPProxy {
	return &v1alpha.HTTPProxy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: v1alpha.HTTPProxySpec{
			Hostnames: []gatewayv1.Hostname{"www.example.com", "api.example.com"},
			Rules: []v1alpha.HTTPProxyRule{
				{
					Name: ptr.To(gatewayv1.SectionName("api")),
					Matches: []gatewayv1.HTTPRouteMatch{{
						Path: &gatewayv1.HTTPPathMatch{Type: ptr.To(gatewayv1.PathMatchPathPrefix), Value: ptr.To("/api")},
					}},
					Filters: []gatewayv1.HTTPRouteFilter{{
						Type: gatewayv1.HTTPRouteFilterRequestHeaderModifier,
						RequestHeaderModifier: &gatewayv1.HTTPHeaderFilter{
							Set: []gatewayv1.HTTPHeader{{Name: "X-Proxied-By", Value: "anchorage"}},
						},
					}},
					Backends: []v1alpha.HTTPProxyBackend{{Endpoint: "https://api.internal.example.com:8443/v1"}},
				},
				{
					// No name, no matches: a catch-all rule. An IP is fine as a backend host.
					Backends: []v1alpha.HTTPProxyBackend{{Endpoint: "http://10.0.0.5"}},
				},
			},
		},
	}
}

// largestProxy has as many rules and matches as the schema allows: it must still be
// accepted (the CEL cost of a full object stays within the API server's budget).
func largestProxy(name string) *v1alpha.HTTPProxy {
	p := validProxy(name)
	p.Spec.Hostnames = nil
	for i := range 16 {
		p.Spec.Hostnames = append(p.Spec.Hostnames, gatewayv1.Hostname(fmt.Sprintf("h%d.example.com", i)))
	}
	p.Spec.Rules = nil
	for i := range 16 {
		rule := v1alpha.HTTPProxyRule{
			Name:     ptr.To(gatewayv1.SectionName(fmt.Sprintf("rule-%d", i))),
			Backends: []v1alpha.HTTPProxyBackend{{Endpoint: fmt.Sprintf("https://backend-%d.example.com", i)}},
		}
		for j := range 8 {
			rule.Matches = append(rule.Matches, gatewayv1.HTTPRouteMatch{
				Path: &gatewayv1.HTTPPathMatch{Type: ptr.To(gatewayv1.PathMatchExact), Value: ptr.To(fmt.Sprintf("/r%d/m%d", i, j))},
			})
		}
		p.Spec.Rules = append(p.Spec.Rules, rule)
	}
	return p
}

func TestValidProxiesAreAccepted(t *testing.T) {
	c := requireAPIServer(t)
	for _, tc := range []struct {
		name  string
		proxy *v1alpha.HTTPProxy
	}{
		{"typical", validProxy("valid-typical")},
		{"largest", largestProxy("valid-largest")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			want := tc.proxy.Spec.DeepCopy()
			g.Expect(c.Create(ctx, tc.proxy)).To(Succeed())
			t.Cleanup(func() { _ = c.Delete(context.Background(), tc.proxy) })

			var got v1alpha.HTTPProxy
			g.Expect(c.Get(ctx, client.ObjectKeyFromObject(tc.proxy), &got)).To(Succeed())
			if diff := cmp.Diff(*want, got.Spec); diff != "" {
				t.Errorf("spec read back differs (-written +read):\n%s", diff)
			}
		})
	}
}

func TestMalformedProxiesAreRefused(t *testing.T) {
	c := requireAPIServer(t)
	for _, tc := range []struct {
		name   string
		mutate func(*v1alpha.HTTPProxy)
		// field and message must both appear in the API server's error: the field so
		// a user knows where to look, the message so we know which rule refused it.
		field, message string
	}{
		{
			name:   "no rules",
			mutate: func(p *v1alpha.HTTPProxy) { p.Spec.Rules = nil },
			field:  "spec.rules", message: "Required value",
		},
		{
			name:   "empty rules",
			mutate: func(p *v1alpha.HTTPProxy) { p.Spec.Rules = []v1alpha.HTTPProxyRule{} },
			field:  "spec.rules", message: "at least 1 items",
		},
		{
			name:   "IP address hostname",
			mutate: func(p *v1alpha.HTTPProxy) { p.Spec.Hostnames = []gatewayv1.Hostname{"10.0.0.1"} },
			field:  "spec.hostnames[0]", message: "not an IP address",
		},
		{
			name:   "wildcard hostname",
			mutate: func(p *v1alpha.HTTPProxy) { p.Spec.Hostnames[1] = "*.example.com" },
			field:  "spec.hostnames[1]", message: "must not be a wildcard",
		},
		{
			name:   "hostname not a DNS name",
			mutate: func(p *v1alpha.HTTPProxy) { p.Spec.Hostnames[0] = "Www.Example.com" },
			field:  "spec.hostnames[0]", message: "should match",
		},
		{
			name:   "duplicate hostnames",
			mutate: func(p *v1alpha.HTTPProxy) { p.Spec.Hostnames[1] = p.Spec.Hostnames[0] },
			field:  "spec.hostnames[1]", message: "Duplicate value",
		},
		{
			name: "duplicate rule names",
			mutate: func(p *v1alpha.HTTPProxy) {
				p.Spec.Rules[1].Name = ptr.To(gatewayv1.SectionName("api"))
			},
			field: "spec.rules", message: "rule names must be unique",
		},
		{
			name:   "backend URL without host",
			mutate: func(p *v1alpha.HTTPProxy) { p.Spec.Rules[0].Backends[0].Endpoint = "https:///path" },
			field:  "spec.rules[0].backends[0].endpoint", message: "must be an http or https URL with a host",
		},
		{
			name:   "backend URL with scheme only",
			mutate: func(p *v1alpha.HTTPProxy) { p.Spec.Rules[1].Backends[0].Endpoint = "http://" },
			field:  "spec.rules[1].backends[0].endpoint", message: "must be an http or https URL with a host",
		},
		{
			name:   "backend URL with ftp scheme",
			mutate: func(p *v1alpha.HTTPProxy) { p.Spec.Rules[0].Backends[0].Endpoint = "ftp://files.example.com/" },
			field:  "spec.rules[0].backends[0].endpoint", message: "must be an http or https URL with a host",
		},
		{
			name:   "backend not a URL",
			mutate: func(p *v1alpha.HTTPProxy) { p.Spec.Rules[0].Backends[0].Endpoint = "api.example.com" },
			field:  "spec.rules[0].backends[0].endpoint", message: "must be an http or https URL with a host",
		},
		{
			name: "two backends",
			mutate: func(p *v1alpha.HTTPProxy) {
				p.Spec.Rules[0].Backends = append(p.Spec.Rules[0].Backends, v1alpha.HTTPProxyBackend{Endpoint: "https://b.example.com"})
			},
			field: "spec.rules[0].backends", message: "Too many",
		},
		{
			name: "redirect with a backend",
			mutate: func(p *v1alpha.HTTPProxy) {
				p.Spec.Rules[0].Filters = []gatewayv1.HTTPRouteFilter{{
					Type:            gatewayv1.HTTPRouteFilterRequestRedirect,
					RequestRedirect: &gatewayv1.HTTPRequestRedirectFilter{Scheme: ptr.To("https")},
				}}
			},
			field: "spec.rules[0]", message: "RequestRedirect filter must not be used together with backends",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			p := validProxy("invalid-" + strings.ToLower(strings.ReplaceAll(tc.name, " ", "-")))
			tc.mutate(p)
			err := c.Create(context.Background(), p)
			if err == nil {
				_ = c.Delete(context.Background(), p)
			}
			g.Expect(err).To(HaveOccurred(), "the API server accepted the malformed proxy")
			t.Logf("refused: %v", err)
			g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want an Invalid error, got %v", err)
			g.Expect(err.Error()).To(And(ContainSubstring(tc.field+":"), ContainSubstring(tc.message)))

			// The message must come from the named field itself, and nothing else may be
			// wrong with the proxy (the API server adds a field-less note when it skipped
			// CEL rules because of other errors).
			var causes []string
			for _, cause := range err.(apierrors.APIStatus).Status().Details.Causes {
				if cause.Field != "" && cause.Field != "<nil>" {
					causes = append(causes, cause.Field+": "+cause.Message)
				}
			}
			g.Expect(causes).To(ConsistOf(And(HavePrefix(tc.field+": "), ContainSubstring(tc.message))))
		})
	}
}
