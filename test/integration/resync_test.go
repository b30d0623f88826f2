package integration

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/multicluster-runtime/providers/kubeconfig"

	"anchorage/internal/harness"
	"anchorage/internal/testenv"
	"anchorage/pkg/anchor"
	"anchorage/pkg/anchor/resync"
)

// TestResyncClearsStrandedBacklog: 145 anchors stranded in one hub namespace (owners
// that never existed or were deleted while no manager ran; Gateways and HTTPRoutes; a
// third with the legacy cluster-_<project> label), each with a downstream object,
// beside 50 live proxies programmed by the gateway path. With default settings (the
// fake clock makes the anchors old), all 145 and their downstream objects are gone
// within a few passes, every live anchor and downstream object survives, and nothing
// halts.
func TestResyncClearsStrandedBacklog(t *testing.T) {
	rt := newResyncTest(t, planeA)
	g, ctx := rt.g, rt.ctx

	var stranded []planted
	for i := range 145 {
		kind := "Gateway"
		if i%2 == 1 {
			kind = "HTTPRoute"
		}
		name := fmt.Sprintf("stranded-%03d", i)
		uid := uuid.NewUUID()
		if i%5 < 2 {
			// Deleted while no manager ran.
			var up client.Object = &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: rt.ns.Name}}
			if kind == "Gateway" {
				up = rt.upstreamGateway(name, "gone")
			} else {
				g.Expect(rt.plane.Client.Create(ctx, up)).To(Succeed())
			}
			uid = up.GetUID()
			g.Expect(rt.plane.Client.Delete(ctx, up)).To(Succeed())
		}
		owner := anchor.Owner{Project: rt.project, Group: gatewayv1.GroupName, Kind: kind, Namespace: rt.ns.Name, Name: name, UID: uid}
		stranded = append(stranded, plant(ctx, g, owner, rt.hubNS(), i%3 == 0))
	}

	m := rt.startResync("backlog", nil)
	for i := range 50 {
		rt.createProxy(rt.newProxy(fmt.Sprintf("live-%02d", i), gatewayv1.Hostname(fmt.Sprintf("live-%02d.example.com", i))))
	}
	for i := range 50 {
		rt.waitProgrammed(fmt.Sprintf("live-%02d", i))
	}
	var live []client.Object
	for i := range 50 {
		name := fmt.Sprintf("live-%02d", i)
		gw, route := rt.upstream(name)
		for _, owner := range []anchor.Owner{rt.owner("Gateway", gw), rt.owner("HTTPRoute", route)} {
			as := anchorsNamed(ctx, g, string(owner.UID))
			g.Expect(as).To(HaveLen(1))
			live = append(live, &as[0])
		}
		for _, obj := range []client.Object{&gatewayv1.Gateway{}, &gatewayv1.HTTPRoute{}} {
			g.Expect(hub.Client.Get(ctx, client.ObjectKey{Namespace: rt.hubNS(), Name: name}, obj)).To(Succeed())
			live = append(live, obj)
		}
	}
	g.Expect(live).To(HaveLen(200))

	start := time.Now()
	mark := len(m.ResyncLog.Reports(rt.project))
	// The pass counts, the reports and the deletion counter read below trail the
	// anchors' absence (a pass reports and counts after its deletes): wait for them.
	rt.passesUntilReported(m, rt.project, 3*time.Minute, func(g Gomega, _ resync.PassReport) {
		left := 0
		for _, s := range stranded {
			if exists(ctx, g, s.anchor) {
				left++
			}
		}
		g.Expect(left).To(BeZero(), "stranded anchors left")
	})
	passes := passesToLastDeletion(m.ResyncLog.Reports(rt.project)[mark:])
	t.Logf("145 stranded anchors collected in %d passes, %s", passes, time.Since(start).Round(time.Millisecond))
	// Typically 4: one to record the proofs, then 50, 50 and 45 at the default cap (a
	// validity lapse under load restarts the confirmation, hence the margin).
	g.Expect(passes).To(BeNumerically("<=", 8), "a few passes")
	for _, s := range stranded {
		g.Eventually(func(g Gomega) bool { return exists(ctx, g, s.downstream) }, gwGCWithin, gwPoll).Should(BeFalse(), "downstream %s collected", s.downstream.GetName())
	}
	for _, obj := range live {
		g.Expect(exists(ctx, g, obj)).To(BeTrue(), "live %T %s survives", obj, obj.GetName())
	}
	for _, rep := range m.ResyncLog.Reports(rt.project) {
		g.Expect(rep.Halt).To(BeEmpty())
		g.Expect(rep.CountAction(resync.ActionDeleted)).To(BeNumerically("<=", 50), "the default cap")
		t.Logf("pass at %s: kept %d, suspect %d, collect %d (deleted %d), unknown %d, %d API calls, %s",
			rep.Start.Format(time.TimeOnly), rep.Count(resync.Keep), rep.Count(resync.Suspect), rep.Count(resync.Collect),
			rep.CountAction(resync.ActionDeleted), rep.Count(resync.Unknown), rep.APICalls, rep.Duration.Round(time.Millisecond))
	}
	halts, err := m.Gauge("anchorage_resync_halts_total", "reason", resync.HaltCeiling)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(halts).To(BeZero())
	deleted, err := m.Gauge("anchorage_resync_collections_total", "action", string(resync.ActionDeleted))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(deleted).To(BeNumerically(">=", 145), "every stranded anchor deleted by the resync")
}

