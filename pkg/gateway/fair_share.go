package gateway

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	"anchorage/api/v1alpha"
)

// hubWriteLimits is one token bucket per project for its hub writes (docs/design.md,
// Threat model). Buckets are kept in an LRU; a rebuilt one starts full.
type hubWriteLimits struct {
	perSecond float64
	clk       clock.Clock
	waited    *prometheus.CounterVec // seconds waited, by project; may be nil

	mu      sync.Mutex
	buckets *lru.Cache[string, *rate.Limiter]
}

// maxLimitedProjects bounds the buckets kept: far more projects than a replica holds.
const maxLimitedProjects = 4096

func newHubWriteLimits(perSecond float64, clk clock.Clock, waited *prometheus.CounterVec) *hubWriteLimits {
	buckets, err := lru.New[string, *rate.Limiter](maxLimitedProjects)
	if err != nil {
		panic(fmt.Sprintf("hub write limits: %v", err)) // only for a size below 1
	}
	return &hubWriteLimits{perSecond: perSecond, clk: clk, waited: waited, buckets: buckets}
}

// wait returns once project may send one more hub write, or with ctx's error.
func (l *hubWriteLimits) wait(ctx context.Context, project string) error {
	l.mu.Lock()
	b, ok := l.buckets.Get(project)
	if !ok {
		b = rate.NewLimiter(rate.Limit(l.perSecond), max(1, int(2*l.perSecond)))
		l.buckets.Add(project, b)
	}
	now := l.clk.Now()
	r := b.ReserveN(now, 1)
	l.mu.Unlock()
	delay := r.DelayFrom(now)
	if delay <= 0 {
		return nil
	}
	if l.waited != nil {
		l.waited.WithLabelValues(project).Add(delay.Seconds())
	}
	if deadline, ok := ctx.Deadline(); ok && deadline.Sub(now) < delay {
		r.CancelAt(now)
		return fmt.Errorf("project %q is over its share of hub writes (%g a second): the next would wait %s, past this reconcile's deadline", project, l.perSecond, delay.Round(time.Millisecond))
	}
	t := l.clk.NewTimer(delay)
	defer t.Stop()
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		r.CancelAt(l.clk.Now())
		return ctx.Err()
	}
}

// fairClusters is Clusters whose hub client waits for the project's share before each
// write; reads are not limited.
type fairClusters struct {
	Clusters
	limits *hubWriteLimits
}

func (f fairClusters) Hub(ctx context.Context, project string) (client.Client, client.Reader, error) {
	w, r, err := f.Clusters.Hub(ctx, project)
	if err != nil {
		return nil, nil, err
	}
	return limitedWrites{Client: w, wait: func(ctx context.Context) error { return f.limits.wait(ctx, project) }}, r, nil
}

// waitFunc waits for the project's share of hub writes.
type waitFunc func(context.Context) error

// then runs write once wait lets it, or returns wait's error.
func (wait waitFunc) then(ctx context.Context, write func() error) error {
	if err := wait(ctx); err != nil {
		return err
	}
	return write()
}

// limitedWrites waits before every write it sends, status and subresource writes too.
type limitedWrites struct {
	client.Client
	wait waitFunc
}

func (c limitedWrites) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	return c.wait.then(ctx, func() error { return c.Client.Create(ctx, obj, opts...) })
}

func (c limitedWrites) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	return c.wait.then(ctx, func() error { return c.Client.Update(ctx, obj, opts...) })
}

func (c limitedWrites) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	return c.wait.then(ctx, func() error { return c.Client.Patch(ctx, obj, patch, opts...) })
}

func (c limitedWrites) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	return c.wait.then(ctx, func() error { return c.Client.Apply(ctx, obj, opts...) })
}

func (c limitedWrites) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	return c.wait.then(ctx, func() error { return c.Client.Delete(ctx, obj, opts...) })
}

func (c limitedWrites) DeleteAllOf(ctx context.Context, obj client.Object, opts ...client.DeleteAllOfOption) error {
	return c.wait.then(ctx, func() error { return c.Client.DeleteAllOf(ctx, obj, opts...) })
}

func (c limitedWrites) Status() client.SubResourceWriter {
	return limitedSubResource{SubResourceWriter: c.Client.Status(), wait: c.wait}
}

// SubResource reads through the subresource client and writes through limitedSubResource.
func (c limitedWrites) SubResource(name string) client.SubResourceClient {
	sub := c.Client.SubResource(name)
	return struct {
		client.SubResourceReader
		limitedSubResource
	}{sub, limitedSubResource{SubResourceWriter: sub, wait: c.wait}}
}

