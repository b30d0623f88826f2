package integration

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"slices"
	"testing"
	"time"

	"github.com/miekg/dns"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"anchorage/api/v1alpha"
	"anchorage/internal/app"
	"anchorage/internal/harness"
	"anchorage/pkg/anchor"
	"anchorage/pkg/anchor/resync"
	"anchorage/pkg/gateway"
	"anchorage/pkg/platform"
)

// ipv4Only runs the manager for an edge that serves IPv4 alone, as the test edge does.
func ipv4Only(o *app.Options) { o.Gateway.Platform.Families = []platform.Family{platform.IPv4} }

// startMergedEdge runs one edge over the hub namespaces of gts, translated together as
// Envoy Gateway does with mergeGateways on the class: one Envoy for them all.
func startMergedEdge(gts ...*gatewayTest) *harness.Edge {
	gt := gts[0]
	gt.t.Helper()
	edge, err := harness.NewEdge(hub.Client, "anchorage-edge")
	gt.g.Expect(err).NotTo(HaveOccurred())
	gt.g.Expect(edge.Merged).To(BeTrue(), "the oracle translates merged by default")
	var namespaces []string
	for _, g := range gts {
		namespaces = append(namespaces, g.hubNS())
	}
	ctx, cancel := context.WithCancel(gt.ctx)
	done := make(chan struct{})
	go func() { defer close(done); edge.Serve(ctx, harness.Namespaces(namespaces...), 250*time.Millisecond) }()
	gt.t.Cleanup(func() { cancel(); <-done })
	return edge
}

// dnsEndpoint reads the hub's DNSEndpoint of the proxy's Gateway; nil when there is none.
func (gt *gatewayTest) dnsEndpoint(g Gomega, name string) *unstructured.Unstructured {
	obj := platform.DNSEndpointRef(name, gt.hubNS())
	err := hub.Client.Get(gt.ctx, client.ObjectKeyFromObject(obj), obj)
	if err != nil {
		g.Expect(client.IgnoreNotFound(err)).To(Succeed())
		return nil
	}
	return obj
}

// records are a DNSEndpoint's endpoints as "<name> <type> <targets...>".
func records(g Gomega, obj *unstructured.Unstructured) []string {
	eps, _, err := unstructured.NestedSlice(obj.Object, "spec", "endpoints")
	g.Expect(err).NotTo(HaveOccurred())
	var out []string
	for _, e := range eps {
		m := e.(map[string]any)
		line := m["dnsName"].(string) + " " + m["recordType"].(string)
		for _, t := range m["targets"].([]any) {
			line += " " + t.(string)
		}
		out = append(out, line)
	}
	return out
}

