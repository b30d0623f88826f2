package integration

import (
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"anchorage/api/v1alpha"
	"anchorage/internal/app"
	"anchorage/internal/cutover"
	"anchorage/pkg/domain"
	"anchorage/pkg/gateway"
)

// testDNS is a real DNS server on loopback, authoritative for whatever the test
// publishes: the tenant's DNS provider. TXT and A records, UDP and TCP.
type testDNS struct {
	Addr string
	mu   sync.Mutex
	txt  map[string][]string
	a    map[string]net.IP
}

func startDNS(t *testing.T) *testDNS {
	t.Helper()
	d := &testDNS{txt: map[string][]string{}, a: map[string]net.IP{}}
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	d.Addr = pc.LocalAddr().String()
	ln, err := net.Listen("tcp", d.Addr)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []*dns.Server{{PacketConn: pc, Handler: d}, {Listener: ln, Handler: d}} {
		go func() { _ = s.ActivateAndServe() }()
		t.Cleanup(func() { _ = s.Shutdown() })
	}
	return d
}

func (d *testDNS) publishTXT(name, value string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.txt[dns.Fqdn(name)] = append(d.txt[dns.Fqdn(name)], value)
}

func (d *testDNS) publishA(name string, ip net.IP) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.a[dns.Fqdn(name)] = ip
}

// ServeDNS answers from what was published: NXDOMAIN for a name with nothing.
func (d *testDNS) ServeDNS(w dns.ResponseWriter, r *dns.Msg) {
	m := new(dns.Msg)
	m.SetReply(r)
	m.Authoritative = true
	q := r.Question[0]
	d.mu.Lock()
	hdr := dns.RR_Header{Name: q.Name, Class: dns.ClassINET, Ttl: 5}
	switch {
	case q.Qtype == dns.TypeTXT && len(d.txt[q.Name]) > 0:
		for _, v := range d.txt[q.Name] {
			hdr.Rrtype = dns.TypeTXT
			m.Answer = append(m.Answer, &dns.TXT{Hdr: hdr, Txt: []string{v}})
		}
	case q.Qtype == dns.TypeA && d.a[q.Name] != nil:
		hdr.Rrtype = dns.TypeA
		m.Answer = append(m.Answer, &dns.A{Hdr: hdr, A: d.a[q.Name]})
	case d.txt[q.Name] == nil && d.a[q.Name] == nil:
		m.Rcode = dns.RcodeNameError
	}
	d.mu.Unlock()
	_ = w.WriteMsg(m)
}

// verifying turns Domain verification on, through d, re-checking a pending Domain every
// second; the HTTP token is fetched from httpPort on loopback.
func verifying(d *testDNS, httpPort int) func(*app.Options) {
	return func(o *app.Options) {
		o.Gateway.VerifyHostnames = true
		o.Domains = app.Domains{
			Settings: domain.Settings{DNSRecordPrefix: "datum-custom-hostname", HTTPTokenPath: ".well-known/datum-custom-hostname-challenge", Retry: []domain.RetryInterval{{Interval: time.Second}}},
			Checker:  domain.Checker{Nameservers: []string{d.Addr}, Timeout: 2 * time.Second, HTTPPort: httpPort, AllowPrivate: true},
			Workers:  2,
		}
	}
}

// domainOf waits for the Domain named name in gt's namespace to carry a proof.
func (gt *gatewayTest) domainWithProof(name string) *v1alpha.Domain {
	gt.t.Helper()
	d := &v1alpha.Domain{}
	gt.g.Eventually(func(g Gomega) {
		g.Expect(gt.plane.Client.Get(gt.ctx, client.ObjectKey{Namespace: gt.ns.Name, Name: name}, d)).To(Succeed(), "the manager creates the Domain for the hostname")
		g.Expect(d.Status.Verification).NotTo(BeNil())
		g.Expect(d.Status.Verification.DNSRecord.Content).NotTo(BeEmpty())
	}, gwProgrammedWithin, gwPoll).Should(Succeed())
	return d
}

