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
	case FaultWatchStall:
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
