package gateway

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"
	mcsource "sigs.k8s.io/multicluster-runtime/pkg/source"
)

// countingSource is a multicluster source whose per-project sources count their starts.
type countingSource struct{ starts *atomic.Int32 }

func (c countingSource) ForCluster(multicluster.ClusterName, cluster.Cluster) (source.TypedSource[mcreconcile.Request], bool, error) {
	return source.TypedFunc[mcreconcile.Request](func(context.Context, workqueue.TypedRateLimitingInterface[mcreconcile.Request]) error {
		c.starts.Add(1)
		return nil
	}), true, nil
}

type noopReconciler struct{ calls atomic.Int32 }

func (n *noopReconciler) Reconcile(context.Context, mcreconcile.Request) (reconcile.Result, error) {
	n.calls.Add(1)
	return reconcile.Result{}, nil
}

func startFor(t *testing.T, d deferredSource, ctx context.Context, project string) {
	t.Helper()
	src, engage, err := d.ForCluster(multicluster.ClusterName(project), nil)
	if err != nil || !engage {
		t.Fatalf("ForCluster: engage=%v err=%v", engage, err)
	}
	if err := src.Start(ctx, nil); err != nil {
		t.Fatal(err)
	}
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("not within 5s: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestDeferredWatchStartsOnlyOnceAProxyOrGatewayIsReconciled(t *testing.T) {
	gates := newProjectGates()
	var starts atomic.Int32
	d := deferredSource{inners: []mcsource.TypedSource[client.Object, mcreconcile.Request]{countingSource{starts: &starts}, countingSource{starts: &starts}}, gates: gates}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	startFor(t, d, ctx, "idle")
	startFor(t, d, ctx, "busy")
	// Nothing opened a gate, so no start can be under way: each source is kept for
	// its gate's opening.
	if n := starts.Load(); n != 0 {
		t.Fatalf("%d deferred sources started before any reconcile opened their project", n)
	}
	expectKept(t, gates, "idle", 1)
	expectKept(t, gates, "busy", 1)

	inner := &noopReconciler{}
	r := opening{gates: gates, TypedReconciler: inner}
	if _, err := r.Reconcile(ctx, mcreconcile.Request{ClusterName: "busy"}); err != nil {
		t.Fatal(err)
	}
	if inner.calls.Load() != 1 {
		t.Fatal("the opening reconciler did not reconcile")
	}
	eventually(t, "busy's two deferred sources started", func() bool { return starts.Load() == 2 })
	if !gates.isOpen("busy") || gates.isOpen("idle") {
		t.Fatalf("open: busy=%v idle=%v, want true, false", gates.isOpen("busy"), gates.isOpen("idle"))
	}

	// A source engaged once the project is open starts at once.
	startFor(t, d, ctx, "busy")
	if n := starts.Load(); n != 4 {
		t.Fatalf("sources engaged with an open project: %d starts, want 4", n)
	}
	// busy's starts are all counted; idle's source is still kept, unstarted.
	if n := starts.Load(); n != 4 {
		t.Fatalf("idle's sources started (%d starts) though nothing opened them", n)
	}
	expectKept(t, gates, "idle", 1)
}

// expectKept fails unless project's gate is closed and keeps n deferred starts.
func expectKept(t *testing.T, gates *projectGates, project string, n int) {
	t.Helper()
	gates.mu.Lock()
	defer gates.mu.Unlock()
	g := gates.gates[multicluster.ClusterName(project)]
	if g == nil {
		t.Fatalf("%s has no gate", project)
	}
	if g.open || len(g.pending) != n {
		t.Fatalf("%s's gate: open=%v keeping %d starts, want closed keeping %d", project, g.open, len(g.pending), n)
	}
}

func TestDeferredWatchOfAnEndedEngagementNeverStarts(t *testing.T) {
	gates := newProjectGates()
	var starts atomic.Int32
	d := deferredSource{inners: []mcsource.TypedSource[client.Object, mcreconcile.Request]{countingSource{starts: &starts}, countingSource{starts: &starts}}, gates: gates}
	ctx, cancel := context.WithCancel(context.Background())
	startFor(t, d, ctx, "gone")
	gateOf := func() *gate {
		gates.mu.Lock()
		defer gates.mu.Unlock()
		return gates.gates["gone"]
	}
	ended := gateOf()
	cancel()
	eventually(t, "the ended engagement's gate forgotten", func() bool { return gateOf() == nil })
	gates.open("gone") // a late reconcile: the gate is forgotten, nothing to start
	// Had the opening come before the gate was forgotten, its starts would run now:
	// run them here, in this goroutine, so that the count below is final.
	gates.mu.Lock()
	pending := ended.pending
	gates.mu.Unlock()
	if len(pending) != 1 {
		t.Fatalf("the ended engagement's gate keeps %d starts, want 1", len(pending))
	}
	for _, start := range pending {
		start()
	}
	if n := starts.Load(); n != 0 {
		t.Fatalf("a source of an ended engagement started (%d starts)", n)
	}

	// A new engagement starts closed.
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	startFor(t, d, ctx2, "gone")
	if gates.isOpen("gone") {
		t.Fatal("a new engagement of a project inherited an opening")
	}
}
