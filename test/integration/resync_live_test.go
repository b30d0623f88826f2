package integration

// Issue 15's acceptance, across the API: the resync never deletes a live anchor when a
// project's Secret is replaced (another plane, the same plane), clears a stranded
// backlog whose dependents carry no owner labels, and is not held up by anchors of a
// kind the project's plane forbids the manager to read. The hub's garbage collector is
// on (TestMain), so every cascade asserted here is the real one.

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/uuid"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/multicluster-runtime/providers/kubeconfig"

	"anchorage/internal/app"
	"anchorage/internal/harness"
	"anchorage/pkg/anchor"
	"anchorage/pkg/anchor/resync"
	"anchorage/pkg/shard"
)

// Data keys of a plane identity record (pkg/anchor/resync, plane_identity.go): the plane it
// records and the Secret it was last verified with.
const (
	recordKeyPlane  = "default-namespace-uid"
	recordKeySecret = "secret-uid"
)

// TestResyncSecretRecreatedForAnotherPlaneHalts: a project with live proxies on plane
// A has its kubeconfig Secret deleted and, once the manager has let the project go,
// created again pointing at plane C, where the project's namespace and proxies were
// recreated (a migration, a restore onto a new cluster). Several passes past the
// confirmation delay delete nothing of the project on the hub: not the live proxies'
// anchors and downstream Gateways and HTTPRoutes, not even anchors of owners that
// exist on neither plane. The halt is visible: a Warning Event on the new Secret, the
// anchorage_resync_projects_halted gauge, and the sweep's table. Once an operator
// acknowledges plane C on the record, as docs/recovery.md says, the project is judged
// against plane C: the anchors of plane A (the proxies that moved and those that exist
// on neither plane) are orphans there and go with their downstream objects, and
// everything plane C's proxies have on the hub stays.
func TestResyncSecretRecreatedForAnotherPlaneHalts(t *testing.T) {
	rt := newResyncTest(t, planeA)
	g, ctx := rt.g, rt.ctx
	// Plane C holds the project's namespace under the same name, with new UIDs.
	xt := &gatewayTest{t: t, g: g, ctx: ctx, env: rt.env, project: rt.project, plane: planeC, class: rt.class,
		ns: &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: rt.ns.Name}}}
	g.Expect(planeC.Client.Create(ctx, xt.ns)).To(Succeed())
	// Registered before the manager starts, so it runs after the manager has stopped.
	t.Cleanup(xt.cleanUpstream)

	m := rt.startResync("replaced", nil)
	names := []string{"web", "api", "shop"}
	for _, n := range names {
		rt.createProxy(rt.newProxy(n, gatewayv1.Hostname(n+".example.com")))
	}
	for _, n := range names {
		rt.waitProgrammed(n)
	}
	rep := rt.passes(m, rt.project, 1)
	g.Expect(rep.Plane).To(Equal(resync.PlaneVerified))
	planeAUID, planeCUID := defaultNamespaceUID(ctx, g, planeA), defaultNamespaceUID(ctx, g, planeC)
	record := planeRecord(ctx, g, rt.env, rt.project)
	g.Expect(record.Data).To(HaveKeyWithValue(recordKeyPlane, string(planeAUID)))

	onA := hubObjectsIn(ctx, g, rt.hubNS())
	for _, n := range names {
		gw, route := rt.upstream(n)
		g.Expect(anchorsNamed(ctx, g, string(gw.UID))).To(HaveLen(1))
		g.Expect(anchorsNamed(ctx, g, string(route.UID))).To(HaveLen(1))
	}
	g.Expect(len(onA)).To(BeNumerically(">=", 4*len(names)), "two anchors, a Gateway and an HTTPRoute per proxy")
	deletesBefore := len(hubDeletesBy(g, m.User, rt.hubNS()))

	// The same proxies on plane C, not programmed yet: no Secret names plane C.
	for _, n := range names {
		xt.createProxy(xt.newProxy(n, gatewayv1.Hostname(n+".example.com")))
	}

	// The Secret is deleted; once the manager has dropped the project, it is created
	// again for plane C (a new Secret UID, a new kubeconfig).
	oldSecret := projectSecret(ctx, g, rt.env, rt.project)
	g.Expect(rt.env.RemoveProject(ctx, rt.project)).To(Succeed())
	g.Eventually(func() []string { return discovered(m) }, resyncPassesWithin, resyncPoll).ShouldNot(ContainElement(rt.project))
	_, err := rt.env.AddProject(ctx, rt.project, planeC)
	g.Expect(err).NotTo(HaveOccurred())
	newSecret := projectSecret(ctx, g, rt.env, rt.project)
	g.Expect(newSecret.UID).NotTo(Equal(oldSecret.UID))

	// Anchors of owners that exist on neither plane, stranded in plane A's hub
	// namespace: while the project is halted they must stay too.
	neither := []planted{rt.orphanGateway("never-gw"), plant(ctx, g,
		anchor.Owner{Project: rt.project, Group: gatewayv1.GroupName, Kind: "HTTPRoute", Namespace: rt.ns.Name, Name: "never-route", UID: uuid.NewUUID()},
		rt.hubNS(), true)}

	rt.passesUntil(m, rt.project, resyncPassesWithin, func(g Gomega, rep resync.PassReport) {
		// A deletion cannot be undone: fail at once, not at the timeout.
		var deleted []string
		for _, obj := range append(append([]client.Object(nil), onA...), neither[0].anchor, neither[1].anchor) {
			if !exists(ctx, g, obj) {
				deleted = append(deleted, fmt.Sprintf("%T %s", obj, obj.GetName()))
			}
		}
		if len(deleted) > 0 {
			StopTrying("objects of the project deleted after its Secret named another plane").
				Attach("deleted", deleted).Attach("plane", rep.Plane.String()+": "+rep.PlaneDetail).Now()
		}
		g.Expect(rep.Halt).To(Equal(resync.HaltPlaneChanged), "plane %s: %s", rep.Plane, rep.PlaneDetail)
	})
	// Several passes, each stepping the fake clock well past the confirmation delay.
	rep = rt.passes(m, rt.project, 4)
	g.Expect(rep.Plane).To(Equal(resync.PlaneChanged))
	g.Expect(rep.Halt).To(Equal(resync.HaltPlaneChanged))
	for _, obj := range append(append([]client.Object(nil), onA...), neither[0].anchor, neither[1].anchor) {
		if !strings.HasPrefix(obj.GetName(), anchor.NamePrefix) {
			continue
		}
		l, ok := rep.Find(obj.GetName())
		g.Expect(ok).To(BeTrue(), "anchor %s in the report", obj.GetName())
		g.Expect(l.Verdict).To(Equal(resync.Verdict{Decision: resync.Unknown, Reason: resync.ReasonPlaneChanged}), "anchor %s", obj.GetName())
	}
	// The gateway path still works on the new plane while deletion is halted.
	for _, n := range names {
		xt.waitProgrammed(n)
	}
	rt.passes(m, rt.project, 2)
	for _, obj := range onA {
		g.Expect(exists(ctx, g, obj)).To(BeTrue(), "%T %s of a live proxy survives the halt", obj, obj.GetName())
	}
	for _, o := range neither {
		g.Expect(exists(ctx, g, o.anchor)).To(BeTrue(), "nothing is deleted while halted")
		g.Expect(exists(ctx, g, o.downstream)).To(BeTrue())
	}
	g.Expect(hubDeletesBy(g, m.User, rt.hubNS())).To(HaveLen(deletesBefore), "the manager deleted nothing in the project's hub namespace")

	// The halt is visible: the alert's gauge, a Warning Event on the new Secret that
	// names the record and the plane to acknowledge, and the sweep.
	halted, err := m.Gauge("anchorage_resync_projects_halted", "reason", resync.HaltPlaneChanged)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(halted).To(Equal(1.0))
	g.Eventually(func(g Gomega) {
		var onNew []eventsv1.Event
		for _, e := range hubEvents(ctx, g, rt.env.ProviderNamespace, "PlaneIdentityChanged") {
			if e.Regarding.UID == newSecret.UID {
				onNew = append(onNew, e)
			}
		}
		g.Expect(onNew).NotTo(BeEmpty())
		g.Expect(onNew[0].Type).To(Equal(corev1.EventTypeWarning))
		g.Expect(onNew[0].Note).To(And(ContainSubstring(resync.PlaneIdentityName(rt.project)), ContainSubstring(string(planeCUID)), ContainSubstring(string(planeAUID))))
	}, 10*time.Second, resyncPoll).Should(Succeed())
	reports, table := sweepDryRun(ctx, g, rt.env)
	// The hub holds other tests' anchors too, listed under NO PROJECT SECRET.
	t.Logf("sweep while halted:\n%s", strings.SplitN(table, "NO PROJECT SECRET", 2)[0])
	var swept *resync.PassReport
	for i := range reports {
		if reports[i].Project == rt.project {
			swept = &reports[i]
		}
	}
	g.Expect(swept).NotTo(BeNil(), "the sweep reports the project")
	g.Expect(swept.Plane).To(Equal(resync.PlaneChanged))
	g.Expect(swept.Halt).To(Equal(resync.HaltPlaneChanged))
	g.Expect(swept.Count(resync.Collect)).To(BeZero())
	g.Expect(table).To(And(ContainSubstring("PROJECT "+rt.project), ContainSubstring("plane changed"), ContainSubstring("HALTED: "+resync.HaltPlaneChanged)))
	g.Expect(hasLine(table, "unknown", "plane-changed", neither[0].anchor.Name)).To(BeTrue(), "the stranded anchor's line")

	// The operator acknowledges plane C, the documented action.
	onC := hubObjectsIn(ctx, g, anchor.MappedNamespace(xt.ns.UID))
	g.Expect(len(onC)).To(BeNumerically(">=", 4*len(names)))
	annotate(ctx, g, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: record.Namespace, Name: record.Name}}, resync.AnnotationAcknowledgePlane, string(planeCUID))
	rt.passesUntil(m, rt.project, resyncPassesWithin, func(g Gomega, rep resync.PassReport) {
		g.Expect(rep.Plane).To(Equal(resync.PlaneVerified), rep.PlaneDetail)
		g.Expect(rep.Halt).To(BeEmpty())
	})
	record = planeRecord(ctx, g, rt.env, rt.project)
	g.Expect(record.Data).To(And(HaveKeyWithValue(recordKeyPlane, string(planeCUID)), HaveKeyWithValue(recordKeySecret, string(newSecret.UID))))
	g.Expect(record.Annotations).NotTo(HaveKey(resync.AnnotationAcknowledgePlane), "the pass that honours it removes it")
	g.Eventually(func(g Gomega) {
		evs := hubEvents(ctx, g, rt.env.ProviderNamespace, "PlaneIdentityAcknowledged")
		g.Expect(evs).NotTo(BeEmpty())
		g.Expect(evs[0].Type).To(Equal(corev1.EventTypeNormal))
		g.Expect(evs[0].Note).To(ContainSubstring(string(planeCUID)))
	}, 10*time.Second, resyncPoll).Should(Succeed())

	// Against plane C, plane A's anchors are orphans (their namespace is recreated
	// there): they go, with their downstream objects through the garbage collector.
	rt.passesUntil(m, rt.project, resyncPassesWithin, func(g Gomega, _ resync.PassReport) {
		for _, obj := range append(append([]client.Object(nil), onA...), neither[0].anchor, neither[1].anchor) {
			if strings.HasPrefix(obj.GetName(), anchor.NamePrefix) {
				g.Expect(exists(ctx, g, obj)).To(BeFalse(), "plane A anchor %s", obj.GetName())
			}
		}
	})
	g.Eventually(func(g Gomega) {
		for _, obj := range append(append([]client.Object(nil), onA...), neither[0].downstream, neither[1].downstream) {
			g.Expect(exists(ctx, g, obj)).To(BeFalse(), "%T %s", obj, obj.GetName())
		}
	}, gwGCWithin, gwPoll).Should(Succeed())
	rep = rt.passes(m, rt.project, 1)
	for _, obj := range onC {
		g.Expect(exists(ctx, g, obj)).To(BeTrue(), "%T %s of plane C's live proxy", obj, obj.GetName())
	}
	halted, err = m.Gauge("anchorage_resync_projects_halted", "reason", resync.HaltPlaneChanged)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(halted).To(BeZero())
	for _, r := range m.ResyncLog.Reports(rt.project) {
		for _, a := range r.Anchors {
			if a.Action == resync.ActionDeleted {
				g.Expect(r.Plane).To(Equal(resync.PlaneVerified))
				g.Expect(a.Namespace).To(Equal(rt.hubNS()), "only plane A's anchors are deleted")
				g.Expect(a.Reason).To(Equal(resync.ReasonNamespaceRecreated))
			}
		}
	}
}

