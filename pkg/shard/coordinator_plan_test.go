package shard

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// planWorld builds PlanPass inputs for the table below: members a/1, b/1 and c/1, and
// projects whose Leases name a holder, claimed or not, changed some time ago.
type planWorld struct {
	now time.Time
	t   Timings
}

func (w planWorld) member(holder string, changedAgo time.Duration, annotations ...string) Observed {
	l := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: MemberLeaseName(PodOf(holder)), ResourceVersion: "7", Labels: map[string]string{LabelRole: RoleMember}, Annotations: map[string]string{}},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder)},
	}
	for i := 0; i+1 < len(annotations); i += 2 {
		l.Annotations[annotations[i]] = annotations[i+1]
	}
	return Observed{Lease: l, Changed: w.now.Add(-changedAgo)}
}

// released is pod's member Lease naming no holder (released, or cleared as expired).
func (w planWorld) released(pod string) Observed {
	o := w.member(pod+"/1", time.Second)
	o.Lease.Spec.HolderIdentity = nil
	return o
}

// project is the Lease of project naming holder, claimed by it or not, last changed
// changedAgo; next, when set, is a requested next holder.
func (w planWorld) project(project, holder string, claimed bool, changedAgo time.Duration, next string) Observed {
	l := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: ProjectLeaseName(project), ResourceVersion: "3", Labels: map[string]string{LabelRole: roleProject}, Annotations: map[string]string{AnnotationProject: project}},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder), LeaseTransitions: ptr.To(int32(1))},
	}
	if claimed {
		l.Annotations[AnnotationClaim] = ClaimValue(holder, "e1")
	}
	if next != "" {
		l.Annotations[AnnotationNextHolder] = next
	}
	return Observed{Lease: l, Changed: w.now.Add(-changedAgo)}
}

// describe prints a plan as one line per write, sorted, for comparison.
func describe(p PassPlan) []string {
	var out []string
	for _, m := range p.Confirm {
		out = append(out, "confirm "+m.Holder())
	}
	for _, a := range p.Assign {
		s := fmt.Sprintf("assign %s to %s (%s)", a.Project, a.Holder, a.Reason)
		if a.Unclaimed != "" {
			s += ", failed " + a.Unclaimed
		}
		out = append(out, s)
	}
	for _, h := range p.HandOvers {
		out = append(out, fmt.Sprintf("hand %s over to %s (%s)", h.Project, h.Next, h.Reason))
	}
	for _, r := range p.Remove {
		out = append(out, "remove "+r.Lease.Annotations[AnnotationProject])
	}
	slices.Sort(out)
	return out
}

