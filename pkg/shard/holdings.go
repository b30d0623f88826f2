package shard

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
)

type holdingState int

const (
	// holdingClaiming: assigned to this incarnation; the cluster is being built and
	// engaged; admission closed (work is retried, not dropped).
	holdingClaiming holdingState = iota
	// holdingOpen: the claim write succeeded; admission open.
	holdingOpen
	// holdingDraining: a planned hand-over began; admission closed for good, in-flight
	// work finishing.
	holdingDraining
	// holdingClosed: lost, released or handed over; admission closed for good.
	holdingClosed
)

// errClaimPending makes a reconcile retry while the claim completes, instead of ending
// quietly: the request belongs to a project this replica is about to serve. It comes
// wrapped in a retryAfter, so the retry is a short fixed delay: with the controller's
// exponential backoff, the requests refused while the claim was written would wait up
// to a second after admission opened (measured by bench/ as a slower hand-over).
var errClaimPending = errors.New("project claim in progress")

// errViewStale refuses work while the Lease watch has not shown this replica's own
// renews for longer than the view bound (view.go): its project Leases may have changed
// unseen.
var errViewStale = errors.New("the Lease watch has not shown this replica's renews recently; admission paused")

// claimPendingRetry is the delay before a request refused during a claim is retried.
const claimPendingRetry = 50 * time.Millisecond

// retryAfter is a refusal that says when to try again (pkg/gateway's Admission honours
// RetryAfter).
type retryAfter struct {
	err   error
	after time.Duration
}

func (r retryAfter) Error() string             { return r.err.Error() }
func (r retryAfter) Unwrap() error             { return r.err }
func (r retryAfter) RetryAfter() time.Duration { return r.after }

// holding is one project held by one incarnation, for one engagement.
type holding struct {
	project    string
	holder     string
	engagement string
	// rv is the project Lease's resourceVersion at which this incarnation read itself
	// as holder; the claim is written conditional on it.
	rv string
	// leaseUID is the UID of the project Lease the claim was written to (set with the
	// claim): an open holding belongs to that Lease and that claim value only.
	leaseUID types.UID
	// discovery is the discovery (discovered.gen) whose config the cluster is built
	// from; 0 for a hand-over of a project this replica never built.
	discovery uint64
	// claimRV is the Lease's resourceVersion the claim write returned: a view of the
	// same Lease older than it predates the claim and says nothing about it.
	claimRV string
	cluster cluster.Cluster
	ctx     context.Context
	cancel  context.CancelFunc

	mu       sync.Mutex
	st       holdingState
	inflight int
	idle     chan struct{} // closed when inflight drops to zero after closing
}

func (h *holding) clusterName() multicluster.ClusterName { return multicluster.ClusterName(h.project) }

func (h *holding) state() holdingState {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.st
}

// close shuts admission at once; in-flight work sees its context cancelled.
func (h *holding) close() {
	h.mu.Lock()
	h.st = holdingClosed
	h.signalIdleLocked()
	h.mu.Unlock()
	h.cancel()
}

// drain closes admission without cancelling in-flight work, and reports whether the
// holding was open (a hand-over starts once).
func (h *holding) drain() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.st != holdingOpen && h.st != holdingClaiming {
		return false
	}
	h.st = holdingDraining
	h.signalIdleLocked()
	return true
}

func (h *holding) signalIdleLocked() {
	if h.inflight == 0 && h.st != holdingOpen && h.idle != nil {
		close(h.idle)
		h.idle = nil
	}
}

// idleCh returns a channel closed once admission is closed and no work is in flight.
func (h *holding) idleCh() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.inflight == 0 && h.st != holdingOpen {
		done := make(chan struct{})
		close(done)
		return done
	}
	if h.idle == nil {
		h.idle = make(chan struct{})
	}
	return h.idle
}

func (s *Shard) openHoldingsLocked() []*holding {
	var out []*holding
	for _, h := range s.holdings {
		if h.state() == holdingOpen {
			out = append(out, h)
		}
	}
	return out
}

