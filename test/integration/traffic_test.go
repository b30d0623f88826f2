package integration

import (
	"context"
	"fmt"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"

	"anchorage/api/v1alpha"
	"anchorage/internal/app"
	"anchorage/internal/harness"
	"anchorage/internal/testenv"
)

// The traffic tests judge the hub by what an edge makes of it: the hub objects of each
// proxy go through Envoy Gateway's translator (harness.Edge), and the test reads its
// verdict (route status) and the xDS it produces (listeners, virtual hosts, clusters).

// trafficCases are the proxies the oracle test programs: the sample and one of each
// shape a tenant writes.
func trafficCases(t *testing.T) []*v1alpha.HTTPProxy {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "samples", "networking_v1alpha_httpproxy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	sample := &v1alpha.HTTPProxy{}
	if err := yaml.UnmarshalStrict(raw, sample); err != nil {
		t.Fatal(err)
	}
	sample.ObjectMeta = metav1.ObjectMeta{Name: "sample"}
	prefix := func(p string) []gatewayv1.HTTPRouteMatch {
		return []gatewayv1.HTTPRouteMatch{{Path: &gatewayv1.HTTPPathMatch{Type: ptr.To(gatewayv1.PathMatchPathPrefix), Value: ptr.To(p)}}}
	}
	backend := func(endpoint string) []v1alpha.HTTPProxyBackend {
		return []v1alpha.HTTPProxyBackend{{Endpoint: endpoint}}
	}
	proxy := func(name string, hosts []gatewayv1.Hostname, rules ...v1alpha.HTTPProxyRule) *v1alpha.HTTPProxy {
		return &v1alpha.HTTPProxy{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha.HTTPProxySpec{Hostnames: hosts, Rules: rules}}
	}
	return []*v1alpha.HTTPProxy{
		sample,
		proxy("plain-http", []gatewayv1.Hostname{"plain.example.com"},
			v1alpha.HTTPProxyRule{Backends: backend("http://origin.example.org:8080")}),
		proxy("https-backend", []gatewayv1.Hostname{"secure.example.com"},
			v1alpha.HTTPProxyRule{Backends: backend("https://secure-origin.example.org")}),
		proxy("path-rewrite", []gatewayv1.Hostname{"rewrite.example.com"},
			v1alpha.HTTPProxyRule{Matches: prefix("/api"), Backends: backend("https://api.example.org/v2")}),
		proxy("many-hosts", []gatewayv1.Hostname{"one.example.com", "two.example.com", "three.example.com"},
			v1alpha.HTTPProxyRule{Backends: backend("http://shared.example.org")}),
		proxy("many-rules", []gatewayv1.Hostname{"rules.example.com"},
			v1alpha.HTTPProxyRule{Name: ptr.To(gatewayv1.SectionName("static")), Matches: prefix("/static"), Backends: backend("http://static.example.org")},
			v1alpha.HTTPProxyRule{Name: ptr.To(gatewayv1.SectionName("api")), Matches: prefix("/api"), Backends: backend("https://api.example.org:8443")},
			v1alpha.HTTPProxyRule{Name: ptr.To(gatewayv1.SectionName("rest")), Backends: backend("http://rest.example.org")}),
		proxy("redirect-only", []gatewayv1.Hostname{"old.example.com"},
			v1alpha.HTTPProxyRule{Filters: []gatewayv1.HTTPRouteFilter{{
				Type:            gatewayv1.HTTPRouteFilterRequestRedirect,
				RequestRedirect: &gatewayv1.HTTPRequestRedirectFilter{Hostname: ptr.To(gatewayv1.PreciseHostname("new.example.com")), StatusCode: ptr.To(301)},
			}}}),
	}
}

// TestEdgeServesEveryProgrammedProxy: every proxy of trafficCases, once Programmed, is
// served by the edge as Envoy Gateway reads the hub: its route Accepted with every
// reference resolved, a cluster per backend reaching the backend's host and port (with
// TLS validated against the backend's hostname for https), the request's Host rewritten
// to the backend and its path prefix replaced where the endpoint has a path, and an
// HTTPS listener filter chain and a virtual host per hostname.
func TestEdgeServesEveryProgrammedProxy(t *testing.T) {
	gt := newGatewayTest(t, planeA)
	edge := gt.startEdge()
	gt.startManager("traffic", edgeReportsStatus)
	cases := trafficCases(t)
	for _, p := range cases {
		p.Namespace = gt.ns.Name
		gt.createProxy(p)
	}
	for _, p := range cases {
		gt.waitProgrammed(p.Name)
	}
	v, err := edge.Translate(gt.ctx, gt.hubNS())
	gt.g.Expect(err).NotTo(HaveOccurred())
	for _, p := range cases {
		t.Run(p.Name, func(t *testing.T) {
			expectServed(t, v, gt.hubNS(), p)
		})
	}
	if t.Failed() {
		t.Logf("translator input:\n%s", v.Input)
	}
}

