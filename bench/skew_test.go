package bench

import (
	"reflect"
	"testing"
	"time"

	"anchorage/pkg/shard"
)

// sec is t0 (analyze_test.go) plus s seconds.
func sec(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

func TestUnskew(t *testing.T) {
	recs := []Record{
		{Replica: "r0", Start: sec(70), End: sec(71), ValidUntil: sec(73)},
		{Replica: "r0", Start: sec(75), End: sec(76)},
	}
	for _, tc := range []struct {
		offset time.Duration
		want   []Record
	}{
		{0, recs},
		{60 * time.Second, []Record{
			{Replica: "r0", Start: sec(10), End: sec(11), ValidUntil: sec(13)},
			{Replica: "r0", Start: sec(15), End: sec(16)}, // no validity stays none
		}},
		{-60 * time.Second, []Record{
			{Replica: "r0", Start: sec(130), End: sec(131), ValidUntil: sec(133)},
			{Replica: "r0", Start: sec(135), End: sec(136)},
		}},
	} {
		if got := Unskew(recs, tc.offset); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("offset %s: got %+v, want %+v", tc.offset, got, tc.want)
		}
	}
	if recs[0].Start != sec(70) {
		t.Error("Unskew changed its input")
	}
}

func TestFailedAt(t *testing.T) {
	faults := []Fault{
		{At: sec(10), Kind: "stop", Replica: "p"},
		{At: sec(19), Kind: "cont", Replica: "p"},
		{At: sec(30), Kind: "kill", Replica: "k"},
		{At: sec(40), Kind: "stop", Replica: "s"}, // never continued
		{At: sec(5), Kind: "start", Replica: "n"},
	}
	failed := FailedAt(faults, 3*time.Second)
	for _, tc := range []struct {
		replica string
		t       float64
		want    bool
	}{
		{"p", 9.9, false},
		{"p", 10, true},
		{"p", 19, true},
		{"p", 22, true}, // within the grace after the wake
		{"p", 22.1, false},
		{"k", 29, false},
		{"k", 30, true},
		{"k", 1000, true},
		{"s", 500, true},
		{"n", 6, false},
		{"other", 50, false},
	} {
		if got := failed(tc.replica, sec(tc.t)); got != tc.want {
			t.Errorf("%s at %.1f: failed %t, want %t", tc.replica, tc.t, got, tc.want)
		}
	}
}

