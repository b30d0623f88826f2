// Acceptance targets: anchorage's Headline judged against fixed limits; report.md shows them, no run fails on them.

package bench

import (
	"fmt"
	"strings"

	"anchorage/internal/harness"
)

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
		zeroTarget("0 hub creates after the proxy's deletion was requested in every scenario", h.CreatesAfterDeletion),
		limitTarget("failure hand-over max ≤ 1.3 × lease (failed replica not the coordinator)",
			h.FailureHandOverMaxNotCoord, handOverLimitNotCoord),
		limitTarget("failure hand-over max ≤ 1.7 × lease (failed replica was the coordinator)",
			h.FailureHandOverMaxOfCoord, handOverLimitOfCoord),
		zeroTarget("0 overlapping reconciles under hub faults", h.HubFaultOverlaps),
		zeroTarget("0 writes after validity under hub faults", h.HubFaultLateWrites),
		hubFaultRecoveryTarget(h),
		leaseGrowthTarget(h),
		memoryTarget(h),
		failoverTarget(h.Failovers),
	}
}

// failoverTarget judges the failure hand-overs of 1,000 light projects on a hub delayed
// 200 ms against 1.3 × the Lease duration plus the retry period (FailureBound), one
// measurement per set of timings the run used; met when every one is.
func failoverTarget(fs []Failover) Target {
	t := Target{Name: "failure hand-over of 1,000 projects, hub answers +200 ms: max ≤ 1.3 × lease + retry", Measured: notAvailable}
	var measured []string
	met := true
	for _, f := range fs {
		if f.Error != "" || f.VictimProjects == 0 {
			continue
		}
		m := fmt.Sprintf("%s Lease: max %.2f s, median %.2f s, bound %.2f s (%d projects", f.LeaseDuration, f.Max.Seconds(), f.Median.Seconds(), f.Bound.Seconds(), f.VictimProjects)
		if f.Missing > 0 {
			m += fmt.Sprintf(", %d not taken over", f.Missing)
		}
		measured = append(measured, m+")")
		met = met && f.MetBound()
	}
	if len(measured) > 0 {
		t.Measured = strings.Join(measured, "; ")
		t.Met = verdictOf(met)
	}
	return t
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

// hubFaultRecoveryTarget: once the hub faults are lifted, every project is owned again
// within the failure bound of the scenarios' timings.
func hubFaultRecoveryTarget(h Headline) Target {
	bound := FailureBound(harness.FastTimings)
	t := Target{Name: fmt.Sprintf("every project owned again ≤ %.1f s (1.3 × lease + retry) after the hub faults are lifted", bound.Seconds()), Measured: notAvailable}
	if h.HubFaultRecovery != nil {
		t.Measured = formatSeconds(h.HubFaultRecovery.Seconds())
		t.Met = verdictOf(*h.HubFaultRecovery <= bound)
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