// Enter admits one unit of work for project: this incarnation holds and has claimed it,
// admission is open, validity has not ended, and the Lease watch has shown a renew of
// this replica recently enough (viewBound). The returned context ends at the end of
// validity or of that view bound, whichever comes first, or when the holding is lost;
// release must be called when the work ends.
func (s *Shard) Enter(ctx context.Context, project string) (context.Context, func(), error) {
	// The view's freshness is read before the holding is looked up: the holdings loop
	// publishes it only after dropping the holdings the view it comes with ends, so a
	// holding found after this read is not one that view already ended.
	viewUntil, stale := viewBound(s.member.viewFreshAt(), s.clock.Now(), s.t)
	s.mu.Lock()
	h := s.holdings[project]
	s.mu.Unlock()
	if h == nil {
		s.m.gateRejections.WithLabelValues(rejectNotHeld).Inc()
		return nil, nil, fmt.Errorf("project %q is not held by this replica: %w", project, multicluster.ErrClusterNotFound)
	}
	holder, until := s.member.current()
	h.mu.Lock()
	if reject, err := s.refusalLocked(project, h, holder, until, stale); err != nil {
		h.mu.Unlock()
		s.m.gateRejections.WithLabelValues(reject).Inc()
		return nil, nil, err
	}
	h.inflight++
	h.mu.Unlock()

	start := s.clock.Now()
	wctx, cancel, stop := s.admittedContext(ctx, earliest(until, viewUntil), h.ctx)
	var once sync.Once
	release := func() {
		once.Do(func() {
			stop()
			cancel()
			h.mu.Lock()
			h.inflight--
			h.signalIdleLocked()
			h.mu.Unlock()
			if s.opts.Recorder != nil {
				s.opts.Recorder.Record(Record{Holder: h.holder, Project: project, Start: start, End: s.clock.Now(), ValidUntil: until, Claim: h.engagement})
			}
		})
	}
	return wctx, release, nil
}

// earliest returns the earlier of a and b.
func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// admittedContext is the context of admitted work: it ends at until, the end of this
// incarnation's validity or sooner (context deadlines run on the real clock, so until is
// translated from the injected one), or when scope (the holding, the leadership term)
// ends. stop detaches it from scope; cancel ends it.
func (s *Shard) admittedContext(ctx context.Context, until time.Time, scope context.Context) (wctx context.Context, cancel context.CancelFunc, stop func() bool) {
	wctx, cancel = context.WithDeadline(ctx, time.Now().Add(until.Sub(s.clock.Now())))
	if !gateEnforced {
		wctx, cancel = context.WithCancel(ctx)
	}
	return wctx, cancel, context.AfterFunc(scope, cancel)
}

// refusalLocked decides whether h admits work for project now, for the incarnation
// holder whose validity ends at until, with staleView telling that the Lease watch has
// not shown its renews recently enough (viewBound); it returns the rejection's metric
// label and error, or nil when work is admitted. h.mu is held.
func (s *Shard) refusalLocked(project string, h *holding, holder string, until time.Time, staleView bool) (string, error) {
	switch {
	case h.st == holdingClaiming:
		return rejectClaimPending, retryAfter{err: fmt.Errorf("project %q: %w", project, errClaimPending), after: claimPendingRetry}
	case h.st != holdingOpen:
		return rejectNotHeld, fmt.Errorf("project %q was released: %w", project, multicluster.ErrClusterNotFound)
	case gateEnforced && (holder != h.holder || !s.clock.Now().Before(until)):
		return rejectInvalid, fmt.Errorf("project %q: %w: %w", project, ErrValidityEnded, multicluster.ErrClusterNotFound)
	case gateEnforced && staleView:
		// Still held as far as this replica can tell, so the work is retried, not
		// dropped: at the next renew the watch shows, or once the holding closes.
		return rejectViewStale, retryAfter{err: fmt.Errorf("project %q: %w", project, errViewStale), after: s.t.RetryPeriod}
	}
	return "", nil
}

// Admits reports whether Enter would admit work for project now, without admitting
// any: no in-flight count, no work record, no rejection counted. For probes (tests,
// tools) that must not show up as work.
func (s *Shard) Admits(project string) bool {
	_, stale := viewBound(s.member.viewFreshAt(), s.clock.Now(), s.t)
	s.mu.Lock()
	h := s.holdings[project]
	s.mu.Unlock()
	if h == nil {
		return false
	}
	holder, until := s.member.current()
	h.mu.Lock()
	defer h.mu.Unlock()
	_, err := s.refusalLocked(project, h, holder, until, stale)
	return err == nil
}

