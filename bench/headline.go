// Headline numbers: medians and maxima, one coordinator's Headline and the rows of the headline table.

package bench

import (
	"fmt"
	"math"
	"slices"
	"time"
)

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
	// Under hub faults: overlapping reconciles, writes after validity, and the longest
	// time after the faults were lifted until every project was owned again.
	HubFaultOverlaps   *int
	HubFaultLateWrites *int
	HubFaultRecovery   *time.Duration

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
	AnchorsLeft          *int
	WrongfulDeletions    *int
	CreatesAfterDeletion *int
	HandOversMissing     *int

	// Failovers are the failure hand-overs of 1,000 light projects on a delayed hub the
	// run measured, one per set of timings.
	Failovers []Failover
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
	for _, f := range r.Failover {
		if f.Coordinator == c {
			h.Failovers = append(h.Failovers, f)
		}
	}
	return h
}

// addScenario adds one scenario's counts to h.
func (h *Headline) addScenario(s *ScenarioResult) {
	if s.Scenario == ScenarioHubFaults {
		addInt(&h.HubFaultOverlaps, len(s.Overlaps))
		addInt(&h.HubFaultLateWrites, len(s.LateWrites))
		if h.HubFaultRecovery == nil || s.Recovery > *h.HubFaultRecovery {
			h.HubFaultRecovery = &s.Recovery
		}
	} else if overlapMatters(s.Scenario) {
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
	addInt(&h.CreatesAfterDeletion, len(s.CreatesAfterDeletion))
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
	{"overlapping reconciles (hub-faults)", intField(func(h Headline) *int { return h.HubFaultOverlaps }), formatCount},
	{"writes after validity (hub-faults)", intField(func(h Headline) *int { return h.HubFaultLateWrites }), formatCount},
	{"every project owned again after the hub faults were lifted", durationField(func(h Headline) *time.Duration { return h.HubFaultRecovery }), formatSeconds},
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
	{"hub creates after the proxy's deletion was requested", intField(func(h Headline) *int { return h.CreatesAfterDeletion }), formatCount},
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
