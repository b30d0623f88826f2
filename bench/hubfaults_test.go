package bench

import (
	"net/http"
	"slices"
	"testing"
	"time"

	"anchorage/internal/harness"
)

func TestHubFaultSchedule(t *testing.T) {
	const lease = 3 * time.Second
	for _, tc := range []struct {
		name  string
		seed  uint64
		steps int
	}{
		{"smoke", 42, HubFaultSteps(true)},
		{"full", 42, HubFaultSteps(false)},
		{"another seed", 1796157503369604588, HubFaultSteps(false)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			steps := HubFaultSchedule(tc.seed, tc.steps, lease)
			if len(steps) != tc.steps {
				t.Fatalf("%d steps, want %d", len(steps), tc.steps)
			}
			if again := HubFaultSchedule(tc.seed, tc.steps, lease); !slices.Equal(steps, again) {
				t.Errorf("the same seed drew another schedule: replays would differ")
			}
			seen := map[HubFaultKind]bool{}
			for i, s := range steps[:len(hubFaultKinds)] {
				if seen[s.Kind] {
					t.Errorf("step %d repeats %s before every kind came once", i, s.Kind)
				}
				seen[s.Kind] = true
			}
			for i, s := range steps {
				checkHubFaultStep(t, i, s, lease)
			}
		})
	}
	if a, b := HubFaultSchedule(1, 7, lease), HubFaultSchedule(2, 7, lease); slices.Equal(a, b) {
		t.Errorf("two seeds drew the same schedule")
	}
}

// checkHubFaultStep checks one step's timing and parameters against its kind.
func checkHubFaultStep(t *testing.T, i int, s HubFaultStep, lease time.Duration) {
	t.Helper()
	if i == 0 && s.After != 0 || i > 0 && (s.After < lease || s.After > 2*lease) {
		t.Errorf("step %d (%s) after %s", i, s.Kind, s.After)
	}
	switch s.Kind {
	case FaultCoordinatorWatchStall, FaultWatchStall:
		if s.For != 3*lease {
			t.Errorf("a watch stall lasts %s, want 3 Lease durations (every member turns suspect)", s.For)
		}
	case FaultErrorBurst:
		if !slices.Contains([]int{http.StatusTooManyRequests, http.StatusInternalServerError, http.StatusServiceUnavailable}, s.Status) ||
			s.Rate < 0.2 || s.Rate > 0.8 || s.For < lease || s.For > 2*lease {
			t.Errorf("error burst %+v", s)
		}
	case FaultSlowHub:
		if s.Delay < 50*time.Millisecond || s.Delay > 300*time.Millisecond || s.For < lease {
			t.Errorf("slow hub %+v", s)
		}
	case FaultHubRestart:
		if s.For < 500*time.Millisecond || s.For > 2*time.Second {
			t.Errorf("hub down for %s", s.For)
		}
	case FaultMemberLeaseDeleted, FaultProjectLeaseDeleted, FaultProjectLeaseRecreated:
		if s.For != 0 {
			t.Errorf("%s is instantaneous, has For %s", s.Kind, s.For)
		}
	default:
		t.Errorf("unknown kind %q", s.Kind)
	}
}

func TestHubFaultsHeadlineAndTargets(t *testing.T) {
	overlap := Overlap{Project: "p1", A: "a", B: "b", Length: time.Second}
	r := &Report{Scenarios: []ScenarioResult{
		{Coordinator: Anchorage, Scenario: ScenarioKill},
		{Coordinator: Anchorage, Scenario: ScenarioHubFaults, Overlaps: []Overlap{overlap}, Recovery: 2 * time.Second},
		{Coordinator: Anchorage, Scenario: ScenarioHubFaults, LateWrites: []LateWrite{{}}, Recovery: 9 * time.Second},
	}}
	h := ComputeHeadline(r, Anchorage)
	if *h.Overlaps != 0 {
		t.Errorf("hub-faults overlaps counted among kill, scale and rolling: %d", *h.Overlaps)
	}
	if *h.HubFaultOverlaps != 1 || *h.HubFaultLateWrites != 1 || *h.HubFaultRecovery != 9*time.Second {
		t.Errorf("hub-faults headline: overlaps %d, late writes %d, recovery %s; want 1, 1 and the longest, 9s",
			*h.HubFaultOverlaps, *h.HubFaultLateWrites, *h.HubFaultRecovery)
	}
	verdicts := map[string]string{}
	for _, tg := range AcceptanceTargets(h) {
		verdicts[tg.Name] = tg.Verdict()
	}
	recovery := hubFaultRecoveryTarget(h).Name
	if verdicts["0 overlapping reconciles under hub faults"] != "no" || verdicts["0 writes after validity under hub faults"] != "no" || verdicts[recovery] != "no" {
		t.Errorf("targets %v: each hub-faults target should be missed", verdicts)
	}
	r.Scenarios = r.Scenarios[:2]
	r.Scenarios[1].Overlaps = nil
	if v := hubFaultRecoveryTarget(ComputeHeadline(r, Anchorage)).Verdict(); v != "yes" {
		t.Errorf("recovered in 2 s, within the %s bound: %s", FailureBound(harness.FastTimings), v)
	}
}