// TestResyncSecretRecreatedForSamePlaneResumes: a project's Secret deleted and created
// again for the same plane (a GitOps replace, a credential rotation by re-creation).
// The plane identity record outlives the Secret (the same object), the new Secret is
// verified against it and noted on it, nothing halts, the live proxies keep everything
// they have on the hub, and an orphan stranded after the re-creation is collected with
// its downstream object.
func TestResyncSecretRecreatedForSamePlaneResumes(t *testing.T) {
	rt := newResyncTest(t, planeB)
	g, ctx := rt.g, rt.ctx
	m := rt.startResync("same", nil)
	names := []string{"web", "api"}
	for _, n := range names {
		rt.createProxy(rt.newProxy(n, gatewayv1.Hostname(n+".example.com")))
	}
	for _, n := range names {
		rt.waitProgrammed(n)
	}
	rep := rt.passes(m, rt.project, 1)
	g.Expect(rep.Plane).To(Equal(resync.PlaneVerified))
	planeUID := defaultNamespaceUID(ctx, g, planeB)
	record := planeRecord(ctx, g, rt.env, rt.project)
	g.Expect(record.Data).To(HaveKeyWithValue(recordKeyPlane, string(planeUID)))
	live := hubObjectsIn(ctx, g, rt.hubNS())
	g.Expect(len(live)).To(BeNumerically(">=", 4*len(names)))

	oldSecret := projectSecret(ctx, g, rt.env, rt.project)
	g.Expect(rt.env.RemoveProject(ctx, rt.project)).To(Succeed())
	g.Eventually(func() []string { return discovered(m) }, resyncPassesWithin, resyncPoll).ShouldNot(ContainElement(rt.project))
	_, err := rt.env.AddProject(ctx, rt.project, planeB)
	g.Expect(err).NotTo(HaveOccurred())
	newSecret := projectSecret(ctx, g, rt.env, rt.project)
	g.Expect(newSecret.UID).NotTo(Equal(oldSecret.UID))
	// Passes from here on (pass reports carry the fake clock's time).
	mark := rt.clock.Now()

	orphans := []planted{rt.orphanGateway("gone-gw"), plant(ctx, g,
		anchor.Owner{Project: rt.project, Group: gatewayv1.GroupName, Kind: "HTTPRoute", Namespace: rt.ns.Name, Name: "gone-route", UID: uuid.NewUUID()},
		rt.hubNS(), true)}
	rt.passesUntil(m, rt.project, resyncPassesWithin, func(g Gomega, _ resync.PassReport) {
		for _, o := range orphans {
			g.Expect(exists(ctx, g, o.anchor)).To(BeFalse(), "orphan %s", o.owner.Name)
		}
	})
	for _, o := range orphans {
		g.Eventually(func(g Gomega) bool { return exists(ctx, g, o.downstream) }, gwGCWithin, gwPoll).Should(BeFalse())
	}
	rt.passes(m, rt.project, 2)
	for _, obj := range live {
		g.Expect(exists(ctx, g, obj)).To(BeTrue(), "%T %s of a live proxy", obj, obj.GetName())
	}
	deleted := 0
	for _, r := range m.ResyncLog.Reports(rt.project) {
		if r.Aborted != "" || r.Start.Before(mark) {
			continue
		}
		g.Expect(r.Halt).To(BeEmpty())
		g.Expect(r.Plane).To(Equal(resync.PlaneVerified), r.PlaneDetail)
		deleted += r.CountAction(resync.ActionDeleted)
	}
	g.Expect(deleted).To(Equal(len(orphans)), "the orphans deleted after the re-creation")
	// The hub's own record: the manager deleted the orphans' anchors and nothing else.
	var deletes []string
	for _, ev := range hubDeletesBy(g, m.User, rt.hubNS()) {
		if ev.ResponseStatus.Code < 300 {
			deletes = append(deletes, ev.ObjectRef.Resource+"/"+ev.ObjectRef.Name)
		}
	}
	g.Expect(deletes).To(ConsistOf("configmaps/"+orphans[0].anchor.Name, "configmaps/"+orphans[1].anchor.Name))

	// The record is the one made for the first Secret, now noting the new one.
	after := planeRecord(ctx, g, rt.env, rt.project)
	g.Expect(after.UID).To(Equal(record.UID), "the record outlived the Secret")
	g.Expect(after.Data).To(And(HaveKeyWithValue(recordKeyPlane, string(planeUID)), HaveKeyWithValue(recordKeySecret, string(newSecret.UID))))
	g.Expect(hubEvents(ctx, g, rt.env.ProviderNamespace, "PlaneIdentityChanged")).To(BeEmpty())
}

