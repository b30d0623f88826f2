package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/uuid"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"anchorage/internal/app"
	"anchorage/internal/harness"
	"anchorage/pkg/anchor"
	"anchorage/pkg/anchor/resync"
	"anchorage/pkg/gateway"
)

// Bounds of the resync tests' waits (real time). Passes are driven by stepping the
// resync's fake clock; rate limits and timeouts run on the real clock.
const (
	resyncPassesWithin = 90 * time.Second
	resyncPoll         = 100 * time.Millisecond
	// resyncStep is how far the fake clock moves per poll: past the confirmation delay
	// at once, past the period in a few polls.
	resyncStep = 3 * time.Minute
)

// resyncTest is a gatewayTest (its own project, upstream namespace and gateway class)
// with the resync's fake clock, an hour ahead of the real one so that anchors the test
// creates are older than the default minimum age.
type resyncTest struct {
	*gatewayTest
	clock *clocktesting.FakeClock
}

func newResyncTest(t *testing.T, plane *harness.ControlPlane) *resyncTest {
	t.Helper()
	gt := newGatewayTest(t, plane)
	rt := &resyncTest{gatewayTest: gt, clock: clocktesting.NewFakeClock(time.Now().Add(time.Hour))}
	if _, err := anchor.EnsureMappedNamespace(gt.ctx, hub.Client, gt.project, gt.ns); err != nil {
		t.Fatal(err)
	}
	return rt
}

// startResync starts a replica with fast protocol timings, this test's gateway class
// and the resync on its default settings except the fake clock (and what adjust sets).
// The tests read every pass since they began, every anchor's line included, in the
// manager's ResyncLog.
func (rt *resyncTest) startResync(name string, adjust func(*app.Options)) *harness.Manager {
	rt.t.Helper()
	return rt.env.StartManagerT(rt.t, name+"-"+rand.String(4), harness.ManagerOptions{Adjust: func(o *app.Options) {
		harness.WithTimings(harness.FastTimings)(o)
		o.Gateway.GatewayClassName = rt.class
		o.Resync.Clock = rt.clock
		if adjust != nil {
			adjust(o)
		}
	}})
}

// passes steps the fake clock until m has finished n more passes over project, and
// returns the last report.
func (rt *resyncTest) passes(m *harness.Manager, project string, n int) resync.PassReport {
	rt.t.Helper()
	start := m.ResyncLog.Passes(project)
	rt.g.Eventually(func() int {
		rt.clock.Step(resyncStep)
		return m.ResyncLog.Passes(project)
	}, resyncPassesWithin, resyncPoll).Should(BeNumerically(">=", start+n), "%d passes of %s by %s", n, project, m.Name)
	rep, ok := m.ResyncLog.LastReport(project)
	rt.g.Expect(ok).To(BeTrue())
	return rep
}

// passesUntil steps passes until cond holds for the last report.
func (rt *resyncTest) passesUntil(m *harness.Manager, project string, within time.Duration, cond func(Gomega, resync.PassReport)) resync.PassReport {
	rt.t.Helper()
	var last resync.PassReport
	rt.g.Eventually(func(g Gomega) {
		rt.clock.Step(resyncStep)
		rep, ok := m.ResyncLog.LastReport(project)
		g.Expect(ok).To(BeTrue(), "a finished pass")
		last = rep
		cond(g, rep)
	}, within, resyncPoll).Should(Succeed())
	return last
}

// passesUntilReported steps passes until cond holds for the last report, then until
// a pass begun after that has run to its end, and returns that pass's report. A pass
// reports only once it ends, after its deletes: when cond sees the anchors gone, the
// pass that deleted the last of them may still be under way. One project's passes run
// one after another, so once two more have ended (the one under way, if any, and one
// begun after it), every pass that acted before cond held has reported, with the
// metrics the resync updates before it reports: what a test then counts is complete.
func (rt *resyncTest) passesUntilReported(m *harness.Manager, project string, within time.Duration, cond func(Gomega, resync.PassReport)) resync.PassReport {
	rt.t.Helper()
	rt.passesUntil(m, project, within, cond)
	return rt.passes(m, project, 2)
}

// passesToLastDeletion counts the passes among reps that ran to their end (not cut
// short) up to and including the last one that deleted an anchor or tried to (a failed
// delete may still have committed): how many passes the collection took. A delete that
// found the anchor already gone (a pass whose cache had not yet seen an earlier
// deletion) deleted nothing.
func passesToLastDeletion(reps []resync.PassReport) int {
	last := -1
	for i, r := range reps {
		for _, a := range r.Anchors {
			if (a.Action == resync.ActionDeleted && a.Detail != "already gone") || a.Action == resync.ActionFailed {
				last = i
			}
		}
	}
	n := 0
	for _, r := range reps[:last+1] {
		if r.Aborted == "" {
			n++
		}
	}
	return n
}

// gatewayOwner is the anchor owner of an upstream Gateway of this test.
func (rt *resyncTest) gatewayOwner(name string, uid types.UID) anchor.Owner {
	return anchor.Owner{Project: rt.project, Group: gatewayv1.GroupName, Kind: "Gateway", Namespace: rt.ns.Name, Name: name, UID: uid}
}

