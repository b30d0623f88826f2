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
		h, err := newPassHistory(tc.bound, 0)
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
	const depth = 16
	h, err := newPassHistory(1, depth)
	if err != nil {
		t.Fatal(err)
	}
	for i := range depth + 5 {
		h.add(PassReport{Project: "a", APICalls: i}, true)
	}
	got := h.of("a")
	if len(got.reports) != depth || got.completed != depth+5 {
		t.Fatalf("%d reports and %d completed passes, want %d and %d", len(got.reports), got.completed, depth, depth+5)
	}
	if first, last := got.reports[0].APICalls, got.reports[depth-1].APICalls; first != 5 || last != depth+4 {
		t.Errorf("reports run from pass %d to %d, want the last ones, 5 to %d", first, last, depth+4)
	}
	// An audit trail outlives the project's loss.
	h.forget("a")
	if len(h.of("a").reports) != depth {
		t.Error("a full history forgot a lost project")
	}
	// A copy: changing it does not change what is remembered.
	got.reports[0].APICalls = -1
	if h.of("a").reports[0].APICalls != 5 {
		t.Error("the reports returned share memory with the history")
	}
}

// By default a project's history is its latest report, without the lines of the
// anchors it kept (counted instead), plus the last completed report when the latest
// was aborted; a lost project is forgotten.
func TestPassHistoryKeepsOnlyTheLatestSlimReport(t *testing.T) {
	h, err := newPassHistory(10, 0)
	if err != nil {
		t.Fatal(err)
	}
	lines := func(keep, collect int) []AnchorReport {
		var out []AnchorReport
		for range keep {
			out = append(out, AnchorReport{Verdict: Verdict{Decision: Keep, Reason: ReasonInCache}})
		}
		for range collect {
			out = append(out, AnchorReport{Verdict: Verdict{Decision: Collect, Reason: ReasonNotFound}, Action: ActionDeleted})
		}
		return out
	}
	for i := range 5 {
		h.add(PassReport{Project: "a", APICalls: i, Anchors: lines(1000, 2)}, true)
	}
	got := h.of("a").reports
	if len(got) != 1 || got[0].APICalls != 4 {
		t.Fatalf("remembered %d reports (%v), want the latest only", len(got), got)
	}
	if len(got[0].Anchors) != 2 || got[0].Count(Keep) != 1000 || got[0].CountAction(ActionDeleted) != 2 {
		t.Errorf("latest report has %d lines, %d kept, %d deleted; want 2 lines (the anchors not kept), 1000 kept, 2 deleted",
			len(got[0].Anchors), got[0].Count(Keep), got[0].CountAction(ActionDeleted))
	}
	h.add(PassReport{Project: "a", APICalls: 5, Aborted: "lost"}, false)
	got = h.of("a").reports
	if len(got) != 2 || got[0].APICalls != 4 || got[1].APICalls != 5 {
		t.Errorf("after an aborted pass remembered %v, want the last completed and the aborted one", got)
	}
	h.add(PassReport{Project: "a", APICalls: 6}, true)
	if got = h.of("a").reports; len(got) != 1 || got[0].APICalls != 6 {
		t.Errorf("after a completed pass remembered %v, want it alone", got)
	}
	h.forget("a")
	if got := h.of("a"); len(got.reports) != 0 || got.completed != 0 {
		t.Errorf("a lost project is still remembered: %d reports", len(got.reports))
	}
}

func TestPassHistoryRefusesNoRoom(t *testing.T) {
	if _, err := newPassHistory(0, 0); err == nil {
		t.Error("a history with room for no project was built")
	}
}
