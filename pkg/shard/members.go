package shard

import (
	"sort"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
)

// ValidMembers returns, sorted, the pods whose member Lease may still be valid at now.
// It compares remote renew times with the local clock: for one-shot operator checks only.
func ValidMembers(leases []coordinationv1.Lease, now time.Time) []string {
	var pods []string
	for _, l := range leases {
		if memberMayBeValid(l.Spec, now) {
			pods = append(pods, PodOf(*l.Spec.HolderIdentity))
		}
	}
	sort.Strings(pods)
	return pods
}

// memberMayBeValid decides one member Lease for ValidMembers.
func memberMayBeValid(s coordinationv1.LeaseSpec, now time.Time) bool {
	if s.HolderIdentity == nil || *s.HolderIdentity == "" {
		return false
	}
	if s.RenewTime == nil || s.LeaseDurationSeconds == nil {
		return true
	}
	return now.Before(s.RenewTime.Add(time.Duration(*s.LeaseDurationSeconds) * time.Second))
}