// TestPlanPass: one row per decision of the coordinator's pass, among them: a suspect
// member keeps its projects, a member whose Lease vanished keeps them for a Lease
// duration, a claim that keeps failing does not flap, and a removed project's Lease
// stays while its holder may still run it.
func TestPlanPass(t *testing.T) {
	w := planWorld{now: time.Unix(10_000, 0), t: Timings{LeaseDuration: 15 * time.Second, ClaimDeadline: 30 * time.Second}}
	ld := w.t.LeaseDuration
	// Rendezvous order of the projects used below over a/1, b/1, c/1, computed rather
	// than assumed.
	all := []Member{{Holder: "a/1", Pod: "a", Weight: 1}, {Holder: "b/1", Pod: "b", Weight: 1}, {Holder: "c/1", Pod: "c", Weight: 1}}
	first := func(project string, members ...string) string {
		var ms []Member
		for _, m := range all {
			if len(members) == 0 || slices.Contains(members, m.Holder) {
				ms = append(ms, m)
			}
		}
		return Rank(project, ms)[0].Holder
	}
	others := func(holder string) []string {
		var out []string
		for _, m := range all {
			if m.Holder != holder {
				out = append(out, m.Holder)
			}
		}
		return out
	}
	p := "team-x"
	top := first(p)
	notTop := others(top)[0]
	liveAll := map[string]Observed{}
	for _, m := range all {
		liveAll[MemberLeaseName(m.Pod)] = w.member(m.Holder, time.Second)
	}
	with := func(base map[string]Observed, obs ...Observed) map[string]Observed {
		out := map[string]Observed{}
		for k, v := range base {
			out[k] = v
		}
		for _, o := range obs {
			out[o.Lease.Name] = o
		}
		return out
	}
	leases := func(obs ...Observed) map[string]Observed { return with(nil, obs...) }
	projects := func(names ...string) map[string]bool {
		out := map[string]bool{}
		for _, n := range names {
			out[n] = true
		}
		return out
	}
	failed := func(project, holder string, until time.Duration) claimFailures {
		return claimFailures{project: {holder: {count: 1, until: w.now.Add(until)}}}
	}

	cases := []struct {
		name     string
		members  map[string]Observed
		vanished map[string]time.Time
		leases   map[string]Observed
		projects map[string]bool
		failures claimFailures
		want     []string
	}{
		{name: "a new project goes to the top-ranked member",
			members: liveAll, leases: leases(), projects: projects(p),
			want: []string{"assign team-x to " + top + " (new)"}},
		{name: "a claimed project of a live top-ranked member stays",
			members: liveAll, leases: leases(w.project(p, top, true, time.Hour, "")), projects: projects(p),
			want: nil},
		{name: "a suspect member keeps its claimed project; it is only confirmed",
			members:  with(liveAll, w.member(top, 2*ld)),
			leases:   leases(w.project(p, top, true, time.Hour, "")),
			projects: projects(p),
			want:     []string{"confirm " + top}},
		{name: "a member declared expired (holder cleared) loses its project to the next",
			members:  with(liveAll, w.released(PodOf(top))),
			leases:   leases(w.project(p, top, true, time.Hour, "")),
			projects: projects(p),
			want:     []string{"assign team-x to " + first(p, others(top)...) + " (orphaned)"}},
		{name: "a member whose Lease vanished keeps its project for a Lease duration",
			members:  withoutMember(liveAll, top),
			vanished: map[string]time.Time{top: w.now.Add(-ld / 2)},
			leases:   leases(w.project(p, top, true, time.Hour, "")),
			projects: projects(p),
			want:     nil},
		{name: "a member whose Lease vanished over a Lease duration ago is gone",
			members:  withoutMember(liveAll, top),
			vanished: map[string]time.Time{top: w.now.Add(-ld)},
			leases:   leases(w.project(p, top, true, time.Hour, "")),
			projects: projects(p),
			want:     []string{"assign team-x to " + first(p, others(top)...) + " (orphaned)"}},
		{name: "an incarnation no member Lease names is gone",
			members: liveAll, leases: leases(w.project(p, PodOf(top)+"/0", true, time.Hour, "")), projects: projects(p),
			want: []string{"assign team-x to " + top + " (orphaned)"}},
		{name: "an overdue claim moves the project and records the failure",
			members: liveAll, leases: leases(w.project(p, top, false, time.Minute, "")), projects: projects(p),
			want: []string{"assign team-x to " + first(p, others(top)...) + " (claim_overdue), failed " + top}},
		{name: "the member that failed stays out of the ranking: no move back",
			members:  liveAll,
			leases:   leases(w.project(p, first(p, others(top)...), true, time.Hour, "")),
			projects: projects(p),
			failures: failed(p, top, time.Minute),
			want:     nil},
		{name: "no member can claim: the project stays where it is",
			members:  with(nil, w.member(top, time.Second), w.member(notTop, time.Second)),
			leases:   leases(w.project(p, notTop, false, time.Minute, "")),
			projects: projects(p),
			failures: failed(p, top, time.Minute),
			want:     nil},
		{name: "a failure whose time out ended no longer counts",
			members:  liveAll,
			leases:   leases(w.project(p, first(p, others(top)...), true, time.Hour, "")),
			projects: projects(p),
			failures: failed(p, top, -time.Second),
			want:     []string{"hand team-x over to " + top + " (rebalance)"}},
		{name: "a project claimed by a lower-ranked member is handed over",
			members: liveAll, leases: leases(w.project(p, notTop, true, time.Hour, "")), projects: projects(p),
			want: []string{"hand team-x over to " + top + " (rebalance)"}},
		{name: "a hand-over already requested is not requested again",
			members: liveAll, leases: leases(w.project(p, notTop, true, time.Hour, top)), projects: projects(p),
			want: nil},
		{name: "an assigned, unclaimed project of a draining member moves directly",
			members:  with(liveAll, w.member(top, time.Second, AnnotationDraining, "shutdown")),
			leases:   leases(w.project(p, top, false, time.Second, "")),
			projects: projects(p),
			want:     []string{"assign team-x to " + first(p, others(top)...) + " (draining)"}},
		{name: "a claimed project of a draining member is handed over",
			members:  with(liveAll, w.member(top, time.Second, AnnotationDraining, "shutdown")),
			leases:   leases(w.project(p, top, true, time.Hour, "")),
			projects: projects(p),
			want:     []string{"hand team-x over to " + first(p, others(top)...) + " (draining)"}},
		{name: "a removed project's Lease stays while its holder may run it (suspect)",
			members:  with(liveAll, w.member(top, 2*ld)),
			leases:   leases(w.project("gone", top, true, time.Hour, "")),
			projects: projects(),
			want:     []string{"confirm " + top}},
		{name: "a removed project's Lease goes once its holder is gone",
			members:  liveAll,
			leases:   leases(w.project("gone", "z/1", true, time.Hour, "")),
			projects: projects(),
			want:     []string{"remove gone"}},
		{name: "no live member: nothing is assigned",
			members:  with(nil, w.member(top, 2*ld)),
			leases:   leases(),
			projects: projects(p),
			want:     []string{"confirm " + top}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := PassInput{Members: tc.members, Vanished: tc.vanished, Leases: tc.leases, Projects: tc.projects,
				Failures: tc.failures, Now: w.now, Timings: w.t, MaxHandoversInFlight: 8}
			got := describe(PlanPass(in))
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("plan:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(tc.want, "\n  "))
			}
		})
	}
}

