package integration

import (
	"context"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"anchorage/api/v1alpha"
	"anchorage/internal/app"
	"anchorage/pkg/gateway"
	"anchorage/pkg/platform"
)

// The tests of this file attack the hostname claims and the per-project cap from
// project a's plane; project b, on the other plane, has a programmed proxy whose hub
// objects and claim must not change (UID and resourceVersion) through the attack.

// bystander is project b with one programmed proxy, and the UID and resourceVersion of
// each of its hub objects and its claim, as they were before the attack.
type bystander struct {
	*gatewayTest
	host   gatewayv1.Hostname
	before map[string]string
}

func newBystander(a *gatewayTest) *bystander { return bystanderOf(a.another(planeB)) }

// bystanderOf is newBystander for a project already made (one an edge was started for).
func bystanderOf(gt *gatewayTest) *bystander {
	b := &bystander{gatewayTest: gt, host: gatewayv1.Hostname("bystander-" + rand.String(6) + ".example.com")}
	b.createProxy(b.newProxy("web", b.host))
	b.waitProgrammed("web")
	b.settled()
	return b
}

// settled waits until cert-manager has issued the Certificates of b's proxy "web", then
// takes b's hub state as it stands before the attack.
func (b *bystander) settled() {
	b.t.Helper()
	b.certificatesIssued("web")
	b.before = b.hubState()
}

// certificatesIssued waits until cert-manager has issued the Certificates of gt's proxy
// name: it writes their status until then, which a snapshot of resourceVersions must not
// take for another writer's.
func (gt *gatewayTest) certificatesIssued(name string) {
	gt.t.Helper()
	gt.g.Eventually(func(g Gomega) {
		c := gt.proxyCondition(g, name, gateway.ConditionCertificatesReady)
		g.Expect(c).NotTo(BeNil(), "CertificatesReady")
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue), "CertificatesReady: %s", c.Message)
	}, gwProgrammedWithin, gwPoll).Should(Succeed())
}

// hubState maps every hub object of b's mapped namespace of the kinds the data path
// writes (hubState), its Certificates and DNSEndpoints, and b's claim, to
// "UID/resourceVersion".
func (b *bystander) hubState() map[string]string {
	out := hubState(b.ctx, b.g, b.hubNS())
	for _, c := range certificatesIn(b.ctx, b.g, b.hubNS()) {
		out["Certificate/"+c.GetName()] = string(c.GetUID()) + "/" + c.GetResourceVersion()
	}
	endpoints := &unstructured.UnstructuredList{}
	endpoints.SetGroupVersionKind(platform.DNSEndpointGVK.GroupVersion().WithKind("DNSEndpointList"))
	b.g.Expect(hub.Client.List(b.ctx, endpoints, client.InNamespace(b.hubNS()))).To(Succeed())
	for _, e := range endpoints.Items {
		out["DNSEndpoint/"+e.GetName()] = string(e.GetUID()) + "/" + e.GetResourceVersion()
	}
	claim := &corev1.ConfigMap{}
	b.g.Expect(hub.Client.Get(b.ctx, client.ObjectKey{Namespace: b.env.ClaimsNamespace(), Name: string(b.host)}, claim)).To(Succeed())
	out["claim"] = string(claim.UID) + "/" + claim.ResourceVersion
	return out
}

// unchanged checks b's hub objects and claim are the ones from before the attack.
func (b *bystander) unchanged() {
	b.t.Helper()
	b.g.Expect(b.hubState()).To(Equal(b.before), "nothing of the other project's on the hub is written")
}

// claimsOf lists the claims of the hostnames in hosts that exist.
func claimsOf(gt *gatewayTest, hosts []gatewayv1.Hostname) []string {
	var held []string
	for _, h := range hosts {
		if !goneFromHub(gt.ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: gt.env.ClaimsNamespace(), Name: string(h)}}) {
			held = append(held, string(h))
		}
	}
	return held
}

// hostnames returns n hostnames for prefix, unique to the run.
func hostnames(prefix string, n int) []gatewayv1.Hostname {
	tag := rand.String(6)
	out := make([]gatewayv1.Hostname, n)
	for i := range out {
		out[i] = gatewayv1.Hostname(fmt.Sprintf("%s-%d-%s.example.com", prefix, i, tag))
	}
	return out
}

// directGateway is a Gateway of gt's class written by the tenant, one HTTP listener per
// hostname.
func (gt *gatewayTest) directGateway(name string, hosts []gatewayv1.Hostname) *gatewayv1.Gateway {
	gw := &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: gt.ns.Name, Name: name}, Spec: gatewayv1.GatewaySpec{GatewayClassName: gatewayv1.ObjectName(gt.class)}}
	for i, h := range hosts {
		gw.Spec.Listeners = append(gw.Spec.Listeners, gatewayv1.Listener{Name: gatewayv1.SectionName(fmt.Sprintf("http-%d", i)), Hostname: ptr.To(h), Port: 80, Protocol: gatewayv1.HTTPProtocolType})
	}
	return gw
}