// voidAll drops every holding of holder at once: called when its validity ended and on
// shutdown.
func (s *Shard) voidAll(holder string) {
	s.mu.Lock()
	var lost []*holding
	for p, h := range s.holdings {
		if h.holder == holder {
			lost = append(lost, h)
			delete(s.holdings, p)
		}
	}
	s.mu.Unlock()
	for _, h := range lost {
		h.close()
	}
	if len(lost) > 0 {
		s.log.Info("Closed admission for every held project", "holder", holder, "projects", len(lost))
	}
	s.updateGauges()
}

// runHoldings reconciles this replica's holdings with the project Leases it observes:
// claim what names this incarnation, drop at once what no longer does.
func (s *Shard) runHoldings(ctx context.Context) {
	tick := s.clock.NewTicker(s.t.RetryPeriod)
	defer tick.Stop()
	for {
		s.syncHoldings(ctx)
		s.noteViewFreshness()
		s.updateGauges()
		select {
		case <-ctx.Done():
			s.voidAll(s.Holder())
			return
		case <-s.observer.notify:
		case <-tick.C():
		}
	}
}

func (s *Shard) syncHoldings(ctx context.Context) {
	holder, _ := s.member.current()
	// Read before the snapshot: every Lease change the watch delivered before the renew
	// that shows the view fresh as of shown is in the snapshot, and the holdings it
	// ends are dropped before shown is published.
	shown := s.member.viewShownAt()
	_, leases, synced := s.observer.snapshot()
	if !synced {
		return
	}
	projects := s.discoveredProjects()
	s.mu.Lock()
	defer s.mu.Unlock()
	// Drop holdings whose Lease is gone, names someone else, or whose Secret is gone.
	for p, h := range s.holdings {
		ob, ok := leases[ProjectLeaseName(p)]
		d, stillThere := projects[p]
		// A Secret engaged again (a changed kubeconfig: rotated credentials, a new
		// address) is claimed again with its new config, not served with the old one.
		rediscovered := stillThere && h.discovery != 0 && d.gen != h.discovery
		preparing := ok && h.state() == holdingClaiming && ob.Lease.Annotations[AnnotationNextHolder] == h.holder
		lost := !ok || !stillThere || rediscovered || (ok && !h.stillClaimedBy(ob.Lease))
		if gateEnforced {
			// A holding of an incarnation that is no longer ours, or of a project the
			// Lease gives to someone else, closes at once (without the gate, the
			// replica would go on believing it owns the project).
			lost = lost || (ob.Holder() != h.holder && !preparing) || h.holder != holder
		}
		if lost {
			delete(s.holdings, p)
			go h.close()
			s.log.Info("Closing admission for a project no longer held", "project", p, "holder", h.holder, "leaseHolder", ob.Holder(), "newKubeconfig", rediscovered)
			if ok && !stillThere && ob.Holder() == h.holder {
				go s.releaseProject(ctx, ob.Lease)
			}
		}
	}
	s.member.publishViewFresh(shown)
	if holder == "" || !s.member.valid(holder) {
		return
	}
	stillUndiscovered := map[string]bool{}
	for name, ob := range leases {
		project := ob.Lease.Annotations[AnnotationProject]
		if project == "" || ProjectLeaseName(project) != name {
			continue
		}
		if ob.Holder() != holder {
			// Named as the next holder of a planned hand-over: warm the project's caches
			// now, so the gap between the old owner's write and our claim is short.
			if _, held := s.holdings[project]; !held && ob.Lease.Annotations[AnnotationNextHolder] == holder && !s.draining.Load() {
				if d, ok := projects[project]; ok {
					s.startClaimLocked(ctx, project, holder, "", d, ob.Lease)
				}
			}
			continue
		}
		h, held := s.holdings[project]
		if next := ob.Lease.Annotations[AnnotationNextHolder]; next != "" && next != holder {
			if h != nil || !s.handedOffLocked(project, holder, ob.Lease) {
				s.beginHandOverLocked(ctx, project, h, ob.Lease)
			}
			continue
		}
		if held || s.draining.Load() || s.handedOffLocked(project, holder, ob.Lease) {
			continue
		}
		d, ok := projects[project]
		if !ok {
			s.releaseUndiscoveredLocked(ctx, project, ob.Lease)
			stillUndiscovered[project] = true
			continue
		}
		s.startClaimLocked(ctx, project, holder, ob.Lease.ResourceVersion, d, ob.Lease)
	}
	for project := range s.undiscovered {
		if !stillUndiscovered[project] {
			delete(s.undiscovered, project)
		}
	}
	for _, project := range forgottenHandOffs(s.handedOff, leases, holder) {
		delete(s.handedOff, project)
	}
}

