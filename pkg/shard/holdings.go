package shard

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
)

// holdingState is where one holding is in its life; admission opens only in holdingOpen.
type holdingState int

const (
	holdingClaiming    holdingState = iota // building and engaging; work is retried
	holdingOpen                            // the claim write succeeded; admission open
	holdingHandingOver                     // admission closed for good; in-flight work finishes
	holdingClosed                          // lost, released or handed over
)

// holdingMoves are the legal changes of a holding's state; nothing goes back to open.
var holdingMoves = map[holdingState][]holdingState{
	holdingClaiming:    {holdingOpen, holdingHandingOver, holdingClosed},
	holdingOpen:        {holdingHandingOver, holdingClosed},
	holdingHandingOver: {holdingClosed},
	holdingClosed:      nil,
}

// moveLocked moves h to to if holdingMoves allows, waking idle waiters. h.mu is held.
func (h *holding) moveLocked(to holdingState) bool {
	if !slices.Contains(holdingMoves[h.st], to) {
		return false
	}
	h.st = to
	h.signalIdleLocked()
	return true
}

// errClaimPending refuses work while the claim is written (retried after claimPendingRetry).
var errClaimPending = errors.New("project claim in progress")

// errViewStale refuses work while the Lease view is stale (view.go).
var errViewStale = errors.New("the Lease watch has not shown this replica's renews recently; admission paused")

// claimPendingRetry is the delay before a request refused during a claim is retried.
const claimPendingRetry = 50 * time.Millisecond

// retryAfter is a refusal that says when to try again (pkg/gateway honours RetryAfter).
type retryAfter struct {
	err   error
	after time.Duration
}

func (r retryAfter) Error() string { return r.err.Error() }

func (r retryAfter) Unwrap() error { return r.err }

func (r retryAfter) RetryAfter() time.Duration { return r.after }

// holding is one project held by one incarnation, for one engagement.
type holding struct {
	project    string
	holder     string
	engagement string
	rv         string    // where this incarnation read itself as holder: the claim's precondition
	leaseUID   types.UID // of the Lease the claim was written to
	discovery  uint64    // the discovered.gen built from; 0 when never built here
	claimRV    string    // the resourceVersion the claim write returned
	cluster    cluster.Cluster
	ctx        context.Context
	cancel     context.CancelFunc

	mu       sync.Mutex
	st       holdingState
	inflight int
	idle     chan struct{} // closed when inflight drops to zero after closing
}

// view is what a holder sync reads of h (PlanHolderSync).
func (h *holding) view() HoldingView {
	h.mu.Lock()
	defer h.mu.Unlock()
	return HoldingView{Holder: h.holder, State: h.st, Discovery: h.discovery, LeaseUID: h.leaseUID,
		Claim: ClaimValue(h.holder, h.engagement), ClaimRV: h.claimRV}
}

func (h *holding) state() holdingState {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.st
}

// close shuts admission at once; in-flight work sees its context cancelled.
func (h *holding) close() {
	h.mu.Lock()
	h.moveLocked(holdingClosed)
	h.mu.Unlock()
	h.cancel()
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

// Enter admits one unit of work for project (docs/design.md, Per-project admission); its
// context ends with validity, the view bound or the holding. Call release when done.
func (s *Shard) Enter(ctx context.Context, project string) (context.Context, func(), error) {
	h, until, viewUntil, reject, err := s.admit(project, true)
	if err != nil {
		s.m.rejections.WithLabelValues(reject).Inc()
		return nil, nil, err
	}
	start := s.clock.Now()
	deadline := slices.MinFunc([]time.Time{until, viewUntil}, time.Time.Compare)
	wctx, cancel, stop := s.admittedContext(ctx, deadline, h.ctx)
	release := sync.OnceFunc(func() {
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
	return wctx, release, nil
}

// admittedContext ends at until (on the real clock) or with scope; stop detaches it.
func (s *Shard) admittedContext(ctx context.Context, until time.Time, scope context.Context) (wctx context.Context, cancel context.CancelFunc, stop func() bool) {
	wctx, cancel = context.WithDeadline(ctx, time.Now().Add(until.Sub(s.clock.Now())))
	return wctx, cancel, context.AfterFunc(scope, cancel)
}

// refusalLocked returns the rejection's label and error, nil when h admits work. h.mu is held.
func (s *Shard) refusalLocked(project string, h *holding, holder string, until time.Time, staleView bool) (string, error) {
	switch {
	case h.st == holdingClaiming:
		return rejectClaimPending, retryAfter{err: fmt.Errorf("project %q: %w", project, errClaimPending), after: claimPendingRetry}
	case h.st != holdingOpen:
		return rejectNotHeld, fmt.Errorf("project %q was released: %w", project, multicluster.ErrClusterNotFound)
	case holder != h.holder || !s.clock.Now().Before(until):
		return rejectInvalid, fmt.Errorf("project %q: %w: %w", project, ErrValidityEnded, multicluster.ErrClusterNotFound)
	case staleView: // maybe still held: retried, not dropped
		return rejectViewStale, retryAfter{err: fmt.Errorf("project %q: %w", project, errViewStale), after: s.t.RetryPeriod}
	}
	return "", nil
}

// admit finds project's holding and checks admission, counting the work in flight when
// enter; it returns the end of validity and the view bound, or the rejection's label.
func (s *Shard) admit(project string, enter bool) (h *holding, until, viewUntil time.Time, reject string, err error) {
	// Freshness is read before the holding is looked up (see syncHoldings).
	viewUntil, stale := viewBound(s.member.viewFreshAt(), s.clock.Now(), s.t)
	s.mu.Lock()
	h = s.holdings[project]
	s.mu.Unlock()
	if h == nil {
		return nil, until, viewUntil, rejectNotHeld, fmt.Errorf("project %q is not held by this replica: %w", project, multicluster.ErrClusterNotFound)
	}
	holder, until := s.member.current()
	h.mu.Lock()
	defer h.mu.Unlock()
	if reject, err = s.refusalLocked(project, h, holder, until, stale); err == nil && enter {
		h.inflight++
	}
	return h, until, viewUntil, reject, err
}

// Admits reports whether Enter would admit work for project now, counting nothing.
func (s *Shard) Admits(project string) bool {
	_, _, _, _, err := s.admit(project, false)
	return err == nil
}

// dropHolding forgets h unless a later holding of its project replaced it.
func (s *Shard) dropHolding(h *holding) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.holdings[h.project] == h {
		delete(s.holdings, h.project)
	}
}

// voidAll closes every holding of holder at once (validity ended, or shutdown).
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