// TestResyncClearsUnlabelledBacklog: a stranded backlog whose dependents hang on the
// stale anchor alone, most of them with no owner labels at all (Gateways, HTTPRoutes
// and ConfigMaps; some anchors with the legacy cluster-_<project> label), is cleared
// as the labelled one is: every anchor, and through the hub's garbage collector every
// dependent. An orphan whose dependent is labelled for an owner in another project
// keeps its anchor, pass after pass, and is reported (foreign-dependent, the dependent
// named). The live proxies beside them keep everything.
func TestResyncClearsUnlabelledBacklog(t *testing.T) {
	rt := newResyncTest(t, planeB)
	g, ctx := rt.g, rt.ctx

	var stranded []planted
	for i := range 40 {
		kind := "Gateway"
		if i%2 == 1 {
			kind = "HTTPRoute"
		}
		name := fmt.Sprintf("stranded-%02d", i)
		owner := anchor.Owner{Project: rt.project, Group: gatewayv1.GroupName, Kind: kind, Namespace: rt.ns.Name, Name: name, UID: uuid.NewUUID()}
		if i%4 == 0 {
			// Labelled, as the live path writes them: the backlog that was already cleared.
			stranded = append(stranded, plant(ctx, g, owner, rt.hubNS(), i%3 == 0))
			continue
		}
		a := plantAnchor(ctx, g, owner, rt.hubNS(), i%3 == 0)
		var dep client.Object
		meta := metav1.ObjectMeta{Name: name, Namespace: rt.hubNS()}
		switch {
		case i%4 == 3:
			// Not the owner's kind, not its name, no labels: the anchor's garbage all the same.
			meta.Name = "leftover-" + name
			dep = &corev1.ConfigMap{ObjectMeta: meta, Data: map[string]string{"k": "v"}}
		case kind == "Gateway":
			dep = &gatewayv1.Gateway{ObjectMeta: meta, Spec: gatewayv1.GatewaySpec{GatewayClassName: "downstream",
				Listeners: []gatewayv1.Listener{{Name: "http", Port: 80, Protocol: gatewayv1.HTTPProtocolType}}}}
		default:
			dep = &gatewayv1.HTTPRoute{ObjectMeta: meta}
		}
		stranded = append(stranded, planted{owner: owner, anchor: a, downstream: hangOn(ctx, g, a, dep)})
	}

	// An orphan whose dependent is labelled for another project's owner: not this
	// project's to judge.
	foreignOwner := anchor.Owner{Project: "elsewhere-" + rand.String(5), Group: gatewayv1.GroupName, Kind: "Gateway", Namespace: "web", Name: "edge", UID: uuid.NewUUID()}
	held := plantAnchor(ctx, g, rt.gatewayOwner("edge", uuid.NewUUID()), rt.hubNS(), false)
	foreignDep := hangOn(ctx, g, held, &gatewayv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Name: "edge", Namespace: rt.hubNS(), Labels: foreignOwner.Labels()},
		Spec: gatewayv1.GatewaySpec{GatewayClassName: "downstream",
			Listeners: []gatewayv1.Listener{{Name: "http", Port: 80, Protocol: gatewayv1.HTTPProtocolType}}},
	})

	m := rt.startResync("unlabelled", nil)
	for i := range 5 {
		rt.createProxy(rt.newProxy(fmt.Sprintf("live-%d", i), gatewayv1.Hostname(fmt.Sprintf("live-%d.example.com", i))))
	}
	var live []client.Object
	for i := range 5 {
		name := fmt.Sprintf("live-%d", i)
		rt.waitProgrammed(name)
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

	mark := len(m.ResyncLog.Reports(rt.project))
	// Counted below: the passes through the one that deleted the last stranded anchor,
	// which reports after the anchor is gone. Wait for its report too.
	rt.passesUntilReported(m, rt.project, 3*time.Minute, func(g Gomega, rep resync.PassReport) {
		var left []string
		for _, s := range stranded {
			if exists(ctx, g, s.anchor) {
				l, _ := rep.Find(s.anchor.Name)
				left = append(left, fmt.Sprintf("%s %s/%s", s.anchor.Name, l.Decision, l.Reason))
			}
		}
		g.Expect(left).To(BeEmpty(), "stranded anchors left")
	})
	passes := passesToLastDeletion(m.ResyncLog.Reports(rt.project)[mark:])
	t.Logf("40 stranded anchors collected in %d passes", passes)
	g.Expect(passes).To(BeNumerically("<=", 6), "a proof, its confirmation, and a margin for a validity lapse")
	g.Eventually(func(g Gomega) {
		for _, s := range stranded {
			g.Expect(exists(ctx, g, s.downstream)).To(BeFalse(), "dependent %T %s", s.downstream, s.downstream.GetName())
		}
	}, gwGCWithin, gwPoll).Should(Succeed())

	// The foreign dependent's anchor is kept and reported, pass after pass.
	rep := rt.passes(m, rt.project, 3)
	l, ok := rep.Find(held.Name)
	g.Expect(ok).To(BeTrue())
	g.Expect(l.Verdict.Decision).To(Equal(resync.Unknown))
	g.Expect(l.Verdict.Reason).To(Equal(resync.ReasonForeignDependent))
	g.Expect(l.Dependents).To(ConsistOf(ContainSubstring(string(foreignDep.GetUID()))))
	g.Expect(exists(ctx, g, held)).To(BeTrue())
	g.Expect(exists(ctx, g, foreignDep)).To(BeTrue())
	foreign, err := m.Gauge("anchorage_resync_decisions_total", "decision", "unknown", "reason", string(resync.ReasonForeignDependent))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(foreign).To(BeNumerically(">=", 3))

	for _, obj := range live {
		g.Expect(exists(ctx, g, obj)).To(BeTrue(), "live %T %s survives", obj, obj.GetName())
	}
	for _, r := range m.ResyncLog.Reports(rt.project) {
		g.Expect(r.Halt).To(BeEmpty())
	}
}

