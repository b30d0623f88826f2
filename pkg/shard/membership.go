package shard

import (
	"context"
	"fmt"
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

// membership keeps this replica's member Lease and knows, at any instant, which
// incarnation is current and until when it is valid.
type membership struct {
	pod    string
	weight float64
	t      Timings
	clock  clock.Clock
	leases coordclient.LeaseInterface
	log    logr.Logger
	m      *metrics
	// onLapse is called, outside any lock, after validity of holder ended.
	onLapse func(holder string)
	// onJoin is called after holder became valid.
	onJoin func(holder string)

	draining atomic.Bool
	kick     chan struct{}

	mu         sync.RWMutex
	holder     string
	validUntil time.Time
	rv         string
	last       *coordinationv1.Lease // as this incarnation last wrote it
	history    []Incarnation
	// renews are the recent successful member-Lease writes the Lease watch has not
	// shown yet, shownEarly the versions it showed before their write's answer came
	// back; viewShown is when the latest write it has shown was sent, viewFresh the
	// same once the holdings have acted on it (view.go).
	renews               []renewSent
	shownEarly           []shownVersion
	viewShown, viewFresh time.Time
}

// Incarnation is one joined incarnation of this replica and the validity it reached.
type Incarnation struct {
	Holder string
	// Joined is when the join write that made it valid was sent.
	Joined time.Time
	// ValidUntil is the end of its validity: final once Ended.
	ValidUntil time.Time
	Ended      bool
}

// setValid records validity for holder, in the current state and the history.
func (m *membership) setValid(holder string, sent time.Time, wrote *coordinationv1.Lease) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.holder != holder && m.holder != "" {
		return
	}
	if m.holder == "" {
		m.history = append(m.history, Incarnation{Holder: holder, Joined: sent})
	}
	m.holder, m.validUntil, m.rv, m.last = holder, sent.Add(m.t.RenewDeadline), wrote.ResourceVersion, wrote
	m.noteWriteLocked(sent, wrote)
	m.history[len(m.history)-1].ValidUntil = m.validUntil
}

// incarnations returns the history of this process's incarnations.
func (m *membership) incarnations() []Incarnation {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return append([]Incarnation(nil), m.history...)
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

// renewSoon asks the renew loop to renew now (to publish the draining mark).
func (m *membership) renewSoon() {
	select {
	case m.kick <- struct{}{}:
	default:
	}
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
		m.holder, m.validUntil = "", time.Time{}
		if n := len(m.history); n > 0 {
			m.history[n-1].Ended = true
		}
		m.mu.Unlock()
		m.m.valid.Set(0)
		if gateEnforced {
			m.onLapse(holder)
		}
		if ctx.Err() != nil {
			m.release(holder)
			return
		}
		m.log.Info("Member validity ended; rejoining under a new incarnation", "holder", holder)
	}
}

func (m *membership) callCtx(ctx context.Context, deadline time.Time) (context.Context, context.CancelFunc) {
	timeout := m.t.CallTimeout
	if !deadline.IsZero() {
		if left := deadline.Sub(m.clock.Now()); left < timeout {
			timeout = left
		}
	}
	return context.WithTimeout(ctx, timeout)
}