func withoutMember(members map[string]Observed, holder string) map[string]Observed {
	out := map[string]Observed{}
	for k, v := range members {
		if v.Holder() != holder {
			out[k] = v
		}
	}
	return out
}

// TestPlanPassBoundsHandOversInFlight: at most MaxHandoversInFlight hand-overs are
// requested, counting those already in flight; a request nobody has acted on for a drain
// and a claim deadline no longer counts (stuck requests would stop rebalancing
// everywhere).
func TestPlanPassBoundsHandOversInFlight(t *testing.T) {
	w := planWorld{now: time.Unix(10_000, 0), t: Timings{LeaseDuration: 15 * time.Second, ClaimDeadline: 30 * time.Second, DrainDeadline: 20 * time.Second}}
	members := map[string]Observed{MemberLeaseName("a"): w.member("a/1", time.Second), MemberLeaseName("b"): w.member("b/1", time.Second)}
	all := []Member{{Holder: "a/1", Pod: "a", Weight: 1}, {Holder: "b/1", Pod: "b", Weight: 1}}
	for _, tc := range []struct {
		name      string
		stuckAge  time.Duration
		wantAsked int
	}{
		{"two in flight, one requested a moment ago", time.Second, 2},
		{"two in flight, one stuck past a drain and a claim deadline", time.Minute, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			leases, projects := map[string]Observed{}, map[string]bool{}
			for i := 0; len(projects) < 11; i++ {
				p := fmt.Sprintf("p-%d", i)
				if Rank(p, all)[0].Holder != "a/1" {
					continue
				}
				projects[p] = true
				next, changed := "", time.Hour
				switch len(projects) {
				case 1, 2:
					next, changed = "a/1", time.Second // in flight
				case 3:
					next, changed = "a/1", tc.stuckAge
				}
				ob := w.project(p, "b/1", true, changed, next)
				leases[ob.Lease.Name] = ob
			}
			plan := PlanPass(PassInput{Members: members, Leases: leases, Projects: projects, Now: w.now, Timings: w.t, MaxHandoversInFlight: 5})
			if len(plan.HandOvers) != tc.wantAsked {
				t.Errorf("hand-overs requested = %d, want %d (5 in flight at most)", len(plan.HandOvers), tc.wantAsked)
			}
		})
	}
}

