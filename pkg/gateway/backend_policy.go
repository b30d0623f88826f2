package gateway

import (
	"fmt"
	"net/url"
	"strings"

	"anchorage/api/v1alpha"
)

// Backends a tenant may not aim at (docs/design.md, Threat model). The edge forwards a
// proxy's requests from inside the platform, so a backend naming the platform itself
// (loopback, the cluster's Service DNS, a cloud metadata server, a name a resolver reads
// as an IP address) would let a tenant reach what only the platform should. The check
// is on the name as written: IP addresses are refused earlier (parseEndpoint: an
// ExternalName Service needs a DNS name), and a public name that resolves to a private
// address (DNS rebinding) is the edge's egress policy to stop, not this function's.

// DefaultBackendReservedDomains are the domains no backend may be in: loopback names
// (RFC 6761 localhost, and localdomain), multicast DNS (local), the cluster's Service
// DNS (svc, cluster.local), internal names (internal: metadata.google.internal among
// them) and the reverse-lookup zones.
var DefaultBackendReservedDomains = []string{"localhost", "localdomain", "local", "internal", "svc", "cluster.local", "in-addr.arpa", "ip6.arpa"}

// refusedBackendHost returns why host (lowercase, a DNS name as parseEndpoint or the
// API server accepted it) may not be a backend, or "" when it may. reserved are the
// domains refused, host itself or any name under it.
func refusedBackendHost(host string, reserved []string) string {
	h := strings.TrimSuffix(strings.ToLower(host), ".")
	if h == "" {
		return "no host"
	}
	for _, r := range h {
		if r > 0x7f {
			return fmt.Sprintf("host %q is not ASCII: write an internationalized name in its xn-- form", host)
		}
	}
	labels := strings.Split(h, ".")
	if tld := labels[len(labels)-1]; tld != "" && tld[0] >= '0' && tld[0] <= '9' {
		// No top-level domain starts with a digit; resolvers read 127.1, 0177.0.0.1,
		// 0x7f.0.0.1 and 2130706433 as IP addresses.
		return fmt.Sprintf("host %q reads as an IP address (its last label %q is numeric): name the backend by its DNS name", host, tld)
	}
	in := "" // the most specific reserved domain host is in
	for _, d := range reserved {
		d = strings.Trim(strings.ToLower(d), ".")
		if d != "" && (h == d || strings.HasSuffix(h, "."+d)) && len(d) > len(in) {
			in = d
		}
	}
	if in != "" {
		return fmt.Sprintf("host %q is in the reserved domain %s, which names the platform rather than a tenant's backend", host, in)
	}
	return ""
}

// refusedBackends returns why one of proxy's endpoint backends may not be programmed
// (refusedBackendHost), or "".
func refusedBackends(proxy *v1alpha.HTTPProxy, reserved []string) string {
	for i, r := range proxy.Spec.Rules {
		for _, b := range r.Backends {
			if b.Endpoint == "" {
				continue
			}
			u, err := url.Parse(b.Endpoint)
			if err != nil {
				continue // parseEndpoint says why
			}
			if why := refusedBackendHost(u.Hostname(), reserved); why != "" {
				return fmt.Sprintf("rule %d: backend %q may not be programmed: %s", i, b.Endpoint, why)
			}
		}
	}
	return ""
}
