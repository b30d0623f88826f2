package bench

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

var reportT0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func reportAt(sec float64) time.Time { return reportT0.Add(reportSecs(sec)) }

func reportSecs(sec float64) time.Duration { return time.Duration(sec * float64(time.Second)) }

func TestReportMedianMax(t *testing.T) {
	tests := []struct {
		name      string
		in        []time.Duration
		median    time.Duration
		max       time.Duration
		wantFound bool
	}{
		{"empty", nil, 0, 0, false},
		{"one", []time.Duration{reportSecs(3)}, reportSecs(3), reportSecs(3), true},
		{"odd", []time.Duration{reportSecs(5), reportSecs(1), reportSecs(3)}, reportSecs(3), reportSecs(5), true},
		{"even takes mean of middle", []time.Duration{reportSecs(4), reportSecs(1), reportSecs(2), reportSecs(3)}, reportSecs(2.5), reportSecs(4), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := slices.Clone(tt.in)
			med, ok := MedianDuration(in)
			if ok != tt.wantFound || med != tt.median {
				t.Errorf("MedianDuration = %v, %v; want %v, %v", med, ok, tt.median, tt.wantFound)
			}
			mx, ok := MaxDuration(in)
			if ok != tt.wantFound || mx != tt.max {
				t.Errorf("MaxDuration = %v, %v; want %v, %v", mx, ok, tt.max, tt.wantFound)
			}
			if !slices.Equal(in, tt.in) {
				t.Errorf("input modified: %v", in)
			}
		})
	}
}

func TestReportFormatRatio(t *testing.T) {
	tests := []struct {
		num, den float64
		want     string
	}{
		{0, 0, "—"},
		{3, 0, "∞"},
		{1, 4, "0.25"},
		{0, 2, "0.00"},
		{10, 3, "3.33"},
	}
	for _, tt := range tests {
		if got := FormatRatio(tt.num, tt.den); got != tt.want {
			t.Errorf("FormatRatio(%v, %v) = %q, want %q", tt.num, tt.den, got, tt.want)
		}
	}
}

// headlineReport has hand-overs, overlaps and late writes for anchorage only, and
// Lease/memory data for both coordinators.
func headlineReport() *Report {
	lease := 10 * time.Second
	return &Report{
		LeaseDuration: lease,
		Scenarios: []ScenarioResult{
			{
				Coordinator: Anchorage, Scenario: ScenarioKill, LeaseDuration: lease, Start: reportT0,
				Overlaps:   []Overlap{{Project: "p1", A: "a", B: "b", Length: reportSecs(0.3)}, {Project: "p2", A: "a", B: "c", Length: reportSecs(0.2)}},
				LateWrites: []LateWrite{{Replica: "a"}, {Replica: "b"}},
				HandOvers: []HandOver{
					{Project: "p1", Duration: reportSecs(10)},
					{Project: "p2", Duration: reportSecs(12)},
					{Project: "p3", Duration: reportSecs(20), OfCoord: true},
					{Project: "p4", Duration: reportSecs(5), Planned: true},
				},
				AnchorsLeft: 1, HandOversMissing: 2,
			},
			{
				Coordinator: Anchorage, Scenario: ScenarioPause, LeaseDuration: lease, Start: reportT0,
				Overlaps:             []Overlap{{Project: "p9", A: "a", B: "b", Length: reportSecs(4)}},
				LateWrites:           []LateWrite{{Replica: "a"}},
				CreatesAfterDeletion: []LateCreate{{Replica: "a"}},
			},
			{
				Coordinator: Anchorage, Scenario: ScenarioScale, Start: reportT0, // lease from the report
				Overlaps:          []Overlap{{Project: "p5", A: "a", B: "b", Length: reportSecs(0.5)}},
				HandOvers:         []HandOver{{Project: "p5", Duration: reportSecs(7), Planned: true}},
				WrongfulDeletions: 3,
			},
			{Coordinator: Sharded, Scenario: ScenarioKill, LeaseDuration: lease, Start: reportT0,
				CreatesAfterDeletion: []LateCreate{{Replica: "x"}, {Replica: "y"}}},
		},
		LeaseLoad: []LeaseLoad{
			{Coordinator: Anchorage, Projects: 10, PerSecond: 2},
			{Coordinator: Anchorage, Projects: 1000, PerSecond: 3},
			{Coordinator: Anchorage, Projects: 1000, PerSecond: 5}, // mean with the above: 4
			{Coordinator: Sharded, Projects: 10, PerSecond: 0},
			{Coordinator: Sharded, Projects: 1000, PerSecond: 8},
			{Coordinator: Sharded, Projects: 100, Unowned: 60, PerSecond: 0.5}, // never steady
		},
		Memory: []Memory{
			{Coordinator: Anchorage, Replicas: 1, ProjectBytes: 40e6},
			{Coordinator: Anchorage, Replicas: 4, ProjectBytes: 10e6},
			{Coordinator: Sharded, Replicas: 1, ProjectBytes: 40e6},
			{Coordinator: Sharded, Replicas: 4, ProjectBytes: 40e6},
		},
	}
}

