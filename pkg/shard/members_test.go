package shard

import (
	"slices"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestValidMembers(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	lease := func(holder *string, renewed *time.Time, seconds *int32) coordinationv1.Lease {
		l := coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{HolderIdentity: holder, LeaseDurationSeconds: seconds}}
		if renewed != nil {
			l.Spec.RenewTime = &metav1.MicroTime{Time: *renewed}
		}
		return l
	}
	ago := func(d time.Duration) *time.Time { return ptr.To(now.Add(-d)) }
	cases := []struct {
		reason string
		lease  coordinationv1.Lease
		valid  bool
	}{
		{"renewed within its duration", lease(ptr.To("pod-a/1"), ago(5*time.Second), ptr.To[int32](15)), true},
		{"renewed exactly one duration ago: lapsed", lease(ptr.To("pod-a/1"), ago(15*time.Second), ptr.To[int32](15)), false},
		{"renewed long ago", lease(ptr.To("pod-a/1"), ago(time.Hour), ptr.To[int32](15)), false},
		{"released: no holder", lease(nil, ago(time.Second), ptr.To[int32](15)), false},
		{"released: empty holder", lease(ptr.To(""), ago(time.Second), ptr.To[int32](15)), false},
		{"a holder but no renew time: cannot be proved expired", lease(ptr.To("pod-a/1"), nil, ptr.To[int32](15)), true},
		{"a holder but no duration: cannot be proved expired", lease(ptr.To("pod-a/1"), ago(time.Hour), nil), true},
	}
	for _, tc := range cases {
		got := ValidMembers([]coordinationv1.Lease{tc.lease}, now)
		if want := tc.valid; (len(got) == 1) != want {
			t.Errorf("%s: ValidMembers = %q, want valid %t", tc.reason, got, want)
		}
	}
	got := ValidMembers([]coordinationv1.Lease{
		lease(ptr.To("pod-b/2"), ago(time.Second), ptr.To[int32](15)),
		lease(ptr.To("pod-c/1"), ago(time.Hour), ptr.To[int32](15)),
		lease(ptr.To("pod-a/7"), ago(time.Second), ptr.To[int32](15)),
	}, now)
	if want := []string{"pod-a", "pod-b"}; !slices.Equal(got, want) {
		t.Errorf("ValidMembers = %q, want the pods of the valid Leases, sorted: %q", got, want)
	}
}