// expectUnverified waits until proxy name says host is not verified, naming the Domain
// and how to verify it, and returns the condition.
func (gt *gatewayTest) expectUnverified(name string, host gatewayv1.Hostname, d *v1alpha.Domain) {
	gt.t.Helper()
	gt.g.Eventually(func(g Gomega) {
		c := gt.proxyCondition(g, name, "HostnamesVerified")
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal("UnverifiedHostnamesPresent"))
		g.Expect(c.Message).To(ContainSubstring(string(host)))
		p := &v1alpha.HTTPProxy{}
		g.Expect(gt.plane.Client.Get(gt.ctx, client.ObjectKey{Namespace: gt.ns.Name, Name: name}, p)).To(Succeed())
		var verified *metav1.Condition
		for _, st := range p.Status.HostnameStatuses {
			if st.Hostname == string(host) {
				verified = meta.FindStatusCondition(st.Conditions, "Verified")
			}
		}
		g.Expect(verified).NotTo(BeNil(), "the hostname's own status says what to do")
		g.Expect(verified.Status).To(Equal(metav1.ConditionFalse))
		for _, what := range []string{d.Spec.DomainName, d.Status.Verification.DNSRecord.Name, d.Status.Verification.DNSRecord.Content, d.Status.Verification.HTTPToken.URL} {
			g.Expect(verified.Message).To(ContainSubstring(what), "the hostname's status names the Domain, the record and the URL")
		}
	}, gwProgrammedWithin, gwPoll).Should(Succeed())
}

// expectNothingOnTheHubFor checks that nothing of host is on the hub for gt: no
// listener, no Certificate, no claim, and no hub write ever named it.
func (gt *gatewayTest) expectNothingOnTheHubFor(m string, host gatewayv1.Hostname) {
	gt.t.Helper()
	g, ctx := gt.g, gt.ctx
	downGW := &gatewayv1.Gateway{}
	if err := hub.Client.Get(ctx, client.ObjectKey{Namespace: gt.hubNS(), Name: "web"}, downGW); err == nil {
		for _, l := range downGW.Spec.Listeners {
			g.Expect(l.Hostname).To(Or(BeNil(), Not(HaveValue(Equal(host)))), "no hub listener for %s", host)
		}
	}
	for _, c := range certificatesIn(ctx, g, gt.hubNS()) {
		dns, _, _ := unstructured.NestedStringSlice(c.Object, "spec", "dnsNames")
		g.Expect(dns).NotTo(ContainElement(string(host)), "no Certificate for %s", host)
	}
	g.Expect(gone(ctx, hub.Client, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: gt.env.ClaimsNamespace(), Name: string(host)}})).To(BeTrue(), "no claim on %s", host)
	writes := []string{"create", "update", "patch"}
	for _, ev := range hubWritesBy(g, m, writes, []string{"configmaps"}, gt.env.ClaimsNamespace()) {
		g.Expect(ev.ObjectRef.Name).NotTo(Equal(string(host)), "no hub write of a claim on %s", host)
	}
	for _, ev := range hubWritesBy(g, m, writes, []string{"certificates"}, gt.hubNS()) {
		g.Expect(ev.ObjectRef.Name).NotTo(ContainSubstring(string(host)), "no Certificate written for %s", host)
	}
}

