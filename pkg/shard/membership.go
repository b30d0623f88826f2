package shard

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	coordclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
)

// membership keeps the member Lease: which incarnation is current, and until when valid.
type membership struct {
	pod      string
	weight   float64
	t        Timings
	clock    clock.Clock
	leases   coordclient.LeaseInterface
	log      logr.Logger
	m        *metrics
	onLapse  func(holder string) // called, outside any lock, after holder's validity ended
	onJoin   func(holder string) // called after holder became valid
	observer Observer            // Options.Observer; nil: none

	draining atomic.Bool
	kick     chan struct{}

	mu                   sync.RWMutex
	holder               string
	validUntil           time.Time
	last                 *coordinationv1.Lease // as this incarnation last wrote or adopted it
	joined               time.Time             // when the current incarnation's join was sent
	sent                 []time.Time           // send times (renewTimes) of its recent renews
	renews               []renewSent           // Lease view freshness (view.go): writes the watch has not shown,
	shownEarly           []shownVersion        // versions shown before their write's answer,
	viewShown, viewFresh time.Time             // the latest shown write's send, and that once acted on
}

// rememberedRenews bounds the renew send times kept: more than a validity's worth.
const rememberedRenews = 16

// Incarnation is one joined incarnation of this replica and the validity it reached.
type Incarnation struct {
	Holder     string
	Joined     time.Time // when the join write that made it valid was sent
	ValidUntil time.Time // the end of its validity: final once Ended
	Ended      bool
}

// Observer is told of each incarnation's join, extensions and lapse, under the membership lock.
type Observer interface{ Incarnation(Incarnation) }

// tellLocked tells the observer of the current incarnation. m.mu is held.
func (m *membership) tellLocked(ended bool) {
	if m.observer != nil {
		m.observer.Incarnation(Incarnation{Holder: m.holder, Joined: m.joined, ValidUntil: m.validUntil, Ended: ended})
	}
}

// setValid records validity for holder.
func (m *membership) setValid(holder string, sent time.Time, wrote *coordinationv1.Lease) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.holder != holder && m.holder != "" {
		return
	}
	if m.holder == "" {
		m.joined, m.sent = sent, nil
	}
	m.holder, m.validUntil, m.last = holder, sent.Add(m.t.RenewDeadline), wrote
	m.noteWriteLocked(sent, wrote)
	m.tellLocked(false)
}

// current returns the incarnation and the end of its validity ("" when not joined).
func (m *membership) current() (string, time.Time) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.holder, m.validUntil
}

// valid reports whether holder is the current incarnation and still valid at now.
func (m *membership) valid(holder string) bool {
	h, until := m.current()
	return holder != "" && h == holder && m.clock.Now().Before(until)
}

// run joins, renews, lapses and rejoins until ctx ends, then releases the Lease.
func (m *membership) run(ctx context.Context) {
	for ctx.Err() == nil {
		holder := HolderIdentity(m.pod, string(uuid.NewUUID()))
		if !m.join(ctx, holder) {
			break
		}
		m.onJoin(holder)
		m.renewUntilLapse(ctx, holder)
		m.mu.Lock()
		m.tellLocked(true)
		m.holder, m.validUntil, m.sent = "", time.Time{}, nil
		m.mu.Unlock()
		m.m.valid.Set(0)
		m.onLapse(holder)
		if ctx.Err() != nil {
			m.release(holder)
			return
		}
		m.log.Info("Member validity ended; rejoining under a new incarnation", "holder", holder)
	}
}

// callCtx bounds a call by timeout and by deadline (on m.clock).
func (m *membership) callCtx(ctx context.Context, deadline time.Time, timeout time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, min(timeout, deadline.Sub(m.clock.Now())))
}

func (m *membership) desired(base *coordinationv1.Lease, holder string, now time.Time) *coordinationv1.Lease {
	l := base.DeepCopy()
	l.Name = MemberLeaseName(m.pod)
	metav1.SetMetaDataLabel(&l.ObjectMeta, LabelRole, RoleMember)
	metav1.SetMetaDataAnnotation(&l.ObjectMeta, AnnotationWeight, strconv.FormatFloat(m.weight, 'g', -1, 64))
	delete(l.Annotations, AnnotationExpiredBy)
	if m.draining.Load() {
		l.Annotations[AnnotationDraining] = "true"
	} else {
		delete(l.Annotations, AnnotationDraining)
	}
	if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != holder {
		l.Spec.AcquireTime = &metav1.MicroTime{Time: now}
		l.Spec.LeaseTransitions = ptr.To(ptr.Deref(l.Spec.LeaseTransitions, 0) + 1)
	}
	l.Spec.HolderIdentity = ptr.To(holder)
	l.Spec.LeaseDurationSeconds = ptr.To(int32(m.t.LeaseDuration / time.Second))
	l.Spec.RenewTime = &metav1.MicroTime{Time: now}
	return l
}