// upstreamGateway creates an upstream Gateway of class in the test namespace.
func (rt *resyncTest) upstreamGateway(name, class string) *gatewayv1.Gateway {
	rt.t.Helper()
	gw := &gatewayv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: rt.ns.Name},
		Spec: gatewayv1.GatewaySpec{GatewayClassName: gatewayv1.ObjectName(class),
			Listeners: []gatewayv1.Listener{{Name: "http", Port: 80, Protocol: gatewayv1.HTTPProtocolType}}},
	}
	rt.g.Expect(rt.plane.Client.Create(rt.ctx, gw)).To(Succeed())
	return gw
}

// planted is an anchor planted on the hub with its downstream object.
type planted struct {
	owner      anchor.Owner
	anchor     *corev1.ConfigMap
	downstream client.Object
}

// plant writes owner's anchor into hubNS in the wire format (with the legacy
// "cluster-_<project>" label when legacy) and one downstream object hanging on it: a
// Gateway or HTTPRoute for those kinds, a ConfigMap for any other.
func plant(ctx context.Context, g Gomega, owner anchor.Owner, hubNS string, legacy bool) planted {
	labels := owner.Labels()
	if legacy {
		labels[anchor.LabelClusterName] = "cluster-_" + owner.Project
	}
	a := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: anchor.Name(owner.UID), Namespace: hubNS, Labels: labels}}
	g.Expect(hub.Client.Create(ctx, a)).To(Succeed())
	meta := metav1.ObjectMeta{
		Name: owner.Name, Namespace: hubNS, Labels: labels,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: a.Name, UID: a.UID}},
	}
	var down client.Object
	switch {
	case owner.Group == gatewayv1.GroupName && owner.Kind == "Gateway":
		down = &gatewayv1.Gateway{ObjectMeta: meta, Spec: gatewayv1.GatewaySpec{GatewayClassName: gatewayv1.ObjectName(gateway.DefaultConfig().DownstreamGatewayClassName),
			Listeners: []gatewayv1.Listener{{Name: "http", Port: 80, Protocol: gatewayv1.HTTPProtocolType}}}}
	case owner.Group == gatewayv1.GroupName && owner.Kind == "HTTPRoute":
		down = &gatewayv1.HTTPRoute{ObjectMeta: meta}
	default:
		down = &corev1.ConfigMap{ObjectMeta: meta}
	}
	g.Expect(hub.Client.Create(ctx, down)).To(Succeed())
	return planted{owner: owner, anchor: a, downstream: down}
}

// orphanGateway plants the anchor of a Gateway that never existed.
func (rt *resyncTest) orphanGateway(name string) planted {
	return plant(rt.ctx, rt.g, rt.gatewayOwner(name, uuid.NewUUID()), rt.hubNS(), false)
}

// liveGateway creates an upstream Gateway the manager does not program (another class)
// and plants its anchor, as the live path would have.
func (rt *resyncTest) liveGateway(name string) planted {
	gw := rt.upstreamGateway(name, "other-"+rand.String(5))
	return plant(rt.ctx, rt.g, rt.gatewayOwner(name, gw.UID), rt.hubNS(), false)
}

// exists reports whether obj is on the hub with its UID.
func exists(ctx context.Context, g Gomega, obj client.Object) bool {
	cur := obj.DeepCopyObject().(client.Object)
	err := hub.Client.Get(ctx, client.ObjectKeyFromObject(obj), cur)
	if apierrors.IsNotFound(err) {
		return false
	}
	g.Expect(err).NotTo(HaveOccurred())
	return cur.GetUID() == obj.GetUID()
}

// hubEvents lists events.k8s.io Events in namespace with reason.
func hubEvents(ctx context.Context, g Gomega, namespace, reason string) []eventsv1.Event {
	list := &eventsv1.EventList{}
	g.Expect(hub.Client.List(ctx, list, client.InNamespace(namespace))).To(Succeed())
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}

// annotate sets (or, with "", removes) an annotation on a hub object.
func annotate(ctx context.Context, g Gomega, obj client.Object, key, value string) {
	g.Eventually(func() error {
		if err := hub.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		a := obj.GetAnnotations()
		if a == nil {
			a = map[string]string{}
		}
		if value == "" {
			delete(a, key)
		} else {
			a[key] = value
		}
		obj.SetAnnotations(a)
		return hub.Client.Update(ctx, obj)
	}, 10*time.Second, resyncPoll).Should(Succeed())
}

// decisionsOf maps anchor names to "decision/reason" in a report.
func decisionsOf(rep resync.PassReport) map[string]string {
	out := map[string]string{}
	for _, a := range rep.Anchors {
		out[a.Name] = a.Decision.String() + "/" + string(a.Reason)
	}
	return out
}

// hasLine reports whether text has a line holding every field, in order.
func hasLine(text string, fields ...string) bool {
	for _, line := range strings.Split(text, "\n") {
		rest, ok := line, true
		for _, f := range fields {
			i := strings.Index(rest, f)
			if i < 0 {
				ok = false
				break
			}
			rest = rest[i+len(f):]
		}
		if ok {
			return true
		}
	}
	return false
}