func TestComputeHeadline(t *testing.T) {
	r := headlineReport()
	a := ComputeHeadline(r, Anchorage)
	s := ComputeHeadline(r, Sharded)
	none := ComputeHeadline(r, AnchorageNoGate)

	ints := []struct {
		name string
		got  *int
		want int
	}{
		{"anchorage overlaps (pause excluded)", a.Overlaps, 3},
		{"anchorage late writes pause", a.LateWritesPause, 1},
		{"anchorage late writes all", a.LateWritesAll, 3},
		{"anchorage anchors left", a.AnchorsLeft, 1},
		{"anchorage wrongful deletions", a.WrongfulDeletions, 3},
		{"anchorage hand-overs missing", a.HandOversMissing, 2},
		{"anchorage hub creates after deletion", a.CreatesAfterDeletion, 1},
		{"sharded overlaps", s.Overlaps, 0},
		{"sharded hub creates after deletion", s.CreatesAfterDeletion, 2},
	}
	for _, tt := range ints {
		if tt.got == nil || *tt.got != tt.want {
			t.Errorf("%s = %v, want %d", tt.name, derefInt(tt.got), tt.want)
		}
	}
	if a.OverlapTime == nil || *a.OverlapTime != reportSecs(1) {
		t.Errorf("overlap time = %v, want 1s", a.OverlapTime)
	}

	floats := []struct {
		name string
		got  *float64
		want float64
	}{
		{"failure median", a.FailureHandOverMedian, 1.2},
		{"failure max", a.FailureHandOverMax, 2.0},
		{"failure max not coordinator", a.FailureHandOverMaxNotCoord, 1.2},
		{"failure max of coordinator", a.FailureHandOverMaxOfCoord, 2.0},
		{"planned median (even count)", a.PlannedHandOverMedian, 0.6},
		{"planned max", a.PlannedHandOverMax, 0.7},
		{"memory ratio", a.MemoryRatio, 0.25},
	}
	for _, tt := range floats {
		if tt.got == nil || !nearlyEqual(*tt.got, tt.want) {
			t.Errorf("%s = %v, want %v", tt.name, derefFloat(tt.got), tt.want)
		}
	}
	if v, ok := a.LeaseWritesAt(1000); !ok || v != 4 {
		t.Errorf("P=1000 = %v, %v; want mean 4", v, ok)
	}
	if _, ok := a.LeaseWritesAt(100); ok {
		t.Error("P=100 has no data but was reported")
	}
	if v, ok := s.LeaseWritesAt(100); ok {
		t.Errorf("sharded P=100 never had every project owned but got a rate of %v", v)
	}
	if s.FailureHandOverMedian != nil || s.LateWritesPause != nil {
		t.Error("sharded has no hand-overs or pause scenario but got values")
	}
	if none.Overlaps != nil || none.AnchorsLeft != nil || none.MemoryRatio != nil {
		t.Errorf("coordinator without data got values: %+v", none)
	}
}