// TestEveryProxyHasAPlatformHostname: a proxy with no hostname of its own, in each of
// three projects, becomes Programmed with a canonical hostname derived from its
// Gateway's UID (status.canonicalHostname, the Gateway's status addresses), its hub
// Gateway has no hostname-less listener, and the edge, translating the three projects'
// Gateways merged into one Envoy, conflicts none of them and serves each canonical name.
// Each Gateway's DNSEndpoint points its names at the edge's address, and leaves with
// the proxy.
func TestEveryProxyHasAPlatformHostname(t *testing.T) {
	a := newGatewayTest(t, planeA)
	projects := []*gatewayTest{a, a.another(planeB), a.another(planeC)}
	edge := startMergedEdge(projects...)
	domain := gateway.DefaultConfig().Platform.TargetDomain
	// The platform's zone on a real DNS server, written by external-dns from the hub.
	zone := harness.StartDNSServer(t, domain)
	harness.StartExternalDNS(a.ctx, t, hub.Config, zone, harness.ExternalDNSOptions{})
	a.startManager("platform", edgeReportsStatus, ipv4Only)
	for _, gt := range projects {
		gt.createProxy(gt.newProxy("web"))
		gt.createProxy(gt.newProxy("custom", gatewayv1.Hostname(gt.project+".example.com")))
	}
	canonical := map[*gatewayTest]string{}
	for _, gt := range projects {
		gt.waitProgrammed("custom")
		var p *v1alpha.HTTPProxy
		var gw *gatewayv1.Gateway
		gt.g.Eventually(func(g Gomega) {
			p = gt.waitProgrammed("web")
			gw, _ = gt.upstream("web")
			g.Expect(p.Status.CanonicalHostname).NotTo(BeEmpty(), "status.canonicalHostname")
		}, gwProgrammedWithin, gwPoll).Should(Succeed())
		name := platform.Derive(gw.UID, domain)
		canonical[gt] = name
		gt.g.Expect(p.Status.CanonicalHostname).To(Equal(name), "derived from the Gateway's UID")
		gt.g.Expect(gw.Status.Addresses).To(Equal([]gatewayv1.GatewayStatusAddress{
			{Type: ptr.To(gatewayv1.HostnameAddressType), Value: name},
			{Type: ptr.To(gatewayv1.HostnameAddressType), Value: "v4." + name},
		}), "the Gateway publishes its platform names, as the previous manager did")
		for _, proxy := range []string{"web", "custom"} {
			down := &gatewayv1.Gateway{}
			gt.g.Expect(hub.Client.Get(gt.ctx, client.ObjectKey{Namespace: gt.hubNS(), Name: proxy}, down)).To(Succeed())
			for _, l := range down.Spec.Listeners {
				gt.g.Expect(l.Hostname).NotTo(BeNil(), "hub Gateway %s listener %s has no hostname", proxy, l.Name)
			}
		}
		gt.g.Eventually(func(g Gomega) {
			obj := gt.dnsEndpoint(g, "web")
			g.Expect(obj).NotTo(BeNil(), "the Gateway's DNSEndpoint on the hub")
			g.Expect(records(g, obj)).To(ConsistOf(name+" A "+edge.Address, "v4."+name+" A "+edge.Address))
			g.Expect(obj.GetOwnerReferences()).To(ConsistOf(HaveField("Name", anchor.Name(gw.UID))), "on the Gateway's anchor")
			c := gt.proxyCondition(g, "web", gateway.ConditionDNSRecordsProgrammed)
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue), "DNSRecordsProgrammed: %s %s", c.Reason, c.Message)
			g.Expect(resolve(gt.ctx, g, zone, name)).To(ConsistOf(edge.Address), "%s resolves to the edge", name)
			g.Expect(resolve(gt.ctx, g, zone, "v4."+name)).To(ConsistOf(edge.Address))
			c = gt.proxyCondition(g, "web", gateway.ConditionCertificatesReady)
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue), "CertificatesReady: %s %s", c.Reason, c.Message)
		}, gwProgrammedWithin, gwPoll).Should(Succeed())
	}

	// One Envoy for all three projects: no listener conflicts, each name is served.
	var namespaces []string
	for _, gt := range projects {
		namespaces = append(namespaces, gt.hubNS())
	}
	v, err := edge.Translate(a.ctx, namespaces...)
	a.g.Expect(err).NotTo(HaveOccurred())
	a.g.Expect(v.Gateways).To(HaveLen(2 * len(projects)))
	for _, gw := range v.Gateways {
		for _, ls := range gw.Status.Listeners {
			c := meta.FindStatusCondition(ls.Conditions, string(gatewayv1.ListenerConditionConflicted))
			a.g.Expect(c == nil || c.Status == metav1.ConditionFalse).To(BeTrue(), "merged: %s/%s listener %s conflicted: %+v", gw.Namespace, gw.Name, ls.Name, c)
			p := meta.FindStatusCondition(ls.Conditions, string(gatewayv1.ListenerConditionProgrammed))
			a.g.Expect(p).NotTo(BeNil())
			a.g.Expect(p.Status).To(Equal(metav1.ConditionTrue), "%s/%s listener %s: %s", gw.Namespace, gw.Name, ls.Name, p.Message)
		}
	}
	routes, err := harness.Resources[harness.EnvoyRouteConfig](v, harness.XDSRoutes)
	a.g.Expect(err).NotTo(HaveOccurred())
	served := map[string]bool{}
	for _, rc := range routes {
		for _, vh := range rc.VirtualHosts {
			for _, d := range vh.Domains {
				served[d] = true
			}
		}
	}
	for _, gt := range projects {
		a.g.Expect(served).To(HaveKey(canonical[gt]), "the edge serves %s", canonical[gt])
		a.g.Expect(servedCertificate(a.g, v, canonical[gt])).To(BeTrue(), "the edge serves %s on HTTPS with the certificate cert-manager issued", canonical[gt])
	}
	if t.Failed() {
		t.Logf("translator input:\n%s", v.Input)
	}

	// Deleted with its proxy: the DNSEndpoint goes with the Gateway's anchor.
	gt := projects[0]
	gt.g.Expect(gt.plane.Client.Delete(gt.ctx, &v1alpha.HTTPProxy{ObjectMeta: metav1.ObjectMeta{Namespace: gt.ns.Name, Name: "web"}})).To(Succeed())
	gt.g.Eventually(func(g Gomega) { g.Expect(gt.dnsEndpoint(g, "web")).To(BeNil()) }, gwCleanWithin, gwPoll).Should(Succeed())
	gt.g.Eventually(func(g Gomega) { g.Expect(resolve(gt.ctx, g, zone, canonical[gt])).To(BeEmpty()) }, gwProgrammedWithin, gwPoll).Should(Succeed(),
		"external-dns takes %s out of the zone", canonical[gt])
	gt.g.Expect(gt.dnsEndpoint(gt.g, "custom")).NotTo(BeNil(), "the other proxy's stays")
}

