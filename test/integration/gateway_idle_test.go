package integration

import (
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"anchorage/api/v1alpha"
	"anchorage/pkg/anchor/resync"
)

// An idle project (no HTTPProxy, no Gateway of ours) is held with only the watches
// that notice our objects appearing: no Service informer runs for it. Its first
// HTTPProxy opens the deferred watches, which list what is there, and the proxy is
// programmed (its Services included) as in a project that was never idle.
func TestGatewayIdleProjectDefersWatchesUntilAProxy(t *testing.T) {
	gt := newGatewayTest(t, planeA)
	g, ctx := gt.g, gt.ctx
	proxies := &v1alpha.HTTPProxyList{}
	g.Expect(gt.plane.Client.List(ctx, proxies)).To(Succeed())
	g.Expect(proxies.Items).To(BeEmpty(), "precondition: the shared plane holds no HTTPProxy another test left")
	m := gt.startManager("idle")
	g.Eventually(func() []string { return m.Held([]string{gt.project}) }, gwProgrammedWithin, gwPoll).
		Should(Equal([]string{gt.project}))

	cl, err := m.Replica.Shard.Project(ctx, gt.project)
	g.Expect(err).NotTo(HaveOccurred())
	strict, ok := resync.StrictReader(cl.GetCache())
	g.Expect(ok).To(BeTrue(), "project caches are built strict (resync.StrictCacheOption)")
	serviceWatched := func() bool {
		err := strict.List(ctx, &corev1.ServiceList{})
		var notCached *cache.ErrResourceNotCached
		return !errors.As(err, &notCached)
	}
	g.Consistently(serviceWatched, 2*time.Second, gwPoll).Should(BeFalse(), "a Service informer runs for an idle project")
	g.Expect(m.Replica.Gateway.WatchesAllKinds(gt.project)).To(BeFalse())
	g.Expect(strict.List(ctx, &v1alpha.HTTPProxyList{})).To(Succeed(), "HTTPProxies are watched from the claim")

	gt.createProxy(gt.newProxy("late", "late.example.com"))
	gt.waitProgrammed("late")
	g.Expect(m.Replica.Gateway.WatchesAllKinds(gt.project)).To(BeTrue())
	g.Eventually(serviceWatched, gwCleanWithin, gwPoll).Should(BeTrue(), "the Service informer started with the first proxy")
	svcs := &corev1.ServiceList{}
	g.Expect(strict.List(ctx, svcs, client.InNamespace(gt.ns.Name))).To(Succeed())
	g.Expect(svcs.Items).To(HaveLen(1), "the proxy's backend Service, seen by the deferred watch")
}
