package shard

import (
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
)

// Observed is a Lease as this process saw it, with the local time of the last change.
type Observed struct {
	Lease   *coordinationv1.Lease
	Changed time.Time // when the current resourceVersion was first seen, locally
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
	MemberReleased MemberState = iota // no holder named (released, or declared expired)
	MemberLive                        // a holder, and a change seen within LeaseDuration
	MemberSuspect                     // no change seen for LeaseDuration; not yet confirmed
)

// ToMemberState classifies a member Lease at now, and how long until that changes (0: never).
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
	ProjectUnassigned   ProjectState = iota // no Lease, or no holder
	ProjectOrphaned                         // the holder is not live: reassign at once
	ProjectAssigned                         // not claimed yet, within the claim deadline
	ProjectClaimOverdue                     // not claimed within the claim deadline
	ProjectClaimed                          // claimed by its live holder
)

// ToProjectState classifies a project Lease at now, and how long until that changes.
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