// resolve asks the DNS server for name's A records.
func resolve(ctx context.Context, g Gomega, server *harness.DNSServer, name string) []string {
	m, err := server.Query(ctx, name, dns.TypeA)
	g.Expect(err).NotTo(HaveOccurred())
	var out []string
	for _, rr := range m.Answer {
		if a, ok := rr.(*dns.A); ok {
			out = append(out, a.A.String())
		}
	}
	return out
}

// servedCertificate reports whether the edge's xDS holds a certificate for host that
// the default issuer's CA signed (cert-manager issued it), and a filter chain for it.
func servedCertificate(g Gomega, v *harness.EdgeVerdict, host string) bool {
	secrets, err := harness.Resources[harness.EnvoySecret](v, harness.XDSSecret)
	g.Expect(err).NotTo(HaveOccurred())
	signed := false
	for _, s := range secrets {
		blk, _ := pem.Decode(s.TLSCertificate.CertificateChain.InlineBytes)
		if blk == nil {
			continue
		}
		cert, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			continue
		}
		if _, err := cert.Verify(x509.VerifyOptions{DNSName: host, Roots: issuerCA.Pool()}); err == nil {
			signed = true
		}
	}
	listeners, err := harness.Resources[harness.EnvoyListener](v, harness.XDSListener)
	g.Expect(err).NotTo(HaveOccurred())
	for _, l := range listeners {
		for _, fc := range l.FilterChains {
			if signed && slices.Contains(fc.FilterChainMatch.ServerNames, host) {
				return true
			}
		}
	}
	return false
}

// TestResyncCollectsAStrandedDNSEndpoint: the anchor of a Gateway that is gone, with its
// DNSEndpoint hanging on it, is collected by the resync and the hub's garbage collector
// takes the DNSEndpoint: the seed's leak does not come back through DNS records.
func TestResyncCollectsAStrandedDNSEndpoint(t *testing.T) {
	rt := newResyncTest(t, planeA)
	g, ctx := rt.g, rt.ctx
	owner := rt.gatewayOwner("stranded", uuid.NewUUID())
	s := plant(ctx, g, owner, rt.hubNS(), false)
	dns := platform.DNSEndpoint("stranded", rt.hubNS(), []platform.Record{{Name: platform.Derive(owner.UID, "edge.anchorage.test"), Type: "A", Targets: []string{"192.0.2.10"}}})
	dns.SetLabels(s.anchor.Labels)
	dns.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: s.anchor.Name, UID: s.anchor.UID}})
	g.Expect(hub.Client.Create(ctx, dns)).To(Succeed())

	m := rt.startResync("dns-strand", nil)
	rt.passesUntil(m, rt.project, 2*time.Minute, func(g Gomega, _ resync.PassReport) {
		g.Expect(exists(ctx, g, s.anchor)).To(BeFalse(), "the stranded Gateway's anchor")
	})
	g.Eventually(func(g Gomega) bool { return exists(ctx, g, dns) }, gwGCWithin, gwPoll).Should(BeFalse(), "its DNSEndpoint collected")
}
