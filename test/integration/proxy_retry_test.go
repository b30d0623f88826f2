package integration

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"anchorage/api/v1alpha"
	"anchorage/internal/app"
	"anchorage/internal/harness"
)

// TestHubCreateAnsweredRetryAfterIsNotResentPastItsGuard: the hub answers every
// Certificate create with 429 and a Retry-After (what API Priority and Fairness answers
// under load), the proxy is deleted while its Certificate create waits, and the hub
// answers again. The create that the live guard allowed before the delete must not reach
// the hub again after it: from the audit logs, every hub create for the proxy follows a
// live guard read of its own (unguardedHubCreates), and nothing of the proxy is left. client-go resends a
// create answered with Retry-After once the wait is over, past the live read that
// allowed it; the hub client sends each create once and the reconcile, guard first,
// comes again.
func TestHubCreateAnsweredRetryAfterIsNotResentPastItsGuard(t *testing.T) {
	needEnvtest(t)
	g := NewWithT(t)
	ctx := context.Background()
	e := newEnv(t)
	class := "anchorage-" + utilrand.String(6)
	p := addRaceProject(t, g, e, "retry-"+utilrand.String(4), planeA)
	anchors := watchAnchors(t, []raceProject{p})

	m := e.StartManagerT(t, "retry-"+utilrand.String(4), harness.ManagerOptions{HubFaults: true, Adjust: func(o *app.Options) {
		harness.WithTimings(harness.FastTimings)(o)
		o.Gateway.GatewayClassName = class
	}})
	waitAllServed(g, e, []*harness.Manager{m}, []string{p.name})

	m.HubProxy.SetRules(harness.FaultRule{Verbs: []string{"create"}, Resources: []string{"certificates"}, Rate: 1, Status: 429})
	proxy := &v1alpha.HTTPProxy{
		ObjectMeta: metav1.ObjectMeta{Name: "px-retry", Namespace: p.ns.Name},
		Spec: v1alpha.HTTPProxySpec{
			Hostnames: []gatewayv1.Hostname{"px-retry.example.com"},
			Rules:     []v1alpha.HTTPProxyRule{{Backends: []v1alpha.HTTPProxyBackend{{Endpoint: "https://backend.example.com"}}}},
		},
	}
	g.Expect(p.plane.Client.Create(ctx, proxy)).To(Succeed())
	g.Eventually(func() int {
		applied, _ := m.HubProxy.Applied()
		return applied["status-429"]
	}, gwProgrammedWithin, 5*time.Millisecond).Should(BeNumerically(">=", 1), "a Certificate create answered 429")
	g.Expect(p.plane.Client.Delete(ctx, proxy)).To(Succeed())
	m.HubProxy.Clear()
	deleted := time.Now()

	g.Eventually(func(g Gomega) {
		list := &v1alpha.HTTPProxyList{}
		g.Expect(p.plane.Client.List(ctx, list, client.InNamespace(p.ns.Name))).To(Succeed())
		g.Expect(namesIn(list)).To(BeEmpty(), "the proxy is finalized")
		cms := &corev1.ConfigMapList{}
		g.Expect(hub.Client.List(ctx, cms, client.InNamespace(p.hubNS))).To(Succeed())
		g.Expect(namesIn(cms)).To(BeEmpty(), "anchors left on the hub")
	}, gwProgrammedWithin, gwPoll).Should(Succeed())
	// Longer than client-go's wait after a Retry-After: a resent create has arrived.
	time.Sleep(time.Until(deleted.Add(2 * time.Second)))

	anchors.waitSeen(g, []raceProject{p})
	unguarded, checked, maxLate := unguardedHubCreates(g, []raceProject{p}, anchors.owners(), map[string][]harness.FaultAnswer{proxy.Name: m.HubProxy.Answered()})
	applied, _ := m.HubProxy.Applied()
	t.Logf("checked %d hub creates; latest relative to the proxy's delete: %s; faults applied %v", checked, maxLate.Round(time.Millisecond), applied)
	g.Expect(anchors.err()).NotTo(HaveOccurred(), "the anchor watch")
	g.Expect(unguarded).To(BeEmpty(), "hub creates without a live guard read of their own")
}
