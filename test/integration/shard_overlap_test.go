package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"anchorage/api/v1alpha"
	"anchorage/internal/harness"
)

// TestShardNoOverlappingReconcilesUnderChurnAndKill: three managers, three real project
// planes, HTTPProxies created and deleted in each while a holder is abruptly stopped.
// No two incarnations ever work on one project at once; every proxy ends programmed or
// fully cleaned; no anchor is left for a deleted proxy.
func TestShardNoOverlappingReconcilesUnderChurnAndKill(t *testing.T) {
	c := newChurn(t, "ov")
	var ms []*harness.Manager
	for i := range 3 {
		ms = append(ms, c.startManager(fmt.Sprintf("ov%d", i)))
	}
	c.create("px0")
	c.create("px1")
	c.create("px2")
	for _, p := range c.projects {
		waitProxyProgrammed(c.g, p.plane.Client, p.ns, "px0")
	}
	c.remove("px0")
	c.create("px3")
	// Kill a replica that holds one of the projects mid-churn (the coordinator too when
	// hashing gave it all three).
	var victim *harness.Manager
	c.g.Eventually(func() *harness.Manager {
		if victim, _ = nonCoordinatorHolder(context.Background(), c.e, ms, c.projectNames()); victim != nil {
			return victim
		}
		for _, m := range ms {
			if len(m.Held(c.projectNames())) > 0 {
				victim = m
			}
		}
		return victim
	}, 30*time.Second, gwPoll).ShouldNot(BeNil())
	victim.Kill()
	c.remove("px1")
	c.create("px4")

	records := c.settle([]string{"px2", "px3", "px4"}, []string{"px0", "px1"})
	perProject := map[string]int{}
	for _, r := range records {
		perProject[r.Project]++
	}
	t.Logf("recorded %d admitted reconciles: %v (killed %s)", len(records), perProject, victim.Name)
	for _, p := range c.projects {
		c.g.Expect(perProject[p.name]).To(BeNumerically(">", 0), "reconciles recorded for %s", p.name)
	}
}

func waitProxyProgrammed(g Gomega, c client.Client, ns, name string) {
	g.Eventually(func(g Gomega) {
		p := &v1alpha.HTTPProxy{}
		g.Expect(c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, p)).To(Succeed())
		var programmed bool
		for _, cond := range p.Status.Conditions {
			if cond.Type == v1alpha.ConditionProgrammed && cond.Status == metav1.ConditionTrue && cond.ObservedGeneration == p.Generation {
				programmed = true
			}
		}
		g.Expect(programmed).To(BeTrue(), "%s/%s programmed", ns, name)
	}, gwProgrammedWithin, gwPoll).Should(Succeed())
}

// stripAndDelete removes finalizers from, and deletes, what a test left in an upstream
// namespace, then the namespace, so no later test's manager meets it.
func stripAndDelete(c client.Client, ns string) {
	ctx := context.Background()
	for _, list := range []client.ObjectList{&v1alpha.HTTPProxyList{}, &gatewayv1.GatewayList{}, &gatewayv1.HTTPRouteList{}} {
		if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
			continue
		}
		var objs []client.Object
		switch l := list.(type) {
		case *v1alpha.HTTPProxyList:
			for i := range l.Items {
				objs = append(objs, &l.Items[i])
			}
		case *gatewayv1.GatewayList:
			for i := range l.Items {
				objs = append(objs, &l.Items[i])
			}
		case *gatewayv1.HTTPRouteList:
			for i := range l.Items {
				objs = append(objs, &l.Items[i])
			}
		}
		for _, o := range objs {
			if len(o.GetFinalizers()) > 0 {
				patch := client.MergeFrom(o.DeepCopyObject().(client.Object))
				o.SetFinalizers(nil)
				_ = c.Patch(ctx, o, patch)
			}
			_ = c.Delete(ctx, o)
		}
	}
	_ = c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
}
