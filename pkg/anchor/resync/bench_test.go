package resync

import (
	"context"
	"flag"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/util/flowcontrol"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"anchorage/pkg/anchor"
)

// The benchmark's shape: -resync.bench-anchors anchors (10,000 unless told), 100 per hub
// namespace; benchOrphans orphans, benchOrphansPerNS in each of the first namespaces
// (orphans come in groups: an owner namespace torn down, a release removed).
//
//	flock /work/heavy.lock go test -run '^$' -bench 'BenchmarkResync' -benchtime 3x ./pkg/anchor/resync -resync.bench-anchors=100000
var benchAnchors = flag.Int("resync.bench-anchors", 10000, "anchors of the resync benchmarks")

const (
	benchPerNamespace = 100
	benchOrphans      = 100
	benchOrphansPerNS = 10
)

func benchNamespaces() int {
	return max(*benchAnchors/benchPerNamespace, benchOrphans/benchOrphansPerNS)
}

var gatewayGR = schema.GroupResource{Group: gatewayv1.GroupName, Resource: "gateways"}

// benchPlane is an in-memory project plane: an owner cache holding the live owners, and
// a live reader that counts its calls. Namespaces map to the hub namespaces.
type benchPlane struct {
	mu         sync.Mutex
	live       map[client.ObjectKey]types.UID // live owners
	namespaces map[string]types.UID           // upstream namespace -> UID
	calls      atomic.Int64
	liveCalls  atomic.Int64 // reads of live owners' keys
}

func (p *benchPlane) owner(key client.ObjectKey) (types.UID, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	uid, ok := p.live[key]
	return uid, ok
}

// benchCache is the owner's cache: Gateways only.
type benchCache struct{ p *benchPlane }

func (c benchCache) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	if _, ok := obj.(*gatewayv1.Gateway); !ok {
		return fmt.Errorf("unexpected cache read of %T", obj)
	}
	uid, ok := c.p.owner(key)
	if !ok {
		return apierrors.NewNotFound(gatewayGR, key.Name)
	}
	obj.SetName(key.Name)
	obj.SetNamespace(key.Namespace)
	obj.SetUID(uid)
	return nil
}

func (c benchCache) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return fmt.Errorf("unexpected cache list")
}

// benchLive is the plane's API server.
type benchLive struct{ p *benchPlane }

func (l benchLive) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	l.p.calls.Add(1)
	pom, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return fmt.Errorf("unexpected live read of %T", obj)
	}
	switch pom.Kind {
	case "Namespace":
		uid, ok := l.p.namespaces[key.Name]
		if !ok {
			return apierrors.NewNotFound(corev1.Resource("namespaces"), key.Name)
		}
		pom.Name, pom.UID = key.Name, uid
		return nil
	case "Gateway":
		uid, ok := l.p.owner(key)
		if !ok {
			return apierrors.NewNotFound(gatewayGR, key.Name)
		}
		l.p.liveCalls.Add(1)
		pom.Name, pom.Namespace, pom.UID = key.Name, key.Namespace, uid
		return nil
	}
	return fmt.Errorf("unexpected live read of %s", pom.Kind)
}

// List answers the batched owner lists (one page, whatever the limit).
func (l benchLive) List(_ context.Context, list client.ObjectList, opts ...client.ListOption) error {
	l.p.calls.Add(1)
	pl, ok := list.(*metav1.PartialObjectMetadataList)
	if !ok || pl.Kind != "GatewayList" {
		return fmt.Errorf("unexpected live list of %T %s", list, list.GetObjectKind().GroupVersionKind())
	}
	lo := (&client.ListOptions{}).ApplyOptions(opts)
	l.p.mu.Lock()
	defer l.p.mu.Unlock()
	pl.Items = nil
	for key, uid := range l.p.live {
		if key.Namespace == lo.Namespace {
			pl.Items = append(pl.Items, metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace, UID: uid}})
		}
	}
	return nil
}

// benchHub is the hub side of the benchmark, built once per process: the anchors
// (created on the package's API server), the anchor cache over them and the memory it
// holds.
type benchHub struct {
	project  string
	provider string
	plane    *benchPlane
	hubNS    []string // by upstream namespace index
	upstream []string
	cache    *AnchorCache
	// bytesPer1000 is the heap the anchor cache holds per 1,000 cached anchors.
	bytesPer1000 float64
	cached       int
	err          error
}

var (
	benchOnce  sync.Once
	benchState *benchHub
)