func TestHeadlineRows(t *testing.T) {
	r := headlineReport()
	rows := HeadlineRows(ComputeHeadline(r, Anchorage), ComputeHeadline(r, Sharded))
	byName := map[string]HeadlineRow{}
	for _, row := range rows {
		byName[row.Metric] = row
	}
	tests := []struct {
		metric               string
		anchorage, sh, ratio string
	}{
		{"overlapping reconciles (kill, scale, rolling)", "3", "0", "∞"},
		{"overlap time (kill, scale, rolling)", "1.00 s", "0.00 s", "∞"},
		{"overlapping reconciles, none frozen by the stop (pause)", "1", "n/a", "n/a"},
		{"writes after validity (pause)", "1", "n/a", "n/a"},
		{"writes after validity (all scenarios)", "3", "0", "∞"},
		{"failure hand-over median (× lease)", "1.20", "n/a", "n/a"},
		{"planned hand-over median (× lease)", "0.60", "n/a", "n/a"},
		{"Lease writes/s at P=10", "2.00", "0.00", "∞"},
		{"Lease writes/s at P=100", "n/a", "n/a", "n/a"},
		{"Lease writes/s at P=1000", "4.00", "8.00", "0.50"},
		{"per-replica project memory R=4 ÷ R=1", "0.25", "1.00", "0.25"},
		{"hand-overs missing", "2", "0", "∞"},
		{"hub creates after the proxy's deletion was requested", "1", "2", "0.50"},
	}
	for _, tt := range tests {
		row, ok := byName[tt.metric]
		if !ok {
			t.Errorf("row %q missing", tt.metric)
			continue
		}
		want := HeadlineRow{tt.metric, tt.anchorage, tt.sh, tt.ratio}
		if row != want {
			t.Errorf("row = %+v, want %+v", row, want)
		}
	}
	if len(rows) != 20 {
		t.Errorf("%d rows, want 20", len(rows))
	}

	// 0 ÷ 0 prints a dash.
	zero := 0
	zh := Headline{AnchorsLeft: &zero}
	if got := HeadlineRows(zh, zh)[16]; got.Metric != "anchors left" || got.Ratio != "—" {
		t.Errorf("0/0 row = %+v, want ratio —", got)
	}
}

func TestReportAcceptanceTargets(t *testing.T) {
	targets := AcceptanceTargets(ComputeHeadline(headlineReport(), Anchorage))
	want := []string{"no", "no", "no", "no", "no", "no", "yes", "no", "n/a", "n/a", "n/a", "yes", "yes", "n/a"}
	if len(targets) != len(want) {
		t.Fatalf("%d targets, want %d", len(targets), len(want))
	}
	for i, tg := range targets {
		if tg.Verdict() != want[i] {
			t.Errorf("%s: met %s (measured %s), want %s", tg.Name, tg.Verdict(), tg.Measured, want[i])
		}
	}
	if v := AcceptanceTargets(Headline{})[0].Verdict(); v != "n/a" {
		t.Errorf("empty headline verdict = %s, want n/a", v)
	}
}

