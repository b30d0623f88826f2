package shard

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
)

func TestTimingsValidate(t *testing.T) {
	longCall := DefaultTimings()
	longCall.CallTimeout = 5 * time.Second
	cases := []struct {
		reason  string
		t       Timings
		wantErr string
	}{
		{"client-go defaults are valid", DefaultTimings(), ""},
		{"renew deadline must exceed 1.2 x retry", NewTimings(15*time.Second, 2400*time.Millisecond, 2*time.Second), "1.2 x retry period"},
		{"duration must exceed renew deadline", NewTimings(10*time.Second, 10*time.Second, 2*time.Second), "lease duration"},
		{"retry must be positive", NewTimings(15*time.Second, 10*time.Second, -1), "retry period must be positive"},
		{"call timeout must stay below duration - renew deadline", longCall, "call timeout"},
		{"zero timings are refused, not defaulted", Timings{}, "retry period must be positive"},
	}
	for _, tc := range cases {
		err := tc.t.Validate()
		got := ""
		if err != nil {
			got = err.Error()
		}
		if (tc.wantErr == "") != (got == "") || !strings.Contains(got, tc.wantErr) {
			t.Errorf("%s: want error containing %q, got %q", tc.reason, tc.wantErr, got)
		}
	}
}

func TestRankIsStableAndMovesLittle(t *testing.T) {
	members := []Member{{Holder: "a/1", Pod: "a"}, {Holder: "b/1", Pod: "b"}, {Holder: "c/1", Pod: "c"}}
	before := map[string]string{}
	counts := map[string]int{}
	for i := range 3000 {
		p := fmt.Sprintf("project-%d", i)
		before[p] = Rank(p, members)[0].Pod
		counts[before[p]]++
	}
	for pod, n := range counts {
		if math.Abs(float64(n)-1000) > 150 {
			t.Errorf("member %s got %d of 3000 projects, want about 1000", pod, n)
		}
	}
	// A new incarnation of the same pod keeps its projects; a fourth member takes only
	// from others what it wins.
	rejoined := []Member{{Holder: "a/2", Pod: "a"}, {Holder: "b/1", Pod: "b"}, {Holder: "c/1", Pod: "c"}, {Holder: "d/1", Pod: "d"}}
	moved := 0
	for p, owner := range before {
		now := Rank(p, rejoined)[0].Pod
		if now != owner {
			moved++
			if now != "d" {
				t.Fatalf("project %s moved from %s to %s, not to the new member", p, owner, now)
			}
		}
	}
	if moved < 600 || moved > 900 {
		t.Errorf("adding a fourth member moved %d of 3000 projects, want about 750", moved)
	}
}

func TestRankHonoursWeights(t *testing.T) {
	members := []Member{{Holder: "a/1", Pod: "a", Weight: 3}, {Holder: "b/1", Pod: "b", Weight: 1}}
	n := 0
	for i := range 4000 {
		if Rank(fmt.Sprintf("p%d", i), members)[0].Pod == "a" {
			n++
		}
	}
	if n < 2800 || n > 3200 {
		t.Errorf("weight 3 vs 1 won %d of 4000, want about 3000", n)
	}
}

func TestParseWeight(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want float64 // 0: refused
	}{
		{"", 1}, {"2", 2}, {"0.5", 0.5}, {"1e3", 1000},
		{"0", 0}, {"-1", 0}, {"NaN", 0}, {"+Inf", 0}, {"Inf", 0}, {"1.5x", 0}, {"x", 0},
	} {
		got, err := ParseWeight(tc.in)
		if tc.want == 0 && err == nil {
			t.Errorf("ParseWeight(%q) = %g, want refused", tc.in, got)
		}
		if tc.want != 0 && (err != nil || got != tc.want) {
			t.Errorf("ParseWeight(%q) = %g, %v; want %g", tc.in, got, err, tc.want)
		}
	}
}

// TestRankIgnoresAnInvalidWeight: a NaN or infinite weight counts as 1, so it neither
// wins nor loses every project.
func TestRankIgnoresAnInvalidWeight(t *testing.T) {
	for _, w := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		members := []Member{{Holder: "a/1", Pod: "a", Weight: w}, {Holder: "b/1", Pod: "b", Weight: 1}}
		n := 0
		for i := range 4000 {
			if Rank(fmt.Sprintf("p%d", i), members)[0].Pod == "a" {
				n++
			}
		}
		if n < 1800 || n > 2200 {
			t.Errorf("weight %g vs 1 won %d of 4000, want about 2000", w, n)
		}
	}
}

// NextAfter returns the member ranked after holder for project, wrapping around, or
// ok=false when there is no other member.
func NextAfter(project, holder string, members []Member) (Member, bool) {
	ranked := Rank(project, members)
	for i, m := range ranked {
		if m.Holder == holder {
			if len(ranked) == 1 {
				return Member{}, false
			}
			return ranked[(i+1)%len(ranked)], true
		}
	}
	if len(ranked) == 0 {
		return Member{}, false
	}
	return ranked[0], true
}

