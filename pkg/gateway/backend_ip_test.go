package gateway

import (
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"

	"anchorage/pkg/netpolicy"
)

// TestIPBackendPolicy: every endpoint host a tenant may write, as url.Hostname gives it
// (brackets gone, a %25 zone unescaped), judged by refusedEndpointHost with an
// operator's denied networks and the hub API server's address. A refusal names the
// host, why, and what to write instead.
func TestIPBackendPolicy(t *testing.T) {
	denied := append([]netpolicy.DeniedNetwork{
		{Prefix: netip.MustParsePrefix("198.51.100.0/24"), Why: "listed in gateway.backendDeniedNetworks"},
		{Prefix: netip.MustParsePrefix("2001:db8:ffff::/48"), Why: "listed in gateway.backendDeniedNetworks"},
	}, netpolicy.HubAPIServerDenied("https://203.0.113.77:6443")...)
	const public = "an address a tenant names must be public unicast"
	const canonical = "write an IPv4 address as four decimal numbers without leading zeros"
	cases := []struct {
		endpoint string
		want     []string // substrings of the refusal; none for accepted
	}{
		// Public unicast, IPv4 and IPv6 (documentation ranges accepted as stand-ins).
		{"http://203.0.113.10:8080", nil},
		{"https://192.0.2.44", nil},
		{"http://9.9.9.9", nil},
		{"http://172.32.0.1", nil},  // just past 172.16.0.0/12
		{"http://100.128.0.1", nil}, // just past 100.64.0.0/10
		{"https://[2001:db8::1]", nil},
		{"http://[2001:DB8:0:0::10]:8080", nil},
		{"http://[2620:fe::fe]", nil},
		{"http://origin.example.org", nil},
		// Loopback, unspecified, link-local, cloud metadata.
		{"http://127.0.0.1:8080", []string{"loopback (127.0.0.0/8)", public}},
		{"http://127.8.9.10", []string{"loopback (127.0.0.0/8)", public}},
		{"http://[::1]:8080", []string{"loopback (::1)", public}},
		{"http://0.0.0.0", []string{"the unspecified address", public}},
		{"http://0.1.2.3", []string{`"this network" range 0.0.0.0/8`, public}},
		{"http://[::]", []string{"the unspecified address", public}},
		{"http://169.254.169.254/latest/meta-data", []string{"the cloud metadata service's address", public}},
		{"http://169.254.1.1", []string{"link-local (169.254.0.0/16)", public}},
		{"http://[fe80::1]", []string{"link-local (fe80::/10)", public}},
		{"http://[fe80::1%25eth0]:8080", []string{`names the zone "eth0"`, "without a zone"}},
		// Multicast, broadcast, reserved.
		{"http://224.0.0.1", []string{"multicast (224.0.0.0/4)", public}},
		{"http://239.255.255.250", []string{"multicast (224.0.0.0/4)", public}},
		{"http://[ff02::1]", []string{"multicast (ff00::/8)", public}},
		{"http://255.255.255.255", []string{"the broadcast address", public}},
		{"http://240.0.0.1", []string{"the reserved range 240.0.0.0/4", public}},
		// Private and shared.
		{"http://10.0.0.1", []string{"a private range (RFC 1918 10.0.0.0/8)", public}},
		{"http://172.16.5.4", []string{"a private range (RFC 1918 172.16.0.0/12)", public}},
		{"http://172.31.255.255", []string{"a private range (RFC 1918 172.16.0.0/12)", public}},
		{"http://192.168.1.1", []string{"a private range (RFC 1918 192.168.0.0/16)", public}},
		{"http://100.64.0.1", []string{"the shared (carrier-grade NAT) range 100.64.0.0/10", public}},
		{"http://[fd00::1]", []string{"a unique local range (fc00::/7)", public}},
		{"http://[fc00::1]", []string{"a unique local range (fc00::/7)", public}},
		// Other special-purpose ranges.
		{"http://192.0.0.8", []string{"the IETF protocol assignments range 192.0.0.0/24", public}},
		{"http://198.18.0.1", []string{"the benchmarking range 198.18.0.0/15", public}},
		{"http://192.88.99.1", []string{"the retired 6to4 relay range", public}},
		{"http://[100::1]", []string{"the discard-only range 100::/64", public}},
		{"http://[2001::1]", []string{"the IETF protocol assignments range 2001::/23 (Teredo among them)", public}},
		{"http://[fec0::1]", []string{"the retired site-local range", public}},
		{"http://[4000::1]", []string{"outside the global unicast range 2000::/3", public}},
		{"http://[64:ff9b:1::1]", []string{"the local-use NAT64 range", public}},
		// IPv6 forms carrying an IPv4 address.
		{"http://[::ffff:127.0.0.1]", []string{"the IPv4-mapped IPv6 form of 127.0.0.1, which is loopback", public}},
		{"http://[::ffff:7f00:1]", []string{"the IPv4-mapped IPv6 form of 127.0.0.1, which is loopback", public}},
		{"http://[::ffff:10.0.0.1]", []string{"the IPv4-mapped IPv6 form of 10.0.0.1, which is a private range", public}},
		{"http://[::ffff:a9fe:a9fe]", []string{"form of 169.254.169.254, which is the cloud metadata service's address", public}},
		{"http://[::ffff:203.0.113.10]", []string{"the IPv4-mapped IPv6 form of the IPv4 address 203.0.113.10: write 203.0.113.10 itself"}},
		{"http://[64:ff9b::10.0.0.1]", []string{"the NAT64 IPv6 form of 10.0.0.1, which is a private range", public}},
		{"http://[64:ff9b::a9fe:a9fe]", []string{"the NAT64 IPv6 form of 169.254.169.254", public}},
		{"http://[64:ff9b::203.0.113.10]", []string{"the NAT64 IPv6 form of the IPv4 address 203.0.113.10: write 203.0.113.10 itself"}},
		{"http://[2002:a9fe:a9fe::1]", []string{"the 6to4 IPv6 form of 169.254.169.254", public}},
		{"http://[::127.0.0.1]", []string{"the IPv4-compatible IPv6 form of 127.0.0.1, which is loopback", public}},
		{"http://[::ffff:0:10.0.0.1]", []string{"the IPv4-translated (SIIT) IPv6 form of 10.0.0.1", public}},
		// Not a canonical IP address, yet read as one by resolvers: refused as before.
		{"http://2130706433", []string{`its last label "2130706433" is numeric`, canonical}},
		{"http://0177.0.0.1", []string{"reads as an IP address", canonical}},
		{"http://0x7f.1", []string{"reads as an IP address", canonical}},
		{"http://127.1", []string{"reads as an IP address", canonical}},
		{"http://010.0.0.1", []string{"reads as an IP address", canonical}},
		{"http://203.0.113.10.", []string{"reads as an IP address where a DNS name is wanted", "by its address (203.0.113.10)"}},
		// The operator's denied networks and the hub API server.
		{"http://198.51.100.7", []string{"is in 198.51.100.0/24, listed in gateway.backendDeniedNetworks", "the platform's own networks"}},
		{"http://[2001:db8:ffff::5]", []string{"is in 2001:db8:ffff::/48, listed in gateway.backendDeniedNetworks"}},
		{"https://203.0.113.77", []string{"is in 203.0.113.77/32, the hub API server's address"}},
		// DNS names keep their rules.
		{"http://localhost:8080", []string{`host "localhost" is not a public DNS name`}},
	}
	for _, tc := range cases {
		u, err := url.Parse(tc.endpoint)
		if err != nil {
			t.Fatalf("%s: %v", tc.endpoint, err)
		}
		host := u.Hostname()
		got := refusedEndpointHost(host, DefaultBackendReservedDomains, denied)
		if len(tc.want) == 0 {
			if got != "" {
				t.Errorf("%s: refused (%s), want accepted", tc.endpoint, got)
			}
			continue
		}
		if got == "" {
			t.Errorf("%s: accepted, want refused for %q", tc.endpoint, tc.want[0])
			continue
		}
		if !strings.Contains(got, "host "+strconv.Quote(host)) {
			t.Errorf("%s: refusal %q does not name the host %q", tc.endpoint, got, host)
		}
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: refusal %q does not say %q", tc.endpoint, got, w)
			}
		}
	}
	// The same refusals come out of a proxy: refusedBackends names the rule and endpoint.
	if got := refusedBackends(proxy("web", nil, backendRule("http://169.254.169.254/")), DefaultBackendReservedDomains, nil); !strings.Contains(got, `rule 0: backend "http://169.254.169.254/" may not be programmed: host "169.254.169.254" is the cloud metadata service's address`) {
		t.Errorf("refusedBackends: %q", got)
	}
}

