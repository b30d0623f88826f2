// Violations: the correctness failures a smoke run exits 1 on, one line each, and the ordering they are described in.

package bench

import (
	"fmt"
	"slices"
	"sort"
)

// overlapMatters reports whether overlaps in scenario s are violations: a paused
// replica legitimately keeps reconciling (it cannot know it was paused) and only
// its writes are gated. Skew pauses a replica too; its overlaps are gated as a
// pause's (a kill freezes nothing, so there all of them are).
func overlapMatters(s Scenario) bool {
	return s == ScenarioKill || s == ScenarioScale || s == ScenarioRolling || s == ScenarioHubFaults
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

// Violations lists coordinator c's correctness violations, one line each:
// overlapping reconciles in kill, scale and rolling scenarios, writes after
// validity in pause and skew scenarios, failure hand-overs of replicas that had not
// failed in skew scenarios, and anchors left, wrongful deletions or hub creates
// after a proxy's deletion was requested in any scenario. Timings are never
// violations.
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

// lateWritesMatter reports whether writes after validity in scenario s are
// violations: where a replica is paused (pause, skew), the validity gate is what
// stops it writing.
// Under hub faults a replica cut off from the hub must stop writing as well.
func lateWritesMatter(s Scenario) bool {
	return s == ScenarioPause || s == ScenarioSkew || s == ScenarioHubFaults
}

func scenarioViolations(s *ScenarioResult) []string {
	var out []string
	scenario := string(s.Scenario)
	if s.Scenario == ScenarioHubFaults {
		// A failing schedule is replayed from its seed.
		scenario = fmt.Sprintf("%s (seed %d)", s.Scenario, s.HubFaultSeed)
	}
	if ovs := gatedOverlaps(s); len(ovs) > 0 {
		o := sortedOverlaps(ovs)[0]
		one, many := "overlapping reconcile", "overlapping reconciles"
		if !overlapMatters(s.Scenario) {
			one, many = one+" not frozen by the stop", many+" not frozen by the stop"
		}
		out = append(out, fmt.Sprintf("%s: %s (first: project %s, replicas %s and %s, %.2f s)",
			scenario, countOf(len(ovs), one, many), o.Project, o.A, o.B, o.Length.Seconds()))
	}
	if s.NotRecovered {
		out = append(out, fmt.Sprintf("%s: not every project owned again once the faults were lifted", scenario))
	}
	if lateWritesMatter(s.Scenario) && len(s.LateWrites) > 0 {
		w := sortedLateWrites(s.LateWrites)[0]
		out = append(out, fmt.Sprintf("%s: %s (first: %s)",
			scenario, countOf(len(s.LateWrites), "write after validity", "writes after validity"),
			describeLateWrite(w)))
	}
	if s.Scenario == ScenarioHubFaults {
		if ps := StalledViewHandOvers(s.PrematureHandOvers, s.Faults, s.LeaseDuration); len(ps) > 0 {
			out = append(out, fmt.Sprintf("%s: %s (first: %s)",
				scenario, countOf(len(ps), "failure hand-over of a renewing member during a Lease watch stall", "failure hand-overs of renewing members during a Lease watch stall"),
				describePremature(ps[0])))
		}
	}
	if s.Scenario == ScenarioSkew && len(s.PrematureHandOvers) > 0 {
		out = append(out, fmt.Sprintf("%s: %s (first: %s)",
			scenario, countOf(len(s.PrematureHandOvers), "premature failure hand-over", "premature failure hand-overs"),
			describePremature(s.PrematureHandOvers[0])))
	}
	if s.AnchorsLeft > 0 {
		out = append(out, fmt.Sprintf("%s: %s (of %d proxies deleted)",
			scenario, countOf(s.AnchorsLeft, "anchor left", "anchors left"), s.ProxiesDeleted))
	}
	if s.WrongfulDeletions > 0 {
		out = append(out, fmt.Sprintf("%s: %s",
			scenario, countOf(s.WrongfulDeletions, "wrongful deletion", "wrongful deletions")))
	}
	if len(s.CreatesAfterDeletion) > 0 {
		out = append(out, fmt.Sprintf("%s: %s (first: %s)",
			scenario, countOf(len(s.CreatesAfterDeletion), "hub create after the proxy's deletion was requested", "hub creates after the proxy's deletion was requested"),
			describeLateCreate(sortedLateCreates(s.CreatesAfterDeletion)[0])))
	}
	return out
}

// describeLateCreate is e.g. "replica r1, proxy p1/ns/px-3, configmaps ns-x/anchor-y,
// 0.52 s after the delete request".
func describeLateCreate(c LateCreate) string {
	return fmt.Sprintf("replica %s, proxy %s/%s/%s, %s %s, %.2f s after the delete request",
		c.Replica, c.Proxy.Project, c.Proxy.Namespace, c.Proxy.Name, c.Resource, objectRef(c.Namespace, c.Name), c.Late.Seconds())
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

// sortedLateCreates returns a copy of cs ordered by arrival at the hub.
func sortedLateCreates(cs []LateCreate) []LateCreate {
	s := slices.Clone(cs)
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
