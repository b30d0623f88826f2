package shard

import (
	"slices"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
)

// viewBoundOf is how long after viewFreshAt admission may go on (design.md, Per-project admission).
func viewBoundOf(t Timings) time.Duration { return t.ClaimDeadline / 2 }

// viewBound decides until when a view fresh as of freshAt admits work, and if that is past.
func viewBound(freshAt, now time.Time, t Timings) (until time.Time, stale bool) {
	if freshAt.IsZero() {
		return time.Time{}, true
	}
	until = freshAt.Add(viewBoundOf(t))
	return until, !now.Before(until)
}

// renewSent is a successful write of the member Lease and its local send time.
type renewSent struct {
	shownVersion
	sent time.Time
}

// shownVersion is a member Lease version: resourceVersion and renewTime in microseconds.
type shownVersion struct {
	rv        string
	renewTime int64
}

// renewsKept bounds the writes remembered while the watch has not shown them.
const renewsKept = 32

// noteWriteLocked remembers a write of the member Lease (shown at once if watched first).
func (m *membership) noteWriteLocked(sent time.Time, wrote *coordinationv1.Lease) {
	v := shownVersion{rv: wrote.ResourceVersion}
	if wrote.Spec.RenewTime != nil {
		v.renewTime = wrote.Spec.RenewTime.UnixMicro()
	}
	if i := slices.Index(m.shownEarly, v); i >= 0 {
		m.shownEarly = slices.Delete(m.shownEarly, i, i+1)
		m.showLocked(sent)
		m.renews = m.renews[:0] // all sent before this one
		return
	}
	m.renews = keepLast(append(m.renews, renewSent{shownVersion: v, sent: sent}), renewsKept)
}

// keepLast drops all but the last k entries.
func keepLast[T any](s []T, k int) []T {
	if n := len(s); n > k {
		return append(s[:0], s[n-k:]...)
	}
	return s
}

func (m *membership) showLocked(sent time.Time) {
	if sent.After(m.viewShown) {
		m.viewShown = sent
	}
}

// watched takes a Lease the watch delivered; one of this replica's writes shows the view.
func (m *membership) watched(l *coordinationv1.Lease) {
	if l.Name != MemberLeaseName(m.pod) || l.Labels[LabelRole] != RoleMember || l.Spec.RenewTime == nil {
		return
	}
	v := shownVersion{rv: l.ResourceVersion, renewTime: l.Spec.RenewTime.UnixMicro()}
	m.mu.Lock()
	defer m.mu.Unlock()
	if i := slices.IndexFunc(m.renews, func(r renewSent) bool { return r.shownVersion == v }); i >= 0 {
		m.showLocked(m.renews[i].sent)
		m.renews = append(m.renews[:0], m.renews[i+1:]...)
		return
	}
	m.shownEarly = keepLast(append(m.shownEarly, v), renewsKept)
}

// viewShownAt is when the latest write the watch has shown was sent.
func (m *membership) viewShownAt() time.Time {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.viewShown
}

// publishViewFresh publishes at, read before the holdings acted, as the fresh time.
func (m *membership) publishViewFresh(at time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if at.After(m.viewFresh) {
		m.viewFresh = at
	}
}

// viewFreshAt is when the view was last fresh as of (zero when never).
func (m *membership) viewFreshAt() time.Time {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.viewFresh
}

// noteViewFreshness logs when the view turns stale with projects open, and fresh again.
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