// TestResyncForbiddenKindDelaysNoOtherOrphan: the project's kubeconfig names a user
// bound only to the generated plane role (config/rbac/project-role.yaml), and the
// operator has asked the resync to read ConfigMap owners live without extending that
// role: the real API server answers 403 to every read of one. Four legacy anchors of
// ConfigMaps, named to sort before every other anchor of the project, are reported
// unknown/forbidden (the missing permission named) and kept; they do not make the plane
// unreachable, and every other orphan of the project is collected as soon as its proof
// is confirmed.
func TestResyncForbiddenKindDelaysNoOtherOrphan(t *testing.T) {
	rt := newResyncTest(t, planeC)
	g, ctx := rt.g, rt.ctx

	user := "anchorage-project-" + rand.String(5)
	cfg, _, err := planeC.User(user)
	g.Expect(err).NotTo(HaveOccurred())
	// Bound to the generated plane role only, which grants no ConfigMaps on the plane.
	g.Expect(harness.BindProjectRole(ctx, planeC, user)).To(Succeed())
	kc, err := harness.KubeconfigVia(cfg, rt.env.Project(rt.project).Proxy.Addr())
	g.Expect(err).NotTo(HaveOccurred())
	secret := projectSecret(ctx, g, rt.env, rt.project)
	secret.Data[kubeconfig.DefaultKubeconfigSecretKey] = kc
	g.Expect(hub.Client.Update(ctx, secret)).To(Succeed())
	// The denial is the API server's own.
	restricted, err := client.New(cfg, client.Options{Scheme: app.Scheme()})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() bool {
		return apierrors.IsForbidden(restricted.Get(ctx, client.ObjectKey{Namespace: rt.ns.Name, Name: "any"}, &corev1.ConfigMap{}))
	}, 10*time.Second, resyncPoll).Should(BeTrue(), "the project's user may not get ConfigMaps")

	var forbidden []planted
	for i := range 4 {
		name := fmt.Sprintf("legacy-%d", i)
		uid := types.UID("00000000" + string(uuid.NewUUID())[8:])
		if i%2 == 0 {
			// A ConfigMap of that name exists (with another UID: the name sorts the anchor
			// first); a 403 proves nothing either way.
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: rt.ns.Name}}
			g.Expect(planeC.Client.Create(ctx, cm)).To(Succeed())
		}
		owner := anchor.Owner{Project: rt.project, Kind: "ConfigMap", Namespace: rt.ns.Name, Name: name, UID: uid}
		p := plant(ctx, g, owner, rt.hubNS(), true)
		forbidden = append(forbidden, p)
	}
	var orphans []planted
	for i := range 6 {
		kind := "Gateway"
		if i%2 == 1 {
			kind = "HTTPRoute"
		}
		uid := uuid.NewUUID()
		for strings.HasPrefix(string(uid), "00000000") {
			uid = uuid.NewUUID()
		}
		owner := anchor.Owner{Project: rt.project, Group: gatewayv1.GroupName, Kind: kind, Namespace: rt.ns.Name, Name: fmt.Sprintf("gone-%d", i), UID: uid}
		orphans = append(orphans, plant(ctx, g, owner, rt.hubNS(), i%3 == 0))
	}
	// Every forbidden anchor sorts first among the project's anchors, all in one hub
	// namespace: before the fix, the first three 403s made the plane unreachable.
	for _, f := range forbidden {
		for _, o := range orphans {
			g.Expect(f.anchor.Name < o.anchor.Name).To(BeTrue())
		}
	}
	alive := rt.liveGateway("alive")

	// ConfigMap owners are configured to be read live (the operator's opt-in), but the
	// plane's role was not extended: every read of them is the API server's 403.
	m := rt.startResync("forbidden", func(o *app.Options) {
		o.Resync.LiveOwnerKinds = append(slices.Clone(resync.DefaultLiveOwnerKinds), schema.GroupKind{Kind: "ConfigMap"})
	})
	mark := len(m.ResyncLog.Reports(rt.project))
	// Counted below: the passes through the one that deleted the last orphan, which
	// reports after the orphan is gone. Wait for its report too.
	rt.passesUntilReported(m, rt.project, resyncPassesWithin, func(g Gomega, rep resync.PassReport) {
		var left []string
		for _, o := range orphans {
			if exists(ctx, g, o.anchor) {
				l, _ := rep.Find(o.anchor.Name)
				left = append(left, fmt.Sprintf("%s %s/%s %s", o.owner.Name, l.Decision, l.Reason, l.Detail))
			}
		}
		g.Expect(left).To(BeEmpty(), "orphans left")
	})
	passes := passesToLastDeletion(m.ResyncLog.Reports(rt.project)[mark:])
	t.Logf("6 orphans collected in %d passes beside 4 forbidden anchors", passes)
	// One pass records the proofs, the next confirms and collects; a margin for a
	// validity lapse on a loaded machine.
	g.Expect(passes).To(BeNumerically("<=", 4))
	for _, o := range orphans {
		g.Eventually(func(g Gomega) bool { return exists(ctx, g, o.downstream) }, gwGCWithin, gwPoll).Should(BeFalse())
	}

	rep := rt.passes(m, rt.project, 1)
	for _, f := range forbidden {
		l, ok := rep.Find(f.anchor.Name)
		g.Expect(ok).To(BeTrue())
		g.Expect(l.Verdict).To(Equal(resync.Verdict{Decision: resync.Unknown, Reason: resync.ReasonForbidden}))
		g.Expect(l.Detail).To(ContainSubstring("configmaps"), "the missing permission is named")
		g.Expect(exists(ctx, g, f.anchor)).To(BeTrue())
		g.Expect(exists(ctx, g, f.downstream)).To(BeTrue())
	}
	g.Expect(exists(ctx, g, alive.anchor)).To(BeTrue())
	g.Expect(exists(ctx, g, alive.downstream)).To(BeTrue())
	for _, r := range m.ResyncLog.Reports(rt.project) {
		if r.Aborted != "" {
			continue
		}
		g.Expect(r.Plane).To(Equal(resync.PlaneVerified), r.PlaneDetail)
		for _, a := range r.Anchors {
			g.Expect(a.Reason).NotTo(BeElementOf(resync.ReasonReadError, resync.ReasonPlaneUnverified), "anchor %s: %s", a.Name, a.Detail)
		}
	}
	n, err := m.Gauge("anchorage_resync_decisions_total", "decision", "unknown", "reason", string(resync.ReasonForbidden))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n).To(BeNumerically(">=", 4))
}