// TestHandedOffAt: a hand-over is remembered for the Lease it was made on, by UID: the
// same Lease at no more transitions stays handed off, a later assignment does not, and a
// Lease created again (transitions back to 0) is claimable.
func TestHandedOffAt(t *testing.T) {
	lease := func(uid string, transitions int32) *coordinationv1.Lease {
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid)}, Spec: coordinationv1.LeaseSpec{LeaseTransitions: ptr.To(transitions)}}
	}
	ho := handOff{holder: "a/1", lease: "u1", transitions: 4}
	cases := []struct {
		name   string
		ho     handOff
		holder string
		lease  *coordinationv1.Lease
		want   bool
	}{
		{"the assignment handed over", ho, "a/1", lease("u1", 4), true},
		{"a later assignment of the same Lease", ho, "a/1", lease("u1", 6), false},
		{"another incarnation", ho, "a/2", lease("u1", 4), false},
		{"the Lease created again, transitions from 0", ho, "a/1", lease("u2", 0), false},
		{"nothing handed over", handOff{}, "a/1", lease("u1", 0), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := handedOffAt(tc.ho, tc.holder, tc.lease); got != tc.want {
				t.Errorf("handedOffAt = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestForgottenHandOffs: hand-over memory is dropped once another holder has claimed the
// project, or its Lease is gone or created again, or the memory is an older
// incarnation's; kept while the Lease names the hand-over's holder or a next holder that
// has not claimed yet (a graceful stop waits for that claim).
func TestForgottenHandOffs(t *testing.T) {
	lease := func(uid, holder, claim string) Observed {
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid), Annotations: map[string]string{}}, Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder)}}
		if claim != "" {
			l.Annotations[AnnotationClaim] = ClaimValue(claim, "e1")
		}
		return Observed{Lease: l}
	}
	handedOff := map[string]handOff{
		"still-ours":      {holder: "a/1", lease: "u1"},
		"next-unclaimed":  {holder: "a/1", lease: "u2"},
		"next-claimed":    {holder: "a/1", lease: "u3"},
		"lease-gone":      {holder: "a/1", lease: "u4"},
		"lease-recreated": {holder: "a/1", lease: "u5"},
		"old-incarnation": {holder: "a/0", lease: "u6"},
	}
	leases := map[string]Observed{
		ProjectLeaseName("still-ours"):      lease("u1", "a/1", "a/1"),
		ProjectLeaseName("next-unclaimed"):  lease("u2", "b/1", ""),
		ProjectLeaseName("next-claimed"):    lease("u3", "b/1", "b/1"),
		ProjectLeaseName("lease-recreated"): lease("u5x", "a/1", ""),
		ProjectLeaseName("old-incarnation"): lease("u6", "a/0", "a/0"),
	}
	got := forgottenHandOffs(handedOff, leases, "a/1")
	want := []string{"lease-gone", "lease-recreated", "next-claimed", "old-incarnation"}
	if !slices.Equal(got, want) {
		t.Errorf("forgottenHandOffs = %v, want %v", got, want)
	}
}

// TestClaimFailuresBackOff: each failure of the same member and project doubles its
// time out, from the claim deadline up to 32 of them; a claim forgets only the claiming
// member's failures; prune drops failures long over.
func TestClaimFailuresBackOff(t *testing.T) {
	now := time.Unix(10_000, 0)
	deadline := 30 * time.Second
	c := claimFailures{}
	var outs []int64
	for range 7 {
		c.record("p", "a/1", now, deadline)
		outs = append(outs, int64(c["p"]["a/1"].until.Sub(now)/deadline))
	}
	if got := fmt.Sprint(outs); got != "[1 2 4 8 16 32 32]" {
		t.Errorf("time outs in claim deadlines = %s", got)
	}
	c.record("p", "b/1", now, deadline)
	ms := []Member{{Holder: "a/1"}, {Holder: "b/1"}, {Holder: "c/1"}}
	if got := c.without("p", ms, now); len(got) != 1 || got[0].Holder != "c/1" {
		t.Errorf("without at now = %v, want only c/1", got)
	}
	if got := c.without("q", ms, now); len(got) != 3 {
		t.Errorf("another project's ranking lost members: %v", got)
	}
	c.forget("p", "b/1")
	if _, ok := c["p"]["a/1"]; !ok {
		t.Error("b/1's claim forgot a/1's failures")
	}
	c.prune(now.Add(32*deadline+32*deadline+time.Second), deadline)
	if len(c) != 0 {
		t.Errorf("failures long over are kept: %v", c)
	}
}
