package integration

// Issue 15, "Projects that no longer exist", across the API: a project retired on
// purpose (a tombstone in the lease namespace) has its anchors collected by the
// replicas themselves, by the coordinator alone, after the absence is confirmed on two
// passes; without a tombstone they are only reported; a dry-run replica deletes
// nothing. The hub's garbage collector is on (TestMain), so the cascade is the real one.

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"anchorage/internal/app"
	"anchorage/internal/harness"
	"anchorage/pkg/anchor"
	"anchorage/pkg/anchor/resync"
)

// retiredWithin bounds the wait for a retired project's anchors to be collected: the
// coordinator's periodic report runs every Period of the fake clock, and collection
// needs two of them ConfirmAfter apart.
const retiredWithin = 90 * time.Second

// TestResyncRetiredProjectCollectedByTheCoordinator: two replicas serve a project with
// live proxies; its kubeconfig Secret is deleted. Without a tombstone, pass after pass
// past the confirmation delay, nothing of it is deleted on the hub (reported, never
// deleted). Once an operator retires it with a tombstone, its anchors are collected
// (proof project-retired, confirmed on two passes), the hub's garbage collector takes
// their downstream Gateways and HTTPRoutes, the plane identity record is dropped, and
// every anchor delete was sent by one replica: the coordinator.
func TestResyncRetiredProjectCollectedByTheCoordinator(t *testing.T) {
	rt := newResyncTest(t, planeB)
	g, ctx := rt.g, rt.ctx
	replicas := []*harness.Manager{rt.startResync("retired-a", nil), rt.startResync("retired-b", nil)}
	names := []string{"web", "api"}
	for _, n := range names {
		rt.createProxy(rt.newProxy(n, gatewayv1.Hostname(n+".example.com")))
	}
	for _, n := range names {
		rt.waitProgrammed(n)
	}
	holder := holderOf(g, replicas, rt.project)
	rep := rt.passes(holder, rt.project, 1)
	g.Expect(rep.Plane).To(Equal(resync.PlaneVerified), rep.PlaneDetail)
	planeRecord(ctx, g, rt.env, rt.project)
	onHub := hubObjectsIn(ctx, g, rt.hubNS())
	anchors := anchorsIn(onHub)
	g.Expect(anchors).To(HaveLen(2*len(names)), "a Gateway's and an HTTPRoute's anchor per proxy")

	g.Expect(rt.env.RemoveProject(ctx, rt.project)).To(Succeed())
	for _, m := range replicas {
		g.Eventually(func() []string { return discovered(m) }, resyncPassesWithin, resyncPoll).ShouldNot(ContainElement(rt.project))
	}

	// No tombstone: reported, never deleted, however long the fake clock runs.
	// Passes from here on (pass reports carry the fake clock's time).
	mark := rt.clock.Now()
	stepFor(rt, 10*time.Second, func() {
		for _, obj := range onHub {
			g.Expect(exists(ctx, g, obj)).To(BeTrue(), "%T %s of a project with no Secret and no tombstone", obj, obj.GetName())
		}
	})
	for _, m := range replicas {
		g.Expect(hubDeletesBy(g, m.User, rt.hubNS())).To(BeEmpty(), "%s deleted nothing of the project", m.Name)
	}

	// The operator retires the project.
	retire(ctx, g, rt.env, rt.project)
	g.Eventually(func(g Gomega) {
		rt.clock.Step(resyncStep)
		for _, a := range anchors {
			g.Expect(exists(ctx, g, a)).To(BeFalse(), "anchor %s of the retired project", a.GetName())
		}
		// Counted below: the deleting passes' reports, which come after their deletes
		// (and so after the deletes' audit records). Wait for them too.
		reported := map[string]bool{}
		for _, m := range replicas {
			for _, r := range reportsSince(m, rt.project, mark) {
				for _, a := range r.Anchors {
					if a.Action == resync.ActionDeleted {
						reported[a.Name] = true
					}
				}
			}
		}
		for _, a := range anchors {
			g.Expect(reported).To(HaveKey(a.GetName()), "the deletion of anchor %s reported", a.GetName())
		}
	}, retiredWithin, resyncPoll).Should(Succeed(), "the retired project's anchors are collected by the replicas")
	for _, obj := range onHub {
		g.Eventually(func(g Gomega) bool { return exists(ctx, g, obj) }, gwGCWithin, gwPoll).Should(BeFalse(), "%T %s", obj, obj.GetName())
	}

	// Exactly one replica collected them, the coordinator: every anchor delete the hub
	// saw was sent by one user, and only that replica passed over the retired project.
	var deleters []string
	for _, m := range replicas {
		var deletes []string
		for _, ev := range hubDeletesBy(g, m.User, rt.hubNS()) {
			if ev.ObjectRef.Resource == "configmaps" && strings.HasPrefix(ev.ObjectRef.Name, anchor.NamePrefix) {
				deletes = append(deletes, ev.ObjectRef.Name)
			}
		}
		if len(deletes) > 0 {
			deleters = append(deleters, m.Name)
			for _, a := range anchors {
				g.Expect(deletes).To(ContainElement(a.GetName()), "%s deleted every anchor", m.Name)
			}
		}
	}
	g.Expect(deleters).To(HaveLen(1), "anchor deletes by exactly one replica")
	var collector *harness.Manager
	for _, m := range replicas {
		if m.Name == deleters[0] {
			collector = m
		} else {
			g.Expect(reportsSince(m, rt.project, mark)).To(BeEmpty(), "%s is not the coordinator: no pass over the retired project", m.Name)
		}
	}
	// The absence was confirmed on two passes: a retired pass that deleted nothing came
	// before the one that deleted.
	deleted, before := 0, 0
	for _, r := range reportsSince(collector, rt.project, mark) {
		g.Expect(r.Retired).To(BeTrue(), "a retired project's pass: %s", r.Aborted)
		for _, a := range r.Anchors {
			if a.Action == resync.ActionDeleted {
				deleted++
				g.Expect(a.Verdict.Decision).To(Equal(resync.Collect))
				g.Expect(a.Verdict.Reason).To(Equal(resync.ReasonProjectRetired))
			}
		}
		if deleted == 0 {
			before++
		}
	}
	g.Expect(deleted).To(Equal(len(anchors)))
	g.Expect(before).To(BeNumerically(">=", 1), "a pass found the project retired before one collected")
	// The retired project's plane identity record is dropped.
	g.Eventually(func() bool {
		rt.clock.Step(resyncStep)
		err := hub.Client.Get(ctx, client.ObjectKey{Namespace: rt.env.ProviderNamespace, Name: resync.PlaneIdentityName(rt.project)}, &corev1.ConfigMap{})
		return err != nil && client.IgnoreNotFound(err) == nil
	}, retiredWithin, resyncPoll).Should(BeTrue(), "the plane record of a retired project is dropped")
}

