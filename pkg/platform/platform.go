// Package platform names every Gateway of the manager's class on the platform's own
// domain and publishes that name in DNS (docs/design.md, Platform hostnames).
//
// The rules, per upstream Gateway:
//
//  1. Its canonical hostname is the one it already has: a hostname address in its status
//     under a target domain (the current or a legacy one), else the hostname of its
//     default-http or default-https listener under one; only a Gateway with neither gets
//     a new one, Derive(UID, targetDomain). A name is never derived over one the previous
//     manager (or an earlier target domain) gave, so tenants' CNAMEs keep resolving.
//  2. Derive is the UID without its dashes, a label of 32 hex digits: unique because the
//     UID is, stable across restarts, replicas, hand-overs and resyncs, and one of the
//     forms the previous manager itself recognises as a Gateway's own (a rollback keeps
//     it).
//  3. The Gateway's platform hostnames are the canonical one and its per-family forms
//     (v4.<canonical>, v6.<canonical>) for the enabled IP families; they are published
//     as its status.addresses and need no Domain and no hostname claim: nobody but the
//     platform can hold a name under a target domain, and a tenant's listener hostname
//     under one that is not its own Gateway's is refused (Reserved).
//  4. Their DNS records (Records) point each at the addresses the edge reports for the
//     hub Gateway, A for IPv4 and AAAA for IPv6, the v4./v6. forms only in their family;
//     they are written as one external-dns DNSEndpoint per hub Gateway, which hangs on
//     the Gateway's anchor like every other hub object of it.
package platform

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// Family is an IP family, spelt as the previous manager's configuration spells it.
type Family string

const (
	IPv4 Family = "IPv4"
	IPv6 Family = "IPv6"
)

// DefaultListeners are the listeners of a Gateway's canonical hostname, on 80 and 443
// (the previous manager's names, kept so its Gateways and their Certificates carry over).
var DefaultListeners = []gatewayv1.SectionName{"default-http", "default-https"}

// Settings are the platform hostnames' settings (pkg/config: platform).
type Settings struct {
	// TargetDomain is the domain new canonical hostnames are derived under.
	TargetDomain string
	// LegacyTargetDomains are earlier target domains: names under them are still
	// platform hostnames and are kept, never derived anew.
	LegacyTargetDomains []string
	// Families are the IP families the edge serves: each gets its v4./v6. hostname
	// and its records.
	Families []Family
}