// releaseUndiscoveredLocked releases lease, which names this incarnation for a project
// it does not discover (its Secret is gone, or never reached this replica), once that
// has lasted a claim deadline: the coordinator deletes a removed project's Lease only
// when no member holds on to it, so a holder that never claimed it must let it go, or
// it would stay forever. The wait lets a Secret this replica has not seen yet arrive.
func (s *Shard) releaseUndiscoveredLocked(ctx context.Context, project string, lease *coordinationv1.Lease) {
	since, seen := s.undiscovered[project]
	now := s.clock.Now()
	if !seen {
		s.undiscovered[project] = now
		return
	}
	if now.Sub(since) < s.t.ClaimDeadline {
		return
	}
	delete(s.undiscovered, project)
	s.log.Info("Releasing the Lease of a project this replica does not discover", "project", project, "since", since)
	go s.releaseProject(ctx, lease.DeepCopy())
}

// startClaimLocked starts an engagement; rv is the resourceVersion at which holder was
// read as the project's holder, or "" when it is only the announced next holder.
func (s *Shard) startClaimLocked(ctx context.Context, project, holder, rv string, d discovered, lease *coordinationv1.Lease) {
	hctx, cancel := context.WithCancel(ctx)
	h := &holding{project: project, holder: holder, engagement: string(uuid.NewUUID())[:8], rv: rv, discovery: d.gen, ctx: hctx, cancel: cancel}
	s.holdings[project] = h
	go s.claim(h, d, lease.DeepCopy())
}

// stillClaimedBy reports whether lease still carries h's claim: for an open holding, the
// Lease it claimed (same UID) with its own claim value. A Lease deleted and created
// again, or whose claim was removed or rewritten by hand, no longer does: the holding
// closes and, if the Lease still names this incarnation, the project is claimed again
// under a new engagement. A holding not open yet (or draining) is judged elsewhere.
func (h *holding) stillClaimedBy(lease *coordinationv1.Lease) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.st != holdingOpen {
		return true
	}
	if lease.UID != h.leaseUID {
		return false
	}
	return olderVersion(lease.ResourceVersion, h.claimRV) || lease.Annotations[AnnotationClaim] == ClaimValue(h.holder, h.engagement)
}

// beginHandOverLocked starts a planned hand-over once per holding. A Lease asking for
// a hand-over of a project this replica holds but has no holding for (a claim that
// failed, or a restart of the loop) is handed over too, with nothing to drain.
func (s *Shard) beginHandOverLocked(ctx context.Context, project string, h *holding, lease *coordinationv1.Lease) {
	if h == nil {
		hctx, cancel := context.WithCancel(ctx)
		h = &holding{project: project, holder: *lease.Spec.HolderIdentity, ctx: hctx, cancel: cancel, st: holdingClaiming}
		s.holdings[project] = h
	}
	if !h.drain() {
		return // already draining or handed over
	}
	s.handedOff[project] = handOff{holder: h.holder, lease: lease.UID, transitions: ptrDeref(lease.Spec.LeaseTransitions)}
	go s.handOver(h, lease.DeepCopy())
}

// handOff remembers that an incarnation began handing a project over at a given
// assignment, of a given Lease: it never reopens that assignment, only a later one. A
// Lease created again (another UID; its transitions start over) is a new assignment.
type handOff struct {
	holder      string
	lease       types.UID
	transitions int32
}

func (s *Shard) handedOffLocked(project, holder string, lease *coordinationv1.Lease) bool {
	return handedOffAt(s.handedOff[project], holder, lease)
}

// handedOffAt reports whether ho (the zero handOff when none) records that holder began
// handing over the assignment lease shows: the same Lease (UID), at no more transitions
// than when the hand-over began.
func handedOffAt(ho handOff, holder string, lease *coordinationv1.Lease) bool {
	return ho.holder != "" && ho.holder == holder && ho.lease == lease.UID && ptrDeref(lease.Spec.LeaseTransitions) <= ho.transitions
}

