package integration

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
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

// xDS type URLs the assertions read.
const (
	xdsCluster  = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
	xdsListener = "type.googleapis.com/envoy.config.listener.v3.Listener"
	xdsRoutes   = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration"
)

// envoyCluster is the part of an xDS Cluster the assertions read.
type envoyCluster struct {
	Name           string `json:"name"`
	Type           string `json:"type"`
	LoadAssignment struct {
		Endpoints []struct {
			LbEndpoints []struct {
				Endpoint struct {
					Address struct {
						SocketAddress struct {
							Address   string `json:"address"`
							PortValue int    `json:"portValue"`
						} `json:"socketAddress"`
					} `json:"address"`
				} `json:"endpoint"`
			} `json:"lbEndpoints"`
		} `json:"endpoints"`
	} `json:"loadAssignment"`
	TransportSocket        *envoyTransportSocket `json:"transportSocket"`
	TransportSocketMatches []struct {
		TransportSocket envoyTransportSocket `json:"transportSocket"`
	} `json:"transportSocketMatches"`
}

// envoyTransportSocket is the part of an upstream transport socket the assertions read.
type envoyTransportSocket struct {
	Name        string `json:"name"`
	TypedConfig struct {
		Sni              string `json:"sni"`
		CommonTLSContext struct {
			CombinedValidationContext struct {
				DefaultValidationContext struct {
					MatchTypedSubjectAltNames []struct {
						Matcher struct {
							Exact string `json:"exact"`
						} `json:"matcher"`
					} `json:"matchTypedSubjectAltNames"`
				} `json:"defaultValidationContext"`
			} `json:"combinedValidationContext"`
		} `json:"commonTlsContext"`
	} `json:"typedConfig"`
}

// tls returns the cluster's TLS transport sockets: Envoy Gateway puts the one a
// BackendTLSPolicy asks for in transportSocketMatches, behind a placeholder default.
func (c envoyCluster) tls() []envoyTransportSocket {
	var out []envoyTransportSocket
	if c.TransportSocket != nil && c.TransportSocket.Name == "envoy.transport_sockets.tls" {
		out = append(out, *c.TransportSocket)
	}
	for _, m := range c.TransportSocketMatches {
		if m.TransportSocket.Name == "envoy.transport_sockets.tls" {
			out = append(out, m.TransportSocket)
		}
	}
	return out
}

// endpoints returns the cluster's endpoint addresses as host:port.
func (c envoyCluster) endpoints() []string {
	var out []string
	for _, e := range c.LoadAssignment.Endpoints {
		for _, lb := range e.LbEndpoints {
			a := lb.Endpoint.Address.SocketAddress
			out = append(out, a.Address+":"+strconv.Itoa(a.PortValue))
		}
	}
	return out
}

// sniAndNames returns the SNI and the validated subject alt names of each TLS socket.
func (c envoyCluster) sniAndNames() (snis, names []string) {
	for _, ts := range c.tls() {
		snis = append(snis, ts.TypedConfig.Sni)
		for _, m := range ts.TypedConfig.CommonTLSContext.CombinedValidationContext.DefaultValidationContext.MatchTypedSubjectAltNames {
			names = append(names, m.Matcher.Exact)
		}
	}
	return snis, names
}

// envoyListener is the part of an xDS Listener the assertions read.
type envoyListener struct {
	Name    string `json:"name"`
	Address struct {
		SocketAddress struct {
			PortValue int `json:"portValue"`
		} `json:"socketAddress"`
	} `json:"address"`
	FilterChains []struct {
		Name             string `json:"name"`
		FilterChainMatch struct {
			ServerNames []string `json:"serverNames"`
		} `json:"filterChainMatch"`
	} `json:"filterChains"`
}