// gatewayCondition reads the upstream Gateway's condition typ.
func gatewayCondition(g Gomega, gt *gatewayTest, name string, typ gatewayv1.GatewayConditionType) (*gatewayv1.Gateway, *metav1.Condition) {
	gw := &gatewayv1.Gateway{}
	g.Expect(gt.plane.Client.Get(gt.ctx, client.ObjectKey{Namespace: gt.ns.Name, Name: name}, gw)).To(Succeed())
	return gw, meta.FindStatusCondition(gw.Status.Conditions, string(typ))
}

// TestARefusedGatewayWriteHoldsNoClaim: a directly written Gateway asks for twenty
// hostnames, and the hub refuses its copy (a ValidatingAdmissionPolicy on the hub
// stands in for whatever a hub may refuse: a Karmada webhook, a quota). The Gateway
// reports the failed write and holds no claim afterwards; another project then programs
// one of its hostnames.
func TestARefusedGatewayWriteHoldsNoClaim(t *testing.T) {
	a := newGatewayTest(t, planeA)
	g, ctx := a.g, a.ctx
	a.startManager("refused-write", func(o *app.Options) { o.Gateway.HostnamesPerGateway = 64 })
	b := newBystander(a)

	name := "hoard-" + rand.String(6)
	hubRefuses(t, g, name)
	hosts := hostnames("refused", 20)
	gw := a.directGateway(name, hosts)
	g.Expect(a.plane.Client.Create(ctx, gw)).To(Succeed())

	g.Eventually(func(g Gomega) {
		_, c := gatewayCondition(g, a, name, gatewayv1.GatewayConditionProgrammed)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(v1alpha.ReasonHubWriteFailed), "the hub refused the write: %s", c.Message)
	}, gwProgrammedWithin, gwPoll).Should(Succeed())
	// The first write takes the claims and releases them; the retries of that generation claim nothing.
	g.Eventually(func() []string { return claimsOf(a, hosts) }, gwProgrammedWithin, gwPoll).Should(BeEmpty(), "a Gateway the hub refused holds no claim")
	g.Expect(goneFromHub(ctx, &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: a.hubNS(), Name: name}})).To(BeTrue(), "nothing on the hub")
	b.unchanged()

	// Another project programs one of the hostnames the refused Gateway asked for.
	b.createProxy(b.newProxy("taken", hosts[3]))
	b.waitProgrammed("taken")
}

// hubRefuses makes the hub refuse every write of a Gateway named name, until the test
// ends, and waits until it does (a dry-run create in default is refused).
func hubRefuses(t *testing.T, g *WithT, name string) {
	t.Helper()
	ctx := context.Background()
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "refuse-" + name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{gatewayv1.GroupName}, APIVersions: []string{"v1"}, Resources: []string{"gateways"}},
				}}}},
			Validations: []admissionregistrationv1.Validation{{Expression: "object.metadata.name != '" + name + "'", Message: "this hub refuses Gateway " + name}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: policy.Name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: policy.Name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}},
	}
	g.Expect(hub.Client.Create(ctx, policy)).To(Succeed())
	g.Expect(hub.Client.Create(ctx, binding)).To(Succeed())
	t.Cleanup(func() {
		_ = hub.Client.Delete(ctx, binding)
		_ = hub.Client.Delete(ctx, policy)
	})
	probe := &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, Spec: gatewayv1.GatewaySpec{GatewayClassName: "probe",
		Listeners: []gatewayv1.Listener{{Name: "http", Port: 80, Protocol: gatewayv1.HTTPProtocolType}}}}
	g.Eventually(func() error { return hub.Client.Create(ctx, probe.DeepCopy(), client.DryRunAll) }, gwProgrammedWithin, gwPoll).
		Should(MatchError(ContainSubstring("this hub refuses")), "the hub's policy is in force")
}