// expectServed checks the edge's verdict v for proxy p, whose hub copies live in hubNS.
func expectServed(t *testing.T, v *harness.EdgeVerdict, hubNS string, p *v1alpha.HTTPProxy) {
	t.Helper()
	g := NewWithT(t)
	var route *gatewayv1.HTTPRoute
	for i := range v.HTTPRoutes {
		if v.HTTPRoutes[i].Name == p.Name {
			route = &v.HTTPRoutes[i]
		}
	}
	g.Expect(route).NotTo(BeNil(), "the edge sees no HTTPRoute %s", p.Name)
	g.Expect(route.Status.Parents).NotTo(BeEmpty(), "the edge gives HTTPRoute %s no parent status", p.Name)
	for _, ps := range route.Status.Parents {
		for _, typ := range []string{string(gatewayv1.RouteConditionAccepted), string(gatewayv1.RouteConditionResolvedRefs)} {
			c := meta.FindStatusCondition(ps.Conditions, typ)
			g.Expect(c).NotTo(BeNil(), "route %s: no %s condition", p.Name, typ)
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue), "route %s: %s=%s %s: %s", p.Name, typ, c.Status, c.Reason, c.Message)
		}
	}

	clusters, err := harness.Resources[harness.EnvoyCluster](v, harness.XDSCluster)
	g.Expect(err).NotTo(HaveOccurred())
	byName := map[string]harness.EnvoyCluster{}
	for _, c := range clusters {
		byName[c.Name] = c
	}
	routeConfigs, err := harness.Resources[harness.EnvoyRouteConfig](v, harness.XDSRoutes)
	g.Expect(err).NotTo(HaveOccurred())
	for i, rule := range p.Spec.Rules {
		// Envoy Gateway names a rule's cluster httproute/<ns>/<name>/rule/<i>, with
		// /backend/<j> after it when backends carry filters of their own.
		ruleCluster := fmt.Sprintf("httproute/%s/%s/rule/%d", hubNS, p.Name, i)
		var ruleClusters []string
		for name := range byName {
			if name == ruleCluster || strings.HasPrefix(name, ruleCluster+"/") {
				ruleClusters = append(ruleClusters, name)
			}
		}
		if len(rule.Backends) == 0 {
			g.Expect(ruleClusters).To(BeEmpty(), "rule %d has no backend, yet the edge has a cluster for it", i)
			g.Expect(harness.RedirectsOf(routeConfigs, p.Name)).NotTo(BeEmpty(), "rule %d redirects, yet the edge has no redirect route", i)
			continue
		}
		u, err := url.Parse(rule.Backends[0].Endpoint)
		g.Expect(err).NotTo(HaveOccurred())
		port := u.Port()
		if port == "" {
			port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
		}
		g.Expect(ruleClusters).To(HaveLen(1), "one cluster %s for rule %d's backend; clusters %v", ruleCluster, i, slices.Sorted(maps.Keys(byName)))
		clusterName := ruleClusters[0]
		c := byName[clusterName]
		g.Expect(c.Endpoints()).To(ConsistOf(u.Hostname()+":"+port), "cluster %s endpoints", clusterName)
		g.Expect(c.Type).To(Equal("STRICT_DNS"), "cluster %s resolves the backend's hostname", clusterName)
		if u.Scheme == "https" {
			tlsName := u.Hostname()
			if tls := rule.Backends[0].TLS; tls != nil && tls.Hostname != nil {
				tlsName = *tls.Hostname
			}
			snis, names := c.SNIAndNames()
			g.Expect(snis).To(ConsistOf(tlsName), "cluster %s: TLS towards the https backend, with its hostname as SNI", clusterName)
			g.Expect(names).To(ConsistOf(tlsName), "cluster %s validates the backend's certificate for its hostname", clusterName)
		} else {
			g.Expect(c.TLS()).To(BeEmpty(), "cluster %s: TLS towards an http backend", clusterName)
		}
		rewrites := harness.RewritesTo(routeConfigs, clusterName)
		g.Expect(rewrites).NotTo(BeEmpty(), "no route sends traffic to cluster %s", clusterName)
		for _, r := range rewrites {
			g.Expect(r.HostRewriteLiteral).To(Equal(u.Hostname()), "route to %s rewrites Host", clusterName)
			if path := strings.TrimRight(u.Path, "/"); path != "" {
				got := r.PrefixRewrite
				if r.RegexRewrite != nil {
					got = r.RegexRewrite.Substitution
				}
				g.Expect(got).To(HavePrefix(path), "route to %s replaces the matched prefix with the endpoint's path", clusterName)
			}
		}
	}

	listeners, err := harness.Resources[harness.EnvoyListener](v, harness.XDSListener)
	g.Expect(err).NotTo(HaveOccurred())
	for _, h := range p.Spec.Hostnames {
		var chains []string
		for _, l := range listeners {
			for _, fc := range l.FilterChains {
				if l.Address.SocketAddress.PortValue != 80 && slices.Contains(fc.FilterChainMatch.ServerNames, string(h)) {
					chains = append(chains, l.Name+"/"+fc.Name)
				}
			}
		}
		g.Expect(chains).NotTo(BeEmpty(), "no HTTPS filter chain serves %s", h)
		g.Expect(harness.VirtualHostsFor(routeConfigs, string(h))).To(BeNumerically(">=", 2), "virtual hosts for %s on HTTP and HTTPS", h)
	}
}

// startEdge starts an edge serving this test's hub namespace until the test ends.
func (gt *gatewayTest) startEdge() *harness.Edge {
	gt.t.Helper()
	edge, err := harness.NewEdge(hub.Client, "anchorage-edge")
	gt.g.Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(gt.ctx)
	done := make(chan struct{})
	go func() { defer close(done); edge.Serve(ctx, harness.Namespaces(gt.hubNS()), 250*time.Millisecond) }()
	gt.t.Cleanup(func() {
		cancel()
		<-done
		if err := edge.LastError(); err != nil && gt.t.Failed() {
			gt.t.Logf("the edge's last round failed: %v", err)
		}
	})
	return edge
}

// edgeReportsStatus runs the manager as on a hub whose edge controller writes status:
// Programmed follows the edge's verdict.
func edgeReportsStatus(o *app.Options) { o.Gateway.AssumeWrittenIsProgrammed = false }