// join takes the member Lease for holder (docs/design.md, Lapse and rejoin).
func (m *membership) join(ctx context.Context, holder string) bool {
	var seenRV string
	var seenAt time.Time
	for ctx.Err() == nil {
		sent := m.clock.Now()
		cctx, cancel := context.WithTimeout(ctx, m.t.CallTimeout)
		cur, err := m.leases.Get(cctx, MemberLeaseName(m.pod), metav1.GetOptions{})
		var wrote *coordinationv1.Lease
		switch { // each write is counted; a failed read is not
		case apierrors.IsNotFound(err):
			wrote, err = m.leases.Create(cctx, m.desired(&coordinationv1.Lease{}, holder, sent), metav1.CreateOptions{})
			m.m.leaseWrite("member", err)
		case err != nil:
		case ptr.Deref(cur.Spec.HolderIdentity, "") != "" && cur.ResourceVersion != seenRV:
			seenRV, seenAt = cur.ResourceVersion, m.clock.Now()
			m.log.Info("Waiting for the previous incarnation's member Lease to go unchanged", "previous", *cur.Spec.HolderIdentity, "wait", m.t.LeaseDuration)
		case ptr.Deref(cur.Spec.HolderIdentity, "") == "" || m.clock.Since(seenAt) >= m.t.LeaseDuration: // free, or left unchanged
			wrote, err = m.leases.Update(cctx, m.desired(cur, holder, sent), metav1.UpdateOptions{})
			m.m.leaseWrite("member", err)
		}
		cancel()
		if err == nil && wrote != nil {
			m.setValid(holder, sent, wrote)
			m.m.valid.Set(1)
			m.log.Info("Joined as member", "holder", holder)
			return true
		}
		if err != nil {
			m.log.V(1).Info("Joining failed; retrying", "error", err.Error())
		}
		sleep(ctx, m.clock, m.t.RetryPeriod)
	}
	return false
}

// renewUntilLapse renews every RetryPeriod until validity ends, the Lease is taken or ctx ends.
func (m *membership) renewUntilLapse(ctx context.Context, holder string) {
	prompt := false
	allowed := m.t.CallTimeout // nextRenewAllowance
	var last renewCall
	for {
		_, until := m.current()
		// RetryPeriod runs from the last renew's send, not from its answer.
		wait := min(max(m.t.RetryPeriod-last.took, 0), until.Sub(m.clock.Now()))
		if wait > 0 && !prompt {
			select {
			case <-ctx.Done():
				return
			case <-m.clock.After(wait):
			case <-m.kick:
			}
		}
		if !m.clock.Now().Before(until) {
			m.log.Info("Member validity ended before a renew succeeded", "holder", holder)
			return
		}
		outcome, call := m.renew(ctx, holder, until, allowed)
		if outcome == renewTaken {
			return
		}
		last, allowed = call, nextRenewAllowance(allowed, call, m.t)
		// After a timeout, renew at once; after a conflict, at most once in a row.
		_, until = m.current()
		prompt = call.timedOut || !prompt && outcome == renewAdopted && closeToLapse(until, m.clock.Now(), m.t.RetryPeriod, allowed)
	}
}

// closeToLapse reports whether validity ends before a renew in a retry period could finish.
func closeToLapse(until, now time.Time, retry, allowed time.Duration) bool {
	return until.Sub(now) < retry+allowed
}

// renewCall is what one renew's call told about the hub.
type renewCall struct {
	took     time.Duration
	timedOut bool // ran out of its allowance without an answer
}

// nextRenewAllowance is how long the renew after last may take: twice last's allowance
// after a timeout, else twice what it took, within [CallTimeout, RenewDeadline].
func nextRenewAllowance(allowed time.Duration, last renewCall, t Timings) time.Duration {
	next := 2 * last.took
	if last.timedOut {
		next = 2 * allowed
	}
	return min(max(next, t.CallTimeout), t.RenewDeadline)
}

// renewOutcome is what one renew did to the incarnation.
type renewOutcome int

const (
	renewDone    renewOutcome = iota // succeeded, or failed without news
	renewAdopted                     // conflicted, still names holder: its version adopted
	renewTaken                       // the Lease no longer names holder, or is gone
)

