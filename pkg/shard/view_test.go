package shard

import (
	"strconv"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

// TestViewBound: admission may go on for half a claim deadline after the send time of
// the latest own renew the Lease watch has shown, and not at all before it showed one.
func TestViewBound(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	fast := Timings{ClaimDeadline: 8 * time.Second}
	defaults := DefaultTimings()
	cases := []struct {
		name      string
		freshAt   time.Time
		now       time.Time
		t         Timings
		wantUntil time.Time
		wantStale bool
	}{
		{"no renew shown yet", time.Time{}, t0, fast, time.Time{}, true},
		{"just shown", t0, t0, fast, t0.Add(4 * time.Second), false},
		{"within the bound", t0, t0.Add(3999 * time.Millisecond), fast, t0.Add(4 * time.Second), false},
		{"at the bound", t0, t0.Add(4 * time.Second), fast, t0.Add(4 * time.Second), true},
		{"past the bound", t0, t0.Add(time.Minute), fast, t0.Add(4 * time.Second), true},
		// With the defaults the bound is a Lease duration (15s), past the validity a
		// renew grants (10s): in normal operation validity binds first.
		{"defaults: past validity, within the bound", t0, t0.Add(defaults.RenewDeadline), defaults, t0.Add(15 * time.Second), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			until, stale := viewBound(c.freshAt, c.now, c.t)
			if !until.Equal(c.wantUntil) || stale != c.wantStale {
				t.Errorf("viewBound = %s, stale %t; want %s, stale %t", until, stale, c.wantUntil, c.wantStale)
			}
		})
	}
}

// TestViewFreshOnlyFromWatchedOwnRenews: the view is fresh as of a renew's send time
// once the observer's watch delivers this replica's member Lease as that renew left it;
// the replica's own recording of the Lease, another replica's Lease, a write by someone
// else and an older write shown late count for nothing, and the holdings publish the
// freshness only after acting on the view.
func TestViewFreshOnlyFromWatchedOwnRenews(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(t0)
	m := &membership{pod: "a", clock: clk, t: Timings{RenewDeadline: 2 * time.Second}}
	o := newLeaseObserver(clk, 3*time.Second, 400*time.Millisecond)
	o.watched = m.watched
	lease := func(pod, rv string, renewed time.Time) *coordinationv1.Lease {
		return &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: MemberLeaseName(pod), ResourceVersion: rv, Labels: map[string]string{LabelRole: RoleMember}},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To(pod + "/1"), RenewTime: &metav1.MicroTime{Time: renewed}},
		}
	}
	// Two renews, sent at t0+1s and t0+2s; the server's renewTime is the send time.
	s1, s2 := t0.Add(time.Second), t0.Add(2*time.Second)
	m.setValid("a/1", s1, lease("a", "10", s1))
	m.setValid("a/1", s2, lease("a", "12", s2))
	expectShown := func(when string, want time.Time) {
		t.Helper()
		if got := m.viewShownAt(); !got.Equal(want) {
			t.Fatalf("%s: shown as of %s, want %s", when, got, want)
		}
	}

	o.observe(lease("a", "12", s2), true) // this process's own write, stored directly
	expectShown("after recording the own write", time.Time{})
	o.observe(lease("b", "12", s2), false)
	expectShown("after another member's Lease", time.Time{})
	o.observe(lease("a", "11", t0), false) // the coordinator wrote this Lease
	expectShown("after a write that is not ours", time.Time{})
	o.observe(lease("a", "12", s1), false) // same version, another renewTime: not our write
	expectShown("after a version matching ours with another renewTime", time.Time{})

	o.observe(lease("a", "12", s2), false)
	expectShown("after the watch showed the second renew", s2)
	if got := m.viewFreshAt(); !got.IsZero() {
		t.Fatalf("fresh as of %s before the holdings acted on the view", got)
	}
	m.publishViewFresh(m.viewShownAt())
	if got := m.viewFreshAt(); !got.Equal(s2) {
		t.Fatalf("fresh as of %s, want %s", got, s2)
	}
	o.observe(lease("a", "10", s1), false) // the first renew, shown late (a relist)
	expectShown("after an older renew shown late", s2)
	m.publishViewFresh(t0)
	if got := m.viewFreshAt(); !got.Equal(s2) {
		t.Fatalf("freshness went back to %s", got)
	}

	// The watch can deliver a renew before its answer reaches the renew loop: the view
	// is shown as of that renew once the answer comes.
	s3 := t0.Add(3 * time.Second)
	o.observe(lease("a", "14", s3), false)
	expectShown("after the watch showed a renew not answered yet", s2)
	m.setValid("a/1", s3, lease("a", "14", s3))
	expectShown("once the renew shown early is answered", s3)
	if n := len(m.renews); n != 0 {
		t.Fatalf("%d writes still remembered, want 0", n)
	}
}

// TestRenewsKeptAreBounded: a watch that shows nothing does not make the remembered
// writes grow without bound, and the latest ones stay matchable.
func TestRenewsKeptAreBounded(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	m := &membership{pod: "a", clock: clocktesting.NewFakeClock(t0), t: Timings{RenewDeadline: 2 * time.Second}}
	var last *coordinationv1.Lease
	var lastSent time.Time
	for i := range 3 * renewsKept {
		lastSent = t0.Add(time.Duration(i) * time.Second)
		last = &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: MemberLeaseName("a"), ResourceVersion: strconv.Itoa(100 + i), Labels: map[string]string{LabelRole: RoleMember}},
			Spec:       coordinationv1.LeaseSpec{RenewTime: &metav1.MicroTime{Time: lastSent}},
		}
		m.setValid("a/1", lastSent, last)
	}
	if n := len(m.renews); n != renewsKept {
		t.Fatalf("%d writes remembered, want %d", n, renewsKept)
	}
	m.watched(last)
	if got := m.viewShownAt(); !got.Equal(lastSent) {
		t.Fatalf("shown as of %s, want %s", got, lastSent)
	}
	if n := len(m.renews); n != 0 {
		t.Fatalf("%d writes still remembered after the latest was shown, want 0", n)
	}
}