// forgottenHandOffs returns the projects whose hand-over holder no longer needs to
// remember: one begun by an older incarnation, one of a Lease that is gone or was created
// again (another UID), and one whose Lease another holder has claimed since (the
// hand-over is complete: its claim is what a graceful stop waits for). A hand-over whose
// Lease still names holder, or names the next holder without its claim yet, is kept.
func forgottenHandOffs(handedOff map[string]handOff, leases map[string]Observed, holder string) []string {
	var out []string
	for project, ho := range handedOff {
		ob, ok := leases[ProjectLeaseName(project)]
		switch {
		case ho.holder != holder, !ok, ob.Lease.UID != ho.lease:
			out = append(out, project)
		case ob.Holder() != ho.holder && ClaimedBy(ob.Lease.Annotations[AnnotationClaim], ob.Holder()):
			out = append(out, project)
		}
	}
	sort.Strings(out)
	return out
}

func ptrDeref(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}

// claim builds and engages the project's cluster under the claim deadline, then writes
// the claim conditional on the resourceVersion at which the holder was read, and only
// then opens admission.
func (s *Shard) claim(h *holding, d discovered, lease *coordinationv1.Lease) {
	log := s.log.WithValues("project", h.project, "holder", h.holder, "engagement", h.engagement)
	fail := func(err error) {
		log.Info("Claim failed; releasing the engagement", "error", err.Error())
		s.mu.Lock()
		if s.holdings[h.project] == h {
			delete(s.holdings, h.project)
		}
		s.mu.Unlock()
		h.close()
	}
	claimStart := s.clock.Now()
	var built, engaged, synced time.Time
	claimCtx, cancel := context.WithTimeout(h.ctx, s.t.ClaimDeadline)
	defer cancel()
	opts := append([]cluster.Option{func(o *cluster.Options) {
		if s.opts.Scheme != nil {
			o.Scheme = s.opts.Scheme
		}
		inner := o.NewClient
		o.NewClient = func(cfg *rest.Config, co client.Options) (client.Client, error) {
			if inner == nil {
				inner = client.New
			}
			c, err := inner(cfg, co)
			if err != nil {
				return nil, err
			}
			return s.validityGuarded(c), nil
		}
	}}, s.opts.ClusterOptions...)
	cl, err := cluster.New(d.config, opts...)
	if err != nil {
		fail(fmt.Errorf("building cluster: %w", err))
		return
	}
	h.cluster = cl
	built = s.clock.Now()
	s.mu.Lock()
	indexers := append([]fieldIndex(nil), s.indexers...)
	awares := append([]multicluster.Aware(nil), s.awares...)
	s.mu.Unlock()
	for _, idx := range indexers {
		if err := cl.GetFieldIndexer().IndexField(claimCtx, idx.obj, idx.field, idx.extract); err != nil {
			fail(fmt.Errorf("indexing %s: %w", idx.field, err))
			return
		}
	}
	go func() {
		if err := cl.Start(h.ctx); err != nil && h.ctx.Err() == nil {
			log.Error(err, "Project cluster stopped")
		}
	}()
	if err := warmInformers(claimCtx, cl, s.opts.WarmKinds); err != nil {
		fail(err)
		return
	}
	for _, a := range awares {
		if err := a.Engage(h.ctx, h.clusterName(), cl); err != nil {
			fail(fmt.Errorf("engaging: %w", err))
			return
		}
	}
	engaged = s.clock.Now()
	if !cl.GetCache().WaitForCacheSync(claimCtx) {
		fail(fmt.Errorf("caches not synced within the claim deadline %s", s.t.ClaimDeadline))
		return
	}
	synced = s.clock.Now()
	if h.rv == "" {
		// Prepared as the next holder of a planned hand-over: caches are warm; wait for
		// the old owner's write to name this incarnation.
		if lease = s.awaitHolder(claimCtx, h); lease == nil {
			fail(fmt.Errorf("planned hand-over to this replica did not happen within the claim deadline %s", s.t.ClaimDeadline))
			return
		}
		h.rv = lease.ResourceVersion
	}
	if !s.member.valid(h.holder) {
		fail(ErrValidityEnded)
		return
	}
	l := lease.DeepCopy()
	l.ResourceVersion = h.rv
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	l.Annotations[AnnotationClaim] = ClaimValue(h.holder, h.engagement)
	wctx, wcancel, err := s.protocolCall(claimCtx, h.holder)
	if err != nil {
		fail(err)
		return
	}
	wrote, err := s.cs.CoordinationV1().Leases(s.opts.Namespace).Update(wctx, l, metav1.UpdateOptions{})
	wcancel()
	s.m.leaseWrite("project", true, err)
	if err != nil {
		fail(fmt.Errorf("writing claim: %w", err))
		return
	}
	s.observer.record(wrote)
	h.mu.Lock()
	h.leaseUID, h.claimRV = wrote.UID, wrote.ResourceVersion
	if h.st == holdingClaiming {
		h.st = holdingOpen
	}
	h.mu.Unlock()
	s.events.Eventf(wrote, "Normal", "Claimed", "Project %s claimed by %s", h.project, h.holder)
	log.Info("Claimed project; admission open", "took", s.clock.Since(claimStart).String(), "built", built.Sub(claimStart).String(), "engaged", engaged.Sub(claimStart).String(), "synced", synced.Sub(claimStart).String())
	s.updateGauges()
}