func setupBenchHub(ctx context.Context) *benchHub {
	h := &benchHub{project: "bench-" + rand.String(5), provider: "bench-prov-" + rand.String(5),
		plane: &benchPlane{live: map[client.ObjectKey]types.UID{}, namespaces: map[string]types.UID{metav1.NamespaceDefault: uuid.NewUUID()}}}
	fail := func(err error) *benchHub { h.err = err; return h }
	for _, ns := range []string{h.provider} {
		if err := hub.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return fail(err)
		}
	}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: h.project, Namespace: h.provider, Labels: map[string]string{DefaultSecretLabel: "true"}}}
	if err := hub.Create(ctx, sec); err != nil {
		return fail(err)
	}
	var namespaces, anchors []client.Object
	for i := range benchNamespaces() {
		uid := uuid.NewUUID()
		up := fmt.Sprintf("team-%03d", i)
		h.upstream = append(h.upstream, up)
		h.plane.namespaces[up] = uid
		h.hubNS = append(h.hubNS, anchor.MappedNamespace(uid))
		namespaces = append(namespaces, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: anchor.MappedNamespace(uid)}})
	}
	for i := range benchNamespaces() {
		for j := range min(benchPerNamespace, *benchAnchors-i*benchPerNamespace) {
			o := anchor.Owner{Project: h.project, Group: gatewayv1.GroupName, Kind: "Gateway", Namespace: h.upstream[i], Name: fmt.Sprintf("gw-%03d", j), UID: uuid.NewUUID()}
			h.plane.live[client.ObjectKey{Namespace: o.Namespace, Name: o.Name}] = o.UID
			anchors = append(anchors, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: anchor.Name(o.UID), Namespace: h.hubNS[i], Labels: o.Labels()}})
		}
	}
	// Namespaces first: anchors need them.
	for _, objs := range [][]client.Object{namespaces, anchors} {
		if err := createAll(ctx, objs, 32); err != nil {
			return fail(err)
		}
	}

	// Memory held by the cache: heap after it synced, minus heap before it started.
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	c, err := NewAnchorCache(ctx, hubConfig, nil, nil)
	if err != nil {
		return fail(err)
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		return fail(fmt.Errorf("anchor cache did not sync"))
	}
	all, err := c.All(ctx)
	if err != nil {
		return fail(err)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	h.cache, h.cached = c, len(all)
	h.bytesPer1000 = float64(after.HeapAlloc-before.HeapAlloc) / float64(len(all)) * 1000
	return h
}

// plantOrphans turns benchOrphans live owners, spread over the namespaces, into
// orphans (their owner is gone) with one downstream object each, and waits until the
// cache holds them.
func (h *benchHub) plantOrphans(ctx context.Context, b *testing.B) []*corev1.ConfigMap {
	var out []*corev1.ConfigMap
	for k := range benchOrphans {
		i := k / benchOrphansPerNS
		o := anchor.Owner{Project: h.project, Group: gatewayv1.GroupName, Kind: "Gateway", Namespace: h.upstream[i], Name: "gone-" + rand.String(8), UID: uuid.NewUUID()}
		a := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: anchor.Name(o.UID), Namespace: h.hubNS[i], Labels: o.Labels()}}
		if err := hub.Create(ctx, a); err != nil {
			b.Fatal(err)
		}
		dep := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: o.Name, Namespace: a.Namespace, Labels: o.Labels(),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: a.Name, UID: a.UID}}}}
		if err := hub.Create(ctx, dep); err != nil {
			b.Fatal(err)
		}
		out = append(out, a)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		n := 0
		for _, a := range out {
			if got, _ := h.cache.Named(ctx, a.Name); len(got) == 1 {
				n++
			}
		}
		if n == len(out) {
			return out
		}
		if time.Now().After(deadline) {
			b.Fatalf("only %d of %d planted orphans reached the cache", n, len(out))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// passMaker returns a function building passes over the benchmark's project that
// share one project memory: the hub is real, the plane in memory, rate limits off
// (the hub lists at up to 1,000 per second).
func (h *benchHub) passMaker(b *testing.B, opts Options) func() *pass {
	deps, err := NewHubDependentLister(hubConfig, nil, DependentKindsOf(DefaultHubWrites, nil), 1000, 1000)
	if err != nil {
		b.Fatal(err)
	}
	mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{gatewayv1.SchemeGroupVersion})
	mapper.AddSpecific(gatewayv1.SchemeGroupVersion.WithKind("Gateway"), gatewayv1.SchemeGroupVersion.WithResource("gateways"),
		gatewayv1.SchemeGroupVersion.WithResource("gateway"), meta.RESTScopeNamespace)
	sch := scheme.Scheme
	if !sch.Recognizes(gatewayv1.SchemeGroupVersion.WithKind("Gateway")) {
		if err := gatewayv1.Install(sch); err != nil {
			b.Fatal(err)
		}
	}
	mem := newProjectMemory()
	mem.live = flowcontrol.NewFakeAlwaysRateLimiter()
	return func() *pass {
		return newPass(passDeps{
			holder: "bench", admission: openAdmission{}, hub: staticHub{c: hub}, anchors: h.cache, dependents: deps,
			secrets: secrets{namespace: h.provider, label: DefaultSecretLabel}, leaseNamespace: h.provider,
			opts: opts, deletes: flowcontrol.NewFakeAlwaysRateLimiter(), recordIdentity: true,
		}, h.project, Plane{Cache: benchCache{p: h.plane}, Scheme: sch, Live: benchLive{p: h.plane}, Mapper: mapper}, mem, logr.Discard())

	}
}

