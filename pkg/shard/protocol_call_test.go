package shard

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

// TestCoordinatorWritesStopAtTheEndOfValidity: each of the coordinator's writes checks
// the coordinator's own validity when it is sent, so a coordinator paused in the middle
// of a pass sends nothing more of it once its validity has ended, and another
// incarnation's writes are refused.
func TestCoordinatorWritesStopAtTheEndOfValidity(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	project := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: ProjectLeaseName("p"), Namespace: "ns", ResourceVersion: "1",
			Labels: map[string]string{LabelRole: roleProject}, Annotations: map[string]string{AnnotationProject: "p"}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("b/1")},
	}
	member := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: MemberLeaseName("b"), Namespace: "ns", ResourceVersion: "4", Labels: map[string]string{LabelRole: RoleMember}},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To("b/1")},
	}
	writes := map[string]func(s *Shard, coordinator string) bool{
		"assign": func(s *Shard, c string) bool {
			return s.assign(context.Background(), c, "p", Observed{Lease: project}, true, "a/1", "orphaned")
		},
		"request a hand-over": func(s *Shard, c string) bool {
			return s.requestHandOver(context.Background(), c, "p", Observed{Lease: project}, "a/1", "rebalance")
		},
		"delete a removed project's Lease": func(s *Shard, c string) bool {
			return s.removeProjectLease(context.Background(), c, Observed{Lease: project})
		},
		"declare a member expired": func(s *Shard, c string) bool {
			return s.confirmExpired(context.Background(), Observed{Lease: member}, c)
		},
	}
	cases := []struct {
		name        string
		coordinator string
		validFor    time.Duration
		want        bool
	}{
		{"valid", "c/1", time.Second, true},
		{"validity ended", "c/1", 0, false},
		{"an earlier incarnation", "c/0", time.Second, false},
	}
	for write, do := range writes {
		for _, tc := range cases {
			t.Run(write+", "+tc.name, func(t *testing.T) {
				clk := clocktesting.NewFakeClock(now)
				cs := fake.NewSimpleClientset(project.DeepCopy(), member.DeepCopy())
				s := &Shard{clock: clk, t: Timings{CallTimeout: time.Second}, log: logr.Discard(), m: newMetrics(prometheus.NewRegistry()),
					cs: cs, opts: Options{Namespace: "ns"}, observer: newLeaseObserver(clk, time.Second, 400*time.Millisecond), events: record.NewFakeRecorder(10)}
				s.member = &membership{clock: clk, t: s.t, holder: "c/1", validUntil: now.Add(tc.validFor)}
				before := len(cs.Actions())
				if got := do(s, tc.coordinator); got != tc.want {
					t.Errorf("wrote = %v, want %v", got, tc.want)
				}
				if sent := len(cs.Actions()) - before; (sent > 0) != tc.want {
					t.Errorf("%d calls sent, want some: %v", sent, tc.want)
				}
			})
		}
	}
}

// TestProtocolEventsEndWithValidity: a coordinator write whose answer arrives after the
// coordinator's validity ended (sent in time, committed, but slow) records no Event:
// other replicas may have written the Lease since, and they report their own writes.
func TestProtocolEventsEndWithValidity(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	project := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: ProjectLeaseName("p"), Namespace: "ns", ResourceVersion: "1",
			Labels: map[string]string{LabelRole: roleProject}, Annotations: map[string]string{AnnotationProject: "p", AnnotationClaim: ClaimValue("b/1", "e")}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("b/1")},
	}
	member := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: MemberLeaseName("b"), Namespace: "ns", ResourceVersion: "4", Labels: map[string]string{LabelRole: RoleMember}},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To("b/1")},
	}
	writes := map[string]func(s *Shard) bool{
		"assign": func(s *Shard) bool {
			return s.assign(context.Background(), "c/1", "p", Observed{Lease: project}, true, "a/1", "orphaned")
		},
		"request a hand-over": func(s *Shard) bool {
			return s.requestHandOver(context.Background(), "c/1", "p", Observed{Lease: project}, "a/1", "rebalance")
		},
		"declare a member expired": func(s *Shard) bool {
			return s.confirmExpired(context.Background(), Observed{Lease: member}, "c/1")
		},
	}
	for write, do := range writes {
		for _, slow := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s, answer after validity %t", write, slow), func(t *testing.T) {
				clk := clocktesting.NewFakeClock(now)
				cs := fake.NewSimpleClientset(project.DeepCopy(), member.DeepCopy())
				if slow {
					cs.PrependReactor("update", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
						clk.Step(2 * time.Second) // the write commits; its answer comes after validity
						return false, nil, nil
					})
				}
				rec := record.NewFakeRecorder(10)
				s := &Shard{clock: clk, t: Timings{CallTimeout: time.Second, LeaseDuration: time.Second}, log: logr.Discard(), m: newMetrics(prometheus.NewRegistry()),
					cs: cs, opts: Options{Namespace: "ns"}, observer: newLeaseObserver(clk, time.Second, 400*time.Millisecond), events: rec}
				s.member = &membership{clock: clk, t: s.t, holder: "c/1", validUntil: now.Add(time.Second)}
				if !do(s) {
					t.Fatal("the write was not sent")
				}
				if got, want := len(rec.Events), map[bool]int{false: 1, true: 0}[slow]; got != want {
					t.Fatalf("%d Events recorded, want %d", got, want)
				}
			})
		}
	}
}