// TestResyncUnreachableProject: while the project's API server is cut off, passes
// delete nothing of that project and report its orphans unknown (the cache still keeps
// the live ones); once restored, the genuine orphans are collected.
func TestResyncUnreachableProject(t *testing.T) {
	rt := newResyncTest(t, planeB)
	g, ctx := rt.g, rt.ctx
	live := rt.liveGateway("alive")
	orphans := []planted{rt.orphanGateway("gone-1"), rt.orphanGateway("gone-2")}
	m := rt.startResync("cut", nil)
	rep := rt.passes(m, rt.project, 1)
	g.Expect(decisionsOf(rep)).To(HaveKeyWithValue(live.anchor.Name, "keep/in-cache"))

	p := rt.env.Project(rt.project)
	for _, mode := range []harness.CutMode{harness.Refuse, harness.BlackHole} {
		p.Proxy.Cut(mode)
		rep = rt.passes(m, rt.project, 2)
		g.Expect(rep.Plane).To(Equal(resync.PlaneUnverified), "mode %d", mode)
		d := decisionsOf(rep)
		g.Expect(d).To(HaveKeyWithValue(live.anchor.Name, "keep/in-cache"))
		for _, o := range orphans {
			g.Expect(d).To(HaveKeyWithValue(o.anchor.Name, "unknown/plane-unverified"))
			g.Expect(exists(ctx, g, o.anchor)).To(BeTrue())
		}
	}
	p.Proxy.Restore()
	rt.passesUntil(m, rt.project, time.Minute, func(g Gomega, rep resync.PassReport) {
		for _, o := range orphans {
			g.Expect(exists(ctx, g, o.anchor)).To(BeFalse())
		}
	})
	g.Expect(exists(ctx, g, live.anchor)).To(BeTrue())
	g.Expect(exists(ctx, g, live.downstream)).To(BeTrue())
}

// TestResyncKindNotServed: anchors of a kind the project plane has never served are
// reported unknown and never deleted, pass after pass.
func TestResyncKindNotServed(t *testing.T) {
	rt := newResyncTest(t, planeA)
	g, ctx := rt.g, rt.ctx
	var widgets []planted
	for i := range 3 {
		owner := anchor.Owner{Project: rt.project, Group: "example.com", Kind: "Widget", Namespace: rt.ns.Name, Name: fmt.Sprintf("w-%d", i), UID: uuid.NewUUID()}
		widgets = append(widgets, plant(ctx, g, owner, rt.hubNS(), false))
	}
	// A kind the plane serves, in a group it serves, but not this kind.
	mesh := anchor.Owner{Project: rt.project, Group: gatewayv1.GroupName, Kind: "Mesh", Namespace: rt.ns.Name, Name: "m", UID: uuid.NewUUID()}
	widgets = append(widgets, plant(ctx, g, mesh, rt.hubNS(), false))
	m := rt.startResync("kind", nil)
	rep := rt.passes(m, rt.project, 4)
	for _, w := range widgets {
		l, ok := rep.Find(w.anchor.Name)
		g.Expect(ok).To(BeTrue())
		g.Expect(l.Verdict).To(Equal(resync.Verdict{Decision: resync.Unknown, Reason: resync.ReasonKindNotServed}))
		g.Expect(exists(ctx, g, w.anchor)).To(BeTrue())
		g.Expect(exists(ctx, g, w.downstream)).To(BeTrue())
	}
	unknown, err := m.Gauge("anchorage_resync_decisions_total", "decision", "unknown", "reason", string(resync.ReasonKindNotServed))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(unknown).To(BeNumerically(">=", 16))
}