// TestDomainsGateHostnamesUntilVerifiedByDNS: acme's proxy for www.<acme> gets nothing
// on the hub (no listener, Certificate or claim; the audit log names no hub write of
// it) and a Domain to verify, until acme publishes the TXT record in its DNS; then it is
// programmed and served by the edge oracle. initech's proxy for shop.<acme>, without a
// Verified Domain of its own, is refused throughout with what to verify.
func TestDomainsGateHostnamesUntilVerifiedByDNS(t *testing.T) {
	acme := newGatewayTest(t, planeA)
	g, ctx := acme.g, acme.ctx
	initech := acme.another(planeB)

	resolver := startDNS(t)
	edge := acme.startEdge()
	m := acme.startManager("domains", edgeReportsStatus, verifying(resolver, 80))
	apex := "acme-" + rand.String(6) + ".example"
	www, shop := gatewayv1.Hostname("www."+apex), gatewayv1.Hostname("shop."+apex)
	proxy := acme.createProxy(acme.newProxy("web", www))
	initech.createProxy(initech.newProxy("web", shop))

	d := acme.domainWithProof(apex)
	g.Expect(d.Spec.DomainName).To(Equal(apex), "the Domain is the hostname's registrable domain")
	acme.expectUnverified("web", www, d)
	theirs := initech.domainWithProof(apex)
	initech.expectUnverified("web", shop, theirs)
	g.Expect(theirs.Status.Verification.DNSRecord.Content).NotTo(Equal(d.Status.Verification.DNSRecord.Content), "each project proves its own")
	acme.expectNothingOnTheHubFor(m.User, www)
	initech.expectNothingOnTheHubFor(m.User, shop)

	// acme publishes its record: one re-check later, the hostname is programmed.
	resolver.publishTXT(d.Status.Verification.DNSRecord.Name, d.Status.Verification.DNSRecord.Content)
	g.Eventually(func(g Gomega) {
		g.Expect(acme.plane.Client.Get(ctx, client.ObjectKeyFromObject(d), d)).To(Succeed())
		g.Expect(meta.IsStatusConditionTrue(d.Status.Conditions, v1alpha.DomainConditionVerified)).To(BeTrue(), "the Domain is Verified")
	}, 30*time.Second, gwPoll).Should(Succeed())
	acme.waitProgrammed("web")
	g.Eventually(func(g Gomega) {
		c := acme.proxyCondition(g, "web", "HostnamesVerified")
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
	}, gwProgrammedWithin, gwPoll).Should(Succeed())
	v, err := edge.Translate(ctx, acme.hubNS())
	g.Expect(err).NotTo(HaveOccurred())
	expectServed(t, v, acme.hubNS(), proxy)

	// initech's own Domain is still pending: its hostname is still refused.
	initech.expectUnverified("web", shop, theirs)
	initech.expectNothingOnTheHubFor(m.User, shop)
	gw, _ := initech.upstream("web")
	c := meta.FindStatusCondition(gw.Status.Listeners[len(gw.Status.Listeners)-1].Conditions, string(gatewayv1.ListenerConditionProgrammed))
	g.Expect(c).NotTo(BeNil())
	g.Expect(c.Reason).To(Equal(gateway.ReasonUnverifiedHostname))
}

// TestDomainVerifiedByHTTPToken: the same gate, proven by the HTTP token: the Domain's
// URL is fetched from the host its name resolves to in the tenant's DNS.
func TestDomainVerifiedByHTTPToken(t *testing.T) {
	gt := newGatewayTest(t, planeA)
	g, ctx := gt.g, gt.ctx
	resolver := startDNS(t)
	var mu sync.Mutex
	tokens := map[string]string{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		body, ok := tokens[r.Host+r.URL.Path]
		mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(body + "\n"))
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	port := ln.Addr().(*net.TCPAddr).Port

	gt.startManager("domains-http", verifying(resolver, port))
	apex := "initech-" + rand.String(6) + ".example"
	resolver.publishA(apex, net.ParseIP("127.0.0.1"))
	host := gatewayv1.Hostname("api." + apex)
	gt.createProxy(gt.newProxy("web", host))
	d := gt.domainWithProof(apex)
	gt.expectUnverified("web", host, d)

	u := strings.TrimPrefix(d.Status.Verification.HTTPToken.URL, "http://")
	mu.Lock()
	tokens[u] = d.Status.Verification.HTTPToken.Body
	mu.Unlock()
	g.Eventually(func(g Gomega) {
		g.Expect(gt.plane.Client.Get(ctx, client.ObjectKeyFromObject(d), d)).To(Succeed())
		c := meta.FindStatusCondition(d.Status.Conditions, v1alpha.DomainConditionVerified)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.Message).To(ContainSubstring("HTTP token"))
	}, 30*time.Second, gwPoll).Should(Succeed())
	gt.waitProgrammed("web")
	claim := &corev1.ConfigMap{}
	g.Expect(hub.Client.Get(ctx, client.ObjectKey{Namespace: gt.env.ClaimsNamespace(), Name: string(host)}, claim)).To(Succeed(), "the verified hostname is claimed")
}