func TestOwnerChanges(t *testing.T) {
	samples := []ownerSample{
		{at: sec(1), owners: map[string]string{"a": "r0", "b": "r1"}},
		{at: sec(2), owners: map[string]string{"a": "r0", "b": "r1"}},
		{at: sec(3), owners: map[string]string{"a": "r2"}},            // a moved, b unclaimed
		{at: sec(4), owners: map[string]string{"a": "r2", "b": "r2"}}, // b claimed: no owner left
	}
	want := []OwnerChange{
		{Project: "a", From: "r0", To: "r2", Before: sec(2), At: sec(3)},
		{Project: "b", From: "r1", To: "", Before: sec(2), At: sec(3)},
	}
	if got := ownerChanges(samples); !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

func TestPrematureHandOvers(t *testing.T) {
	members := map[string]string{shard.MemberLeaseName("r0"): "r0", shard.MemberLeaseName("r1"): "r1"}
	lease := shard.ProjectLeaseName
	// r1 is stopped at 10 and continued at 19; with a 3 s grace it counts as failed
	// over [10, 22].
	failed := FailedAt([]Fault{{At: sec(10), Kind: "stop", Replica: "r1"}, {At: sec(19), Kind: "cont", Replica: "r1"}}, 3*time.Second)
	for _, tc := range []struct {
		name    string
		changes []OwnerChange
		writes  []LeaseWrite
		want    []PrematureHandOver
	}{
		{
			name:   "the paused replica declared expired: a failure",
			writes: []LeaseWrite{{Writer: "r0", Name: shard.MemberLeaseName("r1"), At: sec(14)}},
		},
		{
			name:   "a running replica declared expired",
			writes: []LeaseWrite{{Writer: "r0", Name: shard.MemberLeaseName("r1"), At: sec(5)}},
			want:   []PrematureHandOver{{Kind: "expiry", Replica: "r1", By: "r0", At: sec(5)}},
		},
		{
			name:   "a replica's own renew",
			writes: []LeaseWrite{{Writer: "r1", Name: shard.MemberLeaseName("r1"), At: sec(5)}},
		},
		{
			name:    "a planned hand-over, written by its holder",
			changes: []OwnerChange{{Project: "a", From: "r0", To: "", Before: sec(30), At: sec(30.25)}},
			writes:  []LeaseWrite{{Writer: "r0", Name: lease("a"), At: sec(29.5)}},
		},
		{
			name:    "a project moved away from a running replica by the coordinator",
			changes: []OwnerChange{{Project: "a", From: "r0", To: "r1", Before: sec(30), At: sec(30.25)}},
			writes:  []LeaseWrite{{Writer: "r1", Name: lease("a"), At: sec(30.1)}, {Writer: "r0", Name: lease("b"), At: sec(30.1)}},
			want:    []PrematureHandOver{{Kind: "move", Replica: "r0", Project: "a", To: "r1", At: sec(30.25)}},
		},
		{
			name:    "the holder's write too long before the change",
			changes: []OwnerChange{{Project: "a", From: "r0", To: "", Before: sec(30), At: sec(30.25)}},
			writes:  []LeaseWrite{{Writer: "r0", Name: lease("a"), At: sec(28)}},
			want:    []PrematureHandOver{{Kind: "move", Replica: "r0", Project: "a", At: sec(30.25)}},
		},
		{
			name:    "projects of the paused replica moved during the pause and just after the wake",
			changes: []OwnerChange{{Project: "a", From: "r1", To: "r0", Before: sec(13), At: sec(13.25)}, {Project: "b", From: "r1", To: "r0", Before: sec(21), At: sec(21.25)}},
		},
		{
			name:    "a project of the woken replica moved after the grace",
			changes: []OwnerChange{{Project: "b", From: "r1", To: "r0", Before: sec(25), At: sec(25.25)}},
			want:    []PrematureHandOver{{Kind: "move", Replica: "r1", Project: "b", To: "r0", At: sec(25.25)}},
		},
	} {
		got := PrematureHandOvers(tc.changes, tc.writes, members, failed)
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func TestSkewViolations(t *testing.T) {
	premature := []PrematureHandOver{{Kind: "expiry", Replica: "r1", By: "r0", At: sec(5)}}
	late := []LateWrite{{Replica: "r1", Project: "p", Plane: "hub", Verb: "update", Resource: "configmaps", Name: "x", At: sec(3), ValidUntil: sec(2), Late: time.Second}}
	for _, tc := range []struct {
		name string
		s    ScenarioResult
		want int
	}{
		{"skew, clean", ScenarioResult{Scenario: ScenarioSkew}, 0},
		{"skew, a premature hand-over", ScenarioResult{Scenario: ScenarioSkew, PrematureHandOvers: premature}, 1},
		{"kill, a premature hand-over is reported, not gated", ScenarioResult{Scenario: ScenarioKill, PrematureHandOvers: premature}, 0},
		{"skew, a late write", ScenarioResult{Scenario: ScenarioSkew, LateWrites: late}, 1},
		{"skew, an overlap frozen by the stop", ScenarioResult{Scenario: ScenarioSkew, Overlaps: []Overlap{{Project: "p", Frozen: true}}}, 0},
		{"skew, an overlap not frozen", ScenarioResult{Scenario: ScenarioSkew, Overlaps: []Overlap{{Project: "p"}}}, 1},
	} {
		if got := scenarioViolations(&tc.s); len(got) != tc.want {
			t.Errorf("%s: %d violations %q, want %d", tc.name, len(got), got, tc.want)
		}
	}
}
