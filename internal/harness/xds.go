package harness

import (
	"slices"
	"strconv"
	"strings"
)

// The parts of Envoy's xDS resources that readers of an EdgeVerdict (the traffic tests,
// the demo) look at, decoded with Resources.

// xDS type URLs of the resources EnvoyCluster, EnvoyLoadAssignment, EnvoyListener and
// EnvoyRouteConfig read.
const (
	XDSCluster   = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
	XDSEndpoints = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"
	XDSListener  = "type.googleapis.com/envoy.config.listener.v3.Listener"
	XDSRoutes    = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration"
	XDSSecret    = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret"
)

// EnvoyCluster is the part of an xDS Cluster a reader of the edge's verdict needs.
type EnvoyCluster struct {
	Name                   string                `json:"name"`
	Type                   string                `json:"type"`
	LoadAssignment         EnvoyLoadAssignment   `json:"loadAssignment"`
	TransportSocket        *EnvoyTransportSocket `json:"transportSocket"`
	TransportSocketMatches []struct {
		TransportSocket EnvoyTransportSocket `json:"transportSocket"`
	} `json:"transportSocketMatches"`
}

// EnvoyLoadAssignment is the part of a ClusterLoadAssignment a reader of the edge's
// verdict needs: inline in a cluster of a DNS name (STRICT_DNS), a resource of its own
// (XDSEndpoints) for an EDS cluster, which is what addresses become.
type EnvoyLoadAssignment struct {
	ClusterName string `json:"clusterName"`
	Endpoints   []struct {
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
}

// EnvoyTransportSocket is the part of an upstream transport socket a reader of the edge's verdict needs.
type EnvoyTransportSocket struct {
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

// TLS returns the cluster's TLS transport sockets: Envoy Gateway puts the one a
// BackendTLSPolicy asks for in transportSocketMatches, behind a placeholder default.
func (c EnvoyCluster) TLS() []EnvoyTransportSocket {
	var out []EnvoyTransportSocket
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

// Endpoints returns the cluster's inline endpoint addresses as host:port.
func (c EnvoyCluster) Endpoints() []string { return c.LoadAssignment.Addresses() }

// Addresses returns the assignment's endpoint addresses as host:port.
func (a EnvoyLoadAssignment) Addresses() []string {
	var out []string
	for _, e := range a.Endpoints {
		for _, lb := range e.LbEndpoints {
			sa := lb.Endpoint.Address.SocketAddress
			out = append(out, sa.Address+":"+strconv.Itoa(sa.PortValue))
		}
	}
	return out
}

// SNIAndNames returns the SNI and the validated subject alt names of each TLS socket.
func (c EnvoyCluster) SNIAndNames() (snis, names []string) {
	for _, ts := range c.TLS() {
		snis = append(snis, ts.TypedConfig.Sni)
		for _, m := range ts.TypedConfig.CommonTLSContext.CombinedValidationContext.DefaultValidationContext.MatchTypedSubjectAltNames {
			names = append(names, m.Matcher.Exact)
		}
	}
	return snis, names
}

// EnvoyListener is the part of an xDS Listener a reader of the edge's verdict needs.
type EnvoyListener struct {
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

// EnvoySecret is the part of an xDS Secret a reader of the edge's verdict needs: the
// certificate chain a listener serves (PEM).
type EnvoySecret struct {
	Name           string `json:"name"`
	TLSCertificate struct {
		CertificateChain struct {
			InlineBytes []byte `json:"inlineBytes"`
		} `json:"certificateChain"`
	} `json:"tlsCertificate"`
}

// EnvoyRouteConfig is the part of an xDS RouteConfiguration a reader of the edge's verdict needs.
type EnvoyRouteConfig struct {
	Name         string `json:"name"`
	VirtualHosts []struct {
		Name    string   `json:"name"`
		Domains []string `json:"domains"`
		Routes  []struct {
			Name     string            `json:"name"`
			Route    *EnvoyRouteAction `json:"route"`
			Redirect *struct {
				HostRedirect   string `json:"hostRedirect"`
				SchemeRedirect string `json:"schemeRedirect"`
				ResponseCode   string `json:"responseCode"`
			} `json:"redirect"`
		} `json:"routes"`
	} `json:"virtualHosts"`
}

// EnvoyRouteAction is the part of a route action the readers look at.
type EnvoyRouteAction struct {
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

// RewritesTo returns every route action that sends traffic to cluster, directly or as
// one of weighted clusters (whose own host rewrite then counts).
func RewritesTo(configs []EnvoyRouteConfig, cluster string) []EnvoyRouteAction {
	var out []EnvoyRouteAction
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

// RedirectsOf returns the names of the redirect routes of the proxy's route.
func RedirectsOf(configs []EnvoyRouteConfig, proxy string) []string {
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

// VirtualHostsFor counts the virtual hosts whose domains include host.
func VirtualHostsFor(configs []EnvoyRouteConfig, host string) int {
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