// TestCutOverKeepsDomainsAndProgrammedHostnames: the previous manager's Domains, one
// Verified and one pending with a token the tenant may have published, are adopted as
// stored (the cut-over check says so; the pending one keeps its token and is verified
// with it; what the previous manager stored besides reads back whole); a hostname
// programmed before verification was on, with no Domain at all, stays programmed (the
// grace rule), while a hostname the same proxy adds is not programmed until verified.
func TestCutOverKeepsDomainsAndProgrammedHostnames(t *testing.T) {
	gt := newGatewayTest(t, planeA)
	g, ctx := gt.g, gt.ctx
	resolver := startDNS(t)
	r := rand.String(6)
	verified := &v1alpha.Domain{ObjectMeta: metav1.ObjectMeta{Namespace: gt.ns.Name, Name: "v-" + r + ".example"}, Spec: v1alpha.DomainSpec{DomainName: "v-" + r + ".example"}}
	pending := &v1alpha.Domain{ObjectMeta: metav1.ObjectMeta{Namespace: gt.ns.Name, Name: "p-" + r + ".example"}, Spec: v1alpha.DomainSpec{DomainName: "p-" + r + ".example"}}
	long := metav1.NewTime(time.Now().Add(-time.Hour).Truncate(time.Second))
	for _, d := range []*v1alpha.Domain{verified, pending} {
		g.Expect(gt.plane.Client.Create(ctx, d)).To(Succeed())
	}
	// As the previous manager stored them.
	verified.Status = v1alpha.DomainStatus{
		Registration: &v1alpha.Registration{Domain: verified.Spec.DomainName, Registrar: &v1alpha.RegistrarInfo{Name: "Example Registrar"}, NextRefreshAttempt: long},
		Conditions:   []metav1.Condition{{Type: v1alpha.DomainConditionVerified, Status: metav1.ConditionTrue, Reason: v1alpha.DomainReasonVerified, Message: "Domain verification successful", LastTransitionTime: long}},
	}
	pending.Status = v1alpha.DomainStatus{
		Verification: &v1alpha.DomainVerificationStatus{
			DNSRecord:               v1alpha.DNSVerificationRecord{Name: "datum-custom-hostname." + pending.Spec.DomainName, Type: "TXT", Content: "prev-token"},
			HTTPToken:               v1alpha.HTTPVerificationToken{URL: "http://" + pending.Spec.DomainName + "/.well-known/datum-custom-hostname-challenge/" + string(pending.UID), Body: "prev-token"},
			NextVerificationAttempt: long,
		},
		Nameservers: []v1alpha.Nameserver{{Hostname: "ns1.example.net", IPs: []v1alpha.NameserverIP{{Address: "192.0.2.53"}}}},
		Conditions:  []metav1.Condition{{Type: v1alpha.DomainConditionVerified, Status: metav1.ConditionFalse, Reason: v1alpha.DomainReasonPendingVerification, Message: "Update your DNS provider", LastTransitionTime: long}},
	}
	for _, d := range []*v1alpha.Domain{verified, pending} {
		g.Expect(gt.plane.Client.Status().Update(ctx, d)).To(Succeed())
	}
	rows, err := cutover.Check(ctx, nil, map[string]client.Client{gt.project: gt.plane.Client}, cutover.Options{GatewayClass: gt.class})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rows).To(ContainElement(And(HaveField("Kind", "Domain"), HaveField("Name", verified.Name), HaveField("Verdict", cutover.Adopted), HaveField("Detail", ContainSubstring("Verified")))))
	g.Expect(rows).To(ContainElement(And(HaveField("Kind", "Domain"), HaveField("Name", pending.Name), HaveField("Verdict", cutover.Adopted), HaveField("Detail", ContainSubstring("prev-token")))))

	// Before: a manager without verification programs www.<gone>; no Domain covers it.
	noDomain := "gone-" + r + ".example"
	www, shop := gatewayv1.Hostname("www."+noDomain), gatewayv1.Hostname("shop."+noDomain)
	before := gt.startManager("before")
	gt.createProxy(gt.newProxy("web", www))
	gt.waitProgrammed("web")
	gt.stopManager(before)
	claim := &corev1.ConfigMap{}
	g.Expect(hub.Client.Get(ctx, client.ObjectKey{Namespace: gt.env.ClaimsNamespace(), Name: string(www)}, claim)).To(Succeed())

	// After: verification on. The proxy adds shop.<gone>: only www stays programmed.
	gt.startManager("after", verifying(resolver, 80))
	gt.createProxy(gt.newProxy("covered", gatewayv1.Hostname("www."+verified.Spec.DomainName)))
	gt.waitProgrammed("covered")
	g.Expect(gt.plane.Client.Get(ctx, client.ObjectKeyFromObject(verified), verified)).To(Succeed())
	g.Expect(verified.Status.Registration.Registrar.Name).To(Equal("Example Registrar"), "what the previous manager stored reads back whole")
	g.Expect(meta.IsStatusConditionTrue(verified.Status.Conditions, v1alpha.DomainConditionVerified)).To(BeTrue(), "a Verified Domain is not checked again")
	p := &v1alpha.HTTPProxy{}
	g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := gt.plane.Client.Get(ctx, client.ObjectKey{Namespace: gt.ns.Name, Name: "web"}, p); err != nil {
			return err
		}
		p.Spec.Hostnames = append(p.Spec.Hostnames, shop)
		return gt.plane.Client.Update(ctx, p)
	})).To(Succeed())
	created := gt.domainWithProof(noDomain)
	gt.expectUnverified("web", shop, created)
	downGW := &gatewayv1.Gateway{}
	g.Expect(hub.Client.Get(ctx, client.ObjectKey{Namespace: gt.hubNS(), Name: "web"}, downGW)).To(Succeed())
	var hosts []gatewayv1.Hostname
	for _, l := range downGW.Spec.Listeners {
		if l.Hostname != nil {
			hosts = append(hosts, *l.Hostname)
		}
	}
	g.Expect(hosts).To(ContainElement(www), "the hostname programmed before stays")
	g.Expect(hosts).NotTo(ContainElement(shop), "the new, unverified hostname is not programmed")
	kept := &corev1.ConfigMap{}
	g.Expect(hub.Client.Get(ctx, client.ObjectKey{Namespace: gt.env.ClaimsNamespace(), Name: string(www)}, kept)).To(Succeed())
	g.Expect(kept.UID).To(Equal(claim.UID), "its claim is the same object")

	// The Domain that let www.<verified> be programmed is deleted: the hostname stays;
	// one the proxy adds afterwards needs a Domain again (a new one is created for it).
	g.Expect(gt.plane.Client.Delete(ctx, verified)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(gone(ctx, gt.plane.Client, &v1alpha.Domain{ObjectMeta: metav1.ObjectMeta{Namespace: gt.ns.Name, Name: verified.Name}})).To(BeTrue())
	}, gwProgrammedWithin, gwPoll).Should(Succeed())
	vwww, vshop := gatewayv1.Hostname("www."+verified.Spec.DomainName), gatewayv1.Hostname("shop."+verified.Spec.DomainName)
	g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := gt.plane.Client.Get(ctx, client.ObjectKey{Namespace: gt.ns.Name, Name: "covered"}, p); err != nil {
			return err
		}
		p.Spec.Hostnames = append(p.Spec.Hostnames, vshop)
		return gt.plane.Client.Update(ctx, p)
	})).To(Succeed())
	gt.expectUnverified("covered", vshop, gt.domainWithProof(verified.Spec.DomainName))
	g.Expect(hub.Client.Get(ctx, client.ObjectKey{Namespace: gt.hubNS(), Name: "covered"}, downGW)).To(Succeed())
	hosts = nil
	for _, l := range downGW.Spec.Listeners {
		if l.Hostname != nil {
			hosts = append(hosts, *l.Hostname)
		}
	}
	g.Expect(hosts).To(ContainElement(vwww), "a hostname whose Domain is gone stays programmed")
	g.Expect(hosts).NotTo(ContainElement(vshop))

	// The pending Domain is checked with the token it had, and verified by it.
	g.Eventually(func(g Gomega) {
		g.Expect(gt.plane.Client.Get(ctx, client.ObjectKeyFromObject(pending), pending)).To(Succeed())
		g.Expect(pending.Status.Verification).NotTo(BeNil())
		g.Expect(pending.Status.Verification.LastVerificationAttempt).NotTo(BeNil(), "checked by this manager")
		g.Expect(pending.Status.Verification.DNSRecord.Content).To(Equal("prev-token"), "the token is kept")
	}, gwProgrammedWithin, gwPoll).Should(Succeed())
	resolver.publishTXT(pending.Status.Verification.DNSRecord.Name, "prev-token")
	g.Eventually(func(g Gomega) {
		g.Expect(gt.plane.Client.Get(ctx, client.ObjectKeyFromObject(pending), pending)).To(Succeed())
		g.Expect(meta.IsStatusConditionTrue(pending.Status.Conditions, v1alpha.DomainConditionVerified)).To(BeTrue())
	}, 30*time.Second, gwPoll).Should(Succeed())
	g.Expect(pending.Status.Nameservers).To(HaveLen(1), "what the previous manager stored reads back whole")
}
