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
// validity over, a Lease view the watch has not refreshed within the view bound (retry
// after a retry period), and admitted with a context that ends with validity or with
// the view bound, whichever comes first.
func TestEnterAdmitsOnlyAnOpenHoldingOfTheValidIncarnation(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		name       string
		held       bool
		st         holdingState
		holder     string        // the holding's incarnation
		validFor   time.Duration // from now; member incarnation is "pod/1"
		viewAge    time.Duration // since the watch last showed a renew (view bound 4s)
		neverShown bool          // the watch has shown no renew yet
		wantErr    error
		wantRetry  time.Duration
		wantAdmits bool
	}{
		{name: "not held", wantErr: multicluster.ErrClusterNotFound},
		{name: "claim pending", held: true, st: holdingClaiming, holder: "pod/1", validFor: time.Second, wantErr: errClaimPending, wantRetry: claimPendingRetry},
		{name: "released", held: true, st: holdingHandingOver, holder: "pod/1", validFor: time.Second, wantErr: multicluster.ErrClusterNotFound},
		{name: "held by an earlier incarnation", held: true, st: holdingOpen, holder: "pod/0", validFor: time.Second, wantErr: ErrValidityEnded},
		{name: "validity over", held: true, st: holdingOpen, holder: "pod/1", validFor: 0, wantErr: ErrValidityEnded},
		{name: "view stale", held: true, st: holdingOpen, holder: "pod/1", validFor: time.Second, viewAge: 4 * time.Second, wantErr: errViewStale, wantRetry: 400 * time.Millisecond},
		{name: "view never shown", held: true, st: holdingOpen, holder: "pod/1", validFor: time.Second, neverShown: true, wantErr: errViewStale, wantRetry: 400 * time.Millisecond},
		{name: "validity over and view stale", held: true, st: holdingOpen, holder: "pod/1", validFor: 0, viewAge: time.Hour, wantErr: ErrValidityEnded},
		{name: "admitted", held: true, st: holdingOpen, holder: "pod/1", validFor: time.Second, wantAdmits: true},
		{name: "admitted until the view bound", held: true, st: holdingOpen, holder: "pod/1", validFor: 2 * time.Second, viewAge: 3500 * time.Millisecond, wantAdmits: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(now)
			s := &Shard{clock: clk, t: Timings{RetryPeriod: 400 * time.Millisecond, ClaimDeadline: 8 * time.Second}, m: newMetrics(prometheus.NewRegistry()), holdings: map[string]*holding{}, opts: Options{}}
			s.member = &membership{clock: clk, holder: "pod/1", validUntil: now.Add(c.validFor)}
			if !c.neverShown {
				s.member.viewFresh = now.Add(-c.viewAge)
			}
			if c.held {
				hctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				s.holdings["p"] = &holding{project: "p", holder: c.holder, st: c.st, ctx: hctx, cancel: cancel}
			}
			rec := &records{}
			s.opts.Recorder = rec
			// Admits gives Enter's answer without admitting: nothing in flight, no record.
			if got := s.Admits("p"); got != c.wantAdmits {
				t.Fatalf("Admits = %t, want %t", got, c.wantAdmits)
			}
			if c.held && s.holdings["p"].inflight != 0 || len(*rec) != 0 {
				t.Fatalf("Admits left work behind: in flight %d, records %d", s.holdings["p"].inflight, len(*rec))
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
			// The context ends at the end of validity or of the view bound, whichever
			// is first (translated to the real clock).
			want := min(c.validFor, 4*time.Second-c.viewAge)
			deadline, ok := ctx.Deadline()
			if left := time.Until(deadline); !ok || left > want || left < want-time.Second {
				t.Fatalf("admitted context deadline in %s (set %v), want in %s", left, ok, want)
			}
			if got := s.holdings["p"].inflight; got != 1 {
				t.Fatalf("in flight = %d, want 1", got)
			}
		})
	}
}

// records keeps Records in memory.
type records []Record

func (r *records) Record(rec Record) { *r = append(*r, rec) }
