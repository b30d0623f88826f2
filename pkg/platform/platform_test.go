package platform

import (
	"slices"
	"strings"
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

// TestOwn: a tenant spells another Gateway's platform hostname everywhere Canonical
// reads one from (status addresses, default listeners), in every form that reads as a
// name under a target domain; only a name derived from the Gateway's own UID, or one its
// hub copy already listens on, is kept, and the hub copy is asked about nothing else.
func TestOwn(t *testing.T) {
	own := "0b6e1c2a4d1f4f539a6b2f1d6c7e8a90.edge.example.net"
	legacyOwn := "0b6e1c2a4d1f4f539a6b2f1d6c7e8a90.old.example.net"
	theirs := Derive("7f000001-0000-4000-8000-0000a9fea9fe", "edge.example.net")
	const previous = "brave-otter-x2k9q.old.example.net" // the previous manager's form
	for _, tc := range []struct {
		name  string
		gw    gatewayv1.Gateway
		onHub []string // the hostnames the hub copy listens on
		want  string
		asked bool // whether the hub copy is read
	}{
		{name: "a new Gateway: derived", gw: gw(uid, nil, nil), want: own},
		{name: "its own derived name, from its status", gw: gw(uid, []gatewayv1.GatewayStatusAddress{hostAddr(own)}, nil), want: own},
		{name: "its own derived name under a legacy domain", gw: gw(uid, []gatewayv1.GatewayStatusAddress{hostAddr(legacyOwn)}, nil), want: legacyOwn},
		{name: "its own derived name, from its default listener", gw: gw(uid, nil, []gatewayv1.Listener{listener("default-https", own)}), want: own},
		{name: "the previous manager's name, on its hub copy", gw: gw(uid, []gatewayv1.GatewayStatusAddress{hostAddr(previous)}, nil),
			onHub: []string{previous, "www.tenant.example"}, want: previous, asked: true},
		{name: "the previous manager's name, from the default listener, on its hub copy", gw: gw(uid, nil, []gatewayv1.Listener{listener("default-http", previous)}),
			onHub: []string{previous}, want: previous, asked: true},
		// Another Gateway's name, however spelled, where its hub copy does not listen on it.
		{name: "another's name in the status", gw: gw(uid, []gatewayv1.GatewayStatusAddress{hostAddr(theirs)}, nil), want: own, asked: true},
		{name: "another's name in the status, upper case", gw: gw(uid, []gatewayv1.GatewayStatusAddress{hostAddr(strings.ToUpper(theirs))}, nil), want: own, asked: true},
		{name: "another's v4. form in the status, upper case", gw: gw(uid, []gatewayv1.GatewayStatusAddress{hostAddr("V4." + theirs)}, nil), want: own, asked: true},
		{name: "another's name with a trailing dot", gw: gw(uid, []gatewayv1.GatewayStatusAddress{hostAddr(theirs + ".")}, nil), want: own, asked: true},
		{name: "another's name on the default-https listener", gw: gw(uid, nil, []gatewayv1.Listener{listener("default-https", theirs)}), want: own, asked: true},
		{name: "another's v4. form on the default-http listener", gw: gw(uid, nil, []gatewayv1.Listener{listener("default-http", "v4."+theirs)}), want: own, asked: true},
		{name: "another's name on the listener, its own in the status: the status wins", gw: gw(uid, []gatewayv1.GatewayStatusAddress{hostAddr(own)}, []gatewayv1.Listener{listener("default-https", theirs)}), want: own},
		{name: "the previous manager's form, not on its hub copy", gw: gw(uid, []gatewayv1.GatewayStatusAddress{hostAddr(previous)}, nil), onHub: []string{"www.tenant.example"}, want: own, asked: true},
		{name: "the previous manager's form, no hub copy", gw: gw(uid, nil, []gatewayv1.Listener{listener("default-https", previous)}), want: own, asked: true},
		{name: "a derived name one digit off its own", gw: gw(uid, []gatewayv1.GatewayStatusAddress{hostAddr(strings.ReplaceAll(own, "0b6e", "0b6f"))}, nil), want: own, asked: true},
		{name: "no UID and another's name: none", gw: gw("", []gatewayv1.GatewayStatusAddress{hostAddr(theirs)}, nil), want: "", asked: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := gomega.NewWithT(t)
			asked := false
			got := settings.Own(&tc.gw, func(host string) bool {
				asked = true
				return slices.Contains(tc.onHub, host)
			})
			g.Expect(got).To(gomega.Equal(tc.want))
			g.Expect(asked).To(gomega.Equal(tc.asked), "whether the hub copy is read")
			if got != "" {
				g.Expect(settings.Reserved(theirs, got)).To(gomega.BeTrue(), "the other Gateway's name stays reserved for this one")
			}
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
