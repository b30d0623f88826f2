package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"anchorage/api/v1alpha"
	"anchorage/pkg/anchor"
	"anchorage/pkg/gateway"
)

// TestAHostnameIsProgrammedForOneProjectAtATime: two projects on two planes, two
// replicas, one hostname asked for by a proxy in each at once. Exactly one claim is
// granted and one proxy programmed; the other is Accepted=False/HostnamesInUse, names
// the hostname but not the holder, and gets nothing on the hub for it, while the
// holder's hub objects and claim are not written at all (their resourceVersions) as
// the loser is reconciled again. Once the holder deletes its proxy, the other is
// programmed and holds the claim.
func TestAHostnameIsProgrammedForOneProjectAtATime(t *testing.T) {
	a := newGatewayTest(t, planeA)
	g, ctx := a.g, a.ctx
	b := a.another(planeB)

	a.startManager("claims-1")
	a.startManager("claims-2")
	host := gatewayv1.Hostname("shared-" + rand.String(6) + ".example.com")
	a.createProxy(a.newProxy("web", host))
	b.createProxy(b.newProxy("web", host))

	// One winner.
	var winner, loser *gatewayTest
	g.Eventually(func(g Gomega) {
		okA, okB := programmedNow(g, a, "web"), programmedNow(g, b, "web")
		g.Expect(okA != okB).To(BeTrue(), "exactly one of the two proxies is programmed (a %v, b %v)", okA, okB)
		winner, loser = a, b
		if okB {
			winner, loser = b, a
		}
	}, gwProgrammedWithin, gwPoll).Should(Succeed())
	g.Eventually(func(g Gomega) {
		p := &v1alpha.HTTPProxy{}
		g.Expect(loser.plane.Client.Get(ctx, client.ObjectKey{Namespace: loser.ns.Name, Name: "web"}, p)).To(Succeed())
		c := meta.FindStatusCondition(p.Status.Conditions, v1alpha.ConditionAccepted)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(gateway.ReasonHostnamesInUse))
		g.Expect(c.Message).To(ContainSubstring(string(host)))
		g.Expect(c.Message).NotTo(ContainSubstring(winner.project), "the holder is never named")
		g.Expect(c.Message).NotTo(ContainSubstring(winner.ns.Name), "the holder is never named")
		g.Expect(p.Status.HostnameStatuses).To(ContainElement(HaveField("Hostname", string(host))))
	}, gwProgrammedWithin, gwPoll).Should(Succeed())
	g.Expect(holderNamedTo(loser, winner, host)).To(BeEmpty(), "the holder is never named")

	claim := &corev1.ConfigMap{}
	g.Expect(hub.Client.Get(ctx, client.ObjectKey{Namespace: a.env.ClaimsNamespace(), Name: string(host)}, claim)).To(Succeed())
	p, err := anchor.ProjectFromClusterName(claim.Labels[anchor.LabelClusterName])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(p).To(Equal(winner.project), "the claim is the winner's")
	claims := &corev1.ConfigMapList{}
	g.Expect(hub.Client.List(ctx, claims, client.InNamespace(a.env.ClaimsNamespace()))).To(Succeed())
	g.Expect(claims.Items).To(HaveLen(1), "one claim")

	// The loser's hub Gateway, DNSEndpoint and Certificates do not name the hostname
	// (they name the Gateway's own platform hostname), nor does its hub route.
	g.Expect(hubObjectsNaming(loser, []string{string(host)})).To(BeEmpty(), "the loser's hub objects")
	downRoute := &gatewayv1.HTTPRoute{}
	if err := hub.Client.Get(ctx, client.ObjectKey{Namespace: loser.hubNS(), Name: "web"}, downRoute); err == nil {
		g.Expect(downRoute.Spec.Hostnames).NotTo(ContainElement(host), "the loser's hub route does not carry %s", host)
	}

	// The loser reconciled again (a spec change) writes nothing of the holder's.
	winner.certificatesIssued("web")
	held := resourceVersions(ctx, g, winner.hubNS(), a.env.ClaimsNamespace(), string(host))
	// The manager writes the proxy's status meanwhile: the test's own write retries a
	// conflict on a fresh read.
	g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		lp := &v1alpha.HTTPProxy{}
		if err := loser.plane.Client.Get(ctx, client.ObjectKey{Namespace: loser.ns.Name, Name: "web"}, lp); err != nil {
			return err
		}
		lp.Spec.Rules[0].Backends[0].Endpoint = "https://api.example.com/v2"
		return loser.plane.Client.Update(ctx, lp)
	})).To(Succeed())
	g.Eventually(func(g Gomega) {
		route := &gatewayv1.HTTPRoute{}
		g.Expect(loser.plane.Client.Get(ctx, client.ObjectKey{Namespace: loser.ns.Name, Name: "web"}, route)).To(Succeed())
		g.Expect(route.Generation).To(BeNumerically(">", 1), "the loser's route was rewritten")
		for _, ps := range route.Status.Parents {
			for _, c := range ps.Conditions {
				g.Expect(c.ObservedGeneration).To(Equal(route.Generation))
			}
		}
	}, gwProgrammedWithin, gwPoll).Should(Succeed())
	g.Expect(resourceVersions(ctx, g, winner.hubNS(), a.env.ClaimsNamespace(), string(host))).To(Equal(held), "nothing of the holder's is written")

	// The holder lets go: the other is programmed within one claim retry.
	wp := &v1alpha.HTTPProxy{}
	g.Expect(winner.plane.Client.Get(ctx, client.ObjectKey{Namespace: winner.ns.Name, Name: "web"}, wp)).To(Succeed())
	g.Expect(winner.plane.Client.Delete(ctx, wp)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(programmedNow(g, loser, "web")).To(BeTrue(), "the other proxy is programmed once the hostname is free")
	}, 2*gwProgrammedWithin, gwPoll).Should(Succeed())
	g.Expect(hub.Client.Get(ctx, client.ObjectKey{Namespace: a.env.ClaimsNamespace(), Name: string(host)}, claim)).To(Succeed())
	p, _ = anchor.ProjectFromClusterName(claim.Labels[anchor.LabelClusterName])
	g.Expect(p).To(Equal(loser.project), "the claim changed hands")
}

