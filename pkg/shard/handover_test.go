package shard

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

// TestHandOverWriteRetriedAfterItFailedForGood: a hand-over whose write of the next
// holder ended without a definite answer (the write conflicted and the re-read failed)
// leaves a Lease that names the old owner and asks for a next holder. The old owner
// closed admission for good and dropped its holding, so only its write moves the project:
// it writes the next holder again, once per retry period, and never reopens the project.
// A hand-over remembered of an earlier Lease (created again since: another UID) does not
// stand in the way of this Lease's request.
func TestHandOverWriteRetriedAfterItFailedForGood(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: ProjectLeaseName("p"), Namespace: "ns", ResourceVersion: "7", UID: "lease-1",
			Labels: map[string]string{LabelRole: roleProject},
			Annotations: map[string]string{AnnotationProject: "p", AnnotationClaim: ClaimValue("a/1", "e1"),
				AnnotationNextHolder: "b/1"}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("a/1"), LeaseTransitions: ptr.To(int32(3))},
	}
	cases := []struct {
		name string
		// handedOff is what the old owner remembers of the hand-over it began.
		handedOff handOff
		wantNext  string // the holder the Lease names after the sync
	}{
		{name: "the write failed for good: written again", handedOff: handOff{holder: "a/1", lease: "lease-1", transitions: 3}, wantNext: "b/1"},
		{name: "nothing begun here: the hand-over starts", wantNext: "b/1"},
		{name: "a hand-over remembered of an earlier Lease (created again since): this one is handed over afresh", handedOff: handOff{holder: "a/1", lease: types.UID("lease-0"), transitions: 3}, wantNext: "b/1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(now)
			cs := fake.NewSimpleClientset(lease.DeepCopy())
			s := &Shard{clock: clk, t: Timings{CallTimeout: time.Second, RetryPeriod: 400 * time.Millisecond, DrainDeadline: time.Second},
				log: logr.Discard(), m: newMetrics(prometheus.NewRegistry()), cs: cs, opts: Options{Namespace: "ns", Exit: func() {}},
				observer: newLeaseObserver(clk, time.Second, 400*time.Millisecond), events: record.NewFakeRecorder(10),
				holdings: map[string]*holding{}, handedOff: map[string]handOff{}, handOverStarts: map[string]time.Time{},
				undiscovered: map[string]time.Time{}, found: map[string]discovered{"secret-p": {project: "p", gen: 1}}}
			s.member = &membership{clock: clk, t: s.t, holder: "a/1", validUntil: now.Add(time.Hour)}
			s.observer.observe(lease.DeepCopy(), true)
			s.observer.synced = true
			if c.handedOff.holder != "" {
				s.handedOff["p"] = c.handedOff
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			s.syncHoldings(ctx)
			deadline := time.Now().Add(5 * time.Second)
			for {
				got, err := cs.CoordinationV1().Leases("ns").Get(ctx, lease.Name, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if h := ptr.Deref(got.Spec.HolderIdentity, ""); h == c.wantNext {
					if got.Annotations[AnnotationNextHolder] != "" || got.Annotations[AnnotationClaim] != "" {
						t.Fatalf("Lease handed to %s still carries %v", h, got.Annotations)
					}
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("Lease still names %q with next holder %q, want it handed to %s", ptr.Deref(got.Spec.HolderIdentity, ""), got.Annotations[AnnotationNextHolder], c.wantNext)
				}
				time.Sleep(10 * time.Millisecond)
			}
			s.mu.Lock()
			h := s.holdings["p"]
			s.mu.Unlock()
			if h != nil && h.state() == holdingOpen {
				t.Fatal("the old owner reopened the project it was handing over")
			}
		})
	}
}