func TestReportViolations(t *testing.T) {
	overlap := Overlap{Project: "p1", A: "a", B: "b", Start: reportAt(5), Length: reportSecs(0.31)}
	early := Overlap{Project: "p0", A: "c", B: "d", Start: reportAt(2), Length: reportSecs(0.1)}
	frozen := Overlap{Project: "p1", A: "a", B: "b", Start: reportAt(1), Length: reportSecs(9), Frozen: true}
	late := LateWrite{Replica: "a", Project: "p1", Plane: "hub", Verb: "update", Resource: "anchors",
		Namespace: "ns", Name: "x", At: reportAt(3), ValidUntil: reportAt(2.8), Late: reportSecs(0.2)}
	tests := []struct {
		name string
		s    ScenarioResult
		want []string
	}{
		{"an overlap with work frozen by the stop is not a violation",
			ScenarioResult{Scenario: ScenarioPause, Overlaps: []Overlap{frozen}}, nil},
		{"an overlap in pause with no frozen work is",
			ScenarioResult{Scenario: ScenarioPause, Overlaps: []Overlap{frozen, overlap, early}},
			[]string{"pause: 2 overlapping reconciles not frozen by the stop (first: project p0, replicas c and d, 0.10 s)"}},
		{"late write in pause is",
			ScenarioResult{Scenario: ScenarioPause, LateWrites: []LateWrite{late}},
			[]string{"pause: 1 write after validity (first: replica a, project p1, hub update anchors ns/x, late by 0.20 s)"}},
		{"late write in kill is not",
			ScenarioResult{Scenario: ScenarioKill, LateWrites: []LateWrite{late}}, nil},
		{"overlaps in kill, first by start",
			ScenarioResult{Scenario: ScenarioKill, Overlaps: []Overlap{overlap, early}},
			[]string{"kill: 2 overlapping reconciles (first: project p0, replicas c and d, 0.10 s)"}},
		{"overlap in rolling",
			ScenarioResult{Scenario: ScenarioRolling, Overlaps: []Overlap{overlap}},
			[]string{"rolling: 1 overlapping reconcile (first: project p1, replicas a and b, 0.31 s)"}},
		{"anchors left in pause",
			ScenarioResult{Scenario: ScenarioPause, AnchorsLeft: 2, ProxiesDeleted: 9},
			[]string{"pause: 2 anchors left (of 9 proxies deleted)"}},
		{"wrongful deletion in scale",
			ScenarioResult{Scenario: ScenarioScale, WrongfulDeletions: 1},
			[]string{"scale: 1 wrongful deletion"}},
		{"hub creates after the proxy's deletion was requested, in any scenario, first by arrival",
			ScenarioResult{Scenario: ScenarioRolling, CreatesAfterDeletion: []LateCreate{
				{Replica: "b", Proxy: ProxyKey{"p1", "ns", "px-9"}, Resource: "gateways", Namespace: "ns-1", Name: "px-9", At: reportAt(4), Late: reportSecs(1)},
				{Replica: "a", Proxy: ProxyKey{"p1", "ns", "px-3"}, Resource: "configmaps", Namespace: "ns-1", Name: "anchor-u", At: reportAt(3), Late: reportSecs(0.52)},
			}},
			[]string{"rolling: 2 hub creates after the proxy's deletion was requested (first: replica a, proxy p1/ns/px-3, configmaps ns-1/anchor-u, 0.52 s after the delete request)"}},
		{"timings are not violations",
			ScenarioResult{Scenario: ScenarioKill, HandOvers: []HandOver{{Duration: time.Hour}}, HandOversMissing: 5}, nil},
		{"under hub faults every overlap and late write is, named with the seed",
			ScenarioResult{Scenario: ScenarioHubFaults, HubFaultSeed: 42, Overlaps: []Overlap{overlap}, LateWrites: []LateWrite{late}},
			[]string{"hub-faults (seed 42): 1 overlapping reconcile (first: project p1, replicas a and b, 0.31 s)",
				"hub-faults (seed 42): 1 write after validity (first: replica a, project p1, hub update anchors ns/x, late by 0.20 s)"}},
		{"projects not owned again once the hub faults are lifted",
			ScenarioResult{Scenario: ScenarioHubFaults, HubFaultSeed: 7, NotRecovered: true, Recovery: time.Minute},
			[]string{"hub-faults (seed 7): not every project owned again once the faults were lifted"}},
		{"a slow recovery within the bound is not",
			ScenarioResult{Scenario: ScenarioHubFaults, HubFaultSeed: 7, Recovery: 20 * time.Second}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.s.Coordinator = Anchorage
			other := tt.s
			other.Coordinator = Sharded
			r := &Report{Scenarios: []ScenarioResult{tt.s, other}}
			if got := Violations(r, Anchorage); !slices.Equal(got, tt.want) {
				t.Errorf("Violations = %q, want %q", got, tt.want)
			}
			if got := Violations(r, AnchorageNoGate); got != nil {
				t.Errorf("other coordinator's violations leaked: %q", got)
			}
		})
	}
}

