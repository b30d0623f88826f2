package bench

import (
	"encoding/json"
	"errors"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// Files WriteReport writes besides the per-scenario timelines (see TimelineFile).
const (
	ResultsFile     = "results.json"
	ReportFile      = "report.md"
	HandOverPlot    = "handover.png"
	LeaseWritesPlot = "lease-writes.png"
	MemoryPlot      = "memory.png"
)

// bytesPerMB converts byte counts to the MB the report prints.
const bytesPerMB = 1e6

// notAvailable is what the report prints for a number it has no data for.
const notAvailable = "n/a"

// TimelineFile names the timeline plot of one scenario result.
func TimelineFile(s *ScenarioResult) string {
	return fmt.Sprintf("timeline-%s-%s.png", s.Coordinator, s.Scenario)
}

// ---------------------------------------------------------------------------
// Pure helpers: medians, maxima, headline numbers, targets, violations.

// Number is what Median and Max accept: durations, counts and plain floats.
type Number interface {
	~int | ~int64 | ~float64
}

// Median returns the median of xs (the mean of the two middle values when len(xs)
// is even) and false when xs is empty. xs is not modified.
func Median[T Number](xs []T) (T, bool) {
	if len(xs) == 0 {
		return 0, false
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	mid := len(s) / 2
	if len(s)%2 == 1 {
		return s[mid], true
	}
	return s[mid-1] + (s[mid]-s[mid-1])/2, true
}

// Max returns the largest of xs and false when xs is empty.
func Max[T Number](xs []T) (T, bool) {
	if len(xs) == 0 {
		return 0, false
	}
	return slices.Max(xs), true
}

// MedianDuration is Median for durations.
func MedianDuration(ds []time.Duration) (time.Duration, bool) { return Median(ds) }

// MaxDuration is Max for durations.
func MaxDuration(ds []time.Duration) (time.Duration, bool) { return Max(ds) }

// Headline is one coordinator's numbers in the report's headline table. A nil
// pointer (or an absent map key) means the run has no data for it.
type Headline struct {
	Coordinator Coordinator

	// Overlaps counts overlapping reconciles in kill, scale and rolling scenarios,
	// and OverlapTime sums their lengths.
	Overlaps    *int
	OverlapTime *time.Duration
	// OverlapsAfterWake counts overlapping reconciles in pause scenarios in which
	// neither reconcile was frozen by the stop: work admitted after a wake, or by others
	// during the pause, on a project someone else held.
	OverlapsAfterWake *int
	// LateWritesPause counts writes after validity in pause scenarios,
	// LateWritesAll in every scenario.
	LateWritesPause *int
	LateWritesAll   *int

	// Hand-over times as multiples of the scenario's lease duration. The failure
	// maxima are also split by whether the failed replica was the coordinator.
	FailureHandOverMedian      *float64
	FailureHandOverMax         *float64
	FailureHandOverMaxNotCoord *float64
	FailureHandOverMaxOfCoord  *float64
	PlannedHandOverMedian      *float64
	PlannedHandOverMax         *float64

	// LeaseWritesPerSec is the steady-state Lease write rate by project count
	// (the mean when several runs share a count).
	LeaseWritesPerSec map[int]float64
	// ProjectBytes is the per-replica project memory by replica count (the mean
	// when several runs share a count).
	ProjectBytes map[int]float64
	// MemoryRatio is ProjectBytes at R=4 divided by ProjectBytes at R=1.
	MemoryRatio *float64

	// Sums over every scenario.
	AnchorsLeft       *int
	WrongfulDeletions *int
	HandOversMissing  *int
}

// LeaseWritesAt returns the Lease write rate at p projects, false without data.
func (h Headline) LeaseWritesAt(p int) (float64, bool) {
	v, ok := h.LeaseWritesPerSec[p]
	return v, ok
}

// ComputeHeadline computes coordinator c's headline numbers from r.
func ComputeHeadline(r *Report, c Coordinator) Headline {
	h := Headline{Coordinator: c}
	var hand handOverSet
	for i := range r.Scenarios {
		s := &r.Scenarios[i]
		if s.Coordinator != c {
			continue
		}
		h.addScenario(s)
		hand.add(s, leaseOf(r, s))
	}
	hand.fill(&h)
	h.LeaseWritesPerSec = leaseRates(r, c)
	h.ProjectBytes = projectBytes(r, c)
	h.MemoryRatio = memoryRatio(h.ProjectBytes)
	return h
}

// addScenario adds one scenario's counts to h.
func (h *Headline) addScenario(s *ScenarioResult) {
	if overlapMatters(s.Scenario) {
		addInt(&h.Overlaps, len(s.Overlaps))
		addDuration(&h.OverlapTime, overlapTime(s.Overlaps))
	}
	if s.Scenario == ScenarioPause {
		addInt(&h.LateWritesPause, len(s.LateWrites))
		addInt(&h.OverlapsAfterWake, len(gatedOverlaps(s)))
	}
	addInt(&h.LateWritesAll, len(s.LateWrites))
	addInt(&h.AnchorsLeft, s.AnchorsLeft)
	addInt(&h.WrongfulDeletions, s.WrongfulDeletions)
	addInt(&h.HandOversMissing, s.HandOversMissing)
}

// handOverSet collects hand-over times as multiples of the lease duration.
type handOverSet struct {
	failure, failureNotCoord, failureOfCoord, planned []float64
}

// add adds s's hand-overs; without a lease duration they cannot be expressed as
// multiples of it and are left out.
func (hs *handOverSet) add(s *ScenarioResult, lease time.Duration) {
	if lease <= 0 {
		return
	}
	for _, ho := range s.HandOvers {
		m := ho.Duration.Seconds() / lease.Seconds()
		switch {
		case ho.Planned:
			hs.planned = append(hs.planned, m)
		case ho.OfCoord:
			hs.failure = append(hs.failure, m)
			hs.failureOfCoord = append(hs.failureOfCoord, m)
		default:
			hs.failure = append(hs.failure, m)
			hs.failureNotCoord = append(hs.failureNotCoord, m)
		}
	}
}

// fill stores the medians and maxima in h.
func (hs *handOverSet) fill(h *Headline) {
	h.FailureHandOverMedian = ptrIf(Median(hs.failure))
	h.FailureHandOverMax = ptrIf(Max(hs.failure))
	h.FailureHandOverMaxNotCoord = ptrIf(Max(hs.failureNotCoord))
	h.FailureHandOverMaxOfCoord = ptrIf(Max(hs.failureOfCoord))
	h.PlannedHandOverMedian = ptrIf(Median(hs.planned))
	h.PlannedHandOverMax = ptrIf(Max(hs.planned))
}

// overlapMatters reports whether overlaps in scenario s are violations: a paused
// replica legitimately keeps reconciling (it cannot know it was paused) and only
// its writes are gated.
func overlapMatters(s Scenario) bool {
	return s == ScenarioKill || s == ScenarioScale || s == ScenarioRolling
}

// gatedOverlaps are s's overlaps that the gate must prevent: every one in kill, scale
// and rolling; in a pause, those in which no reconcile was frozen by the stop.
func gatedOverlaps(s *ScenarioResult) []Overlap {
	if overlapMatters(s.Scenario) {
		return s.Overlaps
	}
	var out []Overlap
	for _, o := range s.Overlaps {
		if !o.Frozen {
			out = append(out, o)
		}
	}
	return out
}

// countFrozen counts the overlaps in which a reconcile was frozen by a stop.
func countFrozen(ovs []Overlap) int {
	n := 0
	for _, o := range ovs {
		if o.Frozen {
			n++
		}
	}
	return n
}

// leaseOf is the lease duration hand-overs of s are measured against.
func leaseOf(r *Report, s *ScenarioResult) time.Duration {
	if s.LeaseDuration > 0 {
		return s.LeaseDuration
	}
	return r.LeaseDuration
}

func addInt(p **int, n int) {
	if *p == nil {
		*p = new(int)
	}
	**p += n
}

func addDuration(p **time.Duration, d time.Duration) {
	if *p == nil {
		*p = new(time.Duration)
	}
	**p += d
}

func ptrIf[T any](v T, ok bool) *T {
	if !ok {
		return nil
	}
	return &v
}

func overlapTime(ovs []Overlap) time.Duration {
	var sum time.Duration
	for _, o := range ovs {
		sum += o.Length
	}
	return sum
}

// leaseRates is c's mean Lease writes/s by project count, over the loads in which
// every project had an owner (a steady state that never came has no rate).
func leaseRates(r *Report, c Coordinator) map[int]float64 {
	m := meanBy{}
	for _, l := range r.LeaseLoad {
		if l.Coordinator == c && l.Unowned == 0 {
			m.add(l.Projects, l.PerSecond)
		}
	}
	return m.means()
}

// projectBytes is c's mean per-replica project memory by replica count.
func projectBytes(r *Report, c Coordinator) map[int]float64 {
	m := meanBy{}
	for _, mem := range r.Memory {
		if mem.Coordinator == c {
			m.add(mem.Replicas, mem.ProjectBytes)
		}
	}
	return m.means()
}

func memoryRatio(byReplicas map[int]float64) *float64 {
	one, ok1 := byReplicas[1]
	four, ok4 := byReplicas[4]
	if !ok1 || !ok4 || one <= 0 {
		return nil
	}
	v := four / one
	return &v
}

// meanBy accumulates values by an integer key.
type meanBy map[int][]float64

func (m meanBy) add(k int, v float64) { m[k] = append(m[k], v) }

func (m meanBy) means() map[int]float64 {
	out := make(map[int]float64, len(m))
	for k, vs := range m {
		sum := 0.0
		for _, v := range vs {
			sum += v
		}
		out[k] = sum / float64(len(vs))
	}
	return out
}

// FormatRatio formats num ÷ den with two decimals: "—" for 0 ÷ 0 and "∞" for
// x ÷ 0 with x ≠ 0.
func FormatRatio(num, den float64) string {
	if den == 0 {
		if num == 0 {
			return "—"
		}
		return "∞"
	}
	return fmt.Sprintf("%.2f", num/den)
}

// HeadlineRow is one formatted row of the headline table.
type HeadlineRow struct {
	Metric    string
	Anchorage string
	Sharded   string
	// Ratio is Anchorage ÷ Sharded (see FormatRatio), n/a when either is missing.
	Ratio string
}

// headlineMetric is one headline row: how to read it and how to print it.
type headlineMetric struct {
	name   string
	value  func(Headline) (float64, bool)
	format func(float64) string
}

var headlineMetrics = []headlineMetric{
	{"overlapping reconciles (kill, scale, rolling)", intField(func(h Headline) *int { return h.Overlaps }), formatCount},
	{"overlap time (kill, scale, rolling)", durationField(func(h Headline) *time.Duration { return h.OverlapTime }), formatSeconds},
	{"overlapping reconciles, none frozen by the stop (pause)", intField(func(h Headline) *int { return h.OverlapsAfterWake }), formatCount},
	{"writes after validity (pause)", intField(func(h Headline) *int { return h.LateWritesPause }), formatCount},
	{"writes after validity (all scenarios)", intField(func(h Headline) *int { return h.LateWritesAll }), formatCount},
	{"failure hand-over median (× lease)", floatField(func(h Headline) *float64 { return h.FailureHandOverMedian }), format2},
	{"failure hand-over max (× lease)", floatField(func(h Headline) *float64 { return h.FailureHandOverMax }), format2},
	{"planned hand-over median (× lease)", floatField(func(h Headline) *float64 { return h.PlannedHandOverMedian }), format2},
	{"planned hand-over max (× lease)", floatField(func(h Headline) *float64 { return h.PlannedHandOverMax }), format2},
	{"Lease writes/s at P=10", leaseAt(10), format2},
	{"Lease writes/s at P=100", leaseAt(100), format2},
	{"Lease writes/s at P=1000", leaseAt(1000), format2},
	{"per-replica project memory R=4 ÷ R=1", floatField(func(h Headline) *float64 { return h.MemoryRatio }), format2},
	{"anchors left", intField(func(h Headline) *int { return h.AnchorsLeft }), formatCount},
	{"wrongful deletions", intField(func(h Headline) *int { return h.WrongfulDeletions }), formatCount},
	{"hand-overs missing", intField(func(h Headline) *int { return h.HandOversMissing }), formatCount},
}

func intField(f func(Headline) *int) func(Headline) (float64, bool) {
	return func(h Headline) (float64, bool) {
		if p := f(h); p != nil {
			return float64(*p), true
		}
		return 0, false
	}
}

func durationField(f func(Headline) *time.Duration) func(Headline) (float64, bool) {
	return func(h Headline) (float64, bool) {
		if p := f(h); p != nil {
			return p.Seconds(), true
		}
		return 0, false
	}
}

func floatField(f func(Headline) *float64) func(Headline) (float64, bool) {
	return func(h Headline) (float64, bool) {
		if p := f(h); p != nil {
			return *p, true
		}
		return 0, false
	}
}

func leaseAt(p int) func(Headline) (float64, bool) {
	return func(h Headline) (float64, bool) { return h.LeaseWritesAt(p) }
}

func formatCount(v float64) string   { return fmt.Sprintf("%d", int(math.Round(v))) }
func formatSeconds(v float64) string { return fmt.Sprintf("%.2f s", v) }
func format2(v float64) string       { return fmt.Sprintf("%.2f", v) }

// HeadlineRows formats the headline table of a (anchorage) against s (sharded).
func HeadlineRows(a, s Headline) []HeadlineRow {
	rows := make([]HeadlineRow, 0, len(headlineMetrics))
	for _, m := range headlineMetrics {
		av, aok := m.value(a)
		sv, sok := m.value(s)
		row := HeadlineRow{Metric: m.name, Anchorage: notAvailable, Sharded: notAvailable, Ratio: notAvailable}
		if aok {
			row.Anchorage = m.format(av)
		}
		if sok {
			row.Sharded = m.format(sv)
		}
		if aok && sok {
			row.Ratio = FormatRatio(av, sv)
		}
		rows = append(rows, row)
	}
	return rows
}

// Target is one acceptance target and whether the run met it.
type Target struct {
	Name     string
	Measured string
	// Met is nil when the run has no data to judge the target.
	Met *bool
}

// Verdict is "yes", "no" or "n/a".
func (t Target) Verdict() string {
	switch {
	case t.Met == nil:
		return notAvailable
	case *t.Met:
		return "yes"
	default:
		return "no"
	}
}

// Limits of the acceptance targets, as multiples.
const (
	handOverLimitNotCoord = 1.3
	handOverLimitOfCoord  = 1.7
	leaseGrowthLimit      = 2.0
	memoryRatioLimit      = 0.35
	// limitSlack absorbs float rounding when a measurement sits on a limit.
	limitSlack = 1e-9
)

// AcceptanceTargets judges h (anchorage's headline) against the acceptance targets.
func AcceptanceTargets(h Headline) []Target {
	return []Target{
		zeroTarget("0 overlapping reconciles in kill, scale and rolling", h.Overlaps),
		zeroTarget("0 writes after validity in pause", h.LateWritesPause),
		zeroTarget("0 overlapping reconciles in pause other than work frozen by the stop (added here)", h.OverlapsAfterWake),
		zeroTarget("0 anchors left in every scenario", h.AnchorsLeft),
		zeroTarget("0 wrongful deletions in every scenario", h.WrongfulDeletions),
		limitTarget("failure hand-over max ≤ 1.3 × lease (failed replica not the coordinator)",
			h.FailureHandOverMaxNotCoord, handOverLimitNotCoord),
		limitTarget("failure hand-over max ≤ 1.7 × lease (failed replica was the coordinator)",
			h.FailureHandOverMaxOfCoord, handOverLimitOfCoord),
		leaseGrowthTarget(h),
		memoryTarget(h),
	}
}

func zeroTarget(name string, n *int) Target {
	t := Target{Name: name, Measured: notAvailable}
	if n != nil {
		t.Measured = fmt.Sprintf("%d", *n)
		t.Met = verdictOf(*n == 0)
	}
	return t
}

func limitTarget(name string, v *float64, limit float64) Target {
	t := Target{Name: name, Measured: notAvailable}
	if v != nil {
		t.Measured = fmt.Sprintf("%.2f × lease", *v)
		t.Met = verdictOf(*v <= limit+limitSlack)
	}
	return t
}

func leaseGrowthTarget(h Headline) Target {
	t := Target{Name: "Lease writes/s at P=1000 ≤ 2 × P=10", Measured: notAvailable}
	lo, okLo := h.LeaseWritesAt(10)
	hi, okHi := h.LeaseWritesAt(1000)
	if okLo && okHi {
		t.Measured = fmt.Sprintf("%.2f/s vs %.2f/s (ratio %s)", hi, lo, FormatRatio(hi, lo))
		t.Met = verdictOf(hi <= leaseGrowthLimit*lo+limitSlack)
	}
	return t
}

func memoryTarget(h Headline) Target {
	t := Target{Name: "per-replica project memory R=4 ≤ 0.35 × R=1", Measured: notAvailable}
	if h.MemoryRatio != nil {
		t.Measured = fmt.Sprintf("%.2f × R=1 (%.1f MB vs %.1f MB)", *h.MemoryRatio,
			h.ProjectBytes[4]/bytesPerMB, h.ProjectBytes[1]/bytesPerMB)
		t.Met = verdictOf(*h.MemoryRatio <= memoryRatioLimit+limitSlack)
	}
	return t
}

func verdictOf(b bool) *bool { return &b }

// Violations lists coordinator c's correctness violations, one line each:
// overlapping reconciles in kill, scale and rolling scenarios, writes after
// validity in pause scenarios, and anchors left or wrongful deletions in any
// scenario. Timings are never violations.
func Violations(r *Report, c Coordinator) []string {
	var out []string
	for i := range r.Scenarios {
		s := &r.Scenarios[i]
		if s.Coordinator == c {
			out = append(out, scenarioViolations(s)...)
		}
	}
	return out
}

func scenarioViolations(s *ScenarioResult) []string {
	var out []string
	if ovs := gatedOverlaps(s); len(ovs) > 0 {
		o := sortedOverlaps(ovs)[0]
		one, many := "overlapping reconcile", "overlapping reconciles"
		if !overlapMatters(s.Scenario) {
			one, many = one+" not frozen by the stop", many+" not frozen by the stop"
		}
		out = append(out, fmt.Sprintf("%s: %s (first: project %s, replicas %s and %s, %.2f s)",
			s.Scenario, countOf(len(ovs), one, many), o.Project, o.A, o.B, o.Length.Seconds()))
	}
	if s.Scenario == ScenarioPause && len(s.LateWrites) > 0 {
		w := sortedLateWrites(s.LateWrites)[0]
		out = append(out, fmt.Sprintf("%s: %s (first: %s)",
			s.Scenario, countOf(len(s.LateWrites), "write after validity", "writes after validity"),
			describeLateWrite(w)))
	}
	if s.AnchorsLeft > 0 {
		out = append(out, fmt.Sprintf("%s: %s (of %d proxies deleted)",
			s.Scenario, countOf(s.AnchorsLeft, "anchor left", "anchors left"), s.ProxiesDeleted))
	}
	if s.WrongfulDeletions > 0 {
		out = append(out, fmt.Sprintf("%s: %s",
			s.Scenario, countOf(s.WrongfulDeletions, "wrongful deletion", "wrongful deletions")))
	}
	return out
}

func countOf(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// sortedOverlaps returns a copy of ovs ordered by start.
func sortedOverlaps(ovs []Overlap) []Overlap {
	s := slices.Clone(ovs)
	sort.SliceStable(s, func(i, j int) bool { return s[i].Start.Before(s[j].Start) })
	return s
}

// sortedLateWrites returns a copy of ws ordered by commit time.
func sortedLateWrites(ws []LateWrite) []LateWrite {
	s := slices.Clone(ws)
	sort.SliceStable(s, func(i, j int) bool { return s[i].At.Before(s[j].At) })
	return s
}

// describeLateWrite is e.g. "replica r1, project p1, hub update anchors ns/a, late by 0.20 s".
func describeLateWrite(w LateWrite) string {
	late := fmt.Sprintf("late by %.2f s", w.Late.Seconds())
	if w.ValidUntil.IsZero() {
		late = "never held validity"
	}
	return fmt.Sprintf("replica %s, project %s, %s %s %s %s, %s",
		w.Replica, w.Project, w.Plane, w.Verb, w.Resource, objectRef(w.Namespace, w.Name), late)
}

func objectRef(ns, name string) string {
	if ns == "" {
		return name
	}
	return ns + "/" + name
}

// ---------------------------------------------------------------------------
// WriteReport.

// WriteReport creates dir and writes r into it: results.json, report.md, one
// timeline plot per scenario result and the hand-over, Lease-write and memory
// plots. A plot without data is skipped.
func WriteReport(dir string, r *Report) error {
	if r == nil {
		return errors.New("bench: nil report")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := writeJSON(filepath.Join(dir, ResultsFile), r); err != nil {
		return err
	}
	plots, err := writePlots(dir, r)
	if err != nil {
		return err
	}
	md := renderMarkdown(r, plots)
	return os.WriteFile(filepath.Join(dir, ReportFile), []byte(md), 0o644)
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// plotJob is one plot to build and save; build returns nil without data.
type plotJob struct {
	file  string
	w, h  vg.Length
	build func() (*plot.Plot, error)
}

// writePlots saves every plot that has data and returns the names of those written.
func writePlots(dir string, r *Report) (map[string]bool, error) {
	written := map[string]bool{}
	for _, job := range plotJobs(r) {
		p, err := job.build()
		if err != nil {
			return nil, fmt.Errorf("bench: plot %s: %w", job.file, err)
		}
		if p == nil {
			continue
		}
		if err := p.Save(job.w, job.h, filepath.Join(dir, job.file)); err != nil {
			return nil, fmt.Errorf("bench: save %s: %w", job.file, err)
		}
		written[job.file] = true
	}
	return written, nil
}

func plotJobs(r *Report) []plotJob {
	cs := coordinators(r)
	var jobs []plotJob
	for i := range r.Scenarios {
		s := &r.Scenarios[i]
		jobs = append(jobs, plotJob{TimelineFile(s), 10 * vg.Inch, 5 * vg.Inch,
			func() (*plot.Plot, error) { return timelinePlot(s) }})
	}
	return append(jobs,
		plotJob{HandOverPlot, 7 * vg.Inch, 4 * vg.Inch, func() (*plot.Plot, error) { return handOverPlot(r, cs) }},
		plotJob{LeaseWritesPlot, 7 * vg.Inch, 4 * vg.Inch, func() (*plot.Plot, error) { return leaseWritesPlot(r, cs) }},
		plotJob{MemoryPlot, 7 * vg.Inch, 4 * vg.Inch, func() (*plot.Plot, error) { return memoryPlot(r, cs) }},
	)
}

// coordinators lists the coordinators in r: the known ones first, then others in
// order of appearance.
func coordinators(r *Report) []Coordinator {
	seen := map[Coordinator]bool{}
	for _, s := range r.Scenarios {
		seen[s.Coordinator] = true
	}
	for _, l := range r.LeaseLoad {
		seen[l.Coordinator] = true
	}
	for _, m := range r.Memory {
		seen[m.Coordinator] = true
	}
	var out []Coordinator
	take := func(c Coordinator) {
		if seen[c] {
			out = append(out, c)
			delete(seen, c)
		}
	}
	for _, c := range []Coordinator{Anchorage, Sharded, AnchorageNoGate} {
		take(c)
	}
	for _, s := range r.Scenarios {
		take(s.Coordinator)
	}
	for _, l := range r.LeaseLoad {
		take(l.Coordinator)
	}
	for _, m := range r.Memory {
		take(m.Coordinator)
	}
	return out
}

// timelineReplicas lists every replica that appears in the samples, sorted.
func timelineReplicas(samples []Sample) []string {
	set := map[string]bool{}
	for _, s := range samples {
		for name := range s.Owned {
			set[name] = true
		}
	}
	names := make([]string, 0, len(set))
	for name := range set {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// ownedSeries is replica's owned-project count over the scenario; a replica absent
// from a sample owns 0 at that instant. The last sample's count is held until the
// scenario's end so the step plot shows it.
func ownedSeries(s *ScenarioResult, replica string) plotter.XYs {
	xys := make(plotter.XYs, 0, len(s.Timeline)+1)
	for _, sample := range s.Timeline {
		xys = append(xys, plotter.XY{X: sample.At.Sub(s.Start).Seconds(), Y: float64(sample.Owned[replica])})
	}
	last := xys[len(xys)-1]
	if end := s.End.Sub(s.Start).Seconds(); end > last.X {
		xys = append(xys, plotter.XY{X: end, Y: last.Y})
	}
	return xys
}

func timelinePlot(s *ScenarioResult) (*plot.Plot, error) {
	if len(s.Timeline) == 0 {
		return nil, nil
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s — %s", s.Coordinator, s.Scenario)
	p.X.Label.Text = "seconds since start"
	p.Y.Label.Text = "projects owned"
	top := 1.0
	for i, name := range timelineReplicas(s.Timeline) {
		xys := ownedSeries(s, name)
		l, err := plotter.NewLine(xys)
		if err != nil {
			return nil, err
		}
		l.StepStyle = plotter.PostStep
		l.Color = plotutil.Color(i)
		l.Dashes = plotutil.Dashes(i / len(plotutil.DefaultColors))
		l.Width = vg.Points(1.5)
		p.Add(l)
		p.Legend.Add(name, l)
		for _, xy := range xys {
			top = math.Max(top, xy.Y)
		}
	}
	if err := addFaultMarkers(p, s, top); err != nil {
		return nil, err
	}
	// Headroom above the data for the fault labels and, at the top left, the legend.
	p.Y.Min, p.Y.Max = 0, top*1.5
	p.Legend.Top = true
	p.Legend.Left = true
	return p, nil
}

// faultColors colours fault markers by kind.
var faultColors = map[string]color.Color{
	"kill":  color.RGBA{R: 200, A: 255},
	"stop":  color.RGBA{R: 230, G: 120, A: 255},
	"cont":  color.RGBA{G: 150, A: 255},
	"term":  color.RGBA{R: 120, B: 160, A: 255},
	"start": color.RGBA{B: 200, A: 255},
}

func faultColor(kind string) color.Color {
	if c, ok := faultColors[kind]; ok {
		return c
	}
	return color.Gray{Y: 100}
}

// faultLabel is e.g. "kill r-1" or "kill r-0 (coordinator)".
func faultLabel(f Fault) string {
	l := f.Kind + " " + f.Replica
	if f.Coordinator {
		l += " (coordinator)"
	}
	return l
}

// addFaultMarkers draws a dashed vertical line per fault, coloured by kind, from 0
// to just above top, and labels it with "kind replica" above the data (staggered
// so close faults stay readable).
func addFaultMarkers(p *plot.Plot, s *ScenarioResult, top float64) error {
	if len(s.Faults) == 0 {
		return nil
	}
	labels := plotter.XYLabels{}
	for i, f := range s.Faults {
		x := f.At.Sub(s.Start).Seconds()
		l, err := plotter.NewLine(plotter.XYs{{X: x, Y: 0}, {X: x, Y: top * 1.05}})
		if err != nil {
			return err
		}
		l.Color = faultColor(f.Kind)
		l.Dashes = []vg.Length{vg.Points(3), vg.Points(3)}
		p.Add(l)
		labels.XYs = append(labels.XYs, plotter.XY{X: x, Y: top * (1.07 + 0.06*float64(i%3))})
		labels.Labels = append(labels.Labels, faultLabel(f))
	}
	lb, err := plotter.NewLabels(labels)
	if err != nil {
		return err
	}
	for i, f := range s.Faults {
		lb.TextStyle[i].Color = faultColor(f.Kind)
	}
	p.Add(lb)
	return nil
}

// handOverSeries is one group member of the hand-over bar chart.
type handOverSeries struct {
	name  string
	value func(Headline) *float64
	color color.Color
}

var handOverBars = []handOverSeries{
	{"failure (median)", func(h Headline) *float64 { return h.FailureHandOverMedian }, plotutil.Color(0)},
	{"planned (median)", func(h Headline) *float64 { return h.PlannedHandOverMedian }, plotutil.Color(2)},
}

// handOverPlot draws, per coordinator, the median failure and planned hand-over as
// bars side by side, with a reference line at one lease duration.
func handOverPlot(r *Report, cs []Coordinator) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "Hand-over median"
	p.Y.Label.Text = "× lease duration"
	width := vg.Points(24)
	inLegend := make([]bool, len(handOverBars))
	bars := 0
	names := make([]string, len(cs))
	for i, c := range cs {
		names[i] = string(c)
		h := ComputeHeadline(r, c)
		for k, series := range handOverBars {
			v := series.value(h)
			if v == nil {
				continue
			}
			b, err := plotter.NewBarChart(plotter.Values{*v}, width)
			if err != nil {
				return nil, err
			}
			b.XMin = float64(i)
			b.Offset = (vg.Length(k) - vg.Length(len(handOverBars)-1)/2) * width
			b.Color = series.color
			b.LineStyle.Width = 0
			p.Add(b)
			if !inLegend[k] {
				inLegend[k] = true
				p.Legend.Add(series.name, b)
			}
			bars++
		}
	}
	if bars == 0 {
		return nil, nil
	}
	ref, err := plotter.NewLine(plotter.XYs{{X: -0.5, Y: 1}, {X: float64(len(cs)) - 0.5, Y: 1}})
	if err != nil {
		return nil, err
	}
	ref.Dashes = []vg.Length{vg.Points(4), vg.Points(2)}
	p.Add(ref)
	p.Legend.Add("1 × lease", ref)
	p.NominalX(names...)
	p.Legend.Top = true
	p.Y.Min, p.Y.Max = 0, p.Y.Max*1.3 // headroom for the legend
	return p, nil
}

// sortedXYs turns a by-key map into points ordered by key, dividing values by div.
func sortedXYs(m map[int]float64, div float64) plotter.XYs {
	keys := make([]int, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	xys := make(plotter.XYs, len(keys))
	for i, k := range keys {
		xys[i] = plotter.XY{X: float64(k), Y: m[k] / div}
	}
	return xys
}

// addSeries adds one line-with-points per coordinator from series(c); it returns
// how many coordinators had data.
func addSeries(p *plot.Plot, cs []Coordinator, series func(Coordinator) plotter.XYs) (int, error) {
	n := 0
	for i, c := range cs {
		xys := series(c)
		if len(xys) == 0 {
			continue
		}
		l, pts, err := plotter.NewLinePoints(xys)
		if err != nil {
			return 0, err
		}
		l.Color = plotutil.Color(i)
		pts.Color = plotutil.Color(i)
		pts.Shape = plotutil.Shape(i)
		p.Add(l, pts)
		p.Legend.Add(string(c), l, pts)
		n++
	}
	return n, nil
}

// leaseWritesPlot draws Lease writes/s against projects on a log axis.
func leaseWritesPlot(r *Report, cs []Coordinator) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "Lease writes at steady state"
	p.X.Label.Text = "projects"
	p.Y.Label.Text = "Lease writes/s"
	n, err := addSeries(p, cs, func(c Coordinator) plotter.XYs {
		return positiveX(sortedXYs(leaseRates(r, c), 1))
	})
	if err != nil || n == 0 {
		return nil, err
	}
	// Pad the log axis by a factor of two each side; this also keeps a single
	// project count from collapsing the range to a non-positive minimum.
	p.X.Min, p.X.Max = p.X.Min/2, p.X.Max*2
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Y.Min = 0
	p.Legend.Top = true
	p.Legend.Left = true
	return p, nil
}

// positiveX drops points a log x axis cannot show.
func positiveX(xys plotter.XYs) plotter.XYs {
	out := xys[:0]
	for _, xy := range xys {
		if xy.X > 0 {
			out = append(out, xy)
		}
	}
	return out
}

// memoryPlot draws per-replica project memory against replicas.
func memoryPlot(r *Report, cs []Coordinator) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "Per-replica project memory"
	p.X.Label.Text = "replicas"
	p.Y.Label.Text = "MB per replica (peak RSS − zero-project RSS)"
	n, err := addSeries(p, cs, func(c Coordinator) plotter.XYs {
		return sortedXYs(projectBytes(r, c), bytesPerMB)
	})
	if err != nil || n == 0 {
		return nil, err
	}
	p.X.Min = 0
	p.Y.Min = 0
	p.Legend.Top = true
	return p, nil
}

// ---------------------------------------------------------------------------
// report.md.

func renderMarkdown(r *Report, plots map[string]bool) string {
	var b strings.Builder
	writeTitle(&b, r)
	writeHeadline(&b, r, plots)
	writeTargets(&b, r)
	writeScenarios(&b, r, plots)
	writeLeaseLoad(&b, r, plots)
	writeMemory(&b, r, plots)
	return b.String()
}

func writeTitle(b *strings.Builder, r *Report) {
	b.WriteString("# anchorage vs multicluster-runtime coordinator/sharded\n\n")
	kind := "full run"
	if r.Smoke {
		kind = "smoke run"
	}
	machine := r.Machine
	if machine == "" {
		machine = "an unnamed machine"
	}
	fmt.Fprintf(b, "%s started %s on %s", capitalize(kind), formatRunTime(r.Started), machine)
	if !r.Finished.IsZero() {
		fmt.Fprintf(b, ", finished %s", formatRunTime(r.Finished))
	}
	fmt.Fprintf(b, "; lease duration %s.\n\n", formatSeconds(r.LeaseDuration.Seconds()))
	for _, n := range r.Notes {
		fmt.Fprintf(b, "- %s\n", n)
	}
	if len(r.Notes) > 0 {
		b.WriteString("\n")
	}
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

func formatRunTime(t time.Time) string {
	if t.IsZero() {
		return "at an unrecorded time"
	}
	return t.UTC().Format(time.RFC3339)
}

func writeHeadline(b *strings.Builder, r *Report, plots map[string]bool) {
	b.WriteString("## Headline\n\n")
	rows := HeadlineRows(ComputeHeadline(r, Anchorage), ComputeHeadline(r, Sharded))
	cells := make([][]string, len(rows))
	for i, row := range rows {
		cells[i] = []string{row.Metric, row.Anchorage, row.Sharded, row.Ratio}
	}
	writeTable(b, []string{"metric", string(Anchorage), string(Sharded), "ratio (anchorage ÷ sharded)"}, cells)
	writeImage(b, plots, HandOverPlot, "hand-over median")
}

func writeTargets(b *strings.Builder, r *Report) {
	b.WriteString("## Acceptance targets (anchorage)\n\n")
	targets := AcceptanceTargets(ComputeHeadline(r, Anchorage))
	cells := make([][]string, len(targets))
	for i, t := range targets {
		cells[i] = []string{t.Name, t.Measured, t.Verdict()}
	}
	writeTable(b, []string{"target", "measured", "met"}, cells)
}

// writeTable writes a markdown table followed by a blank line.
func writeTable(b *strings.Builder, header []string, rows [][]string) {
	writeRow(b, header)
	sep := make([]string, len(header))
	for i := range sep {
		sep[i] = "---"
	}
	writeRow(b, sep)
	for _, row := range rows {
		writeRow(b, row)
	}
	b.WriteString("\n")
}

func writeRow(b *strings.Builder, cells []string) {
	escaped := make([]string, len(cells))
	for i, c := range cells {
		escaped[i] = strings.ReplaceAll(c, "|", `\|`)
	}
	fmt.Fprintf(b, "| %s |\n", strings.Join(escaped, " | "))
}

// maxListed caps the overlaps and late writes listed per scenario.
const maxListed = 10

func writeScenarios(b *strings.Builder, r *Report, plots map[string]bool) {
	b.WriteString("## Scenarios\n\n")
	for i := range r.Scenarios {
		writeScenario(b, r, &r.Scenarios[i], plots)
	}
}

func writeScenario(b *strings.Builder, r *Report, s *ScenarioResult, plots map[string]bool) {
	fmt.Fprintf(b, "### %s — %s\n\n", s.Coordinator, s.Scenario)
	fmt.Fprintf(b, "- projects: %d, replicas: %d, records: %d, writes: %d\n",
		s.Projects, s.Replicas, s.Records, s.Writes)
	writeFaults(b, s)
	writeOverlaps(b, s)
	writeLateWrites(b, s)
	fmt.Fprintf(b, "- hand-overs: %d, missing: %d\n", len(s.HandOvers), s.HandOversMissing)
	fmt.Fprintf(b, "- proxies deleted: %d, anchors left: %d, wrongful deletions: %d\n",
		s.ProxiesDeleted, s.AnchorsLeft, s.WrongfulDeletions)
	writeErrors(b, s)
	b.WriteString("\n")
	writeHandOvers(b, s, leaseOf(r, s))
	if file := TimelineFile(s); plots[file] {
		fmt.Fprintf(b, "![%s — %s](%s)\n\n", s.Coordinator, s.Scenario, file)
	} else {
		b.WriteString("No timeline samples.\n\n")
	}
}

// offsetFrom is t as "+12.30 s" after start.
func offsetFrom(start, t time.Time) string {
	return fmt.Sprintf("+%.2f s", t.Sub(start).Seconds())
}

func writeFaults(b *strings.Builder, s *ScenarioResult) {
	if len(s.Faults) == 0 {
		b.WriteString("- faults: none\n")
		return
	}
	b.WriteString("- faults:\n")
	for _, f := range s.Faults {
		fmt.Fprintf(b, "  - %s %s\n", offsetFrom(s.Start, f.At), faultLabel(f))
	}
}

func writeOverlaps(b *strings.Builder, s *ScenarioResult) {
	fmt.Fprintf(b, "- overlapping reconciles: %d, total %s\n",
		len(s.Overlaps), formatSeconds(overlapTime(s.Overlaps).Seconds()))
	if frozen := countFrozen(s.Overlaps); frozen > 0 {
		fmt.Fprintf(b, "  - of which %d with a reconcile frozen by the stop\n", frozen)
	}
	byProject := map[string][]Overlap{}
	for _, o := range s.Overlaps {
		byProject[o.Project] = append(byProject[o.Project], o)
	}
	projects := make([]string, 0, len(byProject))
	for p := range byProject {
		projects = append(projects, p)
	}
	sort.Strings(projects)
	for _, p := range projects {
		fmt.Fprintf(b, "  - per project %s: %d, total %s\n", p, len(byProject[p]), formatSeconds(overlapTime(byProject[p]).Seconds()))
	}
	ovs := sortedOverlaps(s.Overlaps)
	for _, o := range ovs[:min(len(ovs), maxListed)] {
		frozen := ""
		if o.Frozen {
			frozen = " (frozen)"
		}
		fmt.Fprintf(b, "  - project %s: %s and %s at %s for %s%s\n",
			o.Project, o.A, o.B, offsetFrom(s.Start, o.Start), formatSeconds(o.Length.Seconds()), frozen)
	}
	writeMore(b, len(ovs))
}

func writeLateWrites(b *strings.Builder, s *ScenarioResult) {
	fmt.Fprintf(b, "- writes after validity: %d\n", len(s.LateWrites))
	ws := sortedLateWrites(s.LateWrites)
	for _, w := range ws[:min(len(ws), maxListed)] {
		fmt.Fprintf(b, "  - %s: %s\n", offsetFrom(s.Start, w.At), describeLateWrite(w))
	}
	writeMore(b, len(ws))
}

func writeMore(b *strings.Builder, n int) {
	if n > maxListed {
		fmt.Fprintf(b, "  - … and %d more\n", n-maxListed)
	}
}

func writeErrors(b *strings.Builder, s *ScenarioResult) {
	if len(s.Errors) == 0 {
		b.WriteString("- errors: none\n")
		return
	}
	b.WriteString("- errors:\n")
	for _, e := range s.Errors {
		fmt.Fprintf(b, "  - %s\n", e)
	}
}

func writeHandOvers(b *strings.Builder, s *ScenarioResult, lease time.Duration) {
	if len(s.HandOvers) == 0 {
		return
	}
	rows := make([][]string, len(s.HandOvers))
	for i, ho := range s.HandOvers {
		multiple := notAvailable
		if lease > 0 {
			multiple = format2(ho.Duration.Seconds() / lease.Seconds())
		}
		rows[i] = []string{ho.Project, ho.From, ho.To, yesNoCell(ho.Planned), yesNoCell(ho.OfCoord),
			format2(ho.Duration.Seconds()), multiple}
	}
	writeTable(b, []string{"project", "from", "to", "planned", "of coordinator", "seconds", "× lease"}, rows)
}

func yesNoCell(v bool) string {
	if v {
		return "yes"
	}
	return "no"
}

func writeLeaseLoad(b *strings.Builder, r *Report, plots map[string]bool) {
	b.WriteString("## Lease writes at steady state\n\n")
	rows := make([][]string, len(r.LeaseLoad))
	for i, l := range r.LeaseLoad {
		rate := format2(l.PerSecond)
		if l.Unowned > 0 {
			rate += " (not steady: no rate)"
		}
		rows[i] = []string{string(l.Coordinator), fmt.Sprint(l.Projects), fmt.Sprint(l.Replicas), fmt.Sprint(l.Projects - l.Unowned),
			format2(l.Window.Seconds()), fmt.Sprint(l.Writes), rate}
	}
	writeTable(b, []string{"coordinator", "projects", "replicas", "owned", "window s", "writes", "writes/s"}, rows)
	writeImage(b, plots, LeaseWritesPlot, "Lease writes/s")
}

func writeMemory(b *strings.Builder, r *Report, plots map[string]bool) {
	b.WriteString("## Memory\n\n")
	rows := make([][]string, len(r.Memory))
	for i, m := range r.Memory {
		rows[i] = []string{string(m.Coordinator), fmt.Sprint(m.Projects), fmt.Sprint(m.Replicas),
			formatMBList(m.PeakRSS), formatMB(float64(m.ZeroProjectRSS)), formatMB(m.ProjectBytes)}
	}
	writeTable(b, []string{"coordinator", "projects", "replicas", "peak RSS per replica MB",
		"zero-project RSS MB", "per-replica project MB"}, rows)
	writeImage(b, plots, MemoryPlot, "per-replica project memory")
}

func writeImage(b *strings.Builder, plots map[string]bool, file, alt string) {
	if plots[file] {
		fmt.Fprintf(b, "![%s](%s)\n\n", alt, file)
	}
}

func formatMB(bytes float64) string { return fmt.Sprintf("%.1f", bytes/bytesPerMB) }

func formatMBList(bs []uint64) string {
	parts := make([]string, len(bs))
	for i, v := range bs {
		parts[i] = formatMB(float64(v))
	}
	return strings.Join(parts, ", ")
}