// TestResyncCacheLag: an upstream Gateway created moments before a pass, which the
// owner's cache has not seen (its watch is held off), is confirmed live and kept.
func TestResyncCacheLag(t *testing.T) {
	rt := newResyncTest(t, planeA)
	g, ctx := rt.g, rt.ctx
	m := rt.startResync("lag", nil)
	rt.passes(m, rt.project, 1)

	// Hold off the project cache's Gateway list and watch, and drop its connections so
	// the running watch ends: the cache keeps what it had.
	m.SetFault(func(tr harness.Traffic, r *http.Request) (time.Duration, error) {
		if tr == harness.ProjectTraffic && strings.HasSuffix(r.URL.Path, "/gateways") {
			return 0, errors.New("gateway watch held off by the test")
		}
		return 0, nil
	})
	t.Cleanup(func() { m.SetFault(nil) })
	p := rt.env.Project(rt.project)
	p.Proxy.Cut(harness.Refuse)
	p.Proxy.Restore()

	fresh := rt.liveGateway("fresh")
	rep := rt.passes(m, rt.project, 3)
	l, ok := rep.Find(fresh.anchor.Name)
	g.Expect(ok).To(BeTrue())
	g.Expect(l.Verdict).To(Equal(resync.Verdict{Decision: resync.Keep, Reason: resync.ReasonLive}), "read live: the cache has not seen it")
	g.Expect(exists(ctx, g, fresh.anchor)).To(BeTrue())
	g.Expect(exists(ctx, g, fresh.downstream)).To(BeTrue())
}

// TestResyncRepointedSecretHalts: a project's Secret repointed at another, empty
// plane changes the plane identity: nothing of the project is deleted (its owners are
// all "missing" on the new plane) and the halt alert is raised (Warning Event on the
// Secret, anchorage_resync_projects_halted).
func TestResyncRepointedSecretHalts(t *testing.T) {
	rt := newResyncTest(t, planeA)
	g, ctx := rt.g, rt.ctx
	live := []planted{rt.liveGateway("a"), rt.liveGateway("b")}
	m := rt.startResync("repoint", nil)
	rep := rt.passes(m, rt.project, 1)
	g.Expect(rep.Plane).To(Equal(resync.PlaneVerified))

	crds, err := testenv.ProjectCRDs()
	g.Expect(err).NotTo(HaveOccurred())
	empty, err := harness.StartControlPlane("empty", harness.PlaneOptions{CRDs: crds})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = empty.Stop() })
	_, kc, err := empty.User("anchorage-project", "system:masters")
	g.Expect(err).NotTo(HaveOccurred())
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: rt.project, Namespace: rt.env.ProviderNamespace}}
	g.Eventually(func() error {
		if err := hub.Client.Get(ctx, client.ObjectKeyFromObject(secret), secret); err != nil {
			return err
		}
		secret.Data[kubeconfig.DefaultKubeconfigSecretKey] = kc
		return hub.Client.Update(ctx, secret)
	}, 10*time.Second, resyncPoll).Should(Succeed())

	rep = rt.passesUntil(m, rt.project, resyncPassesWithin, func(g Gomega, rep resync.PassReport) {
		g.Expect(rep.Plane).To(Equal(resync.PlaneChanged))
	})
	rep = rt.passes(m, rt.project, 2)
	g.Expect(rep.Halt).To(Equal(resync.HaltPlaneChanged))
	for _, l := range live {
		a, ok := rep.Find(l.anchor.Name)
		g.Expect(ok).To(BeTrue())
		g.Expect(a.Verdict).To(Equal(resync.Verdict{Decision: resync.Unknown, Reason: resync.ReasonPlaneChanged}))
		g.Expect(exists(ctx, g, l.anchor)).To(BeTrue())
		g.Expect(exists(ctx, g, l.downstream)).To(BeTrue())
	}
	halted, err := m.Gauge("anchorage_resync_projects_halted", "reason", resync.HaltPlaneChanged)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(halted).To(Equal(1.0))
	g.Eventually(func(g Gomega) {
		evs := hubEvents(ctx, g, rt.env.ProviderNamespace, "PlaneIdentityChanged")
		g.Expect(evs).NotTo(BeEmpty())
		g.Expect(evs[0].Type).To(Equal(corev1.EventTypeWarning))
		g.Expect(evs[0].Regarding.Name).To(Equal(rt.project))
		g.Expect(evs[0].Note).To(ContainSubstring(resync.PlaneIdentityName(rt.project)))
	}, 10*time.Second, resyncPoll).Should(Succeed())
}