// TestRefusedSliceAddress: an EndpointSlice of the tenant's own behind its own route is
// judged as an HTTPProxy's endpoint is, whatever the address type claims and however the
// address is spelled (a plane may answer with addresses its own validation would refuse).
func TestRefusedSliceAddress(t *testing.T) {
	denied := netpolicy.HubAPIServerDenied("https://203.0.113.77:6443")
	const public = "an address a tenant names must be public unicast"
	const notAName = "is not a public DNS name"
	cases := []struct {
		addressType discoveryv1.AddressType
		address     string
		want        string // substring of the refusal; "" for accepted
	}{
		{discoveryv1.AddressTypeIPv4, "203.0.113.10", ""},
		{discoveryv1.AddressTypeIPv6, "2001:db8::10", ""},
		{discoveryv1.AddressTypeFQDN, "origin.example.org", ""},
		{discoveryv1.AddressTypeFQDN, "connector.local", ""}, // the previous manager's placeholder: BackendNotFound later
		// IPv4 slices.
		{discoveryv1.AddressTypeIPv4, "10.0.0.5", "a private range (RFC 1918 10.0.0.0/8)"},
		{discoveryv1.AddressTypeIPv4, "169.254.169.254", "the cloud metadata service's address"},
		{discoveryv1.AddressTypeIPv4, "127.0.0.1", "loopback"},
		{discoveryv1.AddressTypeIPv4, "203.0.113.77", "the hub API server's address"},
		{discoveryv1.AddressTypeIPv4, "010.0.0.5", "not an IP address in canonical form"},
		{discoveryv1.AddressTypeIPv4, "0x7f000001", "not an IP address in canonical form"},
		{discoveryv1.AddressTypeIPv4, "kubernetes.default", "not an IP address in canonical form"},
		{discoveryv1.AddressTypeIPv4, "::ffff:169.254.169.254", "IPv4-mapped IPv6 form of 169.254.169.254"},
		// IPv6 slices.
		{discoveryv1.AddressTypeIPv6, "::1", "loopback (::1)"},
		{discoveryv1.AddressTypeIPv6, "fe80::1%eth0", `names the zone "eth0"`},
		{discoveryv1.AddressTypeIPv6, "fd00::1", "a unique local range"},
		{discoveryv1.AddressTypeIPv6, "64:ff9b::a9fe:a9fe", "NAT64 IPv6 form of 169.254.169.254"},
		{discoveryv1.AddressTypeIPv6, "::ffff:10.0.0.1", "IPv4-mapped IPv6 form of 10.0.0.1"},
		{discoveryv1.AddressTypeIPv6, "10.0.0.1", public},
		// FQDN slices: the names an edge's resolver completes, in every spelling.
		{discoveryv1.AddressTypeFQDN, "kubernetes.default", notAName},
		{discoveryv1.AddressTypeFQDN, "KUBERNETES.DEFAULT.", notAName},
		{discoveryv1.AddressTypeFQDN, "169-254-169-254.kube-system.pod", notAName},
		{discoveryv1.AddressTypeFQDN, "metadata", notAName},
		{discoveryv1.AddressTypeFQDN, "metadata.google.internal", notAName},
		{discoveryv1.AddressTypeFQDN, "Connector.Local", notAName}, // only the placeholder's own spelling passes
		{discoveryv1.AddressTypeFQDN, "connector.local.", notAName},
		{discoveryv1.AddressTypeFQDN, "169.254.169.254", "reads as an IP address"},
		{discoveryv1.AddressTypeFQDN, "2130706433", "reads as an IP address"},
		// A type no backend has.
		{"IPX", "203.0.113.10", "address type IPX is not a backend's"},
		{"", "origin.example.org", "is not a backend's"},
	}
	for _, tc := range cases {
		got := refusedSliceAddress(tc.addressType, tc.address, DefaultBackendReservedDomains, denied)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s %q: got %q, want %q", tc.addressType, tc.address, got, tc.want)
		}
	}
}