// renew sends one conditional renew within allowed and until, and reports its outcome.
func (m *membership) renew(ctx context.Context, holder string, until time.Time, allowed time.Duration) (renewOutcome, renewCall) {
	m.mu.Lock()
	base := m.last.DeepCopy() // with its resourceVersion: any other writer conflicts
	sent := m.clock.Now()
	m.sent = keepLast(append(m.sent, sent), rememberedRenews)
	m.mu.Unlock()
	cctx, cancel := m.callCtx(ctx, until, allowed)
	defer cancel()
	wrote, err := m.leases.Update(cctx, m.desired(base, holder, sent), metav1.UpdateOptions{})
	call := renewCall{took: m.clock.Since(sent), timedOut: err != nil && cctx.Err() != nil && ctx.Err() == nil}
	m.m.leaseWrite("member", err)
	switch {
	case err == nil:
		m.setValid(holder, sent, wrote)
		return renewDone, call
	case apierrors.IsConflict(err):
		return m.renewConflictOutcome(ctx, holder, until), call
	case apierrors.IsNotFound(err): // the coordinator may already count us gone: lapse now
		m.log.Info("Member Lease was deleted under this incarnation", "holder", holder)
		return renewTaken, call
	default:
		m.log.V(1).Info("Renewing member Lease failed", "error", err.Error(), "validUntil", until, "allowed", allowed, "took", call.took)
		return renewDone, call
	}
}

// renewConflictOutcome reads the Lease after a renew conflicted and judges who wrote it.
func (m *membership) renewConflictOutcome(ctx context.Context, holder string, until time.Time) renewOutcome {
	cctx, cancel := m.callCtx(ctx, until, m.t.CallTimeout)
	defer cancel()
	latest, err := m.leases.Get(cctx, MemberLeaseName(m.pod), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		// The API server creates Leases on update, so a renew of a deleted Lease conflicts.
		m.log.Info("Member Lease was deleted under this incarnation", "holder", holder)
		return renewTaken
	case err != nil:
		m.log.V(1).Info("Reading member Lease after a conflict failed", "error", err.Error(), "validUntil", until)
		return renewDone
	}
	m.mu.RLock()
	sent := append([]time.Time(nil), m.sent...)
	m.mu.RUnlock()
	verdict, committed := judgeConflict(latest, holder, sent)
	switch verdict {
	case conflictTaken:
		m.log.Info("Member Lease was taken from this incarnation", "holder", holder)
		return renewTaken
	case conflictOwnRenew:
		m.log.V(1).Info("A renew committed unseen; crediting it", "holder", holder, "sent", committed)
	}
	// Adopt latest; an own renew also extends validity to committed + RenewDeadline if that
	// is later (another writer that kept the holder, a weight edit, extends nothing).
	m.mu.Lock()
	extend := verdict == conflictOwnRenew && m.holder == holder && committed.Add(m.t.RenewDeadline).After(m.validUntil)
	if m.holder == holder && !extend {
		m.last = latest
	}
	m.mu.Unlock()
	if extend {
		m.setValid(holder, committed, latest)
	}
	return renewAdopted
}

// conflictVerdict is what the Lease read after a conflicting renew says about who wrote.
type conflictVerdict int

const (
	conflictTaken       conflictVerdict = iota // the Lease names another holder or none
	conflictOwnRenew                           // one of holder's renews committed unseen
	conflictOtherWriter                        // another writer kept holder
)

// judgeConflict decides who wrote the Lease read after a conflict, with own renews' send time.
func judgeConflict(latest *coordinationv1.Lease, holder string, sent []time.Time) (conflictVerdict, time.Time) {
	if latest.Spec.HolderIdentity == nil || *latest.Spec.HolderIdentity != holder {
		return conflictTaken, time.Time{}
	}
	if latest.Spec.RenewTime != nil {
		renewed := latest.Spec.RenewTime.Time.Truncate(time.Microsecond)
		if i := slices.IndexFunc(sent, func(s time.Time) bool { return s.Truncate(time.Microsecond).Equal(renewed) }); i >= 0 {
			return conflictOwnRenew, sent[i]
		}
	}
	return conflictOtherWriter, time.Time{}
}

// release clears the holder on shutdown so the coordinator moves projects at once.
func (m *membership) release(holder string) {
	ctx, cancel := context.WithTimeout(context.Background(), m.t.CallTimeout)
	defer cancel()
	cur, err := m.leases.Get(ctx, MemberLeaseName(m.pod), metav1.GetOptions{})
	if err != nil || cur.Spec.HolderIdentity == nil || *cur.Spec.HolderIdentity != holder {
		return
	}
	cur.Spec.HolderIdentity = nil
	_, err = m.leases.Update(ctx, cur, metav1.UpdateOptions{})
	m.m.leaseWrite("member", err)
	if err != nil {
		m.log.Info("Releasing member Lease failed", "error", err.Error())
	}
}
