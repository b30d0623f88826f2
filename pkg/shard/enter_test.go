package shard

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
)

// TestEnterAdmitsOnlyAnOpenHoldingOfTheValidIncarnation walks Enter's decisions: not
// held, claim pending (retry after a short fixed delay), released, another incarnation,
// validity over, and admitted with a context that ends with validity.
func TestEnterAdmitsOnlyAnOpenHoldingOfTheValidIncarnation(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		name       string
		held       bool
		st         holdingState
		holder     string        // the holding's incarnation
		validFor   time.Duration // from now; member incarnation is "pod/1"
		wantErr    error
		wantRetry  time.Duration
		wantAdmits bool
	}{
		{name: "not held", wantErr: multicluster.ErrClusterNotFound},
		{name: "claim pending", held: true, st: holdingClaiming, holder: "pod/1", validFor: time.Second, wantErr: errClaimPending, wantRetry: claimPendingRetry},
		{name: "released", held: true, st: holdingHandingOver, holder: "pod/1", validFor: time.Second, wantErr: multicluster.ErrClusterNotFound},
		{name: "held by an earlier incarnation", held: true, st: holdingOpen, holder: "pod/0", validFor: time.Second, wantErr: ErrValidityEnded},
		{name: "validity over", held: true, st: holdingOpen, holder: "pod/1", validFor: 0, wantErr: ErrValidityEnded},
		{name: "admitted", held: true, st: holdingOpen, holder: "pod/1", validFor: time.Second, wantAdmits: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(now)
			s := &Shard{clock: clk, m: newMetrics(prometheus.NewRegistry()), holdings: map[string]*holding{}, opts: Options{}}
			s.member = &membership{clock: clk, holder: "pod/1", validUntil: now.Add(c.validFor)}
			if c.held {
				hctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				s.holdings["p"] = &holding{project: "p", holder: c.holder, st: c.st, ctx: hctx, cancel: cancel}
			}
			rec := &MemoryRecorder{}
			s.opts.Recorder = rec
			// Admits gives Enter's answer without admitting: nothing in flight, no record.
			if got := s.Admits("p"); got != c.wantAdmits {
				t.Fatalf("Admits = %t, want %t", got, c.wantAdmits)
			}
			if c.held && s.holdings["p"].inflight != 0 || len(rec.Records()) != 0 {
				t.Fatalf("Admits left work behind: in flight %d, records %d", s.holdings["p"].inflight, len(rec.Records()))
			}
			ctx, release, err := s.Enter(context.Background(), "p")
			if !c.wantAdmits {
				if !errors.Is(err, c.wantErr) {
					t.Fatalf("err = %v, want %v", err, c.wantErr)
				}
				var retry interface{ RetryAfter() time.Duration }
				gotRetry := time.Duration(0)
				if errors.As(err, &retry) {
					gotRetry = retry.RetryAfter()
				}
				if gotRetry != c.wantRetry {
					t.Fatalf("retry after %s, want %s", gotRetry, c.wantRetry)
				}
				return
			}
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			defer release()
			deadline, ok := ctx.Deadline()
			if !ok || deadline.After(time.Now().Add(c.validFor)) {
				t.Fatalf("admitted context deadline %v (set %v), want within the validity of %s", deadline, ok, c.validFor)
			}
			if got := s.holdings["p"].inflight; got != 1 {
				t.Fatalf("in flight = %d, want 1", got)
			}
		})
	}
}
