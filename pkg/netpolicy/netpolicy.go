// Package netpolicy is the one judgement of which IP addresses a tenant may make the
// platform reach: a proxy's IP backend, and the address a Domain's HTTP token is
// fetched from (docs/design.md, Threat model). Only public unicast addresses pass;
// every special-purpose range, every IPv6 spelling of an IPv4 address, zones, and the
// operator's denied networks (the hub's own) are refused, each with a message that says
// why and what to write instead.
package netpolicy

import (
	"fmt"
	"net/netip"
	"net/url"
	"strings"
)

// DeniedNetwork is a network no IP backend may be in beyond the built-in ranges of
// Refused: the hub's own networks where they are public, such as its Service
// range or its API server's address.
type DeniedNetwork struct {
	Prefix netip.Prefix
	// Why names the network in a refusal, e.g. "listed in gateway.backendDeniedNetworks".
	Why string
}

// ipRange is a built-in range an IP backend may not be in, and its name in a refusal.
type ipRange struct {
	prefix netip.Prefix
	name   string
}

func ranges(rs ...[2]string) []ipRange {
	out := make([]ipRange, len(rs))
	for i, r := range rs {
		out[i] = ipRange{netip.MustParsePrefix(r[0]), r[1]}
	}
	return out
}

// refusedIPv4 are the IPv4 ranges that are not public unicast (the IANA special-purpose
// registry, RFC 6890), most specific first. The documentation ranges (192.0.2.0/24,
// 198.51.100.0/24, 203.0.113.0/24) are not here: they reach nothing on the Internet, so
// programming one exposes nothing, and examples and tests use them as public stand-ins.
// An operator whose hub networks use them lists them in backendDeniedNetworks.
var refusedIPv4 = ranges(
	[2]string{"0.0.0.0/32", "the unspecified address"},
	[2]string{"0.0.0.0/8", `the "this network" range 0.0.0.0/8`},
	[2]string{"10.0.0.0/8", "a private range (RFC 1918 10.0.0.0/8)"},
	[2]string{"100.64.0.0/10", "the shared (carrier-grade NAT) range 100.64.0.0/10"},
	[2]string{"127.0.0.0/8", "loopback (127.0.0.0/8)"},
	[2]string{"169.254.169.254/32", "the cloud metadata service's address (link-local 169.254.0.0/16)"},
	[2]string{"169.254.0.0/16", "link-local (169.254.0.0/16)"},
	[2]string{"172.16.0.0/12", "a private range (RFC 1918 172.16.0.0/12)"},
	[2]string{"192.0.0.0/24", "the IETF protocol assignments range 192.0.0.0/24"},
	[2]string{"192.88.99.0/24", "the retired 6to4 relay range 192.88.99.0/24"},
	[2]string{"192.168.0.0/16", "a private range (RFC 1918 192.168.0.0/16)"},
	[2]string{"198.18.0.0/15", "the benchmarking range 198.18.0.0/15"},
	[2]string{"224.0.0.0/4", "multicast (224.0.0.0/4)"},
	[2]string{"255.255.255.255/32", "the broadcast address"},
	[2]string{"240.0.0.0/4", "the reserved range 240.0.0.0/4"},
)

// refusedIPv6 are the IPv6 ranges that are not public unicast, most specific first;
// anything else outside 2000::/3 is refused too. The documentation ranges 2001:db8::/32
// and 3fff::/20 are accepted, as their IPv4 counterparts are.
var refusedIPv6 = ranges(
	[2]string{"::/128", "the unspecified address"},
	[2]string{"::1/128", "loopback (::1)"},
	[2]string{"fe80::/10", "link-local (fe80::/10)"},
	[2]string{"fec0::/10", "the retired site-local range fec0::/10"},
	[2]string{"fc00::/7", "a unique local range (fc00::/7), IPv6's private addresses"},
	[2]string{"ff00::/8", "multicast (ff00::/8)"},
	[2]string{"100::/64", "the discard-only range 100::/64"},
	[2]string{"64:ff9b:1::/48", "the local-use NAT64 range 64:ff9b:1::/48"},
	[2]string{"2001::/23", "the IETF protocol assignments range 2001::/23 (Teredo among them)"},
)

