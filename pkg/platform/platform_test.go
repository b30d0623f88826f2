package platform

import (
	"testing"

	"github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

var settings = Settings{TargetDomain: "edge.example.net", LegacyTargetDomains: []string{"old.example.net"}, Families: []Family{IPv4, IPv6}}

const uid = "0b6e1c2a-4d1f-4f53-9a6b-2f1d6c7e8a90"

func hostAddr(v string) gatewayv1.GatewayStatusAddress {
	return gatewayv1.GatewayStatusAddress{Type: ptr.To(gatewayv1.HostnameAddressType), Value: v}
}

func ipAddr(v string) gatewayv1.GatewayStatusAddress {
	return gatewayv1.GatewayStatusAddress{Type: ptr.To(gatewayv1.IPAddressType), Value: v}
}

func TestCanonical(t *testing.T) {
	derived := "0b6e1c2a4d1f4f539a6b2f1d6c7e8a90.edge.example.net"
	for _, tc := range []struct {
		name string
		gw   gatewayv1.Gateway
		want string
	}{
		{name: "a new Gateway: derived from its UID", gw: gw(uid, nil, nil), want: derived},
		{name: "no UID yet: none", gw: gw("", nil, nil), want: ""},
		{name: "kept from the status, under a legacy domain",
			gw:   gw(uid, []gatewayv1.GatewayStatusAddress{hostAddr("v4.brave-otter.old.example.net"), hostAddr("brave-otter.old.example.net")}, nil),
			want: "brave-otter.old.example.net"},
		{name: "a status address under no target domain is not taken",
			gw: gw(uid, []gatewayv1.GatewayStatusAddress{hostAddr("www.tenant.example"), ipAddr("192.0.2.1")}, nil), want: derived},
		{name: "kept from the default listener when the status has none",
			gw: gw(uid, nil, []gatewayv1.Listener{listener("default-https", "quiet-lake.edge.example.net")}), want: "quiet-lake.edge.example.net"},
		{name: "a tenant listener under the target domain is not the canonical name",
			gw: gw(uid, nil, []gatewayv1.Listener{listener("https-x", "stolen.edge.example.net")}), want: derived},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gomega.NewWithT(t).Expect(settings.Canonical(&tc.gw)).To(gomega.Equal(tc.want))
		})
	}
}

func TestDeriveIsUniquePerUID(t *testing.T) {
	g := gomega.NewWithT(t)
	a, b := Derive(uid, "edge.example.net"), Derive("0b6e1c2a-4d1f-4f53-9a6b-2f1d6c7e8a91", "edge.example.net")
	g.Expect(a).NotTo(gomega.Equal(b))
	g.Expect(a).To(gomega.Equal(Derive(uid, "edge.example.net")), "stable")
}

func TestReserved(t *testing.T) {
	canonical := "abc.edge.example.net"
	for host, want := range map[string]bool{
		"abc.edge.example.net":      false,
		"v4.abc.edge.example.net":   false,
		"v6.abc.edge.example.net":   false,
		"ABC.edge.example.net.":     false,
		"xyz.edge.example.net":      true,
		"v4.xyz.edge.example.net":   true,
		"edge.example.net":          true,
		"a.b.old.example.net":       true,
		"www.tenant.example":        false,
		"notedge.example.net":       false,
		"abc.edge.example.net.evil": false,
	} {
		gomega.NewWithT(t).Expect(settings.Reserved(host, canonical)).To(gomega.Equal(want), host)
	}
	gomega.NewWithT(t).Expect(settings.Reserved("abc.edge.example.net", "")).To(gomega.BeTrue(), "no canonical name yet: every name under the domain is reserved")
}

