package gateway

import (
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"
)

// fairQueue is each gateway controller's work queue: one line per project, served round
// robin over the projects with fewer than perProject being worked. It keeps client-go's
// queue contract; of several delayed adds of one request the earliest wins.
type fairQueue struct {
	perProject int
	limiter    workqueue.TypedRateLimiter[mcreconcile.Request]
	clk        clock.WithDelayedExecution
	depth      func(int) // told the number of queued requests after each change; may be nil

	mu   sync.Mutex
	cond *sync.Cond
	// lines are each project's queued requests; turns the projects with one, in order.
	lines map[multicluster.ClusterName][]mcreconcile.Request
	turns []multicluster.ClusterName
	// queued are in a line; working handed out and not Done; again added while worked.
	queued, working, again map[mcreconcile.Request]bool
	inFlight               map[multicluster.ClusterName]int
	// waiting is the time each delayed request is due.
	waiting      map[mcreconcile.Request]time.Time
	shuttingDown bool
}

func newFairQueue(perProject int, limiter workqueue.TypedRateLimiter[mcreconcile.Request], clk clock.WithDelayedExecution) *fairQueue {
	q := &fairQueue{
		perProject: max(perProject, 1), limiter: limiter, clk: clk,
		lines:  map[multicluster.ClusterName][]mcreconcile.Request{},
		queued: map[mcreconcile.Request]bool{}, working: map[mcreconcile.Request]bool{}, again: map[mcreconcile.Request]bool{},
		inFlight: map[multicluster.ClusterName]int{}, waiting: map[mcreconcile.Request]time.Time{},
	}
	q.cond = sync.NewCond(&q.mu)
	return q
}

// Add queues req at the end of its project's line, unless it is queued already.
func (q *fairQueue) Add(req mcreconcile.Request) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.addLocked(req)
}

func (q *fairQueue) addLocked(req mcreconcile.Request) {
	switch {
	case q.shuttingDown || q.queued[req]:
		return
	case q.working[req]:
		q.again[req] = true
		return
	}
	if len(q.lines[req.ClusterName]) == 0 {
		q.turns = append(q.turns, req.ClusterName)
	}
	q.lines[req.ClusterName] = append(q.lines[req.ClusterName], req)
	q.queued[req] = true
	q.toldDepth()
	q.cond.Signal()
}

// Get hands out the next request of the first project in turn below perProject, whose
// turn moves to the end; it waits while none qualifies.
func (q *fairQueue) Get() (mcreconcile.Request, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for {
		if q.shuttingDown {
			return mcreconcile.Request{}, true
		}
		if req, ok := q.nextLocked(); ok {
			return req, false
		}
		q.cond.Wait()
	}
}

func (q *fairQueue) nextLocked() (mcreconcile.Request, bool) {
	for i, project := range q.turns {
		if q.inFlight[project] >= q.perProject {
			continue
		}
		line := q.lines[project]
		req := line[0]
		q.turns = append(q.turns[:i:i], q.turns[i+1:]...)
		if len(line) == 1 {
			delete(q.lines, project)
		} else {
			q.lines[project] = line[1:]
			q.turns = append(q.turns, project)
		}
		delete(q.queued, req)
		q.working[req] = true
		q.inFlight[project]++
		q.toldDepth()
		return req, true
	}
	return mcreconcile.Request{}, false
}

// Done ends the work on req, queueing it again if it was added meanwhile.
func (q *fairQueue) Done(req mcreconcile.Request) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.working[req] {
		return
	}
	delete(q.working, req)
	if q.inFlight[req.ClusterName]--; q.inFlight[req.ClusterName] <= 0 {
		delete(q.inFlight, req.ClusterName)
	}
	if q.again[req] {
		delete(q.again, req)
		q.addLocked(req)
	}
	// A project below its bound may unblock a worker that found none.
	q.cond.Broadcast()
}

// AddAfter queues req once d has passed on the queue's clock.
func (q *fairQueue) AddAfter(req mcreconcile.Request, d time.Duration) {
	if d <= 0 {
		q.Add(req)
		return
	}
	q.mu.Lock()
	due := q.clk.Now().Add(d)
	if at, ok := q.waiting[req]; q.shuttingDown || (ok && !at.After(due)) {
		q.mu.Unlock()
		return
	}
	q.waiting[req] = due
	q.mu.Unlock()
	// Outside the lock: a fake clock runs the func within AfterFunc or Step.
	q.clk.AfterFunc(d, func() {
		q.mu.Lock()
		defer q.mu.Unlock()
		if at, ok := q.waiting[req]; !ok || !at.Equal(due) {
			return // an earlier add replaced this one
		}
		delete(q.waiting, req)
		q.addLocked(req)
	})
}

// AddRateLimited queues req after the rate limiter's delay for it.
func (q *fairQueue) AddRateLimited(req mcreconcile.Request) { q.AddAfter(req, q.limiter.When(req)) }

// Forget clears req's failures in the rate limiter.
func (q *fairQueue) Forget(req mcreconcile.Request) { q.limiter.Forget(req) }

// NumRequeues is how often req has failed since it was last forgotten.
func (q *fairQueue) NumRequeues(req mcreconcile.Request) int { return q.limiter.NumRequeues(req) }

// Len is the number of queued requests, those being worked left out.
func (q *fairQueue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.queued)
}

// ShutDown stops handing out requests: every Get returns shutdown, adds are dropped.
func (q *fairQueue) ShutDown() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.shuttingDown = true
	q.cond.Broadcast()
}

// ShutDownWithDrain shuts down and waits until every request handed out is Done.
func (q *fairQueue) ShutDownWithDrain() {
	q.ShutDown()
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.working) > 0 {
		q.cond.Wait()
	}
}

// ShuttingDown reports whether ShutDown was called.
func (q *fairQueue) ShuttingDown() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.shuttingDown
}

func (q *fairQueue) toldDepth() {
	if q.depth != nil {
		q.depth(len(q.queued))
	}
}
