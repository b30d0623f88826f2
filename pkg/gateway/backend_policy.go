package gateway

import (
	"fmt"
	"net/netip"
	"net/url"
	"strings"
	"unicode"

	"anchorage/api/v1alpha"
	"anchorage/pkg/netpolicy"
)

// DefaultBackendReservedDomains are the domains no backend may be in (docs/design.md,
// Threat model): loopback, multicast DNS, the cluster's Service DNS, internal names
// (metadata.google.internal) and the reverse-lookup zones.
var DefaultBackendReservedDomains = []string{"localhost", "localdomain", "local", "internal", "svc", "cluster.local", "in-addr.arpa", "ip6.arpa"}

// refusedBackendHost returns why host, a DNS name, may not be a backend, or "": not
// ASCII, read as an IP address (IP backends are judged by netpolicy.Refused, and only
// where an address is carried as one), or in a reserved domain. The name is judged as
// written.
func refusedBackendHost(host string, reserved []string) string {
	h := strings.TrimSuffix(strings.ToLower(host), ".")
	if h == "" {
		return "no host"
	}
	if strings.ContainsFunc(h, func(r rune) bool { return r > unicode.MaxASCII }) {
		return fmt.Sprintf("host %q is not ASCII: write an internationalized name in its xn-- form", host)
	}
	labels := strings.Split(h, ".")
	if tld := labels[len(labels)-1]; tld != "" && tld[0] >= '0' && tld[0] <= '9' {
		// No TLD starts with a digit; resolvers read 127.1, 0x7f.0.0.1, 2130706433 as IPs.
		if addr, err := netip.ParseAddr(h); err == nil {
			return fmt.Sprintf("host %q reads as an IP address where a DNS name is wanted: name an IP backend by its address (%s) in an endpoint URL, or in an EndpointSlice of address type IPv4 or IPv6", host, addr)
		}
		return fmt.Sprintf("host %q reads as an IP address (its last label %q is numeric) but is not one in canonical form: write an IPv4 address as four decimal numbers without leading zeros (such as 203.0.113.10), or name the backend by its DNS name", host, tld)
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
// (refusedEndpointHost), or "".
func refusedBackends(proxy *v1alpha.HTTPProxy, reserved []string, denied []netpolicy.DeniedNetwork) string {
	for i, r := range proxy.Spec.Rules {
		for _, b := range r.Backends {
			if b.Endpoint == "" {
				continue
			}
			u, err := url.Parse(b.Endpoint)
			if err != nil {
				continue // parseEndpoint says why
			}
			if why := refusedEndpointHost(u.Hostname(), reserved, denied); why != "" {
				return fmt.Sprintf("rule %d: backend %q may not be programmed: %s", i, b.Endpoint, why)
			}
		}
	}
	return ""
}