// TestResyncRetiredProjectDryRunDeletesNothing: a replica in dry-run decides the
// retired project's anchors and reports them collectable, and deletes nothing.
func TestResyncRetiredProjectDryRunDeletesNothing(t *testing.T) {
	rt := newResyncTest(t, planeB)
	g, ctx := rt.g, rt.ctx
	m := rt.startResync("retired-dry", func(o *app.Options) { o.Resync.DryRun = true })
	rt.createProxy(rt.newProxy("web", "web.example.com"))
	rt.waitProgrammed("web")
	rt.passes(m, rt.project, 1)
	onHub := hubObjectsIn(ctx, g, rt.hubNS())
	anchors := anchorsIn(onHub)
	g.Expect(anchors).To(HaveLen(2))

	g.Expect(rt.env.RemoveProject(ctx, rt.project)).To(Succeed())
	g.Eventually(func() []string { return discovered(m) }, resyncPassesWithin, resyncPoll).ShouldNot(ContainElement(rt.project))
	retire(ctx, g, rt.env, rt.project)

	// Passes decide every anchor collectable, confirmed, and act on none.
	g.Eventually(func(g Gomega) {
		rt.clock.Step(resyncStep)
		rep, ok := m.ResyncLog.LastReport(rt.project)
		g.Expect(ok).To(BeTrue(), "a finished pass over the retired project")
		g.Expect(rep.Retired).To(BeTrue())
		g.Expect(rep.DryRun).To(BeTrue())
		g.Expect(rep.Count(resync.Collect)).To(Equal(len(anchors)), "%v", decisionsOf(rep))
	}, retiredWithin, resyncPoll).Should(Succeed())
	stepFor(rt, 5*time.Second, func() {})
	for _, obj := range onHub {
		g.Expect(exists(ctx, g, obj)).To(BeTrue(), "%T %s survives a dry-run replica", obj, obj.GetName())
	}
	g.Expect(hubDeletesBy(g, m.User, rt.hubNS())).To(BeEmpty(), "a dry-run replica deletes nothing")
	for _, r := range m.ResyncLog.Reports(rt.project) {
		g.Expect(r.CountAction(resync.ActionDeleted)).To(BeZero())
	}
}

// holderOf returns the replica that holds project, once one does.
func holderOf(g *WithT, replicas []*harness.Manager, project string) *harness.Manager {
	var holder *harness.Manager
	g.Eventually(func() bool {
		for _, m := range replicas {
			if m.Replica.Shard.Admits(project) {
				holder = m
				return true
			}
		}
		return false
	}, resyncPassesWithin, resyncPoll).Should(BeTrue(), "a replica holds %s", project)
	return holder
}

// reportsSince returns m's reports of passes over project started at or after mark
// (the fake clock's time).
func reportsSince(m *harness.Manager, project string, mark time.Time) []resync.PassReport {
	var out []resync.PassReport
	for _, r := range m.ResyncLog.Reports(project) {
		if !r.Start.Before(mark) {
			out = append(out, r)
		}
	}
	return out
}

// anchorsIn picks the anchors out of hub objects.
func anchorsIn(objs []client.Object) []client.Object {
	var out []client.Object
	for _, obj := range objs {
		if _, ok := obj.(*corev1.ConfigMap); ok && strings.HasPrefix(obj.GetName(), anchor.NamePrefix) {
			out = append(out, obj)
		}
	}
	return out
}

// retire writes a tombstone for project in the lease namespace (the provider namespace
// in these tests), as docs/operations.md says.
func retire(ctx context.Context, g *WithT, e *harness.Env, project string) {
	g.Expect(hub.Client.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "retired-" + rand.String(6), Namespace: e.ProviderNamespace, Labels: map[string]string{resync.LabelTombstone: "true"}},
		Data:       map[string]string{resync.TombstoneKeyProject: project},
	})).To(Succeed())
}

// stepFor steps the resync's fake clock for d of real time, calling check after every
// step.
func stepFor(rt *resyncTest, d time.Duration, check func()) {
	for end := time.Now().Add(d); time.Now().Before(end); {
		rt.clock.Step(resyncStep)
		check()
		time.Sleep(resyncPoll)
	}
}
