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
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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
					// No name and the catch-all match the server would default to. An IP
					// is fine as a backend host.
					Matches:  everyRequest(),
					Backends: []v1alpha.HTTPProxyBackend{{Endpoint: "http://10.0.0.5"}},
				},
			},
		},
	}
}

// everyRequest is the matches list the API server defaults a rule's matches to.
func everyRequest() []gatewayv1.HTTPRouteMatch {
	return []gatewayv1.HTTPRouteMatch{{
		Path: &gatewayv1.HTTPPathMatch{Type: ptr.To(gatewayv1.PathMatchPathPrefix), Value: ptr.To("/")},
	}}
}

// exactMatches returns n distinct exact path matches, prefixed so that two rules' lists
// differ.
func exactMatches(prefix string, n int) []gatewayv1.HTTPRouteMatch {
	var ms []gatewayv1.HTTPRouteMatch
	for i := range n {
		ms = append(ms, gatewayv1.HTTPRouteMatch{
			Path: &gatewayv1.HTTPPathMatch{Type: ptr.To(gatewayv1.PathMatchExact), Value: ptr.To(fmt.Sprintf("/%s/m%d", prefix, i))},
		})
	}
	return ms
}

// largestProxy has as many rules and matches as the schema allows: it must still be
// accepted (the CEL cost of a full object stays within the API server's budget). Its
// 16 rules of 8 matches reach the total of 128 matches exactly.
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
		rule.Matches = exactMatches(fmt.Sprintf("r%d", i), 8)
		p.Spec.Rules = append(p.Spec.Rules, rule)
	}
	return p
}

// widestRuleProxy has one rule with the most matches a rule may have, and a second
// rule that brings the total to the limit of 128.
func widestRuleProxy(name string) *v1alpha.HTTPProxy {
	p := validProxy(name)
	p.Spec.Rules[0].Matches = exactMatches("a", 64)
	p.Spec.Rules[1].Matches = exactMatches("b", 64)
	return p
}

// instanceBackend is a backend of the instance kind, which the schema accepts for the
// previous manager's proxies.
func instanceBackend() v1alpha.HTTPProxyBackend {
	return v1alpha.HTTPProxyBackend{Instance: &v1alpha.InstanceBackendRef{Name: "web-0", Port: 8080}}
}

// connectorBackend is an endpoint reached through a connector.
func connectorBackend() v1alpha.HTTPProxyBackend {
	return v1alpha.HTTPProxyBackend{
		Endpoint:  "http://localhost:3000",
		Connector: &v1alpha.ConnectorReference{Name: "office"},
	}
}