// awaitHolder waits until the observed Lease of h's project names h's incarnation and
// returns it; nil when the hand-over was called off or ctx ended.
func (s *Shard) awaitHolder(ctx context.Context, h *holding) *coordinationv1.Lease {
	for {
		ob, ok := s.observer.project(h.project)
		switch {
		case ok && ob.Holder() == h.holder:
			return ob.Lease
		case !ok || ob.Lease.Annotations[AnnotationNextHolder] != h.holder:
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-s.clock.After(s.t.RetryPeriod / 8):
		}
	}
}

// releaseProject clears our holder from a project whose Secret is gone, so the
// coordinator can delete its Lease.
func (s *Shard) releaseProject(ctx context.Context, lease *coordinationv1.Lease) {
	l := lease.DeepCopy()
	l.Spec.HolderIdentity = nil
	delete(l.Annotations, AnnotationClaim)
	cctx, cancel := context.WithTimeout(ctx, s.t.CallTimeout)
	defer cancel()
	_, err := s.cs.CoordinationV1().Leases(s.opts.Namespace).Update(cctx, l, metav1.UpdateOptions{})
	s.m.leaseWrite("project", true, err)
	if err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
		s.log.Info("Releasing a removed project's Lease failed", "project", l.Annotations[AnnotationProject], "error", err.Error())
	}
}

// discoveredProjects maps engageable project names to their discovery; a project named
// by two Secrets is not engageable.
func (s *Shard) discoveredProjects() map[string]discovered {
	s.mu.Lock()
	defer s.mu.Unlock()
	count := map[string]int{}
	for _, d := range s.found {
		count[d.project]++
	}
	out := map[string]discovered{}
	dup := 0
	for _, d := range s.found {
		if d.project == "" {
			continue // its name is not read yet
		}
		if count[d.project] > 1 {
			dup++
			continue
		}
		out[d.project] = d
	}
	s.m.unengageable.Set(float64(dup))
	return out
}

// updateGauges recomputes the ownership gauges from what this replica observes.
func (s *Shard) updateGauges() {
	members, leases, synced := s.observer.snapshot()
	if !synced {
		return
	}
	now := s.clock.Now()
	live := liveHolders(members, now, s.t.LeaseDuration)
	var unowned, unclaimed float64
	for p := range s.discoveredProjects() {
		ob := leases[ProjectLeaseName(p)]
		switch st, _ := ToProjectState(ob, live, now, s.t.ClaimDeadline); st {
		case ProjectUnassigned, ProjectOrphaned:
			unowned++
		case ProjectAssigned, ProjectClaimOverdue:
			unclaimed++
		}
	}
	s.m.unowned.Set(unowned)
	s.m.unclaimed.Set(unclaimed)
	s.mu.Lock()
	s.m.held.Set(float64(len(s.openHoldingsLocked())))
	var oldest time.Duration
	for _, start := range s.drains {
		if age := now.Sub(start); age > oldest {
			oldest = age
		}
	}
	s.mu.Unlock()
	s.m.oldestDrain.Set(oldest.Seconds())
}

// warmInformers starts the informers of kinds in parallel and waits for them to sync.
func warmInformers(ctx context.Context, cl cluster.Cluster, kinds []client.Object) error {
	errs := make(chan error, len(kinds))
	for _, k := range kinds {
		go func() {
			_, err := cl.GetCache().GetInformer(ctx, k)
			errs <- err
		}()
	}
	for range kinds {
		if err := <-errs; err != nil {
			return fmt.Errorf("syncing informers: %w", err)
		}
	}
	return nil
}
