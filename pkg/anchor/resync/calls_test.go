package resync

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"anchorage/pkg/anchor"
)

// countingTransport counts the requests that reach the API server.
type countingTransport struct {
	next  http.RoundTripper
	calls *atomic.Int64
}

func (c countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.calls.Add(1)
	return c.next.RoundTrip(r)
}

// countedPasses runs passes over the fixture's project with every client (hub, plane,
// dependents' scan) counting its requests on the wire.
type countedPasses struct {
	f     *passFixture
	calls atomic.Int64
	deps  passDeps
	plane Plane
}

func newCountedPasses(f *passFixture) *countedPasses {
	c := &countedPasses{f: f}
	cfg := rest.CopyConfig(hubConfig)
	cfg.QPS, cfg.Burst = 1000, 1000
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return countingTransport{next: rt, calls: &c.calls} })
	cl, err := client.New(cfg, client.Options{Mapper: hub.RESTMapper()})
	f.g.Expect(err).NotTo(HaveOccurred())
	deps, err := NewHubDependentLister(cfg, nil, DependentKindsOf(f.opts.Writes, nil), 1000, 1000)
	f.g.Expect(err).NotTo(HaveOccurred())
	c.deps = passDeps{
		holder: "test", admission: openAdmission{}, hub: staticHub{c: cl}, dependents: deps,
		secrets: secrets{namespace: f.provider, label: DefaultSecretLabel}, leaseNamespace: f.provider,
		opts: f.opts, deletes: flowcontrol.NewFakeAlwaysRateLimiter(), recordIdentity: true,
	}
	// The plane is the same API server, read through the counting client; it has no
	// owner cache, so every owner is one the cache does not watch.
	c.plane = Plane{Live: cl, Mapper: hub.RESTMapper()}
	return c
}

// run runs one pass and returns its report and the requests it made on the wire.
func (c *countedPasses) run() (PassReport, int) {
	c.f.t.Helper()
	anchors, err := listAnchors(c.f.ctx, hub)
	c.f.g.Expect(err).NotTo(HaveOccurred())
	d := c.deps
	d.anchors = anchors
	before := c.calls.Load()
	rep, err := newPass(d, c.f.project, c.plane, c.f.memory, testr.New(c.f.t)).run(c.f.ctx)
	c.f.g.Expect(err).NotTo(HaveOccurred())
	return rep, int(c.calls.Load() - before)
}

// TestPassAPICallsFollowTheWork counts the requests of resync passes over a fixed set
// of anchors on a real API server, whose owners are of a kind the owner's cache does
// not watch (the worst case for live anchors: every one is read live). Live anchors
// cost nothing per anchor beyond the pass's fixed cost (one list of the owners per kind
// and namespace); orphans, proved on one pass and collected on the next, cost at most 3
// requests each, amortized over both passes.
func TestPassAPICallsFollowTheWork(t *testing.T) {
	const (
		namespaces   = 4
		livePerNS    = 10
		orphansPerNS = 5
	)
	f := newPassFixture(t)
	g := f.g
	ctx := context.Background()
	// Upstream namespaces (the fixture's, and more), each with its hub namespace.
	upstream := []*corev1.Namespace{f.upstream}
	for range namespaces - 1 {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "up-" + rand.String(6)}}
		g.Expect(hub.Create(ctx, ns)).To(Succeed())
		g.Expect(hub.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: anchor.MappedNamespace(ns.UID)}})).To(Succeed())
		upstream = append(upstream, ns)
	}
	plantLive := func(n int) {
		for _, ns := range upstream {
			for range n {
				cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "live-", Namespace: ns.Name}}
				g.Expect(hub.Create(ctx, cm)).To(Succeed())
				o := anchor.Owner{Project: f.project, Kind: "ConfigMap", Namespace: ns.Name, Name: cm.Name, UID: cm.UID}
				f.anchorIn(o, anchor.MappedNamespace(ns.UID))
			}
		}
	}
	c := newCountedPasses(f)

	plantLive(livePerNS)
	c.run() // records the plane identity
	rep, steady := c.run()
	g.Expect(rep.Count(Keep)).To(Equal(namespaces * livePerNS))
	g.Expect(steady).To(Equal(rep.APICalls), "the pass counts every request it makes")

	plantLive(livePerNS)
	rep, steadyDouble := c.run()
	g.Expect(rep.Count(Keep)).To(Equal(2 * namespaces * livePerNS))
	t.Logf("steady pass: %d requests over %d live anchors, %d over %d", steady, namespaces*livePerNS, steadyDouble, 2*namespaces*livePerNS)
	g.Expect(steadyDouble).To(Equal(steady), "twice the live anchors, no more requests: 0 per live anchor")

	// Orphans: owners that never existed, each anchor with an unlabelled dependent.
	var orphans []*corev1.ConfigMap
	for _, ns := range upstream {
		hubNS := anchor.MappedNamespace(ns.UID)
		for i := range orphansPerNS {
			o := anchor.Owner{Project: f.project, Kind: "ConfigMap", Namespace: ns.Name, Name: fmt.Sprintf("gone-%d", i), UID: uuid.NewUUID()}
			a := f.anchorIn(o, hubNS)
			f.dependent(hubNS, "dep-"+rand.String(6), nil, a)
			orphans = append(orphans, a)
		}
	}
	proving, provingCalls := c.run()
	g.Expect(proving.Count(Suspect)).To(Equal(len(orphans)))
	f.clock.Step(f.opts.ConfirmAfter + time.Second)
	collecting, collectingCalls := c.run()
	g.Expect(collecting.CountAction(ActionDeleted)).To(Equal(len(orphans)), "every orphan collected")
	g.Expect(collecting.APICalls + proving.APICalls).To(Equal(provingCalls + collectingCalls))
	perOrphan := float64(provingCalls+collectingCalls-2*steadyDouble) / float64(len(orphans))
	t.Logf("%d orphans in %d namespaces: %d requests to prove, %d to collect, %.2f per collected anchor beyond the steady passes",
		len(orphans), namespaces, provingCalls, collectingCalls, perOrphan)
	g.Expect(perOrphan).To(BeNumerically("<=", 3), "requests per collected anchor, amortized")
	for _, a := range orphans {
		g.Expect(f.exists(a)).To(BeFalse())
	}
}

