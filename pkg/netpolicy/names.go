package netpolicy

import (
	"fmt"
	"net/netip"
	"strings"
	"unicode"

	"golang.org/x/net/publicsuffix"
)

// RefusedName returns why host, a DNS name a tenant wrote as a backend (a URL's host as
// url.Hostname gives it, or an ExternalName), may not be reached, or "" when it may.
//
// Only a public DNS name passes: a name whose top-level domain is in the ICANN section
// of the public suffix list, with at least one label more than its public suffix. A
// name is judged in lower case, without a trailing dot. No list of private domains can
// stand in for this: an edge's resolver completes a name through its search list, so a
// single label is a Service of the edge's own namespace, a two-label name ending in a
// namespace (kubernetes.default, kube-dns.kube-system) is a Service of that namespace,
// and the cluster DNS's pod form (a-b-c-d.<namespace>.pod) answers with whatever
// address the name spells, the metadata server's included. None of those end in a TLD
// ICANN delegates. A name under a private-section suffix (foo.github.io) is judged by
// the ICANN suffix above it (io). The arpa domain, whose names are infrastructure
// (reverse lookups), is refused whole.
//
// reserved are the operator's domains beyond that (gateway.backendReservedDomains): a
// public name in one, or equal to one, is refused. They are for public-looking names an edge
// still answers privately: a split-horizon zone, or a namespace of the edge cluster
// whose name is a TLD (x.app is a Service when the edge has a namespace app).
//
// Besides: a non-ASCII host (write the xn-- form), a host read as an IP address in any
// spelling (127.1, 0x7f000001; IP backends are judged by Refused, where an address is
// carried as one), an empty label, and a label of characters other than letters,
// digits and hyphens are refused.
func RefusedName(host string, reserved []string) string {
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
	for _, l := range labels {
		if l == "" {
			return fmt.Sprintf("host %q has an empty label", host)
		}
		if strings.ContainsFunc(l, func(r rune) bool { return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') }) {
			return fmt.Sprintf("host %q has the label %q: a host name's labels are letters, digits and hyphens", host, l)
		}
	}
	const public = "a backend is a public DNS name (under an ICANN public suffix, such as origin.example.com) or a public IP address"
	if len(labels) == 1 {
		return fmt.Sprintf("host %q is not a public DNS name: a single label, which an edge's resolver completes into a cluster name; %s", host, public)
	}
	tld := labels[len(labels)-1]
	if tld == "arpa" {
		return fmt.Sprintf("host %q is not a public DNS name: arpa is the infrastructure domain (reverse lookups); %s", host, public)
	}
	suffix, ok := icannSuffix(h)
	if !ok {
		return fmt.Sprintf("host %q is not a public DNS name: its top-level domain %q is not in the public suffix list's ICANN section, so an edge's resolver may complete it into a cluster name (a Service of namespace %s, a pod) or a private zone; %s", host, tld, tld, public)
	}
	if len(labels) <= strings.Count(suffix, ".")+1 {
		return fmt.Sprintf("host %q is not a public DNS name: it is the public suffix %s itself; %s", host, suffix, public)
	}
	in := "" // the most specific reserved domain host is in
	for _, d := range reserved {
		d = strings.Trim(strings.ToLower(d), ".")
		if d != "" && (h == d || strings.HasSuffix(h, "."+d)) && len(d) > len(in) {
			in = d
		}
	}
	if in != "" {
		return fmt.Sprintf("host %q is in the reserved domain %s, which the operator reserves (gateway.backendReservedDomains): it names the platform rather than a tenant's backend", host, in)
	}
	return ""
}

// icannSuffix returns the public suffix of the lower-case name h in the ICANN section
// of the public suffix list, and whether it has one: the suffix PublicSuffix finds
// when that is an ICANN one; for a private-section suffix (github.io), the ICANN
// suffix above it (io). PublicSuffix answers a TLD it does not list with that label and
// icann false: no ICANN suffix.
func icannSuffix(h string) (string, bool) {
	suffix, icann := publicsuffix.PublicSuffix(h)
	for !icann {
		dot := strings.IndexByte(suffix, '.')
		if dot < 0 {
			return "", false
		}
		suffix, icann = publicsuffix.PublicSuffix(suffix[dot+1:])
	}
	return suffix, true
}