// envoyRouteConfig is the part of an xDS RouteConfiguration the assertions read.
type envoyRouteConfig struct {
	Name         string `json:"name"`
	VirtualHosts []struct {
		Name    string   `json:"name"`
		Domains []string `json:"domains"`
		Routes  []struct {
			Name     string            `json:"name"`
			Route    *envoyRouteAction `json:"route"`
			Redirect *struct {
				HostRedirect   string `json:"hostRedirect"`
				SchemeRedirect string `json:"schemeRedirect"`
				ResponseCode   string `json:"responseCode"`
			} `json:"redirect"`
		} `json:"routes"`
	} `json:"virtualHosts"`
}

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

	clusters, err := harness.Resources[envoyCluster](v, xdsCluster)
	g.Expect(err).NotTo(HaveOccurred())
	byName := map[string]envoyCluster{}
	for _, c := range clusters {
		byName[c.Name] = c
	}
	routeConfigs, err := harness.Resources[envoyRouteConfig](v, xdsRoutes)
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
			g.Expect(redirectsOf(routeConfigs, p.Name)).NotTo(BeEmpty(), "rule %d redirects, yet the edge has no redirect route", i)
			continue
		}
		u, err := url.Parse(rule.Backends[0].Endpoint)
		g.Expect(err).NotTo(HaveOccurred())
		port := u.Port()
		if port == "" {
			port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
		}
		g.Expect(ruleClusters).To(HaveLen(1), "one cluster %s for rule %d's backend; clusters %v", ruleCluster, i, keys(byName))
		clusterName := ruleClusters[0]
		c := byName[clusterName]
		g.Expect(c.endpoints()).To(ConsistOf(u.Hostname()+":"+port), "cluster %s endpoints", clusterName)
		g.Expect(c.Type).To(Equal("STRICT_DNS"), "cluster %s resolves the backend's hostname", clusterName)
		if u.Scheme == "https" {
			tlsName := u.Hostname()
			if tls := rule.Backends[0].TLS; tls != nil && tls.Hostname != nil {
				tlsName = *tls.Hostname
			}
			snis, names := c.sniAndNames()
			g.Expect(snis).To(ConsistOf(tlsName), "cluster %s: TLS towards the https backend, with its hostname as SNI", clusterName)
			g.Expect(names).To(ConsistOf(tlsName), "cluster %s validates the backend's certificate for its hostname", clusterName)
		} else {
			g.Expect(c.tls()).To(BeEmpty(), "cluster %s: TLS towards an http backend", clusterName)
		}
		rewrites := rewritesTo(routeConfigs, clusterName)
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

	listeners, err := harness.Resources[envoyListener](v, xdsListener)
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
		g.Expect(virtualHostsFor(routeConfigs, string(h))).To(BeNumerically(">=", 2), "virtual hosts for %s on HTTP and HTTPS", h)
	}
}

type envoyRouteAction struct {
	Cluster          string `json:"cluster"`
	WeightedClusters *struct {
		Clusters []struct {
			Name               string `json:"name"`
			HostRewriteLiteral string `json:"hostRewriteLiteral"`
		} `json:"clusters"`
	} `json:"weightedClusters"`
	HostRewriteLiteral string `json:"hostRewriteLiteral"`
	RegexRewrite       *struct {
		Substitution string `json:"substitution"`
	} `json:"regexRewrite"`
	PrefixRewrite string `json:"prefixRewrite"`
}

// rewritesTo returns every route action that sends traffic to cluster, directly or as
// one of weighted clusters (whose own host rewrite then counts).
func rewritesTo(configs []envoyRouteConfig, cluster string) []envoyRouteAction {
	var out []envoyRouteAction
	for _, rc := range configs {
		for _, vh := range rc.VirtualHosts {
			for _, r := range vh.Routes {
				if r.Route == nil {
					continue
				}
				if r.Route.Cluster == cluster {
					out = append(out, *r.Route)
				}
				if r.Route.WeightedClusters == nil {
					continue
				}
				for _, wc := range r.Route.WeightedClusters.Clusters {
					if wc.Name == cluster {
						a := *r.Route
						if wc.HostRewriteLiteral != "" {
							a.HostRewriteLiteral = wc.HostRewriteLiteral
						}
						out = append(out, a)
					}
				}
			}
		}
	}
	return out
}

// redirectsOf returns the names of the redirect routes of the proxy's route.
func redirectsOf(configs []envoyRouteConfig, proxy string) []string {
	var out []string
	for _, rc := range configs {
		for _, vh := range rc.VirtualHosts {
			for _, r := range vh.Routes {
				if r.Redirect != nil && strings.Contains(r.Name, "/"+proxy+"/") {
					out = append(out, r.Name)
				}
			}
		}
	}
	return out
}

// virtualHostsFor counts the virtual hosts whose domains include host.
func virtualHostsFor(configs []envoyRouteConfig, host string) int {
	n := 0
	for _, rc := range configs {
		for _, vh := range rc.VirtualHosts {
			if slices.Contains(vh.Domains, host) {
				n++
			}
		}
	}
	return n
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// startEdge starts an edge serving this test's hub namespace until the test ends.
func (gt *gatewayTest) startEdge() *harness.Edge {
	gt.t.Helper()
	edge, err := harness.NewEdge(hub.Client, "anchorage-edge")
	gt.g.Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(gt.ctx)
	done := make(chan struct{})
	go func() { defer close(done); edge.Serve(ctx, gt.hubNS(), 250*time.Millisecond) }()
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
