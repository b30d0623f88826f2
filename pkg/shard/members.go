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
		s := l.Spec
		if s.HolderIdentity == nil || *s.HolderIdentity == "" {
			continue
		}
		if s.RenewTime == nil || s.LeaseDurationSeconds == nil || now.Before(s.RenewTime.Add(time.Duration(*s.LeaseDurationSeconds)*time.Second)) {
			pods = append(pods, PodOf(*s.HolderIdentity))
		}
	}
	sort.Strings(pods)
	return pods
}