// holderNamedTo lists where loser's plane, refused host, names the holder (its
// project, namespace or UIDs): every condition of the proxy, of each of its hostname
// statuses, of its Gateway and of each listener, and every Event in loser's namespace.
func holderNamedTo(loser, holder *gatewayTest, host gatewayv1.Hostname) []string {
	ctx, g := loser.ctx, loser.g
	hp, hgw := &v1alpha.HTTPProxy{}, &gatewayv1.Gateway{}
	g.Expect(holder.plane.Client.Get(ctx, client.ObjectKey{Namespace: holder.ns.Name, Name: "web"}, hp)).To(Succeed())
	g.Expect(holder.plane.Client.Get(ctx, client.ObjectKey{Namespace: holder.ns.Name, Name: "web"}, hgw)).To(Succeed())
	secrets := []string{holder.project, holder.ns.Name, string(holder.ns.UID), string(hp.UID), string(hgw.UID)}
	var texts []string
	conditions := func(where string, cs []metav1.Condition) {
		for _, c := range cs {
			texts = append(texts, fmt.Sprintf("%s %s: %s", where, c.Type, c.Message))
		}
	}
	p, gw := &v1alpha.HTTPProxy{}, &gatewayv1.Gateway{}
	g.Expect(loser.plane.Client.Get(ctx, client.ObjectKey{Namespace: loser.ns.Name, Name: "web"}, p)).To(Succeed())
	g.Expect(loser.plane.Client.Get(ctx, client.ObjectKey{Namespace: loser.ns.Name, Name: "web"}, gw)).To(Succeed())
	conditions("proxy", p.Status.Conditions)
	for _, st := range p.Status.HostnameStatuses {
		conditions("proxy hostname "+st.Hostname, st.Conditions)
	}
	conditions("Gateway", gw.Status.Conditions)
	for _, ls := range gw.Status.Listeners {
		conditions("Gateway listener "+string(ls.Name), ls.Conditions)
	}
	events := &eventsv1.EventList{}
	g.Expect(loser.plane.Client.List(ctx, events, client.InNamespace(loser.ns.Name))).To(Succeed())
	for _, ev := range events.Items {
		texts = append(texts, fmt.Sprintf("Event %s on %s %s: %s", ev.Reason, ev.Regarding.Kind, ev.Regarding.Name, ev.Note))
	}
	var named []string
	for _, text := range texts {
		if slices.ContainsFunc(secrets, func(s string) bool { return strings.Contains(text, s) }) {
			named = append(named, text)
		}
	}
	g.Expect(strings.Join(texts, "\n")).To(ContainSubstring(string(host)), "the refusal is on the loser's plane")
	return named
}

// programmedNow reports whether proxy name of gt is Accepted and Programmed for its
// generation.
func programmedNow(g Gomega, gt *gatewayTest, name string) bool {
	p := &v1alpha.HTTPProxy{}
	g.Expect(gt.plane.Client.Get(context.Background(), client.ObjectKey{Namespace: gt.ns.Name, Name: name}, p)).To(Succeed())
	a := meta.FindStatusCondition(p.Status.Conditions, v1alpha.ConditionAccepted)
	c := meta.FindStatusCondition(p.Status.Conditions, v1alpha.ConditionProgrammed)
	return a != nil && a.Status == metav1.ConditionTrue && c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == p.Generation
}

// resourceVersions maps every object in hubNS of the kinds the data path writes, and
// the claim of host, to its resourceVersion; a Certificate, whose status cert-manager
// keeps writing after it is Ready, to what the manager writes of it: its generation
// (the spec), labels and owners.
func resourceVersions(ctx context.Context, g *WithT, hubNS, claimsNS, host string) map[string]string {
	out := map[string]string{}
	for _, list := range []client.ObjectList{&gatewayv1.GatewayList{}, &gatewayv1.HTTPRouteList{}, &corev1.ConfigMapList{}, &corev1.ServiceList{}} {
		g.Expect(hub.Client.List(ctx, list, client.InNamespace(hubNS))).To(Succeed())
		g.Expect(meta.EachListItem(list, func(o runtime.Object) error {
			obj := o.(client.Object)
			out[fmt.Sprintf("%T/%s", obj, obj.GetName())] = obj.GetResourceVersion()
			return nil
		})).To(Succeed())
	}
	for _, c := range certificatesIn(ctx, g, hubNS) {
		out["Certificate/"+c.GetName()] = fmt.Sprintf("%s/%d %v %v", c.GetUID(), c.GetGeneration(), c.GetLabels(), c.GetOwnerReferences())
	}
	claim := &corev1.ConfigMap{}
	g.Expect(hub.Client.Get(ctx, client.ObjectKey{Namespace: claimsNS, Name: host}, claim)).To(Succeed())
	out["claim"] = claim.ResourceVersion
	return out
}
