package gateway

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"
)

func req(project, name string) mcreconcile.Request {
	return mcreconcile.Request{ClusterName: multicluster.ClusterName(project), Request: reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: name}}}
}

func newTestFairQueue(perProject int) (*fairQueue, *clocktesting.FakeClock) {
	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	return newFairQueue(perProject, workqueue.DefaultTypedControllerRateLimiter[mcreconcile.Request](), clk), clk
}

// getNow takes the next request, failing the test if Get would wait.
func getNow(t *testing.T, q *fairQueue) mcreconcile.Request {
	t.Helper()
	q.mu.Lock()
	r, ok := q.nextLocked()
	q.mu.Unlock()
	if !ok {
		t.Fatalf("no request could be handed out; queued %d", q.Len())
	}
	return r
}

func TestFairQueueServesProjectsInTurnBehindABacklog(t *testing.T) {
	q, _ := newTestFairQueue(2)
	for i := range 1000 {
		q.Add(req("hostile", fmt.Sprintf("px-%d", i)))
	}
	q.Add(req("a", "one"))
	q.Add(req("b", "one"))
	var order []string
	for range 4 {
		r := getNow(t, q)
		order = append(order, string(r.ClusterName)+"/"+r.Name)
	}
	want := []string{"hostile/px-0", "a/one", "b/one", "hostile/px-1"}
	if fmt.Sprint(order) != fmt.Sprint(want) {
		t.Fatalf("handed out %v, want %v: a request of another project waits behind at most one of each project", order, want)
	}
	// The hostile project holds its two workers: nothing more of it is handed out.
	q.mu.Lock()
	_, ok := q.nextLocked()
	q.mu.Unlock()
	if ok {
		t.Fatal("a third request of a project at its bound of two was handed out")
	}
	q.Add(req("c", "one"))
	if r := getNow(t, q); r.ClusterName != "c" {
		t.Fatalf("handed out %v while the hostile project is at its bound, want c's", r)
	}
	q.Done(req("hostile", "px-0"))
	if r := getNow(t, q); r != req("hostile", "px-2") {
		t.Fatalf("after one of its requests is done, handed out %v, want hostile/px-2", r)
	}
}