func TestRecords(t *testing.T) {
	canonical := "abc.edge.example.net"
	for _, tc := range []struct {
		name     string
		settings Settings
		edge     []gatewayv1.GatewayStatusAddress
		want     []Record
		missing  []Family
	}{
		{name: "both families", settings: settings,
			edge: []gatewayv1.GatewayStatusAddress{ipAddr("2001:db8::1"), ipAddr("192.0.2.2"), ipAddr("192.0.2.1"), hostAddr("lb.example")},
			want: []Record{
				{Name: canonical, Type: "A", Targets: []string{"192.0.2.1", "192.0.2.2"}},
				{Name: canonical, Type: "AAAA", Targets: []string{"2001:db8::1"}},
				{Name: "v4." + canonical, Type: "A", Targets: []string{"192.0.2.1", "192.0.2.2"}},
				{Name: "v6." + canonical, Type: "AAAA", Targets: []string{"2001:db8::1"}},
			}},
		{name: "the edge reports no IPv6 address", settings: settings, edge: []gatewayv1.GatewayStatusAddress{ipAddr("192.0.2.1")},
			want: []Record{
				{Name: canonical, Type: "A", Targets: []string{"192.0.2.1"}},
				{Name: "v4." + canonical, Type: "A", Targets: []string{"192.0.2.1"}},
			}, missing: []Family{IPv6}},
		{name: "IPv6 not enabled: its address is not published",
			settings: Settings{TargetDomain: "edge.example.net", Families: []Family{IPv4}},
			edge:     []gatewayv1.GatewayStatusAddress{ipAddr("192.0.2.1"), ipAddr("2001:db8::1")},
			want: []Record{
				{Name: canonical, Type: "A", Targets: []string{"192.0.2.1"}},
				{Name: "v4." + canonical, Type: "A", Targets: []string{"192.0.2.1"}},
			}},
		{name: "no address yet", settings: settings, missing: []Family{IPv4, IPv6}},
		{name: "an IPv4-mapped address is IPv4", settings: Settings{TargetDomain: "edge.example.net", Families: []Family{IPv4}},
			edge: []gatewayv1.GatewayStatusAddress{ipAddr("::ffff:192.0.2.9")},
			want: []Record{{Name: canonical, Type: "A", Targets: []string{"192.0.2.9"}}, {Name: "v4." + canonical, Type: "A", Targets: []string{"192.0.2.9"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := gomega.NewWithT(t)
			got, missing := tc.settings.Records(canonical, tc.edge)
			g.Expect(got).To(gomega.Equal(tc.want))
			g.Expect(missing).To(gomega.Equal(tc.missing))
		})
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		s     Settings
		error string
	}{
		{s: settings},
		{s: Settings{Families: []Family{IPv4}}, error: "targetDomain is empty"},
		{s: Settings{TargetDomain: "localhost", Families: []Family{IPv4}}, error: "two labels"},
		{s: Settings{TargetDomain: "Edge.example.net", Families: []Family{IPv4}}, error: "lowercase"},
		{s: Settings{TargetDomain: "edge.example.net", LegacyTargetDomains: []string{"x_y.example"}, Families: []Family{IPv4}}, error: "x_y.example"},
		{s: Settings{TargetDomain: "edge.example.net"}, error: "ipFamilies is empty"},
		{s: Settings{TargetDomain: "edge.example.net", Families: []Family{"ipv4"}}, error: `"ipv4"`},
	} {
		err := tc.s.Validate()
		if tc.error == "" {
			gomega.NewWithT(t).Expect(err).NotTo(gomega.HaveOccurred())
			continue
		}
		gomega.NewWithT(t).Expect(err).To(gomega.MatchError(gomega.ContainSubstring(tc.error)))
	}
}

func TestDNSEndpoint(t *testing.T) {
	g := gomega.NewWithT(t)
	obj := DNSEndpoint("gw", "ns-1", []Record{{Name: "a.edge.example.net", Type: "A", Targets: []string{"192.0.2.1"}}})
	g.Expect(obj.GetKind()).To(gomega.Equal("DNSEndpoint"))
	g.Expect(obj.Object["spec"]).To(gomega.Equal(map[string]any{"endpoints": []any{map[string]any{
		"dnsName": "a.edge.example.net", "recordType": "A", "recordTTL": int64(300), "targets": []any{"192.0.2.1"}}}}))
	g.Expect(RecordsObserved(obj)).To(gomega.BeFalse(), "no status: external-dns has not seen it")
	obj.SetGeneration(2)
	obj.Object["status"] = map[string]any{"observedGeneration": int64(2)}
	g.Expect(RecordsObserved(obj)).To(gomega.BeTrue())
	dst := DNSEndpointRef("gw", "ns-1")
	g.Expect(CopySpec(dst, obj)).To(gomega.Succeed())
	g.Expect(dst.Object["spec"]).To(gomega.Equal(obj.Object["spec"]))
}

func gw(uid string, addrs []gatewayv1.GatewayStatusAddress, listeners []gatewayv1.Listener) gatewayv1.Gateway {
	g := gatewayv1.Gateway{}
	g.UID = types.UID(uid)
	g.Status.Addresses = addrs
	g.Spec.Listeners = listeners
	return g
}

func listener(name, host string) gatewayv1.Listener {
	return gatewayv1.Listener{Name: gatewayv1.SectionName(name), Hostname: ptr.To(gatewayv1.Hostname(host))}
}
