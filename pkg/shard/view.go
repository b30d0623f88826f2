package shard

import (
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
)

// viewBoundOf is how long after viewFreshAt admission may go on: half the claim
// deadline, since the coordinator cannot move a Lease this replica has not seen change
// before viewFreshAt + ClaimDeadline (docs/design.md, Per-project admission).
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

// renewsKept bounds the writes remembered while the watch has not shown them: far more
// than a healthy watch lags; losing an older one only delays freshness to a later one.
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

// watched takes a Lease the observer's watch delivered: when it is this replica's member
// Lease as one of its remembered writes left it (same resourceVersion and renewTime), the
// view is shown as of that write's send. An unknown version is kept in shownEarly, since
// the write's answer may still be on its way.
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

// publishViewFresh makes at (a viewShownAt read before the holdings last acted on the
// observed Leases) the time the view is fresh as of; published only after they acted, so
// a Lease delivered with the renew closes its holding before admission reopens.
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
// projects (admission paused), and when it is fresh again; only the holdings loop calls it.
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