// TestHostnamesPerProxyAndPerGatewayAreBounded: with a bound of three, a proxy with four
// hostnames is Accepted=False/TooManyHostnames and a directly written Gateway with four
// has every hostname listener refused; neither claims anything, and another project
// then programs their hostnames.
func TestHostnamesPerProxyAndPerGatewayAreBounded(t *testing.T) {
	a := newGatewayTest(t, planeA)
	g, ctx := a.g, a.ctx
	a.startManager("bounded", func(o *app.Options) { o.Gateway.HostnamesPerProxy, o.Gateway.HostnamesPerGateway = 3, 3 })
	b := newBystander(a)

	proxyHosts, gatewayHosts := hostnames("proxy", 4), hostnames("gateway", 4)
	a.createProxy(a.newProxy("many", proxyHosts...))
	g.Expect(a.plane.Client.Create(ctx, a.directGateway("many-gw", gatewayHosts))).To(Succeed())

	g.Eventually(func(g Gomega) {
		p := &v1alpha.HTTPProxy{}
		g.Expect(a.plane.Client.Get(ctx, client.ObjectKey{Namespace: a.ns.Name, Name: "many"}, p)).To(Succeed())
		c := meta.FindStatusCondition(p.Status.Conditions, v1alpha.ConditionAccepted)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(gateway.ReasonTooManyHostnames))
		g.Expect(c.Message).To(ContainSubstring("at most 3"))
	}, gwProgrammedWithin, gwPoll).Should(Succeed())
	g.Eventually(func(g Gomega) {
		gw, _ := gatewayCondition(g, a, "many-gw", gatewayv1.GatewayConditionProgrammed)
		g.Expect(gw.Status.Listeners).To(HaveLen(len(gatewayHosts)), "a status for every listener")
		for _, l := range gw.Status.Listeners {
			c := meta.FindStatusCondition(l.Conditions, string(gatewayv1.ListenerConditionProgrammed))
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse), "listener %s", l.Name)
			g.Expect(c.Reason).To(Equal(gateway.ReasonTooManyHostnames), "listener %s", l.Name)
		}
	}, gwProgrammedWithin, gwPoll).Should(Succeed())
	g.Consistently(func() []string { return claimsOf(a, append(proxyHosts, gatewayHosts...)) }, "3s", gwPoll).Should(BeEmpty(), "nothing over the bound is claimed")
	b.unchanged()

	b.createProxy(b.newProxy("taken", proxyHosts[0], gatewayHosts[0]))
	b.waitProgrammed("taken")
}

// TestDirectGatewaysCountAgainstTheProjectsCap: with a cap of two, a proxy and a
// directly written Gateway take the two slots; a second direct Gateway and a second
// proxy, younger, are refused with ProxyLimitReached and get nothing on the hub and no
// claim. When the first Gateway is deleted, the second takes its slot.
func TestDirectGatewaysCountAgainstTheProjectsCap(t *testing.T) {
	a := newGatewayTest(t, planeA)
	g, ctx := a.g, a.ctx
	a.startManager("cap-gateways", func(o *app.Options) { o.Gateway.ProxiesPerProject = 2 })
	b := newBystander(a)

	hosts := hostnames("cap", 4)
	a.createProxy(a.newProxy("a-proxy", hosts[0]))
	a.waitProgrammed("a-proxy")
	g.Expect(a.plane.Client.Create(ctx, a.directGateway("b-gw", hosts[1:2]))).To(Succeed())
	onHub := func(name string) bool {
		return !goneFromHub(ctx, &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: a.hubNS(), Name: name}})
	}
	g.Eventually(func() bool { return onHub("b-gw") }, gwProgrammedWithin, gwPoll).Should(BeTrue(), "the first direct Gateway holds a slot")
	g.Expect(a.plane.Client.Create(ctx, a.directGateway("c-gw", hosts[2:3]))).To(Succeed())
	a.createProxy(a.newProxy("d-proxy", hosts[3]))

	g.Eventually(func(g Gomega) {
		gw, c := gatewayCondition(g, a, "c-gw", gatewayv1.GatewayConditionAccepted)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(v1alpha.ReasonProxyLimitReached))
		g.Expect(c.Message).To(ContainSubstring("programs at most 2"))
		g.Expect(gw.Finalizers).To(BeEmpty(), "nothing is written for a Gateway past the cap")
		p := &v1alpha.HTTPProxy{}
		g.Expect(a.plane.Client.Get(ctx, client.ObjectKey{Namespace: a.ns.Name, Name: "d-proxy"}, p)).To(Succeed())
		pc := meta.FindStatusCondition(p.Status.Conditions, v1alpha.ConditionAccepted)
		g.Expect(pc).NotTo(BeNil())
		g.Expect(pc.Reason).To(Equal(v1alpha.ReasonProxyLimitReached), "a direct Gateway holds the proxy's slot")
	}, gwProgrammedWithin, gwPoll).Should(Succeed())
	g.Expect(onHub("c-gw")).To(BeFalse(), "no hub Gateway past the cap")
	g.Expect(onHub("d-proxy")).To(BeFalse(), "no hub Gateway past the cap")
	g.Expect(claimsOf(a, hosts[2:])).To(BeEmpty(), "no claim past the cap")
	b.unchanged()

	g.Expect(a.plane.Client.Delete(ctx, &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: a.ns.Name, Name: "b-gw"}})).To(Succeed())
	g.Eventually(func() bool { return onHub("c-gw") }, gwProgrammedWithin, gwPoll).Should(BeTrue(), "the waiting Gateway takes the freed slot")
	g.Expect(onHub("d-proxy")).To(BeFalse(), "the younger proxy still waits")
	b.unchanged()
}