// TestResyncRecreatedNamespace: an upstream Namespace deleted and recreated (same
// name, new UID) while no manager ran: the anchors left in the old ns-<uid> are
// collected (proof: the namespace's UID), nothing in the new one is touched, even an
// owner of the same name, and nothing halts.
func TestResyncRecreatedNamespace(t *testing.T) {
	rt := newResyncTest(t, planeB)
	g, ctx := rt.g, rt.ctx
	var old []planted
	for _, name := range []string{"web", "api"} {
		old = append(old, rt.liveGateway(name))
	}
	oldNS := rt.ns.DeepCopy()

	// No manager runs. The plane runs no namespace controller: empty the namespace,
	// then finalize it by hand.
	for _, o := range old {
		g.Expect(rt.plane.Client.Delete(ctx, &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: oldNS.Name, Name: o.owner.Name}})).To(Succeed())
	}
	g.Expect(rt.plane.Client.Delete(ctx, oldNS)).To(Succeed())
	cs, err := kubernetes.NewForConfig(rt.plane.Config)
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() error {
		cur, err := cs.CoreV1().Namespaces().Get(ctx, oldNS.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Spec.Finalizers = nil
		_, err = cs.CoreV1().Namespaces().Finalize(ctx, cur, metav1.UpdateOptions{})
		return err
	}, 10*time.Second, resyncPoll).Should(Succeed())
	g.Eventually(func() bool { return gone(ctx, rt.plane.Client, oldNS.DeepCopy()) }, 10*time.Second, resyncPoll).Should(BeTrue())
	rt.ns = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: oldNS.Name}}
	g.Expect(rt.plane.Client.Create(ctx, rt.ns)).To(Succeed())
	g.Expect(rt.ns.UID).NotTo(Equal(oldNS.UID))
	_, err = anchor.EnsureMappedNamespace(ctx, hub.Client, rt.project, rt.ns)
	g.Expect(err).NotTo(HaveOccurred())
	fresh := []planted{rt.liveGateway("web"), rt.liveGateway("other")}

	m := rt.startResync("ns", nil)
	rt.passesUntil(m, rt.project, resyncPassesWithin, func(g Gomega, _ resync.PassReport) {
		for _, o := range old {
			g.Expect(exists(ctx, g, o.anchor)).To(BeFalse(), "old anchor %s", o.anchor.Name)
		}
	})
	for _, o := range old {
		g.Eventually(func(g Gomega) bool { return exists(ctx, g, o.downstream) }, gwGCWithin, gwPoll).Should(BeFalse())
	}
	rep := rt.passes(m, rt.project, 1)
	for _, f := range fresh {
		g.Expect(exists(ctx, g, f.anchor)).To(BeTrue())
		g.Expect(exists(ctx, g, f.downstream)).To(BeTrue())
		g.Expect(decisionsOf(rep)).To(HaveKeyWithValue(f.anchor.Name, "keep/in-cache"))
	}
	collected := 0
	for _, r := range m.ResyncLog.Reports(rt.project) {
		g.Expect(r.Halt).To(BeEmpty())
		for _, a := range r.Anchors {
			if a.Action == resync.ActionDeleted {
				g.Expect(a.Reason).To(Equal(resync.ReasonNamespaceRecreated))
				collected++
			}
		}
	}
	g.Expect(collected).To(Equal(len(old)))
}