func TestFairQueueKeepsTheWorkQueueContract(t *testing.T) {
	q, clk := newTestFairQueue(1)
	a := req("p", "a")
	q.Add(a)
	q.Add(a)
	if q.Len() != 1 {
		t.Fatalf("a request added twice is queued %d times", q.Len())
	}
	if got := getNow(t, q); got != a {
		t.Fatalf("got %v", got)
	}
	q.Add(a) // while being worked
	if q.Len() != 0 {
		t.Fatal("a request being worked was queued a second time while still worked")
	}
	q.Done(a)
	if q.Len() != 1 {
		t.Fatal("a request added while worked was not queued again when done")
	}
	_ = getNow(t, q)
	q.Done(a)

	b := req("p", "b")
	q.AddAfter(b, 10*time.Second)
	q.AddAfter(b, 3*time.Second) // the earlier one wins
	clk.Step(3 * time.Second)    // the fake clock runs due funcs within Step
	if got := getNow(t, q); got != b {
		t.Fatalf("got %v after the earlier delay, want b", got)
	}
	q.Done(b)
	clk.Step(10 * time.Second)
	if q.Len() != 0 {
		t.Fatal("the later, replaced delayed add queued b again")
	}
	q.AddAfter(b, time.Second)
	clk.Step(time.Second)

	done := make(chan struct{})
	go func() {
		_, shutdown := q.Get() // b
		if shutdown {
			t.Error("Get reported shutdown before ShutDown")
		}
		_, shutdown = q.Get() // waits, then shutdown
		if !shutdown {
			t.Error("Get after ShutDown did not report shutdown")
		}
		close(done)
	}()
	waitFor(t, func() bool { return q.Len() == 0 })
	q.ShutDown()
	<-done
	q.Add(a)
	if q.Len() != 0 || !q.ShuttingDown() {
		t.Fatal("a queue shutting down took an add")
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for range 500 {
		if cond() {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatal("condition not reached within a second")
}

// TestFairQueuePriority: a request added above zero goes ahead of its own project's
// ordinary requests, first come first among equals, but never ahead of another project's
// turn; a requeue at the priority it was handed out with keeps its place, delayed or not.
func TestFairQueuePriority(t *testing.T) {
	q, clk := newTestFairQueue(2)
	at := func(p int) priorityqueue.AddOpts { return priorityqueue.AddOpts{Priority: &p} }
	q.Add(req("a", "a-0"))
	for i := range 3 {
		q.Add(req("b", fmt.Sprintf("b-%d", i)))
	}
	q.AddWithOpts(at(terminatingPriority), req("b", "gone-1"))
	q.AddWithOpts(at(terminatingPriority), req("b", "gone-2"))
	q.AddWithOpts(at(-100), req("b", "b-1")) // low priority: stays where it is
	q.AddWithOpts(at(terminatingPriority), req("b", "b-2"))
	want := []struct {
		req      mcreconcile.Request
		priority int
	}{
		{req("a", "a-0"), 0}, // a's turn came first
		{req("b", "gone-1"), terminatingPriority},
		{req("b", "gone-2"), terminatingPriority},
		{req("b", "b-2"), terminatingPriority}, // raised while queued: behind the equals
	}
	for _, w := range want {
		got, priority, _ := q.GetWithPriority()
		if got != w.req || priority != w.priority {
			t.Fatalf("handed out %v at %d, want %v at %d", got, priority, w.req, w.priority)
		}
		if got.ClusterName == "b" {
			q.Done(got) // keep b below its bound
		}
	}

	// A failed terminating request is requeued at its priority, rate limited: once due,
	// it goes ahead of b's ordinary requests again.
	q.AddWithOpts(priorityqueue.AddOpts{RateLimited: true, Priority: ptr.To(terminatingPriority)}, req("b", "gone-1"))
	q.AddWithOpts(priorityqueue.AddOpts{After: time.Minute}, req("b", "gone-1")) // later, ordinary: the earlier, higher add stands
	clk.Step(time.Second)
	if got, priority, _ := q.GetWithPriority(); got != req("b", "gone-1") || priority != terminatingPriority {
		t.Fatalf("after its delay, handed out %v at %d, want b/gone-1 at %d", got, priority, terminatingPriority)
	}
	// Added again while worked, at its priority: queued first when done.
	q.AddWithOpts(at(terminatingPriority), req("b", "gone-1"))
	q.Done(req("b", "gone-1"))
	if got, priority, _ := q.GetWithPriority(); got != req("b", "gone-1") || priority != terminatingPriority {
		t.Fatalf("added again while worked, handed out %v at %d, want b/gone-1 first", got, priority)
	}
	q.Done(req("b", "gone-1"))
	if got, priority, _ := q.GetWithPriority(); got != req("b", "b-0") || priority != 0 {
		t.Fatalf("handed out %v at %d, want the ordinary b/b-0", got, priority)
	}

	// A request alone in its line, raised: its project keeps one turn, it is handed out
	// once, and nothing is left of it.
	q.Add(req("c", "alone"))
	q.AddWithOpts(at(terminatingPriority), req("c", "alone"))
	if len(q.turns) != 2 { // b's and c's
		t.Fatalf("turns %v after raising c's only request, want b and c once each", q.turns)
	}
	if got := getNow(t, q); got != req("b", "b-1") {
		t.Fatalf("handed out %v, want b's turn first", got)
	}
	if got := getNow(t, q); got != req("c", "alone") {
		t.Fatalf("handed out %v, want c/alone", got)
	}
	q.mu.Lock()
	_, more := q.nextLocked()
	q.mu.Unlock()
	if more || q.Len() != 0 {
		t.Fatalf("after the queue emptied: another request handed out=%v, queued %d", more, q.Len())
	}
}
