package shard

import (
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
)

// A holder that does not see its project Lease change cannot close admission for it. Its
// Lease watch may stall (the connection stays open, nothing is forwarded) while the
// Lease is deleted and created again naming it without its claim (an etcd restore, a
// hand edit); the coordinator then moves the unclaimed Lease after ClaimDeadline while
// the holder, blind, goes on admitting under its old claim. So the holder judges its own
// view: the observer watches every Lease of the lease namespace in one watch, which
// delivers changes in resourceVersion order, so once it has delivered this replica's
// own member-Lease renew sent at local time s, every Lease change committed before s has
// been delivered too. The latest such s is viewFreshAt; a change the holder has not seen
// committed after it, and the coordinator moves that Lease only ClaimDeadline after it
// saw the change. Admission therefore ends at viewFreshAt + viewBoundOf(ClaimDeadline)
// (viewBound).

// viewBoundOf is how long after viewFreshAt admission may go on. Half the claim
// deadline: the coordinator cannot move a Lease this replica has not seen change before
// viewFreshAt + ClaimDeadline, and the other half is the margin for in-flight work
// whose context ends at the bound to stop (a write sent just before can still commit,
// within a call timeout), for the rates of the two clocks to differ, and for nothing
// else: the move write and the other member's claim come later still. With the default
// ClaimDeadline (2 x LeaseDuration) the bound is a Lease duration, longer than the
// RenewDeadline validity a renew grants: while the watch shows each renew within
// milliseconds, validity stays the binding limit, and only a stalled watch makes this
// bound bite.
func viewBoundOf(t Timings) time.Duration { return t.ClaimDeadline / 2 }

// viewBound decides until when a replica whose watch last showed its own renew sent at
// freshAt (zero: none yet) may admit project work, and whether that is over at now.
func viewBound(freshAt, now time.Time, t Timings) (until time.Time, stale bool) {
	if freshAt.IsZero() {
		return time.Time{}, true
	}
	until = freshAt.Add(viewBoundOf(t))
	return until, !now.Before(until)
}

// renewSent is a successful write of this replica's member Lease (a join or a renew):
// the resourceVersion and renewTime the API server answered with, and the local time
// the write was sent.
type renewSent struct {
	shownVersion
	sent time.Time
}

// shownVersion identifies one version of the member Lease as this replica wrote it:
// its resourceVersion and renewTime (in microseconds, the precision it is stored at).
type shownVersion struct {
	rv        string
	renewTime int64
}

// renewsKept bounds the writes remembered while the watch has not shown them: at one
// renew per RetryPeriod, far more than a healthy watch ever lags; a write older than
// that being shown later only means a fresher one will be shown soon after.
const renewsKept = 32

// noteWriteLocked remembers a successful write of the member Lease; when the watch
// already delivered it (its event can arrive before the write's answer), the view is
// shown as of its send time at once. m.mu is held.
func (m *membership) noteWriteLocked(sent time.Time, wrote *coordinationv1.Lease) {
	v := shownVersion{rv: wrote.ResourceVersion}
	if wrote.Spec.RenewTime != nil {
		v.renewTime = wrote.Spec.RenewTime.UnixMicro()
	}
	for i, e := range m.shownEarly {
		if e == v {
			m.shownEarly = append(m.shownEarly[:i], m.shownEarly[i+1:]...)
			m.showLocked(sent)
			// Every write remembered so far was sent before this one.
			m.renews = m.renews[:0]
			return
		}
	}
	m.renews = keepLast(append(m.renews, renewSent{shownVersion: v, sent: sent}))
}

// keepLast drops all but the last renewsKept entries.
func keepLast[T any](s []T) []T {
	if n := len(s); n > renewsKept {
		return append(s[:0], s[n-renewsKept:]...)
	}
	return s
}

func (m *membership) showLocked(sent time.Time) {
	if sent.After(m.viewShown) {
		m.viewShown = sent
	}
}

// watched takes a Lease the observer's watch delivered (never one this process recorded
// itself): when it is this replica's member Lease as one of its own remembered writes
// left it (same resourceVersion and renewTime), the watch has shown every change
// committed before that write was sent. A version of it not remembered (yet) is kept
// for a while: the write's answer may still be on its way. The view counts as fresh
// only once the holdings have acted on what came with it (publishViewFresh).
func (m *membership) watched(l *coordinationv1.Lease) {
	if l.Name != MemberLeaseName(m.pod) || l.Labels[LabelRole] != roleMember || l.Spec.RenewTime == nil {
		return
	}
	v := shownVersion{rv: l.ResourceVersion, renewTime: l.Spec.RenewTime.UnixMicro()}
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, r := range m.renews {
		if r.shownVersion != v {
			continue
		}
		m.showLocked(r.sent)
		// Earlier writes can only be shown before this one: forget them too.
		m.renews = append(m.renews[:0], m.renews[i+1:]...)
		return
	}
	m.shownEarly = keepLast(append(m.shownEarly, v))
}

// viewShownAt is when the latest write the watch has shown was sent.
func (m *membership) viewShownAt() time.Time {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.viewShown
}

// publishViewFresh makes at (a viewShownAt read before the holdings last looked at the
// observed Leases) the time the view is fresh as of. Deferring it until then keeps the
// moment the watch resumes safe: the re-created Lease arrives just before the renew that
// shows the view fresh again, and admission must not open on that renew before the
// holding that Lease ends is closed.
func (m *membership) publishViewFresh(at time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if at.After(m.viewFresh) {
		m.viewFresh = at
	}
}

// viewFreshAt is the send time of the latest own write the watch has shown and the
// holdings have acted on (zero when none).
func (m *membership) viewFreshAt() time.Time {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.viewFresh
}

// noteViewFreshness logs when the view turns stale while this replica holds open
// projects (admission for them is paused), and when it is fresh again. Called from
// the holdings loop, which runs at least every RetryPeriod.
func (s *Shard) noteViewFreshness() {
	freshAt := s.member.viewFreshAt()
	now := s.clock.Now()
	_, stale := viewBound(freshAt, now, s.t)
	s.mu.Lock()
	open := len(s.openHoldingsLocked())
	s.mu.Unlock()
	switch {
	case stale && !s.viewStale && open > 0 && s.Holder() != "":
		s.viewStale = true
		shown := "since it joined"
		if !freshAt.IsZero() {
			shown = "for " + now.Sub(freshAt).Round(time.Millisecond).String()
		}
		s.log.Info("Lease watch has not shown this replica's renews "+shown+"; admission paused", "lastShown", freshAt, "bound", viewBoundOf(s.t).String(), "projects", open)
	case !stale && s.viewStale:
		s.viewStale = false
		s.log.Info("Lease watch shows this replica's renews again; admission resumes")
	}
}
