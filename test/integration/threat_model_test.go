package integration

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"anchorage/api/v1alpha"
	"anchorage/pkg/gateway"
	"anchorage/pkg/platform"
)

// The tests of this file attack a "cannot" of docs/design.md's threat model that no
// other test attacks whole, from project a's plane; project b's hub objects must not
// change (UID and resourceVersion) through the attack.

// TestAGatewayCannotTakeAnotherGatewaysPlatformHostname: a tenant with full admin on its
// plane spells a second project's platform hostname into Gateways of its own, everywhere
// a Gateway's platform hostname is read from: the hostname of a default-http or
// default-https listener (the canonical name, and its v4. form), and the Gateway's status
// addresses (written by the tenant before the manager first sees the Gateway, above a
// hostname-less HTTP or HTTPS listener, which the manager narrows to the Gateway's
// platform hostname; the spellings the plane's schema refuses are pkg/platform's
// TestOwn). Each attacking Gateway ends up with a platform hostname of its own, derived
// from its UID; a listener spelling the other's name is refused, ReservedHostname; none
// of the other's names reaches a hub Gateway, a DNSEndpoint or a Certificate of the
// attacker; the merged edge conflicts none of the other project's listeners; and its
// hub objects keep their UID and resourceVersion.
func TestAGatewayCannotTakeAnotherGatewaysPlatformHostname(t *testing.T) {
	a := newGatewayTest(t, planeA)
	g, ctx, pc := a.g, a.ctx, a.plane.Client
	other := a.another(planeB)
	edge := startMergedEdge(a, other)
	a.startManager("platform-theft", edgeReportsStatus, ipv4Only)
	b := bystanderOf(other)

	theirs := b.platformHostnames(g)
	canonical := theirs[0]
	defaults := func(name string, host string, https bool) gatewayv1.Listener {
		l := gatewayv1.Listener{Name: gatewayv1.SectionName(name), Hostname: ptr.To(gatewayv1.Hostname(host)), Port: 80, Protocol: gatewayv1.HTTPProtocolType}
		if https {
			l.Port, l.Protocol = 443, gatewayv1.HTTPSProtocolType
			l.TLS = &gatewayv1.ListenerTLSConfig{Mode: ptr.To(gatewayv1.TLSModeTerminate), CertificateRefs: []gatewayv1.SecretObjectReference{{Name: "cert"}}}
		}
		if host == "" {
			l.Hostname = nil
		}
		return l
	}
	attacks := []struct {
		name      string
		listeners []gatewayv1.Listener
		status    string // a hostname address written before the manager sees the Gateway
		refused   []gatewayv1.SectionName
	}{
		// A hostname-less listener besides, which gets the Gateway's own name: a Gateway
		// with every listener refused has no hub copy and publishes no name at all.
		{name: "default-listeners", listeners: []gatewayv1.Listener{defaults("http", "", false), defaults("default-http", canonical, false), defaults("default-https", canonical, true)},
			refused: []gatewayv1.SectionName{"default-http", "default-https"}},
		{name: "family-form", listeners: []gatewayv1.Listener{defaults("http", "", false), defaults("default-http", "v4."+canonical, false)}, refused: []gatewayv1.SectionName{"default-http"}},
		{name: "status", listeners: []gatewayv1.Listener{defaults("http", "", false)}, status: canonical},
		{name: "status-https", listeners: []gatewayv1.Listener{defaults("https", "", true)}, status: canonical},
	}
	for _, at := range attacks {
		gw := &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: a.ns.Name, Name: at.name}, Spec: gatewayv1.GatewaySpec{
			GatewayClassName: "not-yet-" + gatewayv1.ObjectName(a.class), Listeners: at.listeners}}
		// Written under another class, so no manager writes its status first, then moved
		// to the manager's class.
		g.Expect(pc.Create(ctx, gw)).To(Succeed(), at.name)
		if at.status != "" {
			gw.Status.Addresses = []gatewayv1.GatewayStatusAddress{{Type: ptr.To(gatewayv1.HostnameAddressType), Value: at.status}}
			g.Expect(pc.Status().Update(ctx, gw)).To(Succeed(), at.name)
		}
		gw.Spec.GatewayClassName = gatewayv1.ObjectName(a.class)
		g.Expect(pc.Update(ctx, gw)).To(Succeed(), at.name)
	}

	// Each attacking Gateway is named on its own: its status addresses are its own
	// platform hostname, a listener spelling the other's is refused, and none of the
	// other's names is on a hub object of the attacker's. When one is not, all are listed.
	domain := gateway.DefaultConfig().Platform.TargetDomain
	var faults []string
	g.Eventually(func(g Gomega) []string {
		faults = nil
		for _, at := range attacks {
			gw := &gatewayv1.Gateway{}
			g.Expect(pc.Get(ctx, client.ObjectKey{Namespace: a.ns.Name, Name: at.name}, gw)).To(Succeed())
			own := platform.Derive(gw.UID, domain)
			var addresses []string
			for _, addr := range gw.Status.Addresses {
				addresses = append(addresses, addr.Value)
			}
			if !slices.Equal(addresses, []string{own, "v4." + own}) {
				faults = append(faults, fmt.Sprintf("Gateway %s publishes %v, not its own %s", at.name, addresses, own))
			}
			for _, name := range at.refused {
				reason := "(no status)"
				for _, ls := range gw.Status.Listeners {
					if c := meta.FindStatusCondition(ls.Conditions, string(gatewayv1.ListenerConditionProgrammed)); ls.Name == name && c != nil {
						reason = string(c.Status) + "/" + c.Reason
					}
				}
				if reason != string(metav1.ConditionFalse)+"/"+gateway.ReasonReservedHostname {
					faults = append(faults, fmt.Sprintf("Gateway %s listener %s: Programmed %s, want False/%s", at.name, name, reason, gateway.ReasonReservedHostname))
				}
			}
		}
		return append(faults, hubObjectsNaming(a, theirs)...)
	}, gwProgrammedWithin, gwPoll).Should(BeEmpty(), func() string { return strings.Join(faults, "\n") })

	// One Envoy for both projects: none of the other project's listeners is conflicted.
	v, err := edge.Translate(ctx, a.hubNS(), b.hubNS())
	g.Expect(err).NotTo(HaveOccurred())
	for _, gw := range v.Gateways {
		if gw.Namespace != b.hubNS() {
			continue
		}
		for _, ls := range gw.Status.Listeners {
			c := meta.FindStatusCondition(ls.Conditions, string(gatewayv1.ListenerConditionConflicted))
			g.Expect(c == nil || c.Status == metav1.ConditionFalse).To(BeTrue(), "the other project's listener %s is conflicted: %+v", ls.Name, c)
		}
	}
	b.unchanged()
}

