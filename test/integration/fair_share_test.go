package integration

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"anchorage/api/v1alpha"
	"anchorage/internal/app"
)

// TestAProjectProgramsAtMostItsCapOfProxies: with a cap of two, the third proxy of a
// project (the youngest; ties in creation time go by name) is Accepted=False with reason
// ProxyLimitReached and an Event, and nothing is written for it: no finalizer, no
// upstream Gateway, nothing on the hub. When one of the two older proxies is deleted,
// the waiting one takes its slot and is programmed.
func TestAProjectProgramsAtMostItsCapOfProxies(t *testing.T) {
	gt := newGatewayTest(t, planeA)
	g, ctx := gt.g, gt.ctx
	gt.startManager("cap", func(o *app.Options) { o.Gateway.ProxiesPerProject = 2 })
	host := func(name string) gatewayv1.Hostname {
		return gatewayv1.Hostname(name + "-" + rand.String(6) + ".example.com")
	}
	for _, name := range []string{"a-first", "b-second"} {
		gt.createProxy(gt.newProxy(name, host(name)))
		gt.waitProgrammed(name)
	}
	gt.createProxy(gt.newProxy("c-third", host("c-third")))

	key := client.ObjectKey{Namespace: gt.ns.Name, Name: "c-third"}
	g.Eventually(func(g Gomega) {
		p := &v1alpha.HTTPProxy{}
		g.Expect(planeA.Client.Get(ctx, key, p)).To(Succeed())
		c := meta.FindStatusCondition(p.Status.Conditions, v1alpha.ConditionAccepted)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(v1alpha.ReasonProxyLimitReached))
		g.Expect(c.Message).To(ContainSubstring("programs at most 2"))
		g.Expect(p.Finalizers).To(BeEmpty(), "nothing is produced for a proxy past the cap, so it holds no finalizer")
		evs := &eventsv1.EventList{}
		g.Expect(planeA.Client.List(ctx, evs, client.InNamespace(gt.ns.Name))).To(Succeed())
		found := false
		for _, e := range evs.Items {
			found = found || (e.Reason == v1alpha.ReasonProxyLimitReached && e.Regarding.Name == "c-third" && e.Type == corev1.EventTypeWarning)
		}
		g.Expect(found).To(BeTrue(), "a ProxyLimitReached Event on the proxy")
	}, gwProgrammedWithin, gwPoll).Should(Succeed())
	g.Expect(gone(ctx, planeA.Client, &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: gt.ns.Name, Name: "c-third"}})).To(BeTrue(), "no upstream Gateway past the cap")
	g.Expect(gone(ctx, hub.Client, &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: gt.hubNS(), Name: "c-third"}})).To(BeTrue(), "no hub Gateway past the cap")

	g.Expect(planeA.Client.Delete(ctx, &v1alpha.HTTPProxy{ObjectMeta: metav1.ObjectMeta{Namespace: gt.ns.Name, Name: "a-first"}})).To(Succeed())
	gt.waitProgrammed("c-third")
	p := &v1alpha.HTTPProxy{}
	g.Expect(planeA.Client.Get(ctx, key, p)).To(Succeed())
	g.Expect(meta.IsStatusConditionTrue(p.Status.Conditions, v1alpha.ConditionAccepted)).To(BeTrue())
}

// TestTheResyncReleasesTheClaimsOfAGatewayGoneWithoutItsFinalizer: the tenant strips
// the finalizers of a programmed proxy and its Gateway and HTTPRoute while no replica
// runs and deletes them, so no finalizer releases the hostname claim. The next resync
// pass proves the Gateway absent on the plane and releases the claim (an Event on the
// project's Secret says so), and another proxy's claim, whose Gateway is there, is kept.
func TestTheResyncReleasesTheClaimsOfAGatewayGoneWithoutItsFinalizer(t *testing.T) {
	gt := newGatewayTest(t, planeA)
	g, ctx := gt.g, gt.ctx
	fastResync := func(o *app.Options) {
		o.Resync.Period, o.Resync.InitialJitter, o.Resync.ConfirmAfter = 2*time.Second, time.Millisecond, time.Second
	}
	m := gt.startManager("claims-gone", fastResync)
	gone, kept := gatewayv1.Hostname("gone-"+rand.String(6)+".example.com"), gatewayv1.Hostname("kept-"+rand.String(6)+".example.com")
	gt.createProxy(gt.newProxy("gone", gone))
	gt.createProxy(gt.newProxy("kept", kept))
	gt.waitProgrammed("gone")
	gt.waitProgrammed("kept")
	claimOf := func(host gatewayv1.Hostname) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: gt.env.ClaimsNamespace(), Name: string(host)}}
	}
	g.Expect(hub.Client.Get(ctx, client.ObjectKeyFromObject(claimOf(gone)), claimOf(gone))).To(Succeed())
	gt.stopManager(m)

	for _, obj := range []client.Object{&v1alpha.HTTPProxy{}, &gatewayv1.Gateway{}, &gatewayv1.HTTPRoute{}} {
		key := client.ObjectKey{Namespace: gt.ns.Name, Name: "gone"}
		g.Expect(planeA.Client.Get(ctx, key, obj)).To(Succeed())
		obj.SetFinalizers(nil)
		g.Expect(planeA.Client.Update(ctx, obj)).To(Succeed())
		g.Expect(client.IgnoreNotFound(planeA.Client.Delete(ctx, obj))).To(Succeed())
	}

	gt.startManager("claims-gone-again", fastResync)
	g.Eventually(func() bool { return goneFromHub(ctx, claimOf(gone)) }, gwProgrammedWithin, gwPoll).Should(BeTrue(), "the claim of the gone Gateway is released")
	g.Eventually(func(g Gomega) {
		g.Expect(hubEvents(ctx, g, gt.env.ProviderNamespace, "HostnameClaimReleased")).To(ContainElement(HaveField("Note", ContainSubstring(string(gone)))))
	}, gwProgrammedWithin, gwPoll).Should(Succeed())
	g.Expect(hub.Client.Get(ctx, client.ObjectKeyFromObject(claimOf(kept)), claimOf(kept))).To(Succeed(), "a claim whose Gateway is there is kept")
}

func goneFromHub(ctx context.Context, obj client.Object) bool {
	return apierrors.IsNotFound(hub.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj))
}