// defaultNamespaceUID is a plane's identity as the resync reads it.
func defaultNamespaceUID(ctx context.Context, g Gomega, plane *harness.ControlPlane) types.UID {
	ns := &corev1.Namespace{}
	g.Expect(plane.Client.Get(ctx, client.ObjectKey{Name: metav1.NamespaceDefault}, ns)).To(Succeed())
	return ns.UID
}

// planeRecord reads a project's plane identity record in the lease namespace (the
// provider namespace in these tests).
func planeRecord(ctx context.Context, g Gomega, e *harness.Env, project string) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{}
	g.Expect(hub.Client.Get(ctx, client.ObjectKey{Namespace: e.ProviderNamespace, Name: resync.PlaneIdentityName(project)}, cm)).To(Succeed())
	return cm
}

// projectSecret reads a project's kubeconfig Secret.
func projectSecret(ctx context.Context, g Gomega, e *harness.Env, project string) *corev1.Secret {
	s := &corev1.Secret{}
	g.Expect(hub.Client.Get(ctx, client.ObjectKey{Namespace: e.ProviderNamespace, Name: project}, s)).To(Succeed())
	return s
}

// hubObjectsIn lists the ConfigMaps (anchors), Gateways and HTTPRoutes of a hub
// namespace: what a project's proxies have there.
func hubObjectsIn(ctx context.Context, g Gomega, ns string) []client.Object {
	var out []client.Object
	cms, gws, routes := &corev1.ConfigMapList{}, &gatewayv1.GatewayList{}, &gatewayv1.HTTPRouteList{}
	g.Expect(hub.Client.List(ctx, cms, client.InNamespace(ns))).To(Succeed())
	g.Expect(hub.Client.List(ctx, gws, client.InNamespace(ns))).To(Succeed())
	g.Expect(hub.Client.List(ctx, routes, client.InNamespace(ns))).To(Succeed())
	for i := range cms.Items {
		out = append(out, &cms.Items[i])
	}
	for i := range gws.Items {
		out = append(out, &gws.Items[i])
	}
	for i := range routes.Items {
		out = append(out, &routes.Items[i])
	}
	return out
}

