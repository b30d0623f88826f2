package shard

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// TestEnterCoordinatorAdmitsOnlyTheLeadingValidIncarnation walks EnterCoordinator's
// decisions: not leading, a term whose leadership ended, a term of an earlier
// incarnation, validity over, and admitted with a context that ends with validity and
// with leadership. CoordinatorHub and coordinatorRefusal give the same answer.
func TestEnterCoordinatorAdmitsOnlyTheLeadingValidIncarnation(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		name       string
		leading    bool
		ended      bool          // the term's leadership context is cancelled
		holder     string        // the term's incarnation
		validFor   time.Duration // from now; member incarnation is "pod/1"
		wantErr    []error
		wantAdmits bool
	}{
		{name: "not leading", wantErr: []error{ErrNotCoordinator}},
		{name: "leadership ended", leading: true, ended: true, holder: "pod/1", validFor: time.Second, wantErr: []error{ErrNotCoordinator}},
		{name: "elected as an earlier incarnation", leading: true, holder: "pod/0", validFor: time.Second, wantErr: []error{ErrNotCoordinator, ErrValidityEnded}},
		{name: "validity over", leading: true, holder: "pod/1", validFor: 0, wantErr: []error{ErrNotCoordinator, ErrValidityEnded}},
		{name: "admitted", leading: true, holder: "pod/1", validFor: time.Second, wantAdmits: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(now)
			s := &Shard{clock: clk, m: newMetrics(prometheus.NewRegistry()), holdings: map[string]*holding{}}
			s.member = &membership{clock: clk, holder: "pod/1", validUntil: now.Add(c.validFor)}
			hub := fake.NewClientBuilder().Build()
			s.SetHubClients(hub, hub)
			lctx, endLeadership := context.WithCancel(context.Background())
			defer endLeadership()
			if c.leading {
				defer s.lead(lctx, c.holder)()
			}
			if c.ended {
				endLeadership()
			}
			if _, _, err := s.coordinatorRefusal(); (err == nil) != c.wantAdmits {
				t.Fatalf("coordinatorRefusal = %v, want admitted %t", err, c.wantAdmits)
			}
			w, r, hubErr := s.CoordinatorHub(context.Background())
			ctx, release, err := s.EnterCoordinator(context.Background())
			if !c.wantAdmits {
				for _, want := range c.wantErr {
					if !errors.Is(err, want) || !errors.Is(hubErr, want) {
						t.Fatalf("EnterCoordinator err = %v, CoordinatorHub err = %v, want %v", err, hubErr, want)
					}
				}
				return
			}
			if err != nil || hubErr != nil {
				t.Fatalf("refused: %v, hub: %v", err, hubErr)
			}
			if w == nil || r == nil {
				t.Fatalf("no hub clients")
			}
			defer release()
			deadline, ok := ctx.Deadline()
			if !ok || deadline.After(time.Now().Add(c.validFor)) {
				t.Fatalf("admitted context deadline %v (set %v), want within the validity of %s", deadline, ok, c.validFor)
			}
			// Losing leadership ends admitted work at once.
			endLeadership()
			select {
			case <-ctx.Done():
			case <-time.After(5 * time.Second):
				t.Fatal("admitted context not cancelled when leadership ended")
			}
			if _, _, err := s.coordinatorRefusal(); err == nil {
				t.Fatal("still coordinating after leadership ended")
			}
		})
	}
}

// TestLeadershipClearedOnlyByItsOwnTerm: the end of an older term (its coordinate
// returning late) does not clear a newer term of a later incarnation.
func TestLeadershipClearedOnlyByItsOwnTerm(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(now)
	s := &Shard{clock: clk, m: newMetrics(prometheus.NewRegistry())}
	s.member = &membership{clock: clk, holder: "pod/2", validUntil: now.Add(time.Second)}
	endOld := s.lead(context.Background(), "pod/1")
	endNew := s.lead(context.Background(), "pod/2")
	endOld()
	if _, _, err := s.coordinatorRefusal(); err != nil {
		t.Fatal("the newer term was cleared by the older one's end")
	}
	endNew()
	if _, _, err := s.coordinatorRefusal(); err == nil {
		t.Fatal("coordinating after the term ended")
	}
}