// benchSetup returns the shared benchmark hub, building it on first use.
func benchSetup(b *testing.B) *benchHub {
	if hub == nil {
		b.Skip("no API server in this process")
	}
	benchOnce.Do(func() { benchState = setupBenchHub(context.Background()) })
	if benchState.err != nil {
		b.Fatal(benchState.err)
	}
	return benchState
}

// BenchmarkResyncSteadyPass measures the common pass: every anchor's owner is in the
// owner's cache. It makes no API call per anchor; the few per pass are the Secret, the
// plane identity and its record. Besides the time of a pass (ms/steady-pass), it
// reports the anchor cache's heap per 1,000 anchors (MB/1000-anchors, measured on the
// real informer's store). A replica keeps no pass report.
func BenchmarkResyncSteadyPass(b *testing.B) {
	h := benchSetup(b)
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Now().Add(time.Hour))
	opts := DefaultOptions()
	opts.Clock = clk
	newPass := h.passMaker(b, opts)
	calls, anchors := 0, 0
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		rep, err := newPass().run(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if n := rep.Count(Keep); n != len(rep.Anchors) {
			b.Fatalf("%d of %d anchors kept", n, len(rep.Anchors))
		}
		calls += rep.APICalls
		anchors += len(rep.Anchors)
	}
	b.StopTimer()
	elapsed := b.Elapsed()
	b.ReportMetric(float64(elapsed.Milliseconds())/float64(b.N), "ms/steady-pass")
	b.ReportMetric(float64(calls)/float64(b.N), "calls/pass")
	b.ReportMetric(float64(anchors)/float64(b.N), "anchors/pass")
	b.ReportMetric(h.bytesPer1000/1e6, "MB/1000-anchors")
}

// BenchmarkResyncPass measures the collection of benchOrphans orphans among the
// anchors: a pass records their proofs (untimed), a second one ConfirmAfter later
// collects them (timed). The hub is the package's API server (anchor cache, dependents'
// scans, deletions are real); the project plane is in memory, with an owner cache that
// holds every live owner. calls/collected-anchor is the requests of both passes beyond
// those of a steady pass over the same live anchors, per anchor collected.
func BenchmarkResyncPass(b *testing.B) {
	h := benchSetup(b)
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Now().Add(time.Hour))
	opts := DefaultOptions()
	opts.Clock, opts.MaxDeletionsPerPass, opts.HaltAbove = clk, 1000, 1000
	newPass := h.passMaker(b, opts)

	var calls, collected, anchors, liveReads, steady int
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		base, err := newPass().run(ctx)
		if err != nil {
			b.Fatal(err)
		}
		steady += base.APICalls
		orphans := h.plantOrphans(ctx, b)
		proving, err := newPass().run(ctx)
		if err != nil {
			b.Fatal(err)
		}
		clk.Step(opts.ConfirmAfter + time.Second)
		h.plane.liveCalls.Store(0)
		b.StartTimer()

		rep, err := newPass().run(ctx)

		b.StopTimer()
		if err != nil {
			b.Fatal(err)
		}
		if got := rep.CountAction(ActionDeleted); got != len(orphans) {
			for _, a := range rep.Anchors {
				if a.Decision != Keep {
					b.Logf("%s %s %s %s", a.Name, a.Decision, a.Reason, a.Detail)
					break
				}
			}
			b.Fatalf("collected %d of %d orphans (%d unknown, %d suspect; plane %s %s)", got, len(orphans), rep.Count(Unknown), rep.Count(Suspect), rep.Plane, rep.PlaneDetail)
		}
		calls += proving.APICalls + rep.APICalls
		collected += rep.CountAction(ActionDeleted)
		anchors += len(rep.Anchors)
		liveReads += int(h.plane.liveCalls.Load())
		b.StartTimer()
	}
	b.StopTimer()
	live := anchors - collected
	b.ReportMetric(float64(liveReads)/float64(live), "calls/live-anchor")
	b.ReportMetric(float64(calls-2*steady)/float64(collected), "calls/collected-anchor")
	b.ReportMetric(float64(calls)/float64(b.N), "calls/2-passes")
	b.ReportMetric(float64(anchors)/float64(b.N), "anchors/pass")
	b.ReportMetric(h.bytesPer1000/1e6, "MB/1000-anchors")
}

// createAll creates objs on the hub with workers requests in flight, and returns the
// first error.
func createAll(ctx context.Context, objs []client.Object, workers int) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(workers)
	for _, obj := range objs {
		g.Go(func() error { return hub.Create(ctx, obj) })
	}
	return g.Wait()
}
