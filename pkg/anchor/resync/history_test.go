package resync

import (
	"testing"
)

func TestPassHistoryForgetsTheLeastRecentlyPassedProject(t *testing.T) {
	type pass struct {
		project   string
		completed bool
	}
	type step struct {
		pass pass   // a pass to record, when project is set
		read string // a project whose reports are read, when set
	}
	cases := []struct {
		reason     string
		bound      int
		steps      []step
		remembered map[string]int // project -> completed passes still remembered
		forgotten  []string
	}{
		{
			reason:     "within the bound, every project is remembered",
			bound:      3,
			steps:      []step{{pass: pass{"a", true}}, {pass: pass{"b", true}}, {pass: pass{"a", false}}},
			remembered: map[string]int{"a": 1, "b": 1},
		},
		{
			reason:     "the project passed least recently goes first, not the first one seen",
			bound:      2,
			steps:      []step{{pass: pass{"a", true}}, {pass: pass{"b", true}}, {pass: pass{"a", true}}, {pass: pass{"c", true}}},
			remembered: map[string]int{"a": 2, "c": 1},
			forgotten:  []string{"b"},
		},
		{
			reason:     "reading a project's reports does not keep it",
			bound:      2,
			steps:      []step{{pass: pass{"a", true}}, {pass: pass{"b", true}}, {read: "a"}, {pass: pass{"c", true}}},
			remembered: map[string]int{"b": 1, "c": 1},
			forgotten:  []string{"a"},
		},
	}
	for _, tc := range cases {
		h, err := newPassHistory(tc.bound)
		if err != nil {
			t.Fatalf("%s: %v", tc.reason, err)
		}
		for _, s := range tc.steps {
			if s.read != "" {
				h.of(s.read)
				continue
			}
			h.add(PassReport{Project: s.pass.project}, s.pass.completed)
		}
		if h.len() != len(tc.remembered) {
			t.Errorf("%s: %d projects remembered, want %d", tc.reason, h.len(), len(tc.remembered))
		}
		for p, completed := range tc.remembered {
			got := h.of(p)
			if got.completed != completed || len(got.reports) == 0 {
				t.Errorf("%s: project %s: %d completed passes and %d reports, want %d and some", tc.reason, p, got.completed, len(got.reports), completed)
			}
		}
		for _, p := range tc.forgotten {
			if got := h.of(p); got.completed != 0 || len(got.reports) != 0 {
				t.Errorf("%s: project %s should be forgotten, has %d reports", tc.reason, p, len(got.reports))
			}
		}
	}
}

func TestPassHistoryKeepsTheLastReportsOfAProject(t *testing.T) {
	h, err := newPassHistory(1)
	if err != nil {
		t.Fatal(err)
	}
	for i := range historyLength + 5 {
		h.add(PassReport{Project: "a", APICalls: i}, true)
	}
	got := h.of("a")
	if len(got.reports) != historyLength || got.completed != historyLength+5 {
		t.Fatalf("%d reports and %d completed passes, want %d and %d", len(got.reports), got.completed, historyLength, historyLength+5)
	}
	if first, last := got.reports[0].APICalls, got.reports[historyLength-1].APICalls; first != 5 || last != historyLength+4 {
		t.Errorf("reports run from pass %d to %d, want the last ones, 5 to %d", first, last, historyLength+4)
	}
	// A copy: changing it does not change what is remembered.
	got.reports[0].APICalls = -1
	if h.of("a").reports[0].APICalls != 5 {
		t.Error("the reports returned share memory with the history")
	}
}

func TestPassHistoryRefusesNoRoom(t *testing.T) {
	if _, err := newPassHistory(0); err == nil {
		t.Error("a history with room for no project was built")
	}
}