func TestNextAfter(t *testing.T) {
	members := []Member{{Holder: "a/1", Pod: "a"}, {Holder: "b/1", Pod: "b"}, {Holder: "c/1", Pod: "c"}}
	ranked := Rank("proj", members)
	next, ok := NextAfter("proj", ranked[0].Holder, members)
	if !ok || next.Holder != ranked[1].Holder {
		t.Errorf("next after the owner: want %s, got %s (ok=%v)", ranked[1].Holder, next.Holder, ok)
	}
	next, _ = NextAfter("proj", ranked[2].Holder, members)
	if next.Holder != ranked[0].Holder {
		t.Errorf("next after the last wraps to the first: want %s, got %s", ranked[0].Holder, next.Holder)
	}
	if _, ok := NextAfter("proj", "a/1", members[:1]); ok {
		t.Error("a single member has no next")
	}
}

func TestProjectLeaseNames(t *testing.T) {
	cases := []string{"proj", "org/proj", "Org/Proj", "a_b", strings.Repeat("x", 300), "/", "integration-24be19"}
	seen := map[string]string{}
	for _, p := range cases {
		name := ProjectLeaseName(p)
		if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 || len(name) > 63 {
			t.Errorf("%q -> %q is not a DNS-safe Lease name: %v", p, name, errs)
		}
		if other, dup := seen[name]; dup {
			t.Errorf("%q and %q map to one Lease name %q", p, other, name)
		}
		seen[name] = p
		if v := ProjectLabelValue(p); len(validation.IsValidLabelValue(v)) > 0 {
			t.Errorf("%q -> label value %q is invalid", p, v)
		}
	}
	if ProjectLeaseName("org/proj") == ProjectLeaseName("org-proj") {
		t.Error(`"org/proj" and "org-proj" must not share a Lease`)
	}
}

func lease(holder string, annotations map[string]string) *coordinationv1.Lease {
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Annotations: annotations}}
	if holder != "" {
		l.Spec.HolderIdentity = ptr.To(holder)
	}
	return l
}

// The states' names, for the diffs of the tests below.
func (s MemberState) String() string {
	return [...]string{"Released", "Live", "Suspect"}[s]
}

func (s ProjectState) String() string {
	return [...]string{"Unassigned", "Orphaned", "Assigned", "ClaimOverdue", "Claimed"}[s]
}

func TestToMemberState(t *testing.T) {
	now := time.Unix(1000, 0)
	d := 15 * time.Second
	cases := []struct {
		reason    string
		o         Observed
		want      MemberState
		wantAfter time.Duration
	}{
		{"no holder is released", Observed{Lease: lease("", nil), Changed: now}, MemberReleased, 0},
		{"changed 5s ago is live for 10s more", Observed{Lease: lease("a/1", nil), Changed: now.Add(-5 * time.Second)}, MemberLive, 10 * time.Second},
		{"unchanged for a full duration is only suspect", Observed{Lease: lease("a/1", nil), Changed: now.Add(-d)}, MemberSuspect, 0},
	}
	for _, tc := range cases {
		got, after := ToMemberState(tc.o, now, d)
		if diff := cmp.Diff([]any{tc.want, tc.wantAfter}, []any{got, after}); diff != "" {
			t.Errorf("%s: -want +got:\n%s", tc.reason, diff)
		}
	}
}

func TestToProjectState(t *testing.T) {
	now := time.Unix(1000, 0)
	live := map[string]bool{"a/1": true}
	claimed := map[string]string{AnnotationClaim: ClaimValue("a/1", "e1")}
	staleClaim := map[string]string{AnnotationClaim: ClaimValue("a/0", "e1")}
	cases := []struct {
		reason    string
		o         Observed
		want      ProjectState
		wantAfter time.Duration
	}{
		{"no Lease", Observed{}, ProjectUnassigned, 0},
		{"Lease without holder", Observed{Lease: lease("", nil), Changed: now}, ProjectUnassigned, 0},
		{"holder not live", Observed{Lease: lease("b/1", claimed), Changed: now}, ProjectOrphaned, 0},
		{"claimed by the live holder", Observed{Lease: lease("a/1", claimed), Changed: now.Add(-time.Hour)}, ProjectClaimed, 0},
		{"claim of an older incarnation does not count", Observed{Lease: lease("a/1", staleClaim), Changed: now.Add(-10 * time.Second)}, ProjectAssigned, 20 * time.Second},
		{"unclaimed past the deadline", Observed{Lease: lease("a/1", nil), Changed: now.Add(-30 * time.Second)}, ProjectClaimOverdue, 0},
	}
	for _, tc := range cases {
		got, after := ToProjectState(tc.o, live, now, 30*time.Second)
		if diff := cmp.Diff([]any{tc.want, tc.wantAfter}, []any{got, after}); diff != "" {
			t.Errorf("%s: -want +got:\n%s", tc.reason, diff)
		}
	}
}
