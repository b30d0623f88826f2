package shard

import (
	"maps"
	"slices"
	"time"
)

// PassInput is what one coordinator pass decides from.
type PassInput struct {
	Members              map[string]Observed  // member Leases by name
	Vanished             map[string]time.Time // holders whose member Lease was seen deleted, and when
	Leases               map[string]Observed  // project Leases by name
	Projects             map[string]bool      // engageable projects
	Failures             claimFailures
	Now                  time.Time
	Timings              Timings
	MaxHandoversInFlight int
}

// Assignment writes Holder into a project's Lease (creating it when !Exists).
type Assignment struct {
	Project string
	Lease   Observed
	Exists  bool
	Holder  string
	Reason  string
	// Unclaimed: the holder whose overdue claim this moves from, remembered once written.
	Unclaimed string
}

// HandOver asks a project's holder, through its Lease, to hand the project to Next.
type HandOver struct {
	Project string
	Lease   Observed
	Next    string
	Reason  string
}

// PassPlan is what a pass writes: confirmations first, then the project writes.
type PassPlan struct {
	Confirm   []Observed // suspect member Leases to read and, when unchanged, clear
	Assign    []Assignment
	HandOvers []HandOver
	Remove    []Observed        // Leases of removed projects no member holds on to
	Claimed   map[string]string // holder by project: forget its claim failures there
}

// PlanPass decides one coordinator pass; it is pure. Who holds on to projects and who
// gets them is in docs/design.md, Coordinator.
func PlanPass(in PassInput) PassPlan {
	var plan PassPlan
	holding := map[string]bool{}
	live, draining := map[string]bool{}, map[string]bool{}
	var eligible []Member
	for _, name := range slices.Sorted(maps.Keys(in.Members)) {
		m := in.Members[name]
		st, _ := ToMemberState(m, in.Now, in.Timings.LeaseDuration)
		switch st {
		case MemberReleased:
			continue
		case MemberSuspect:
			plan.Confirm = append(plan.Confirm, m)
			holding[m.Holder()] = true
			continue
		}
		holding[m.Holder()], live[m.Holder()] = true, true
		if m.Lease.Annotations[AnnotationDraining] != "" {
			draining[m.Holder()] = true
			continue
		}
		w, err := ParseWeight(m.Lease.Annotations[AnnotationWeight])
		if err != nil {
			w = 1
		}
		eligible = append(eligible, Member{Holder: m.Holder(), Pod: PodOf(m.Holder()), Weight: w})
	}
	for holder, seen := range in.Vanished {
		if in.Now.Sub(seen) < in.Timings.LeaseDuration {
			holding[holder] = true
		}
	}

	inFlight := 0
	for _, ob := range in.Leases {
		if handOverInFlight(ob, holding, in.Now, in.Timings) {
			inFlight++
		}
	}
	for _, project := range slices.Sorted(maps.Keys(in.Projects)) {
		ob, exists := in.Leases[ProjectLeaseName(project)]
		st, _ := ToProjectState(ob, holding, in.Now, in.Timings.ClaimDeadline)
		candidates := in.Failures.without(project, eligible, in.Now)
		ranked := Rank(project, candidates)
		assign := func(holder, reason, unclaimed string) {
			plan.Assign = append(plan.Assign, Assignment{Project: project, Lease: ob, Exists: exists, Holder: holder, Reason: reason, Unclaimed: unclaimed})
		}
		if st == ProjectClaimed && in.Failures[project] != nil {
			if plan.Claimed == nil {
				plan.Claimed = map[string]string{}
			}
			plan.Claimed[project] = ob.Holder()
		}
		switch {
		case st == ProjectClaimOverdue: // the holder is out of this project's ranking
			if i := slices.IndexFunc(ranked, func(m Member) bool { return m.Holder != ob.Holder() }); i >= 0 {
				assign(ranked[i].Holder, "claim_overdue", ob.Holder())
			}
		case len(ranked) == 0:
			continue
		case st == ProjectUnassigned || st == ProjectOrphaned:
			reason := map[bool]string{true: "orphaned", false: "new"}[st == ProjectOrphaned]
			assign(ranked[0].Holder, reason, "")
		case st == ProjectAssigned && draining[ob.Holder()]: // nothing runs there yet
			assign(ranked[0].Holder, "draining", "")
		case st == ProjectClaimed && ranked[0].Holder != ob.Holder() && live[ob.Holder()]: // only live holders hand over
			next := ob.Lease.Annotations[AnnotationNextHolder]
			if next == ranked[0].Holder || (next == "" && inFlight >= in.MaxHandoversInFlight) {
				continue
			}
			reason := map[bool]string{true: "draining", false: "rebalance"}[draining[ob.Holder()]]
			plan.HandOvers = append(plan.HandOvers, HandOver{Project: project, Lease: ob, Next: ranked[0].Holder, Reason: reason})
			if next == "" {
				inFlight++
			}
		}
	}
	// Leases of projects no longer discovered: deleted once no member holds on to them.
	for _, name := range slices.Sorted(maps.Keys(in.Leases)) {
		ob := in.Leases[name]
		project := ob.Lease.Annotations[AnnotationProject]
		if in.Projects[project] && ProjectLeaseName(project) == name {
			continue
		}
		if holding[ob.Holder()] {
			continue
		}
		plan.Remove = append(plan.Remove, ob)
	}
	return plan
}

// handOverInFlight reports whether ob's hand-over request counts against MaxHandoversInFlight.
func handOverInFlight(ob Observed, holding map[string]bool, now time.Time, t Timings) bool {
	if ob.Lease.Annotations[AnnotationNextHolder] == "" || !holding[ob.Holder()] {
		return false
	}
	return now.Sub(ob.Changed) < t.DrainDeadline+t.ClaimDeadline
}

// claimFailures remembers overdue claims per project and member (design.md, Claim deadline).
type claimFailures map[string]map[string]claimFailure

type claimFailure struct {
	count int
	until time.Time
}

// maxClaimBackoffFactor caps a time out of a ranking, in claim deadlines.
const maxClaimBackoffFactor = 32

// record notes that holder let its claim of project go overdue at now.
func (c claimFailures) record(project, holder string, now time.Time, claimDeadline time.Duration) {
	if c[project] == nil {
		c[project] = map[string]claimFailure{}
	}
	f := c[project][holder]
	f.count++
	factor := min(1<<min(f.count-1, 30), maxClaimBackoffFactor)
	f.until = now.Add(time.Duration(factor) * claimDeadline)
	c[project][holder] = f
}

// forget drops holder's failures of project: it claimed it.
func (c claimFailures) forget(project, holder string) {
	delete(c[project], holder)
	if len(c[project]) == 0 {
		delete(c, project)
	}
}

// prune drops failures whose time out ended longer ago than the longest time out.
func (c claimFailures) prune(now time.Time, claimDeadline time.Duration) {
	for project, holders := range c {
		for holder, f := range holders {
			if now.Sub(f.until) > maxClaimBackoffFactor*claimDeadline {
				c.forget(project, holder)
			}
		}
	}
}

// without returns members less those out of project's ranking at now.
func (c claimFailures) without(project string, members []Member, now time.Time) []Member {
	failed := c[project]
	if len(failed) == 0 {
		return members
	}
	return slices.DeleteFunc(slices.Clone(members), func(m Member) bool {
		f, ok := failed[m.Holder]
		return ok && now.Before(f.until)
	})
}