func TestStalledViewHandOvers(t *testing.T) {
	const lease = 3 * time.Second
	t0 := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	stall := Fault{At: at(10), Kind: string(FaultCoordinatorWatchStall), Replica: "r0", Coordinator: true, For: 3 * lease}
	move := func(replica, project string, s float64) PrematureHandOver {
		return PrematureHandOver{Kind: "move", Replica: replica, Project: project, To: "r0", At: at(s)}
	}
	for _, tc := range []struct {
		name      string
		premature []PrematureHandOver
		faults    []Fault
		want      int
	}{
		{"no stall: nothing is the stall's", []PrematureHandOver{move("r1", "p1", 14)}, nil, 0},
		{"a move during a coordinator's stall", []PrematureHandOver{move("r1", "p1", 14)}, []Fault{stall}, 1},
		{"an expiry declared during an every-replica stall",
			[]PrematureHandOver{{Kind: "expiry", Replica: "r2", By: "r0", At: at(13)}},
			[]Fault{{At: at(10), Kind: string(FaultWatchStall), For: 3 * lease}}, 1},
		{"before the stall", []PrematureHandOver{move("r1", "p1", 9)}, []Fault{stall}, 0},
		{"within a Lease duration after it", []PrematureHandOver{move("r1", "p1", 21.5)}, []Fault{stall}, 1},
		{"later than that", []PrematureHandOver{move("r1", "p1", 22.5)}, []Fault{stall}, 0},
		{"an error burst on the replica explains it",
			[]PrematureHandOver{move("r1", "p1", 14)},
			[]Fault{stall, {At: at(12), Kind: string(FaultErrorBurst), Replica: "r1", For: lease}}, 0},
		{"an error burst on another replica does not",
			[]PrematureHandOver{move("r1", "p1", 14)},
			[]Fault{stall, {At: at(12), Kind: string(FaultErrorBurst), Replica: "r2", For: lease}}, 1},
		{"the replica's member Lease deleted explains it",
			[]PrematureHandOver{move("r1", "p1", 14)},
			[]Fault{stall, {At: at(11), Kind: string(FaultMemberLeaseDeleted), Replica: "r1"}}, 0},
		{"the project's Lease re-created explains it, another project's does not",
			[]PrematureHandOver{move("r1", "p1", 14), move("r1", "p2", 14)},
			[]Fault{stall, {At: at(13), Kind: string(FaultProjectLeaseRecreated), Project: "p1"}}, 1},
		{"a hub restart explains what follows it within four Lease durations",
			[]PrematureHandOver{move("r1", "p1", 14), move("r2", "p2", 21.5)},
			[]Fault{stall, {At: at(8), Kind: string(FaultHubRestart), For: time.Second}}, 1},
		{"an error burst explains four Lease durations after it ends, not more",
			[]PrematureHandOver{move("r1", "p1", 18.5), move("r1", "p2", 20)},
			[]Fault{stall, {At: at(5), Kind: string(FaultErrorBurst), Replica: "r1", For: 2 * time.Second}}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := StalledViewHandOvers(tc.premature, tc.faults, lease); len(got) != tc.want {
				t.Errorf("got %d (%v), want %d", len(got), got, tc.want)
			}
		})
	}
}
