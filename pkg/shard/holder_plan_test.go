package shard

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// describeHolder prints a holder plan as one line per action, sorted, for comparison.
func describeHolder(p HolderPlan) []string {
	var out []string
	for _, c := range p.Close {
		s := fmt.Sprintf("close %s (%s)", c.Project, c.Reason)
		if c.Release != nil {
			s += ", release"
		}
		out = append(out, s)
	}
	for _, c := range p.Claim {
		if c.RV == "" {
			out = append(out, fmt.Sprintf("warm %s (gen %d)", c.Project, c.Discovery))
			continue
		}
		out = append(out, fmt.Sprintf("claim %s at %s (gen %d)", c.Project, c.RV, c.Discovery))
	}
	for _, h := range p.HandOver {
		out = append(out, "hand over "+h.Project)
	}
	for _, w := range p.WriteNextHolder {
		out = append(out, "write next holder of "+w.Project+" again")
	}
	for _, r := range p.Release {
		out = append(out, "release "+r.Project)
	}
	for _, f := range p.ForgetHandOffs {
		out = append(out, "forget hand-over of "+f)
	}
	slices.Sort(out)
	return out
}

// TestPlanHolderSync: one row per decision of a holder's sync, among them: a holding
// belongs to its Lease's UID and its own claim, a hand-over begun here is never reopened
// and its write is sent again when it ended without it, a changed kubeconfig is claimed
// again, and a Lease naming this incarnation for a project it does not discover is
// released after a claim deadline.
func TestPlanHolderSync(t *testing.T) {
	w := planWorld{now: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC), t: Timings{LeaseDuration: 3 * time.Second, RetryPeriod: 400 * time.Millisecond, ClaimDeadline: 8 * time.Second}}
	const me = "a/1"
	open := func(leaseUID types.UID) HoldingView {
		return HoldingView{Holder: me, State: holdingOpen, Discovery: 1, LeaseUID: leaseUID, Claim: ClaimValue(me, "e1"), ClaimRV: "3"}
	}
	withUID := func(o Observed, uid types.UID) Observed { o.Lease.UID = uid; return o }
	without := func(o Observed, annotation string) Observed { delete(o.Lease.Annotations, annotation); return o }
	leases := func(obs ...Observed) map[string]Observed {
		out := map[string]Observed{}
		for _, o := range obs {
			out[o.Lease.Name] = o
		}
		return out
	}
	cases := []struct {
		name         string
		holder       string // "" : me
		invalid      bool
		shuttingDown bool
		leases       map[string]Observed
		projects     map[string]uint64
		holdings     map[string]HoldingView
		handedOff    map[string]handOff
		undiscovered map[string]time.Time
		want         []string
		// wantUndiscovered is the undiscovered table after the plan.
		wantUndiscovered map[string]time.Time
	}{
		{
			name:     "a Lease naming this incarnation: claimed at the version read",
			leases:   leases(w.project("p", me, false, time.Second, "")),
			projects: map[string]uint64{"p": 1},
			want:     []string{"claim p at 3 (gen 1)"},
		},
		{
			name:     "held open and still claimed: nothing to do",
			leases:   leases(withUID(w.project("p", me, true, time.Second, ""), "u1")),
			projects: map[string]uint64{"p": 1},
			holdings: map[string]HoldingView{"p": open("u1")},
		},
		{
			name:     "the Lease is gone: closed",
			projects: map[string]uint64{"p": 1},
			holdings: map[string]HoldingView{"p": open("u1")},
			want:     []string{"close p (lease gone)"},
		},
		{
			name:     "the Lease created again (another UID): closed and claimed again",
			leases:   leases(withUID(w.project("p", me, false, time.Second, ""), "u2")),
			projects: map[string]uint64{"p": 1},
			holdings: map[string]HoldingView{"p": open("u1")},
			want:     []string{"claim p at 3 (gen 1)", "close p (claim lost)"},
		},
		{
			name:     "the claim removed by hand: closed and claimed again",
			leases:   leases(withUID(without(w.project("p", me, true, time.Second, ""), AnnotationClaim), "u1")),
			projects: map[string]uint64{"p": 1},
			holdings: map[string]HoldingView{"p": {Holder: me, State: holdingOpen, Discovery: 1, LeaseUID: "u1", Claim: ClaimValue(me, "e1"), ClaimRV: "2"}},
			want:     []string{"claim p at 3 (gen 1)", "close p (claim lost)"},
		},
		{
			name:     "a view of the Lease older than the claim write says nothing about the claim",
			leases:   leases(withUID(without(w.project("p", me, true, time.Second, ""), AnnotationClaim), "u1")),
			projects: map[string]uint64{"p": 1},
			holdings: map[string]HoldingView{"p": {Holder: me, State: holdingOpen, Discovery: 1, LeaseUID: "u1", Claim: ClaimValue(me, "e1"), ClaimRV: "4"}},
		},
		{
			name:     "the Lease names another holder: closed",
			leases:   leases(withUID(w.project("p", "b/1", false, time.Second, ""), "u1")),
			projects: map[string]uint64{"p": 1},
			holdings: map[string]HoldingView{"p": open("u1")},
			want:     []string{"close p (lease names another holder)"},
		},
		{
			name:             "the Secret is gone: closed, and the Lease naming us released",
			leases:           leases(withUID(w.project("p", me, true, time.Second, ""), "u1")),
			holdings:         map[string]HoldingView{"p": open("u1")},
			want:             []string{"close p (secret gone), release"},
			wantUndiscovered: map[string]time.Time{"p": w.now},
		},
		{
			name:     "the Secret engaged again with a new kubeconfig: closed and claimed again",
			leases:   leases(withUID(w.project("p", me, true, time.Second, ""), "u1")),
			projects: map[string]uint64{"p": 2},
			holdings: map[string]HoldingView{"p": open("u1")},
			want:     []string{"claim p at 3 (gen 2)", "close p (new kubeconfig)"},
		},
		{
			name:     "a holding of an earlier incarnation: closed, nothing claimed while invalid",
			holder:   "a/2",
			invalid:  true,
			leases:   leases(withUID(w.project("p", me, true, time.Second, ""), "u1")),
			projects: map[string]uint64{"p": 1},
			holdings: map[string]HoldingView{"p": open("u1")},
			want:     []string{"close p (earlier incarnation)"},
		},
		{
			name:     "not valid: nothing claimed",
			invalid:  true,
			leases:   leases(w.project("p", me, false, time.Second, "")),
			projects: map[string]uint64{"p": 1},
		},
		{
			name:     "a hand-over asked of an open holding: begun",
			leases:   leases(withUID(w.project("p", me, true, time.Second, "b/1"), "u1")),
			projects: map[string]uint64{"p": 1},
			holdings: map[string]HoldingView{"p": open("u1")},
			want:     []string{"hand over p"},
		},
		{
			name:     "a hand-over in progress: begun once",
			leases:   leases(withUID(w.project("p", me, true, time.Second, "b/1"), "u1")),
			projects: map[string]uint64{"p": 1},
			holdings: map[string]HoldingView{"p": {Holder: me, State: holdingHandingOver, Discovery: 1}},
		},
		{
			name:      "a hand-over that ended without its write: the write sent again",
			leases:    leases(withUID(w.project("p", me, true, time.Second, "b/1"), "u1")),
			projects:  map[string]uint64{"p": 1},
			handedOff: map[string]handOff{"p": {holder: me, lease: "u1", transitions: 1}},
			want:      []string{"write next holder of p again"},
		},
		{
			name:      "that write is in flight: not sent twice",
			leases:    leases(withUID(w.project("p", me, true, time.Second, "b/1"), "u1")),
			projects:  map[string]uint64{"p": 1},
			handedOff: map[string]handOff{"p": {holder: me, lease: "u1", transitions: 1, writing: true, wroteAt: w.now.Add(-time.Minute)}},
		},
		{
			name:      "that write ended less than a retry period ago: not yet",
			leases:    leases(withUID(w.project("p", me, true, time.Second, "b/1"), "u1")),
			projects:  map[string]uint64{"p": 1},
			handedOff: map[string]handOff{"p": {holder: me, lease: "u1", transitions: 1, wroteAt: w.now.Add(-100 * time.Millisecond)}},
		},
		{
			name:      "a hand-over remembered of an earlier Lease (created again): this one is handed over afresh",
			leases:    leases(withUID(w.project("p", me, true, time.Second, "b/1"), "u2")),
			projects:  map[string]uint64{"p": 1},
			handedOff: map[string]handOff{"p": {holder: me, lease: "u1", transitions: 5}},
			want:      []string{"forget hand-over of p", "hand over p"},
		},
		{
			name:      "an assignment begun handing over is never claimed again",
			leases:    leases(withUID(w.project("p", me, false, time.Second, ""), "u1")),
			projects:  map[string]uint64{"p": 1},
			handedOff: map[string]handOff{"p": {holder: me, lease: "u1", transitions: 1}},
		},
		{
			name:      "the next holder claimed the project: the hand-over forgotten",
			leases:    leases(withUID(w.project("p", "b/1", true, time.Second, ""), "u1")),
			projects:  map[string]uint64{"p": 1},
			handedOff: map[string]handOff{"p": {holder: me, lease: "u1", transitions: 1}},
			want:      []string{"forget hand-over of p"},
		},
		{
			name:     "announced as next holder: claimed ahead, caches warming",
			leases:   leases(w.project("p", "b/1", true, time.Second, me)),
			projects: map[string]uint64{"p": 3},
			want:     []string{"warm p (gen 3)"},
		},
		{
			name:     "the warm-up of the next holder is not closed while the Lease still names the owner",
			leases:   leases(w.project("p", "b/1", true, time.Second, me)),
			projects: map[string]uint64{"p": 3},
			holdings: map[string]HoldingView{"p": {Holder: me, State: holdingClaiming}},
		},
		{
			name:         "announced as next holder while shutting down: not taken",
			shuttingDown: true,
			leases:       leases(w.project("p", "b/1", true, time.Second, me)),
			projects:     map[string]uint64{"p": 3},
		},
		{
			name:         "shutting down: a Lease naming this incarnation is not claimed",
			shuttingDown: true,
			leases:       leases(w.project("p", me, false, time.Second, "")),
			projects:     map[string]uint64{"p": 1},
		},
		{
			name:             "a Lease naming this incarnation for a project it does not discover: noted first",
			leases:           leases(w.project("p", me, false, time.Second, "")),
			want:             nil,
			wantUndiscovered: map[string]time.Time{"p": w.now},
		},
		{
			name:             "not discovered for less than a claim deadline: kept",
			leases:           leases(w.project("p", me, false, time.Second, "")),
			undiscovered:     map[string]time.Time{"p": w.now.Add(-time.Second), "q": w.now.Add(-time.Minute)},
			wantUndiscovered: map[string]time.Time{"p": w.now.Add(-time.Second)},
		},
		{
			name:         "not discovered for a claim deadline: released",
			leases:       leases(w.project("p", me, false, time.Second, "")),
			undiscovered: map[string]time.Time{"p": w.now.Add(-8 * time.Second)},
			want:         []string{"release p"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			holder := c.holder
			if holder == "" {
				holder = me
			}
			plan := PlanHolderSync(HolderInput{Holder: holder, Valid: !c.invalid, ShuttingDown: c.shuttingDown,
				Leases: c.leases, Projects: c.projects, Holdings: c.holdings, HandedOff: c.handedOff, Undiscovered: c.undiscovered,
				Now: w.now, Timings: w.t})
			if got := describeHolder(plan); !slices.Equal(got, c.want) {
				t.Errorf("plan:\n  got  %q\n  want %q", got, c.want)
			}
			if c.wantUndiscovered == nil {
				c.wantUndiscovered = map[string]time.Time{}
			}
			if fmt.Sprint(plan.Undiscovered) != fmt.Sprint(c.wantUndiscovered) {
				t.Errorf("undiscovered: got %v, want %v", plan.Undiscovered, c.wantUndiscovered)
			}
		})
	}
}