// Domains are the target domain and the legacy ones, once each, lowercase.
func (s Settings) Domains() []string {
	var out []string
	for _, d := range append([]string{s.TargetDomain}, s.LegacyTargetDomains...) {
		d = strings.TrimSuffix(strings.ToLower(d), ".")
		if d != "" && !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	return out
}

// Validate refuses settings no canonical hostname can be made of.
func (s Settings) Validate() error {
	if s.TargetDomain == "" {
		return fmt.Errorf("targetDomain is empty: every Gateway's canonical hostname is derived under it")
	}
	for _, d := range append([]string{s.TargetDomain}, s.LegacyTargetDomains...) {
		if errs := validation.IsDNS1123Subdomain(d); len(errs) > 0 || !strings.Contains(d, ".") {
			return fmt.Errorf("domain %q is not a lowercase DNS name of two labels or more", d)
		}
		// A canonical hostname is v4.<32 hex>.<domain> at its longest.
		if len(d) > validation.DNS1123SubdomainMaxLength-36 {
			return fmt.Errorf("domain %q is too long for a canonical hostname under it (at most %d characters)", d, validation.DNS1123SubdomainMaxLength-36)
		}
	}
	if len(s.Families) == 0 {
		return fmt.Errorf("ipFamilies is empty: want IPv4, IPv6 or both")
	}
	for _, f := range s.Families {
		if f != IPv4 && f != IPv6 {
			return fmt.Errorf("ipFamilies: %q is not IPv4 or IPv6", f)
		}
	}
	return nil
}

// Derive is the canonical hostname of the Gateway with uid under domain.
func Derive(uid types.UID, domain string) string {
	return strings.ReplaceAll(strings.ToLower(string(uid)), "-", "") + "." + domain
}

// Canonical returns gw's canonical hostname (rule 1), or "" when it has none yet and
// no UID to derive one from.
func (s Settings) Canonical(gw *gatewayv1.Gateway) string {
	for _, a := range gw.Status.Addresses {
		if ptr.Deref(a.Type, gatewayv1.IPAddressType) == gatewayv1.HostnameAddressType && s.under(a.Value) && !isFamilyForm(a.Value) {
			return strings.ToLower(a.Value)
		}
	}
	for _, l := range gw.Spec.Listeners {
		if slices.Contains(DefaultListeners, l.Name) && l.Hostname != nil && s.under(string(*l.Hostname)) {
			return strings.ToLower(string(*l.Hostname))
		}
	}
	if gw.UID == "" {
		return ""
	}
	return Derive(gw.UID, s.Domains()[0])
}

// Own returns gw's canonical hostname once the platform can vouch that it is gw's:
// Canonical(gw) when it is derived from gw's UID (under any target domain), or when
// onHub reports that gw's hub copy already listens on it (a name the previous manager
// gave, kept at cut-over: only a manager writes the hub copy, in the Gateway's own
// mapped namespace); else the name derived from gw's UID ("" without one). A name read
// from gw alone proves nothing: its status and listeners are written by whoever writes
// the Gateway, the tenant included, who may spell another Gateway's name there. onHub
// is asked only about a name that is not derived from gw's UID.
func (s Settings) Own(gw *gatewayv1.Gateway, onHub func(host string) bool) string {
	kept := s.Canonical(gw)
	if kept == "" || s.derivedFrom(kept, gw.UID) || onHub(kept) {
		return kept
	}
	if gw.UID == "" {
		return ""
	}
	return Derive(gw.UID, s.Domains()[0])
}

// derivedFrom reports whether host is, exactly, the name Derive gives uid under one of
// the target domains.
func (s Settings) derivedFrom(host string, uid types.UID) bool {
	return uid != "" && slices.ContainsFunc(s.Domains(), func(d string) bool { return host == Derive(uid, d) })
}

// Hostnames are canonical's platform hostnames: itself and its enabled families' forms.
func (s Settings) Hostnames(canonical string) []string {
	out := []string{canonical}
	if slices.Contains(s.Families, IPv4) {
		out = append(out, "v4."+canonical)
	}
	if slices.Contains(s.Families, IPv6) {
		out = append(out, "v6."+canonical)
	}
	return out
}

// Addresses are canonical's platform hostnames as Gateway status addresses.
func (s Settings) Addresses(canonical string) []gatewayv1.GatewayStatusAddress {
	var out []gatewayv1.GatewayStatusAddress
	for _, h := range s.Hostnames(canonical) {
		out = append(out, gatewayv1.GatewayStatusAddress{Type: ptr.To(gatewayv1.HostnameAddressType), Value: h})
	}
	return out
}

// Reserved reports whether host is under a target domain (current or legacy) and not
// one of the platform hostnames of canonical: a name no tenant may program.
func (s Settings) Reserved(host, canonical string) bool {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if !s.under(host) {
		return false
	}
	return canonical == "" || !slices.Contains([]string{canonical, "v4." + canonical, "v6." + canonical}, host)
}

// under reports whether host is a target domain or a name under one.
func (s Settings) under(host string) bool {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	for _, d := range s.Domains() {
		if host == d || strings.HasSuffix(host, "."+d) {
			return true
		}
	}
	return false
}

func isFamilyForm(host string) bool {
	return strings.HasPrefix(host, "v4.") || strings.HasPrefix(host, "v6.")
}

// Record is one DNS record set: a name, its type (A or AAAA) and its targets.
type Record struct {
	Name    string
	Type    string
	Targets []string
}

// TTL is every record's time to live, in seconds (the previous manager's).
const TTL = 300

// Records returns the record sets of canonical's platform hostnames pointing at the IP
// addresses among edge (the hub Gateway's status addresses), and the enabled families
// the edge reports no address of. A v4./v6. form gets only its family's record.
func (s Settings) Records(canonical string, edge []gatewayv1.GatewayStatusAddress) ([]Record, []Family) {
	targets := map[Family][]string{}
	for _, a := range edge {
		if ptr.Deref(a.Type, gatewayv1.IPAddressType) != gatewayv1.IPAddressType {
			continue
		}
		addr, err := netip.ParseAddr(a.Value)
		if err != nil {
			continue
		}
		f := IPv6
		if addr.Unmap().Is4() {
			f, addr = IPv4, addr.Unmap()
		}
		if v := addr.String(); !slices.Contains(targets[f], v) {
			targets[f] = append(targets[f], v)
		}
	}
	var missing []Family
	for _, f := range s.Families {
		if len(targets[f]) == 0 {
			missing = append(missing, f)
		}
		slices.Sort(targets[f])
	}
	var out []Record
	for _, h := range s.Hostnames(canonical) {
		for _, f := range s.Families {
			if len(targets[f]) == 0 || (isFamilyForm(h) && !strings.HasPrefix(h, familyPrefix(f))) {
				continue
			}
			out = append(out, Record{Name: h, Type: recordType(f), Targets: slices.Clone(targets[f])})
		}
	}
	return out, missing
}

func familyPrefix(f Family) string {
	if f == IPv4 {
		return "v4."
	}
	return "v6."
}

func recordType(f Family) string {
	if f == IPv4 {
		return "A"
	}
	return "AAAA"
}
