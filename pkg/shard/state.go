package shard

import (
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
)

// Observed is a Lease as this process saw it, with the local time of the last change
// it observed. Remote renewTime is never compared with the local clock.
type Observed struct {
	Lease *coordinationv1.Lease
	// Changed is the local time the current resourceVersion was first seen.
	Changed time.Time
}

// Holder returns the Lease's holder identity, "" when none.
func (o Observed) Holder() string {
	if o.Lease == nil || o.Lease.Spec.HolderIdentity == nil {
		return ""
	}
	return *o.Lease.Spec.HolderIdentity
}

// MemberState is what the coordinator may conclude about a member Lease.
type MemberState int

const (
	// MemberReleased: the Lease names no holder (released, or declared expired).
	MemberReleased MemberState = iota
	// MemberLive: a holder is named and a change was seen less than LeaseDuration ago.
	MemberLive
	// MemberSuspect: no change seen for LeaseDuration; expiry is not yet confirmed.
	MemberSuspect
)

func (s MemberState) String() string {
	return [...]string{"Released", "Live", "Suspect"}[s]
}

// ToMemberState classifies a member Lease at now, and returns how long until the state
// can next change on its own (0 when it cannot).
func ToMemberState(o Observed, now time.Time, leaseDuration time.Duration) (MemberState, time.Duration) {
	if o.Holder() == "" {
		return MemberReleased, 0
	}
	if age := now.Sub(o.Changed); age < leaseDuration {
		return MemberLive, leaseDuration - age
	}
	return MemberSuspect, 0
}

// ProjectState is what the coordinator concludes about a project Lease.
type ProjectState int

const (
	// ProjectUnassigned: no Lease, or a Lease naming no holder.
	ProjectUnassigned ProjectState = iota
	// ProjectOrphaned: the holder is not a live member; it may be reassigned at once.
	ProjectOrphaned
	// ProjectAssigned: a live holder has not claimed yet, within the claim deadline.
	ProjectAssigned
	// ProjectClaimOverdue: a live holder has not claimed within the claim deadline.
	ProjectClaimOverdue
	// ProjectClaimed: a live holder has claimed it.
	ProjectClaimed
)

func (s ProjectState) String() string {
	return [...]string{"Unassigned", "Orphaned", "Assigned", "ClaimOverdue", "Claimed"}[s]
}

// ToProjectState classifies a project Lease at now given the set of live holders, and
// returns how long until the state can next change on its own.
func ToProjectState(o Observed, live map[string]bool, now time.Time, claimDeadline time.Duration) (ProjectState, time.Duration) {
	holder := o.Holder()
	switch {
	case o.Lease == nil || holder == "":
		return ProjectUnassigned, 0
	case !live[holder]:
		return ProjectOrphaned, 0
	case ClaimedBy(o.Lease.Annotations[AnnotationClaim], holder):
		return ProjectClaimed, 0
	}
	if age := now.Sub(o.Changed); age < claimDeadline {
		return ProjectAssigned, claimDeadline - age
	}
	return ProjectClaimOverdue, 0
}