// TestResyncRecreatedOwnerWaitsForReattachment: an upstream Gateway deleted while no
// manager ran and recreated under the same name, its reconcile held back (its class is
// not ours yet). Its downstream Gateway hangs on the stale anchor alone, so the stale
// anchor stays; once the live path re-attaches it, the stale anchor is collected, and
// the downstream Gateway is never deleted.
func TestResyncRecreatedOwnerWaitsForReattachment(t *testing.T) {
	rt := newResyncTest(t, planeA)
	g, ctx := rt.g, rt.ctx
	first := rt.startResync("owner1", nil)
	gw1 := rt.upstreamGateway("edge", rt.class)
	down := &gatewayv1.Gateway{}
	g.Eventually(func() error {
		return hub.Client.Get(ctx, client.ObjectKey{Namespace: rt.hubNS(), Name: "edge"}, down)
	}, gwProgrammedWithin, gwPoll).Should(Succeed())
	stale := anchorsNamed(ctx, g, string(gw1.UID))
	g.Expect(stale).To(HaveLen(1))
	rt.stopManager(first)

	// While no manager runs: the Gateway goes (its finalizer stripped) and comes back
	// under the same name, of a class that is not ours.
	g.Expect(rt.plane.Client.Get(ctx, client.ObjectKeyFromObject(gw1), gw1)).To(Succeed())
	gw1.Finalizers = nil
	g.Expect(rt.plane.Client.Update(ctx, gw1)).To(Succeed())
	g.Expect(rt.plane.Client.Delete(ctx, gw1)).To(Succeed())
	g.Eventually(func() bool { return gone(ctx, rt.plane.Client, gw1.DeepCopy()) }, 10*time.Second, resyncPoll).Should(BeTrue())
	gw2 := rt.upstreamGateway("edge", "held-back")

	second := rt.startResync("owner2", nil)
	rep := rt.passes(second, rt.project, 4)
	l, ok := rep.Find(stale[0].Name)
	g.Expect(ok).To(BeTrue())
	g.Expect(l.Verdict).To(Equal(resync.Verdict{Decision: resync.Suspect, Reason: resync.ReasonAwaitingReattach, Proof: resync.ReasonReplaced}))
	g.Expect(l.Action).To(Equal(resync.ActionOwnerEnqueued))
	g.Expect(exists(ctx, g, &stale[0])).To(BeTrue())
	g.Expect(exists(ctx, g, down)).To(BeTrue())

	// The hold is released: the live path re-attaches the downstream Gateway to the new
	// Gateway's anchor, and the stale anchor goes.
	g.Eventually(func() error {
		if err := rt.plane.Client.Get(ctx, client.ObjectKeyFromObject(gw2), gw2); err != nil {
			return err
		}
		gw2.Spec.GatewayClassName = gatewayv1.ObjectName(rt.class)
		return rt.plane.Client.Update(ctx, gw2)
	}, 10*time.Second, resyncPoll).Should(Succeed())
	rt.passesUntil(second, rt.project, resyncPassesWithin, func(g Gomega, _ resync.PassReport) {
		g.Expect(exists(ctx, g, &stale[0])).To(BeFalse())
	})
	current := anchorsNamed(ctx, g, string(gw2.UID))
	g.Expect(current).To(HaveLen(1))
	g.Consistently(func(g Gomega) {
		got := &gatewayv1.Gateway{}
		g.Expect(hub.Client.Get(ctx, client.ObjectKeyFromObject(down), got)).To(Succeed())
		g.Expect(got.UID).To(Equal(down.UID), "the downstream Gateway is never deleted")
		expectAttached(g, got, rt.gatewayOwner("edge", gw2.UID), &current[0])
	}, 3*time.Second, gwPoll).Should(Succeed())
}