// platformHostnames waits for b's proxy "web" to be published under its platform
// hostnames (its Gateway's status addresses and its DNSEndpoint), takes b's hub state
// again once settled, and returns them, the canonical one first.
func (b *bystander) platformHostnames(g *WithT) []string {
	var names []string
	g.Eventually(func(g Gomega) {
		gw := &gatewayv1.Gateway{}
		g.Expect(b.plane.Client.Get(b.ctx, client.ObjectKey{Namespace: b.ns.Name, Name: "web"}, gw)).To(Succeed())
		names = nil
		for _, a := range gw.Status.Addresses {
			names = append(names, a.Value)
		}
		g.Expect(names).NotTo(BeEmpty(), "the Gateway's platform hostnames")
		g.Expect(b.dnsEndpoint(g, "web")).NotTo(BeNil(), "the Gateway's DNSEndpoint")
	}, gwProgrammedWithin, gwPoll).Should(Succeed())
	b.settled()
	return names
}

// hubObjectsNaming lists the hub Gateways, DNSEndpoints and Certificates of gt's mapped
// namespace that name one of hosts, in any case.
func hubObjectsNaming(gt *gatewayTest, hosts []string) []string {
	g, ctx := gt.g, gt.ctx
	naming := func(s string) bool {
		return slices.ContainsFunc(hosts, func(h string) bool { return strings.EqualFold(h, strings.TrimSuffix(s, ".")) })
	}
	var out []string
	gws := &gatewayv1.GatewayList{}
	g.Expect(hub.Client.List(ctx, gws, client.InNamespace(gt.hubNS()))).To(Succeed())
	for _, gw := range gws.Items {
		for _, l := range gw.Spec.Listeners {
			if l.Hostname != nil && naming(string(*l.Hostname)) {
				out = append(out, fmt.Sprintf("Gateway %s listener %s: %s", gw.Name, l.Name, *l.Hostname))
			}
		}
	}
	for _, gw := range gws.Items {
		obj := gt.dnsEndpoint(g, gw.Name)
		if obj == nil {
			continue
		}
		for _, r := range records(g, obj) {
			if naming(strings.Fields(r)[0]) {
				out = append(out, fmt.Sprintf("DNSEndpoint %s: %s", gw.Name, r))
			}
		}
	}
	for _, c := range certificatesIn(ctx, g, gt.hubNS()) {
		dns, _, _ := unstructured.NestedStringSlice(c.Object, "spec", "dnsNames")
		for _, d := range dns {
			if naming(d) {
				out = append(out, fmt.Sprintf("Certificate %s: %s", c.GetName(), d))
			}
		}
	}
	return out
}