// hubDeletesBy returns the deletes user sent to the hub in namespace, from the audit
// log.
func hubDeletesBy(g Gomega, user, namespace string) []harness.AuditEvent {
	return hubWritesBy(g, user, []string{"delete", "deletecollection"}, []string{"configmaps", "gateways", "httproutes"}, namespace)
}

// plantAnchor writes owner's anchor into hubNS in the wire format (with the legacy
// "cluster-_<project>" label when legacy), with no dependent.
func plantAnchor(ctx context.Context, g Gomega, owner anchor.Owner, hubNS string, legacy bool) *corev1.ConfigMap {
	labels := owner.Labels()
	if legacy {
		labels[anchor.LabelClusterName] = "cluster-_" + owner.Project
	}
	a := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: anchor.Name(owner.UID), Namespace: hubNS, Labels: labels}}
	g.Expect(hub.Client.Create(ctx, a)).To(Succeed())
	return a
}

// hangOn creates obj with an ownerReference to anchor a alone, and the labels obj
// already has (none, for an unlabelled dependent).
func hangOn(ctx context.Context, g Gomega, a *corev1.ConfigMap, obj client.Object) client.Object {
	obj.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: a.Name, UID: a.UID}})
	g.Expect(hub.Client.Create(ctx, obj)).To(Succeed())
	return obj
}

// sweepDryRun runs the sweep in dry-run over e's projects, as `manager sweep --once
// --dry-run` does, and returns its reports and its table.
func sweepDryRun(ctx context.Context, g Gomega, e *harness.Env) ([]resync.PassReport, string) {
	ro := resync.DefaultOptions()
	ro.DryRun, ro.MinAge, ro.ConfirmAfter = true, time.Millisecond, time.Second
	reports, unowned, err := resync.Sweep(ctx, resync.SweepOptions{
		Hub: hub.Config, ProviderNamespace: e.ProviderNamespace,
		SecretLabel: kubeconfig.DefaultKubeconfigSecretLabel, SecretProjectAnnotation: shard.AnnotationProject,
		Resync: ro, Scheme: app.Scheme(),
	})
	g.Expect(err).NotTo(HaveOccurred())
	var out bytes.Buffer
	for _, r := range reports {
		g.Expect(resync.WriteProjectTable(&out, r)).To(Succeed())
	}
	g.Expect(resync.WriteUnownedTable(&out, unowned)).To(Succeed())
	return reports, out.String()
}
