package shard

import (
	"maps"
	"slices"
	"sort"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// HoldingView is what the planner reads of one holding.
type HoldingView struct {
	Holder    string
	State     holdingState
	Discovery uint64    // holding.discovery
	LeaseUID  types.UID // the Lease the claim was written to (set once open)
	Claim     string    // the claim value
	ClaimRV   string    // the resourceVersion the claim write returned
}

// stillClaimedBy reports whether lease still carries open holding v's claim (or predates it).
func (v HoldingView) stillClaimedBy(lease *coordinationv1.Lease) bool {
	if v.State != holdingOpen {
		return true
	}
	if lease.UID != v.LeaseUID {
		return false
	}
	return olderVersion(lease.ResourceVersion, v.ClaimRV) || lease.Annotations[AnnotationClaim] == v.Claim
}

// HolderInput is what one holder sync decides from.
type HolderInput struct {
	Holder       string                 // the current incarnation, "" before it joined
	Valid        bool                   // Holder is valid now
	ShuttingDown bool                   // hand everything over, take nothing new
	Leases       map[string]Observed    // project Leases by name
	Projects     map[string]uint64      // engageable projects and their discovery numbers
	Holdings     map[string]HoldingView // by project
	HandedOff    map[string]handOff     // hand-overs this replica began, by project
	Undiscovered map[string]time.Time   // Shard.undiscovered
	Now          time.Time
	Timings      Timings
}

// HoldingClose closes one holding; Release, when set, is its Lease to release too.
type HoldingClose struct {
	Project string
	Reason  string
	Release *coordinationv1.Lease
}

// ClaimStart starts claiming Project; RV is the claim's precondition, "" for the next holder.
type ClaimStart struct {
	Project   string
	RV        string
	Lease     *coordinationv1.Lease
	Discovery uint64
}

// ProjectLease is a project and its Lease as observed.
type ProjectLease struct {
	Project string
	Lease   *coordinationv1.Lease
}

// HolderPlan is what one holder sync does, in this order.
type HolderPlan struct {
	Close           []HoldingClose
	Claim           []ClaimStart
	HandOver        []ProjectLease       // planned hand-overs to begin
	WriteNextHolder []ProjectLease       // hand-overs that ended without their write: send it again
	Release         []ProjectLease       // Leases of projects undiscovered for a claim deadline
	Undiscovered    map[string]time.Time // replaces the input's table
	ForgetHandOffs  []string
}

// PlanHolderSync decides one holder sync; it is pure. Holdings close first (closeReason);
// while valid, it then begins hand-overs, claims and releases (docs/design.md, Claims).
func PlanHolderSync(in HolderInput) HolderPlan {
	plan := HolderPlan{Undiscovered: map[string]time.Time{}}
	held := map[string]HoldingView{}
	for _, project := range slices.Sorted(maps.Keys(in.Holdings)) {
		v := in.Holdings[project]
		if reason := closeReason(in, project, v); reason != "" {
			c := HoldingClose{Project: project, Reason: reason}
			if ob, ok := in.Leases[ProjectLeaseName(project)]; ok && reason == "secret gone" && ob.Holder() == v.Holder {
				c.Release = ob.Lease
			}
			plan.Close = append(plan.Close, c)
			continue
		}
		held[project] = v
	}
	if in.Holder == "" || !in.Valid {
		maps.Copy(plan.Undiscovered, in.Undiscovered)
		return plan
	}
	for _, name := range slices.Sorted(maps.Keys(in.Leases)) {
		ob := in.Leases[name]
		project := ob.Lease.Annotations[AnnotationProject]
		if project == "" || ProjectLeaseName(project) != name {
			continue
		}
		v, isHeld := held[project]
		gen, discovered := in.Projects[project]
		next := ob.Lease.Annotations[AnnotationNextHolder]
		handedOff := handedOffAt(in.HandedOff[project], in.Holder, ob.Lease)
		switch {
		case ob.Holder() != in.Holder:
			if !isHeld && next == in.Holder && !in.ShuttingDown && discovered {
				plan.Claim = append(plan.Claim, ClaimStart{Project: project, Lease: ob.Lease, Discovery: gen})
			}
		case next != "" && next != in.Holder:
			switch {
			case isHeld && (v.State == holdingClaiming || v.State == holdingOpen), !isHeld && !handedOff:
				plan.HandOver = append(plan.HandOver, ProjectLease{project, ob.Lease})
			case !isHeld && nextHolderWriteDue(in.HandedOff[project], in.Now, in.Timings):
				plan.WriteNextHolder = append(plan.WriteNextHolder, ProjectLease{project, ob.Lease})
			}
		case isHeld || in.ShuttingDown || handedOff:
		case !discovered:
			since, seen := in.Undiscovered[project]
			switch {
			case !seen:
				plan.Undiscovered[project] = in.Now
			case in.Now.Sub(since) < in.Timings.ClaimDeadline:
				plan.Undiscovered[project] = since
			default:
				plan.Release = append(plan.Release, ProjectLease{project, ob.Lease})
			}
		default:
			plan.Claim = append(plan.Claim, ClaimStart{Project: project, RV: ob.Lease.ResourceVersion, Lease: ob.Lease, Discovery: gen})
		}
	}
	plan.ForgetHandOffs = forgottenHandOffs(in.HandedOff, in.Leases, in.Holder)
	return plan
}

// closeReason says why holding v of project closes now, "" when it stays.
func closeReason(in HolderInput, project string, v HoldingView) string {
	ob, ok := in.Leases[ProjectLeaseName(project)]
	gen, discovered := in.Projects[project]
	// The announced next holder warms up while the Lease still names the owner.
	preparing := ok && v.State == holdingClaiming && ob.Lease.Annotations[AnnotationNextHolder] == v.Holder
	switch {
	case !ok:
		return "lease gone"
	case !discovered:
		return "secret gone"
	case v.Discovery != 0 && gen != v.Discovery:
		return "new kubeconfig"
	case ob.Holder() != v.Holder && !preparing:
		return "lease names another holder"
	case !v.stillClaimedBy(ob.Lease):
		return "claim lost"
	case v.Holder != in.Holder:
		return "earlier incarnation"
	}
	return ""
}

// nextHolderWriteDue reports whether hand-over ho's write is due again (one per retry period).
func nextHolderWriteDue(ho handOff, now time.Time, t Timings) bool {
	return !ho.writing && (ho.wroteAt.IsZero() || now.Sub(ho.wroteAt) >= t.RetryPeriod)
}

// handOff remembers an incarnation's hand-over of one assignment, never reopened.
type handOff struct {
	holder      string
	lease       types.UID
	transitions int32
	// writing and wroteAt pace WriteNextHolder: one at a time, one per retry period.
	writing bool
	wroteAt time.Time
}

// handedOffAt reports whether ho is holder's hand-over of the assignment lease shows.
func handedOffAt(ho handOff, holder string, lease *coordinationv1.Lease) bool {
	return ho.holder != "" && ho.holder == holder && ho.lease == lease.UID && ptr.Deref(lease.Spec.LeaseTransitions, 0) <= ho.transitions
}

// forgottenHandOffs returns the hand-overs holder no longer needs: begun by an older
// incarnation, of a Lease gone or created again, or claimed since by another holder.
func forgottenHandOffs(handedOff map[string]handOff, leases map[string]Observed, holder string) []string {
	var out []string
	for project, ho := range handedOff {
		ob, ok := leases[ProjectLeaseName(project)]
		switch {
		case ho.holder != holder, !ok, ob.Lease.UID != ho.lease:
			out = append(out, project)
		case ob.Holder() != ho.holder && ClaimedBy(ob.Lease.Annotations[AnnotationClaim], ob.Holder()):
			out = append(out, project)
		}
	}
	sort.Strings(out)
	return out
}
