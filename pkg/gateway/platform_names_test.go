package gateway

import (
	"testing"

	"github.com/onsi/gomega"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"anchorage/pkg/platform"
)

func listenerOn(name string, port gatewayv1.PortNumber, host string) gatewayv1.Listener {
	l := gatewayv1.Listener{Name: gatewayv1.SectionName(name), Port: port, Protocol: gatewayv1.HTTPProtocolType}
	if port == 443 {
		l.Protocol = gatewayv1.HTTPSProtocolType
	}
	if host != "" {
		l.Hostname = ptr.To(gatewayv1.Hostname(host))
	}
	return l
}

func hostsOf(gw *gatewayv1.Gateway) []string {
	var out []string
	for _, l := range gw.Spec.Listeners {
		out = append(out, string(l.Name)+"="+string(ptr.Deref(l.Hostname, "")))
	}
	return out
}

func TestWithPlatformHostname(t *testing.T) {
	const canonical = "abc.edge.anchorage.test"
	for _, tc := range []struct {
		name      string
		listeners []gatewayv1.Listener
		canonical string
		want      []string
	}{
		{name: "the platform listeners get the canonical hostname",
			listeners: []gatewayv1.Listener{listenerOn("default-http", 80, ""), listenerOn("default-https", 443, ""), listenerOn("http-a", 80, "a.example.com")},
			canonical: canonical,
			want:      []string{"default-http=" + canonical, "default-https=" + canonical, "http-a=a.example.com"}},
		{name: "any hostname-less listener is narrowed to it",
			listeners: []gatewayv1.Listener{listenerOn("http", 80, "")}, canonical: canonical, want: []string{"http=" + canonical}},
		{name: "a second hostname-less listener on the same port stays hostname-less",
			listeners: []gatewayv1.Listener{listenerOn("default-http", 80, ""), listenerOn("http", 80, ""), listenerOn("other", 8080, "")},
			canonical: canonical,
			want:      []string{"default-http=" + canonical, "http=", "other=" + canonical}},
		{name: "a port already serving the canonical hostname keeps a hostname-less listener so",
			listeners: []gatewayv1.Listener{listenerOn("http", 80, ""), listenerOn("default-http", 80, canonical)},
			canonical: canonical,
			want:      []string{"http=", "default-http=" + canonical}},
		{name: "no canonical hostname yet: unchanged",
			listeners: []gatewayv1.Listener{listenerOn("default-http", 80, "")}, want: []string{"default-http="}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gw := &gatewayv1.Gateway{Spec: gatewayv1.GatewaySpec{Listeners: tc.listeners}}
			before := hostsOf(gw)
			got := withPlatformHostname(gw, tc.canonical)
			g := gomega.NewWithT(t)
			g.Expect(hostsOf(got)).To(gomega.Equal(tc.want))
			g.Expect(hostsOf(gw)).To(gomega.Equal(before), "the Gateway read from the cache is not changed")
		})
	}
}

func TestPlatformRefusals(t *testing.T) {
	const canonical = "abc.edge.anchorage.test"
	r := &GatewayReconciler{Config: DefaultConfig()}
	gw := &gatewayv1.Gateway{Spec: gatewayv1.GatewaySpec{Listeners: []gatewayv1.Listener{
		listenerOn("default-http", 80, canonical),
		listenerOn("v4", 80, "v4."+canonical),
		listenerOn("stolen", 80, "xyz.edge.anchorage.test"),
		listenerOn("apex", 443, "edge.anchorage.test"),
		listenerOn("bare", 80, ""),
		listenerOn("tenant", 80, "www.example.com"),
	}}}
	refused := r.platformRefusals(gw, canonical)
	g := gomega.NewWithT(t)
	g.Expect(refused).To(gomega.HaveLen(3))
	g.Expect(refused["xyz.edge.anchorage.test"].reason).To(gomega.Equal(ReasonReservedHostname))
	g.Expect(refused["edge.anchorage.test"].reason).To(gomega.Equal(ReasonReservedHostname))
	g.Expect(refused[""].reason).To(gomega.Equal(ReasonHostnameRequired))
	g.Expect(refused[""].why).To(gomega.ContainSubstring("listener bare"))

	programmable := refused.programmable(gw)
	g.Expect(hostsOf(programmable)).To(gomega.Equal([]string{"default-http=" + canonical, "v4=v4." + canonical, "tenant=www.example.com"}))
	tenant := withoutListenersOn(programmable, r.Config.Platform.Hostnames(canonical))
	g.Expect(hostsOf(tenant)).To(gomega.Equal([]string{"tenant=www.example.com"}), "the tenant's hostname rules apply to its own names only")
}

func TestDNSVerdict(t *testing.T) {
	for _, tc := range []struct {
		name string
		st   dnsState
		ok   bool
		say  string
	}{
		{name: "no edge address yet", st: dnsState{missing: []platform.Family{platform.IPv4}}, say: "Waiting for the edge to report an address"},
		{name: "a family missing", st: dnsState{records: 2, missing: []platform.Family{platform.IPv6}, observed: true}, say: "no IPv6 address"},
		{name: "not published yet", st: dnsState{records: 2}, say: "to be published"},
		{name: "published", st: dnsState{records: 2, observed: true}, ok: true, say: "resolve to the edge"},
	} {
		v := dnsVerdict(tc.st, "abc.edge.anchorage.test")
		g := gomega.NewWithT(t)
		g.Expect(v.ok).To(gomega.Equal(tc.ok), tc.name)
		g.Expect(v.message).To(gomega.ContainSubstring(tc.say), tc.name)
	}
}