type limitedSubResource struct {
	client.SubResourceWriter
	wait waitFunc
}

func (c limitedSubResource) Create(ctx context.Context, obj, sub client.Object, opts ...client.SubResourceCreateOption) error {
	return c.wait.then(ctx, func() error { return c.SubResourceWriter.Create(ctx, obj, sub, opts...) })
}

func (c limitedSubResource) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	return c.wait.then(ctx, func() error { return c.SubResourceWriter.Update(ctx, obj, opts...) })
}

func (c limitedSubResource) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	return c.wait.then(ctx, func() error { return c.SubResourceWriter.Patch(ctx, obj, patch, opts...) })
}

func (c limitedSubResource) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.SubResourceApplyOption) error {
	return c.wait.then(ctx, func() error { return c.SubResourceWriter.Apply(ctx, obj, opts...) })
}

// fairQueue is each gateway controller's work queue: one line per project, served round
// robin over the projects with fewer than perProject being worked. It keeps client-go's
// queue contract; of several delayed adds of one request the earliest wins. It is a
// controller-runtime priority queue too, so the controller hands it priorities instead
// of wrapping it: a request added at a priority above zero goes ahead of the ordinary
// ones in its own project's line (first come first among equals), never ahead of
// another project's turn, and keeps the higher of its priorities until handed out.
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
	// priority is the priority above zero of a request queued or added again.
	priority map[mcreconcile.Request]int
	// waiting is each delayed request's due time and priority.
	waiting      map[mcreconcile.Request]delayedAdd
	shuttingDown bool
}

// delayedAdd is a request's pending AddAfter.
type delayedAdd struct {
	due      time.Time
	priority int
}

var _ priorityqueue.PriorityQueue[mcreconcile.Request] = (*fairQueue)(nil)

func newFairQueue(perProject int, limiter workqueue.TypedRateLimiter[mcreconcile.Request], clk clock.WithDelayedExecution) *fairQueue {
	q := &fairQueue{
		perProject: max(perProject, 1), limiter: limiter, clk: clk,
		lines:  map[multicluster.ClusterName][]mcreconcile.Request{},
		queued: map[mcreconcile.Request]bool{}, working: map[mcreconcile.Request]bool{}, again: map[mcreconcile.Request]bool{},
		inFlight: map[multicluster.ClusterName]int{}, priority: map[mcreconcile.Request]int{},
		waiting: map[mcreconcile.Request]delayedAdd{},
	}
	q.cond = sync.NewCond(&q.mu)
	return q
}

// Add queues req in its project's line, unless it is queued already.
func (q *fairQueue) Add(req mcreconcile.Request) { q.addAfter(req, 0, 0) }

// AddWithOpts adds each item as AddRateLimited, AddAfter or Add would, at opts.Priority.
func (q *fairQueue) AddWithOpts(opts priorityqueue.AddOpts, items ...mcreconcile.Request) {
	priority := ptr.Deref(opts.Priority, 0)
	for _, req := range items {
		d := opts.After
		if opts.RateLimited {
			d = q.limiter.When(req)
		}
		q.addAfter(req, d, priority)
	}
}

// addLocked queues req at the end of its project's line, or at priority above zero
// behind the requests of its line queued at that priority or higher.
func (q *fairQueue) addLocked(req mcreconcile.Request, priority int) {
	if q.shuttingDown {
		return
	}
	raised := priority > q.priority[req]
	if raised {
		q.priority[req] = priority
	}
	switch {
	case q.working[req]:
		q.again[req] = true
		return
	case q.queued[req] && !raised:
		return
	}
	line := q.lines[req.ClusterName]
	if q.queued[req] { // raised: it moves up its line; its project keeps its turn
		line = slices.DeleteFunc(line, func(r mcreconcile.Request) bool { return r == req })
	} else if len(line) == 0 {
		q.turns = append(q.turns, req.ClusterName)
	}
	at := len(line)
	if priority > 0 {
		at = slices.IndexFunc(line, func(r mcreconcile.Request) bool { return q.priority[r] < priority })
		if at < 0 {
			at = len(line)
		}
	}
	q.lines[req.ClusterName] = slices.Insert(line, at, req)
	q.queued[req] = true
	q.toldDepth()
	q.cond.Signal()
}

// Get hands out the next request of the first project in turn below perProject, whose
// turn moves to the end; it waits while none qualifies.
func (q *fairQueue) Get() (mcreconcile.Request, bool) {
	req, _, shutdown := q.GetWithPriority()
	return req, shutdown
}