// syntheticReport has two coordinators through kill and rolling, with timelines,
// faults, hand-overs, Lease load and memory.
func syntheticReport() *Report {
	lease := 15 * time.Second
	r := &Report{
		Started: reportT0, Finished: reportAt(600), Smoke: true, Machine: "test-box", LeaseDuration: lease,
		Notes: []string{"synthetic data"},
	}
	for _, c := range []Coordinator{Anchorage, Sharded} {
		for _, sc := range []Scenario{ScenarioKill, ScenarioRolling} {
			r.Scenarios = append(r.Scenarios, ScenarioResult{
				Coordinator: c, Scenario: sc, Projects: 6, Replicas: 3, LeaseDuration: lease,
				Start: reportT0, End: reportAt(60), Records: 100, Writes: 50,
				Faults: []Fault{{At: reportAt(20), Kind: "kill", Replica: "r0", Coordinator: true}, {At: reportAt(40), Kind: "start", Replica: "r3"}},
				Timeline: []Sample{
					{At: reportAt(0), Owned: map[string]int{"r0": 2, "r1": 2, "r2": 2}},
					{At: reportAt(25), Owned: map[string]int{"r1": 3, "r2": 3}},
					{At: reportAt(45), Owned: map[string]int{"r1": 2, "r2": 2, "r3": 2}},
				},
				HandOvers: []HandOver{{Project: "p1", From: "r0", To: "r1", OfCoord: true, At: reportAt(20), Duration: reportSecs(18)}},
			})
		}
		r.LeaseLoad = append(r.LeaseLoad,
			LeaseLoad{Coordinator: c, Projects: 10, Replicas: 3, Window: time.Minute, Writes: 60, PerSecond: 1},
			LeaseLoad{Coordinator: c, Projects: 1000, Replicas: 3, Window: time.Minute, Writes: 120, PerSecond: 2})
		r.Memory = append(r.Memory,
			Memory{Coordinator: c, Projects: 100, Replicas: 1, PeakRSS: []uint64{80e6}, ZeroProjectRSS: 40e6, ProjectBytes: 40e6},
			Memory{Coordinator: c, Projects: 100, Replicas: 4, PeakRSS: []uint64{50e6, 50e6, 50e6, 50e6}, ZeroProjectRSS: 40e6, ProjectBytes: 10e6})
	}
	return r
}