func TestValidProxiesAreAccepted(t *testing.T) {
	c := requireAPIServer(t)
	for _, tc := range []struct {
		name  string
		proxy *v1alpha.HTTPProxy
	}{
		{"typical", validProxy("valid-typical")},
		{"largest", largestProxy("valid-largest")},
		{"64 matches in one rule", widestRuleProxy("valid-widest-rule")},
		{"instance backend", func() *v1alpha.HTTPProxy {
			p := validProxy("valid-instance")
			p.Spec.Rules[1].Backends = []v1alpha.HTTPProxyBackend{instanceBackend()}
			return p
		}()},
		{"connector backend", func() *v1alpha.HTTPProxy {
			p := validProxy("valid-connector")
			p.Spec.Rules[1].Backends = []v1alpha.HTTPProxyBackend{connectorBackend()}
			return p
		}()},
		{"IP address hostname", func() *v1alpha.HTTPProxy {
			// The previous manager stored these; this manager refuses them with a
			// condition, not the schema.
			p := validProxy("valid-ip-hostname")
			p.Spec.Hostnames = append(p.Spec.Hostnames, "192.0.2.10")
			return p
		}()},
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
			name:   "no endpoint",
			mutate: func(p *v1alpha.HTTPProxy) { p.Spec.Rules[0].Backends[0].Endpoint = "" },
			field:  "spec.rules[0].backends[0]", message: "endpoint is required unless instance is set",
		},
		{
			name: "connector without endpoint",
			mutate: func(p *v1alpha.HTTPProxy) {
				b := connectorBackend()
				b.Endpoint = ""
				p.Spec.Rules[0].Backends[0] = b
			},
			field: "spec.rules[0].backends[0]", message: "endpoint is required unless instance is set",
		},
		{
			name: "instance with endpoint",
			mutate: func(p *v1alpha.HTTPProxy) {
				b := instanceBackend()
				b.Endpoint = "https://api.example.com"
				p.Spec.Rules[0].Backends[0] = b
			},
			field: "spec.rules[0].backends[0]", message: "instance must not be combined with endpoint or connector",
		},
		{
			name: "instance with connector",
			mutate: func(p *v1alpha.HTTPProxy) {
				b := instanceBackend()
				b.Connector = &v1alpha.ConnectorReference{Name: "office"}
				p.Spec.Rules[0].Backends[0] = b
			},
			field: "spec.rules[0].backends[0]", message: "instance must not be combined with endpoint or connector",
		},
		{
			name: "instance port zero",
			mutate: func(p *v1alpha.HTTPProxy) {
				b := instanceBackend()
				b.Instance.Port = 0
				p.Spec.Rules[0].Backends[0] = b
			},
			field: "spec.rules[0].backends[0].instance.port", message: "greater than or equal to 1",
		},
		{
			name: "instance port above 65535",
			mutate: func(p *v1alpha.HTTPProxy) {
				b := instanceBackend()
				b.Instance.Port = 65536
				p.Spec.Rules[0].Backends[0] = b
			},
			field: "spec.rules[0].backends[0].instance.port", message: "less than or equal to 65535",
		},
		{
			name:   "65 matches in one rule",
			mutate: func(p *v1alpha.HTTPProxy) { p.Spec.Rules[0].Matches = exactMatches("a", 65) },
			field:  "spec.rules[0].matches", message: "Too many",
		},
		{
			name: "129 matches in total",
			mutate: func(p *v1alpha.HTTPProxy) {
				p.Spec.Rules[0].Matches = exactMatches("a", 64)
				p.Spec.Rules[1].Matches = exactMatches("b", 64)
				p.Spec.Rules = append(p.Spec.Rules, v1alpha.HTTPProxyRule{
					Matches:  exactMatches("c", 1),
					Backends: []v1alpha.HTTPProxyBackend{{Endpoint: "https://c.example.com"}},
				})
			},
			field: "spec.rules", message: "at most 128 matches in total",
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

// TestOmittedMatchesDefaultToEveryRequest checks the default the previous manager's
// schema had: a rule written without matches is stored with one prefix match on "/".
func TestOmittedMatchesDefaultToEveryRequest(t *testing.T) {
	c := requireAPIServer(t)
	g := NewWithT(t)
	ctx := context.Background()
	p := validProxy("default-matches")
	p.Spec.Rules[1].Matches = nil
	g.Expect(c.Create(ctx, p)).To(Succeed())
	t.Cleanup(func() { _ = c.Delete(context.Background(), p) })

	var got v1alpha.HTTPProxy
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(p), &got)).To(Succeed())
	if diff := cmp.Diff(everyRequest(), got.Spec.Rules[1].Matches); diff != "" {
		t.Errorf("defaulted matches differ (-want +got):\n%s", diff)
	}
}

// TestEmptyMatchesAreRefused sends an explicit empty matches list, which the Go type
// cannot (omitempty drops it and the default applies): it is refused, as it was by the
// previous manager's schema.
func TestEmptyMatchesAreRefused(t *testing.T) {
	c := requireAPIServer(t)
	g := NewWithT(t)
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha.GroupVersion.String(),
		"kind":       "HTTPProxy",
		"metadata":   map[string]any{"namespace": "default", "name": "invalid-empty-matches"},
		"spec": map[string]any{"rules": []any{map[string]any{
			"matches":  []any{},
			"backends": []any{map[string]any{"endpoint": "https://api.example.com"}},
		}}},
	}}
	err := c.Create(context.Background(), u)
	if err == nil {
		_ = c.Delete(context.Background(), u)
	}
	g.Expect(err).To(HaveOccurred(), "the API server accepted an empty matches list")
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want an Invalid error, got %v", err)
	g.Expect(err.Error()).To(And(ContainSubstring("spec.rules[0].matches:"), ContainSubstring("at least 1 items")))
}