// embeddedIPv4 are the IPv6 forms that carry an IPv4 address, which a host or a
// translator on the edge's path may turn into that address: refused whatever the
// address, so a check of the IPv4 address is never bypassed by its IPv6 spelling.
var embeddedIPv4 = []struct {
	prefix netip.Prefix
	name   string
	v4     func(b [16]byte) netip.Addr
}{
	{netip.MustParsePrefix("::ffff:0:0/96"), "IPv4-mapped", func(b [16]byte) netip.Addr { return netip.AddrFrom4([4]byte(b[12:])) }},
	{netip.MustParsePrefix("::ffff:0:0:0/96"), "IPv4-translated (SIIT)", func(b [16]byte) netip.Addr { return netip.AddrFrom4([4]byte(b[12:])) }},
	{netip.MustParsePrefix("64:ff9b::/96"), "NAT64", func(b [16]byte) netip.Addr { return netip.AddrFrom4([4]byte(b[12:])) }},
	{netip.MustParsePrefix("2002::/16"), "6to4", func(b [16]byte) netip.Addr { return netip.AddrFrom4([4]byte(b[2:6])) }},
	{netip.MustParsePrefix("::/96"), "IPv4-compatible", func(b [16]byte) netip.Addr { return netip.AddrFrom4([4]byte(b[12:])) }},
}

var globalUnicastIPv6 = netip.MustParsePrefix("2000::/3")

// Refused returns why the IP address host (as url.Hostname gives it: no
// brackets) may not be reached, or "" when it may: only a public unicast address, in
// no denied network, written as a canonical dotted quad or a valid IPv6 literal
// without a zone. Loopback, link-local (cloud metadata among them), unspecified,
// multicast, broadcast, private, shared and other special-purpose ranges are refused
// (docs/design.md, Threat model), and so is every IPv6 form carrying an IPv4 address.
func Refused(host string, denied []DeniedNetwork) string {
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return fmt.Sprintf("host %q is not an IP address in canonical form: write an IPv4 address as four decimal numbers without leading zeros (such as 203.0.113.10), an IPv6 address in brackets, or name the backend by its DNS name", host)
	}
	const must = "an address a tenant names must be public unicast"
	if zone := addr.Zone(); zone != "" {
		return fmt.Sprintf("host %q names the zone %q, an interface of the edge's own host: %s, written without a zone", host, zone, must)
	}
	if addr.Is4() {
		if why := builtinRefusal(addr, refusedIPv4); why != "" {
			return fmt.Sprintf("host %q is %s: %s", host, why, must)
		}
	} else {
		if why := builtinRefusal(addr, refusedIPv6); why != "" {
			return fmt.Sprintf("host %q is %s: %s", host, why, must)
		}
		for _, e := range embeddedIPv4 {
			if !e.prefix.Contains(addr) {
				continue
			}
			v4 := e.v4(addr.As16())
			if why := builtinRefusal(v4, refusedIPv4); why != "" {
				return fmt.Sprintf("host %q is the %s IPv6 form of %s, which is %s: %s", host, e.name, v4, why, must)
			}
			return fmt.Sprintf("host %q is the %s IPv6 form of the IPv4 address %s: write %s itself", host, e.name, v4, v4)
		}
		if !globalUnicastIPv6.Contains(addr) {
			return fmt.Sprintf("host %q is outside the global unicast range 2000::/3: %s", host, must)
		}
	}
	for _, d := range denied {
		if d.Prefix.Contains(addr) {
			return fmt.Sprintf("host %q is in %s, %s: the platform's own networks are not a tenant's backend", host, d.Prefix, d.Why)
		}
	}
	return ""
}

// builtinRefusal is the name of the first of rs holding addr, or "".
func builtinRefusal(addr netip.Addr, rs []ipRange) string {
	for _, r := range rs {
		if r.prefix.Contains(addr) {
			return r.name
		}
	}
	return ""
}

// HubAPIServerDenied is the DeniedNetwork of the hub API server's address when host, a
// rest.Config's Host (a URL or host[:port]), names it by an IP address; nil otherwise
// (a DNS name is not resolved: list its addresses in backendDeniedNetworks).
func HubAPIServerDenied(host string) []DeniedNetwork {
	if !strings.Contains(host, "://") {
		host = "https://" + host
	}
	u, err := url.Parse(host)
	if err != nil {
		return nil
	}
	addr, err := netip.ParseAddr(u.Hostname())
	if err != nil {
		return nil
	}
	addr = addr.WithZone("").Unmap()
	return []DeniedNetwork{{Prefix: netip.PrefixFrom(addr, addr.BitLen()), Why: "the hub API server's address"}}
}