func TestWriteReport(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	r := syntheticReport()
	if err := WriteReport(dir, r); err != nil {
		t.Fatal(err)
	}
	md := readReportFile(t, filepath.Join(dir, ReportFile))
	wantInOrder := []string{
		"# anchorage vs multicluster-runtime coordinator/sharded",
		"Smoke run", "test-box", "- synthetic data",
		"## Headline", "| metric | anchorage | mcr-sharded | ratio (anchorage ÷ sharded) |",
		"overlapping reconciles", "overlap time", "writes after validity (pause)",
		"writes after validity (all scenarios)", "failure hand-over median (× lease)",
		"failure hand-over max (× lease)", "planned hand-over median (× lease)",
		"planned hand-over max (× lease)", "Lease writes/s at P=10 ", "Lease writes/s at P=100 ",
		"Lease writes/s at P=1000", "per-replica project memory R=4 ÷ R=1", "anchors left",
		"wrongful deletions", "hub creates after the proxy's deletion was requested", "hand-overs missing",
		"## Acceptance targets (anchorage)",
		"## Scenarios", "### anchorage — kill", "+20.00 s kill r0 (coordinator)",
		"- hub creates after the proxy's deletion was requested (+100ms): 0 of 0",
		"| p1 | r0 | r1 | no | yes | 18.00 | 1.20 |", "](timeline-anchorage-kill.png)",
		"### mcr-sharded — rolling",
		"## Lease writes at steady state", "](lease-writes.png)",
		"## Memory", "| mcr-sharded | 100 | 4 | 50.0, 50.0, 50.0, 50.0 | 40.0 | 10.0 |", "](memory.png)",
	}
	assertReportOrder(t, md, wantInOrder)
	assertTablesAligned(t, md)
	if !strings.Contains(md, "| failure hand-over max ≤ 1.7 × lease (failed replica was the coordinator) | 1.20 × lease | yes |") {
		t.Error("coordinator hand-over target row missing or wrong")
	}

	for _, name := range []string{
		"timeline-anchorage-kill.png", "timeline-anchorage-rolling.png",
		"timeline-mcr-sharded-kill.png", "timeline-mcr-sharded-rolling.png",
		HandOverPlot, LeaseWritesPlot, MemoryPlot,
	} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if !bytes.HasPrefix(b, []byte("\x89PNG")) {
			t.Errorf("%s is not a PNG (%d bytes)", name, len(b))
		}
	}

	var back Report
	if err := json.Unmarshal([]byte(readReportFile(t, filepath.Join(dir, ResultsFile))), &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Scenarios) != 4 || back.Scenarios[0].Timeline[1].Owned["r1"] != 3 {
		t.Errorf("results.json does not round-trip: %+v", back.Scenarios)
	}
}

func TestWriteReportSkipsEmptyPlots(t *testing.T) {
	dir := t.TempDir()
	r := &Report{Started: reportT0, Scenarios: []ScenarioResult{{Coordinator: Anchorage, Scenario: ScenarioPause, Start: reportT0}}}
	if err := WriteReport(dir, r); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"timeline-anchorage-pause.png", HandOverPlot, LeaseWritesPlot, MemoryPlot} {
		if _, err := os.Stat(filepath.Join(dir, name)); !os.IsNotExist(err) {
			t.Errorf("%s: want no file, got err %v", name, err)
		}
	}
	md := readReportFile(t, filepath.Join(dir, ReportFile))
	if !strings.Contains(md, "| Lease writes/s at P=10 | n/a | n/a | n/a |") {
		t.Error("missing data should print n/a")
	}
	if strings.Contains(md, ".png)") {
		t.Error("report links a plot that was not written")
	}
}

func assertReportOrder(t *testing.T, s string, parts []string) {
	t.Helper()
	rest := s
	for _, p := range parts {
		i := strings.Index(rest, p)
		if i < 0 {
			t.Fatalf("%q missing or out of order in:\n%s", p, s)
		}
		rest = rest[i+len(p):]
	}
}

func readReportFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func nearlyEqual(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }

func derefInt(p *int) any {
	if p == nil {
		return nil
	}
	return *p
}

func derefFloat(p *float64) any {
	if p == nil {
		return nil
	}
	return *p
}

// assertTablesAligned fails t for a Markdown table row whose cell count differs from its
// table's header row: a header column the rows do not fill shifts every column after it.
func assertTablesAligned(t *testing.T, md string) {
	t.Helper()
	header := 0
	for _, line := range strings.Split(md, "\n") {
		if !strings.HasPrefix(line, "|") {
			header = 0
			continue
		}
		cells := strings.Count(line, " | ") + 1
		if header == 0 {
			header = cells
			continue
		}
		if cells != header {
			t.Errorf("table row with %d cells under a %d-column header: %s", cells, header, line)
		}
	}
}