// GetWithPriority is Get, also giving the priority req was queued at.
func (q *fairQueue) GetWithPriority() (mcreconcile.Request, int, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for {
		if q.shuttingDown {
			return mcreconcile.Request{}, 0, true
		}
		if req, ok := q.nextLocked(); ok {
			priority := q.priority[req]
			delete(q.priority, req)
			return req, priority, false
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
		q.addLocked(req, q.priority[req])
	}
	// A project below its bound may unblock a worker that found none.
	q.cond.Broadcast()
}

// AddAfter queues req once d has passed on the queue's clock.
func (q *fairQueue) AddAfter(req mcreconcile.Request, d time.Duration) { q.addAfter(req, d, 0) }

// addAfter queues req at priority once d has passed, at once when d ≤ 0.
func (q *fairQueue) addAfter(req mcreconcile.Request, d time.Duration, priority int) {
	q.mu.Lock()
	if d <= 0 {
		q.addLocked(req, priority)
		q.mu.Unlock()
		return
	}
	due := q.clk.Now().Add(d)
	w, ok := q.waiting[req]
	if q.shuttingDown || (ok && !w.due.After(due)) {
		if ok && priority > w.priority {
			q.waiting[req] = delayedAdd{w.due, priority}
		}
		q.mu.Unlock()
		return
	}
	q.waiting[req] = delayedAdd{due, max(priority, w.priority)}
	q.mu.Unlock()
	// Outside the lock: a fake clock runs the func within AfterFunc or Step.
	q.clk.AfterFunc(d, func() {
		q.mu.Lock()
		defer q.mu.Unlock()
		w, ok := q.waiting[req]
		if !ok || !w.due.Equal(due) {
			return // an earlier add replaced this one
		}
		delete(q.waiting, req)
		q.addLocked(req, w.priority)
	})
}

// AddRateLimited queues req after the rate limiter's delay for it.
func (q *fairQueue) AddRateLimited(req mcreconcile.Request) { q.addAfter(req, q.limiter.When(req), 0) }

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

// proxySlots caps what a project programs: its proxies and the Gateways of the manager's
// class it writes directly (not a proxy's own) count together, and the first cap by
// creation time (then namespace, name, proxies before Gateways) hold a slot. The rank is
// read from the cache, never remembered, so every replica agrees; a project's ranking
// is reused for rankFreshFor.
type proxySlots struct {
	cap   int
	class string // the manager's Gateway class: only such Gateways count
	clk   clock.WithDelayedExecution
	// enqueue reconciles a holder again: a proxy's request, or a Gateway's (kind).
	enqueue func(kind string, req mcreconcile.Request)
	// rankings needs no lock of its own: the LRU is safe for concurrent use.
	rankings *lru.Cache[string, *ranking]
}

// slotKey names what holds a slot: a proxy or a directly written Gateway.
type slotKey struct {
	kind string // kindHTTPProxy or kindGateway
	types.NamespacedName
}

// rankFreshFor is how long a project's ranking is reused.
const rankFreshFor = time.Second

// slotHandOverDelay is how long after a proxy is finalized the proxy taking its slot is
// enqueued: past rankFreshFor and a cache's usual lag behind a delete.
const slotHandOverDelay = 2 * time.Second

// slotRecheck is how often a proxy past the cap looks again, in case of a missed hand-over.
const slotRecheck = 10 * time.Minute

type ranking struct {
	at    time.Time
	order []slotKey
	rank  map[slotKey]int
}

func newProxySlots(limit int, class string, clk clock.WithDelayedExecution, enqueue func(kind string, req mcreconcile.Request)) *proxySlots {
	rankings, err := lru.New[string, *ranking](maxLimitedProjects)
	if err != nil {
		panic(fmt.Sprintf("proxy slots: %v", err))
	}
	return &proxySlots{cap: limit, class: class, clk: clk, enqueue: enqueue, rankings: rankings}
}

// slotRefusal is the message of a proxy or Gateway past the cap, or "" for one within
// it. rank counts from 0; total is the project's proxies and direct Gateways.
func slotRefusal(what string, rank, total, limit int) string {
	if rank < limit {
		return ""
	}
	return fmt.Sprintf("The project has %d proxies and Gateways of its own and programs at most %d, the oldest first; this %s is number %d by creation time. It is programmed once %d older ones are deleted, or the cap is raised",
		total, limit, what, rank+1, rank+1-limit)
}

// refusal returns why proxy may not be programmed, or "" when it holds a slot.
func (p *proxySlots) refusal(ctx context.Context, project string, reader client.Reader, proxy *v1alpha.HTTPProxy) (string, error) {
	return p.refusalOf(ctx, project, reader, slotKey{kindHTTPProxy, client.ObjectKeyFromObject(proxy)}, "proxy")
}

// gatewayRefusal returns why a Gateway written directly (of the manager's class, not a
// proxy's own) may not be programmed, or "" when it holds a slot.
func (p *proxySlots) gatewayRefusal(ctx context.Context, project string, reader client.Reader, gw *gatewayv1.Gateway) (string, error) {
	return p.refusalOf(ctx, project, reader, slotKey{kindGateway, client.ObjectKeyFromObject(gw)}, "Gateway")
}

func (p *proxySlots) refusalOf(ctx context.Context, project string, reader client.Reader, key slotKey, what string) (string, error) {
	if p == nil {
		return "", nil
	}
	r, err := p.rankingOf(ctx, project, reader, key)
	if err != nil {
		return "", err
	}
	rank, ok := r.rank[key]
	if !ok {
		return "", nil // not in the cache at all: the reconcile ends at load next time
	}
	return slotRefusal(what, rank, len(r.order), p.cap), nil
}

func (p *proxySlots) rankingOf(ctx context.Context, project string, reader client.Reader, key slotKey) (*ranking, error) {
	now := p.clk.Now()
	r, ok := p.rankings.Get(project)
	if ok && now.Sub(r.at) < rankFreshFor {
		if _, known := r.rank[key]; known {
			return r, nil
		}
	}
	proxies := &v1alpha.HTTPProxyList{}
	if err := reader.List(ctx, proxies, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing the project's proxies to rank them: %w", err)
	}
	gateways := &gatewayv1.GatewayList{}
	if err := reader.List(ctx, gateways, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing the project's Gateways to rank them: %w", err)
	}
	r = rankSlotHolders(proxies.Items, gateways.Items, p.class, now)
	p.rankings.Add(project, r)
	return r, nil
}

// holdsOwnSlot reports whether gw counts against the cap on its own: of class, and not
// the Gateway a proxy writes for itself (the proxy counts for it).
func holdsOwnSlot(gw *gatewayv1.Gateway, class string) bool {
	return string(gw.Spec.GatewayClassName) == class && !ownedByItsProxy(gw)
}

// rankSlotHolders orders the proxies and the Gateways holding their own slot oldest
// first; ties go by namespace and name, a proxy before a Gateway.
func rankSlotHolders(proxies []v1alpha.HTTPProxy, gateways []gatewayv1.Gateway, class string, at time.Time) *ranking {
	type holder struct {
		key     slotKey
		created metav1.Time
	}
	byAge := make([]holder, 0, len(proxies)+len(gateways))
	for i := range proxies {
		byAge = append(byAge, holder{slotKey{kindHTTPProxy, client.ObjectKeyFromObject(&proxies[i])}, proxies[i].CreationTimestamp})
	}
	for i := range gateways {
		if holdsOwnSlot(&gateways[i], class) {
			byAge = append(byAge, holder{slotKey{kindGateway, client.ObjectKeyFromObject(&gateways[i])}, gateways[i].CreationTimestamp})
		}
	}
	slices.SortFunc(byAge, func(a, b holder) int {
		return cmp.Or(a.created.Compare(b.created.Time), strings.Compare(a.key.Namespace, b.key.Namespace), strings.Compare(a.key.Name, b.key.Name),
			-strings.Compare(a.key.kind, b.key.kind)) // HTTPProxy before Gateway
	})
	r := &ranking{at: at, order: make([]slotKey, len(byAge)), rank: make(map[slotKey]int, len(byAge))}
	for i, h := range byAge {
		r.order[i] = h.key
		r.rank[h.key] = i
	}
	return r
}

// released is told that a proxy or Gateway of project holding its own slot is
// finalized: the first waiting is enqueued.
func (p *proxySlots) released(project string, gone slotKey) {
	if p == nil {
		return
	}
	r, ok := p.rankings.Get(project)
	if !ok {
		return
	}
	if rank, in := r.rank[gone]; in && rank < p.cap && p.cap < len(r.order) {
		// The first waiting takes the slot, once the cache has seen the gone one go.
		next := r.order[p.cap]
		req := mcreconcile.Request{ClusterName: multicluster.ClusterName(project), Request: reconcile.Request{NamespacedName: next.NamespacedName}}
		p.clk.AfterFunc(slotHandOverDelay, func() { p.enqueue(next.kind, req) })
	}
	p.rankings.Remove(project) // the next reconcile ranks again without the gone one
}