// TestAHeldHostnameStaysHeldWhateverTheDomainSays: with Domain verification on, project b
// verifies its domain by DNS and programs www.<domain>. Tenants on the other plane ask
// for that hostname with a Verified Domain of their own covering it: one verified by DNS
// as b's was (both publish their token: a domain moved between organisations), asking
// through a proxy; one that wrote the hostname's Domain Verified itself on its plane,
// asking through a listener of a Gateway of its own. Both are refused HostnamesInUse,
// nothing of them reaches the hub, and b's claim and hub objects keep their UID and
// resourceVersion.
func TestAHeldHostnameStaysHeldWhateverTheDomainSays(t *testing.T) {
	a := newGatewayTest(t, planeA)
	g, ctx := a.g, a.ctx
	forger := a.another(planeA)
	resolver := startDNS(t)
	a.startManager("held-verified", verifying(resolver, 80))

	apex := "held-" + rand.String(6) + ".example"
	host := gatewayv1.Hostname("www." + apex)
	b := &bystander{gatewayTest: a.another(planeB), host: host}
	b.createProxy(b.newProxy("web", host))
	proof := b.domainWithProof(apex)
	resolver.publishTXT(proof.Status.Verification.DNSRecord.Name, proof.Status.Verification.DNSRecord.Content)
	b.waitProgrammed("web")
	b.settled()

	// a verifies the same domain by DNS.
	a.createProxy(a.newProxy("web", host))
	mine := a.domainWithProof(apex)
	resolver.publishTXT(mine.Status.Verification.DNSRecord.Name, mine.Status.Verification.DNSRecord.Content)
	g.Eventually(func(g Gomega) {
		g.Expect(a.plane.Client.Get(ctx, client.ObjectKeyFromObject(mine), mine)).To(Succeed())
		g.Expect(meta.IsStatusConditionTrue(mine.Status.Conditions, v1alpha.DomainConditionVerified)).To(BeTrue(), "a's Domain is verified by DNS")
	}, 30*time.Second, gwPoll).Should(Succeed())
	// The forger writes the hostname's Domain Verified on its own plane.
	forgeVerified(forger, string(host))
	// A hostname-less listener besides (it gets the Gateway's platform hostname): a
	// Gateway whose every listener is refused has no hub copy to write.
	direct := forger.directGateway("direct", []gatewayv1.Hostname{host})
	direct.Spec.Listeners = append(direct.Spec.Listeners, gatewayv1.Listener{Name: "http", Port: 80, Protocol: gatewayv1.HTTPProtocolType})
	g.Expect(forger.plane.Client.Create(ctx, direct)).To(Succeed())

	g.Eventually(func(g Gomega) {
		c := a.proxyCondition(g, "web", v1alpha.ConditionAccepted)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(gateway.ReasonHostnamesInUse), c.Message)
		gw, _ := gatewayCondition(g, forger, "direct", gatewayv1.GatewayConditionProgrammed)
		var lc *metav1.Condition
		for _, ls := range gw.Status.Listeners {
			if ls.Name == direct.Spec.Listeners[0].Name {
				lc = meta.FindStatusCondition(ls.Conditions, string(gatewayv1.ListenerConditionProgrammed))
			}
		}
		g.Expect(lc).NotTo(BeNil())
		g.Expect(lc.Reason).To(Equal(gateway.ReasonHostnamesInUse), lc.Message)
	}, gwProgrammedWithin, gwPoll).Should(Succeed())
	for _, gt := range []*gatewayTest{a, forger} {
		g.Expect(hubObjectsNaming(gt, []string{string(host)})).To(BeEmpty(), "project %s", gt.project)
	}
	b.unchanged()
}

// forgeVerified creates a Domain for name in gt's namespace and writes its status
// Verified, as a tenant with full admin on its plane can (the manager's Domain
// reconciler writes the status too: a conflict is retried on a fresh read).
func forgeVerified(gt *gatewayTest, name string) {
	gt.t.Helper()
	d := &v1alpha.Domain{ObjectMeta: metav1.ObjectMeta{Namespace: gt.ns.Name, Name: name}, Spec: v1alpha.DomainSpec{DomainName: name}}
	gt.g.Expect(gt.plane.Client.Create(gt.ctx, d)).To(Succeed())
	gt.g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := gt.plane.Client.Get(gt.ctx, client.ObjectKeyFromObject(d), d); err != nil {
			return err
		}
		meta.SetStatusCondition(&d.Status.Conditions, metav1.Condition{Type: v1alpha.DomainConditionVerified, Status: metav1.ConditionTrue, Reason: v1alpha.DomainReasonVerified, Message: "written by the tenant"})
		return gt.plane.Client.Status().Update(gt.ctx, d)
	})).To(Succeed())
}