func (m *membership) desired(base *coordinationv1.Lease, holder string, now time.Time) *coordinationv1.Lease {
	l := base.DeepCopy()
	l.Name, l.Namespace = MemberLeaseName(m.pod), ""
	if base.Namespace != "" {
		l.Namespace = base.Namespace
	}
	if l.Labels == nil {
		l.Labels = map[string]string{}
	}
	l.Labels[LabelRole] = roleMember
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	l.Annotations[AnnotationWeight] = strconv.FormatFloat(m.weight, 'g', -1, 64)
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

// join takes the member Lease for holder. Like client-go acquiring a lock, it writes
// over a Lease naming another holder only after seeing it unchanged for LeaseDuration:
// that proves the previous incarnation's validity (at most RenewDeadline after its last
// renew was sent) has ended.
func (m *membership) join(ctx context.Context, holder string) bool {
	var seenRV string
	var seenAt time.Time
	for ctx.Err() == nil {
		sent := m.clock.Now()
		cctx, cancel := m.callCtx(ctx, time.Time{})
		cur, err := m.leases.Get(cctx, MemberLeaseName(m.pod), metav1.GetOptions{})
		var wrote *coordinationv1.Lease
		switch {
		case apierrors.IsNotFound(err):
			wrote, err = m.leases.Create(cctx, m.desired(&coordinationv1.Lease{}, holder, sent), metav1.CreateOptions{})
		case err != nil:
		case cur.Spec.HolderIdentity == nil || *cur.Spec.HolderIdentity == "":
			wrote, err = m.leases.Update(cctx, m.desired(cur, holder, sent), metav1.UpdateOptions{})
		default:
			if cur.ResourceVersion != seenRV {
				seenRV, seenAt = cur.ResourceVersion, m.clock.Now()
				m.log.Info("Waiting for the previous incarnation's member Lease to go unchanged", "previous", *cur.Spec.HolderIdentity, "wait", m.t.LeaseDuration)
			} else if m.clock.Since(seenAt) >= m.t.LeaseDuration {
				wrote, err = m.leases.Update(cctx, m.desired(cur, holder, sent), metav1.UpdateOptions{})
			}
		}
		cancel()
		m.m.leaseWrite("member", wrote != nil, err)
		if err == nil && wrote != nil {
			m.setValid(holder, sent, wrote)
			m.m.valid.Set(1)
			m.log.Info("Joined as member", "holder", holder)
			return true
		}
		if err != nil {
			m.log.V(1).Info("Joining failed; retrying", "error", err.Error())
		}
		select {
		case <-ctx.Done():
		case <-m.clock.After(m.t.RetryPeriod):
		}
	}
	return false
}

// renewUntilLapse renews every RetryPeriod and returns when validity ends, when a renew
// shows the Lease taken from holder, or when ctx ends.
func (m *membership) renewUntilLapse(ctx context.Context, holder string) {
	for {
		_, until := m.current()
		wait := m.t.RetryPeriod
		if left := until.Sub(m.clock.Now()); left < wait {
			wait = left
		}
		if wait > 0 {
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
		if taken := m.renew(ctx, holder, until); taken {
			return
		}
	}
}

// renew sends one conditional renew; it returns true when the Lease no longer names
// holder (the coordinator declared this incarnation expired).
func (m *membership) renew(ctx context.Context, holder string, until time.Time) bool {
	m.mu.RLock()
	rv := m.rv
	m.mu.RUnlock()
	sent := m.clock.Now()
	cctx, cancel := m.callCtx(ctx, until)
	defer cancel()
	// The renew is built from the Lease as this incarnation last wrote it and is
	// conditional on that version: any other writer (the coordinator declaring it
	// expired) makes it conflict.
	m.mu.RLock()
	base := m.last.DeepCopy()
	m.mu.RUnlock()
	base.ResourceVersion = rv
	wrote, err := m.leases.Update(cctx, m.desired(base, holder, sent), metav1.UpdateOptions{})
	m.m.leaseWrite("member", true, err)
	switch {
	case err == nil:
		m.setValid(holder, sent, wrote)
		return false
	case apierrors.IsConflict(err):
		// Someone else wrote the Lease. Only a write that keeps this holder (a weight
		// change) lets the incarnation go on; adopt its resourceVersion and retry.
		latest, gerr := m.leases.Get(cctx, MemberLeaseName(m.pod), metav1.GetOptions{})
		if gerr != nil {
			return false
		}
		if latest.Spec.HolderIdentity == nil || *latest.Spec.HolderIdentity != holder {
			m.log.Info("Member Lease was taken from this incarnation", "holder", holder)
			return true
		}
		m.mu.Lock()
		m.rv, m.last = latest.ResourceVersion, latest
		m.mu.Unlock()
		return false
	case apierrors.IsNotFound(err):
		// Deleted (by hand, or by a restore): the coordinator may already count this
		// incarnation gone, so it lapses now rather than run on until its validity ends.
		m.log.Info("Member Lease was deleted under this incarnation", "holder", holder)
		return true
	default:
		m.log.V(1).Info("Renewing member Lease failed", "error", err.Error(), "validUntil", until)
		return false
	}
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
	m.m.leaseWrite("member", true, err)
	if err != nil {
		m.log.Info("Releasing member Lease failed", "error", fmt.Sprint(err))
	}
}