// listRefusingPlane reads the hub as the plane, answering 403 to every list of
// ConfigMaps (a role that grants get only) and counting lists and gets of them; lists
// record the resourceVersion they asked for.
type listRefusingPlane struct {
	refuse       bool
	lists, gets  int
	listVersions []string
}

func (l *listRefusingPlane) plane() Plane {
	live := interceptor.NewClient(hub, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if obj.GetObjectKind().GroupVersionKind().Kind == "ConfigMap" {
				l.gets++
			}
			return c.Get(ctx, key, obj, opts...)
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			lo := (&client.ListOptions{}).ApplyOptions(opts)
			rv := ""
			if lo.Raw != nil {
				rv = lo.Raw.ResourceVersion
			}
			l.lists++
			l.listVersions = append(l.listVersions, rv)
			if l.refuse {
				return apierrors.NewForbidden(corev1.Resource("configmaps"), "", fmt.Errorf("user cannot list resource %q", "configmaps"))
			}
			return c.List(ctx, list, opts...)
		},
	})
	return Plane{Live: live, Mapper: hub.RESTMapper()}
}

// TestPassBatchedOwnerReads: owners of a kind the cache does not watch, several in one
// namespace, are read with one list, which asks for no resourceVersion (a quorum read,
// never the watch cache); a plane that refuses the list has them read with GETs, with
// the same verdicts.
func TestPassBatchedOwnerReads(t *testing.T) {
	for _, refuse := range []bool{false, true} {
		t.Run(fmt.Sprintf("list refused %v", refuse), func(t *testing.T) {
			f := newPassFixture(t)
			g := f.g
			var live []*corev1.ConfigMap
			for i := range 3 {
				live = append(live, f.anchorIn(f.liveOwner(fmt.Sprintf("alive-%d", i)), f.hubNS))
			}
			gone := f.anchorIn(f.owner("gone", uuid.NewUUID()), f.hubNS)
			lp := &listRefusingPlane{refuse: refuse}
			f.plane = lp.plane()
			rep := f.run()
			for _, a := range live {
				g.Expect(f.line(rep, a).Verdict).To(Equal(Verdict{Decision: Keep, Reason: ReasonLive}))
			}
			g.Expect(f.line(rep, gone).Verdict).To(Equal(Verdict{Decision: Suspect, Reason: ReasonAwaitingConfirmation, Proof: ReasonNotFound}))
			g.Expect(lp.lists).To(Equal(1), "one list of the namespace's owners")
			g.Expect(lp.listVersions).To(ConsistOf(""), "a quorum read")
			if refuse {
				g.Expect(lp.gets).To(Equal(4), "a GET per owner once the list is refused")
			} else {
				g.Expect(lp.gets).To(BeZero())
			}
		})
	}
}
