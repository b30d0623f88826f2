package shard

import (
	"testing"
	"time"
)

func TestNextRenewAllowance(t *testing.T) {
	tm := Timings{LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second, CallTimeout: 2500 * time.Millisecond}
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	for _, tc := range []struct {
		name    string
		allowed time.Duration
		last    renewCall
		want    time.Duration
	}{
		{"a fast answer keeps the call timeout", ms(2500), renewCall{took: ms(20)}, ms(2500)},
		{"a slow answer leaves twice what it took", ms(2500), renewCall{took: ms(1800)}, ms(3600)},
		{"a fast answer after slow ones brings the allowance back down", ms(7200), renewCall{took: ms(30)}, ms(2500)},
		{"a timeout doubles the allowance", ms(2500), renewCall{took: ms(2500), timedOut: true}, ms(5000)},
		{"doubling stops at the renew deadline", ms(5000), renewCall{took: ms(5000), timedOut: true}, ms(10000)},
		{"a slow answer past half the renew deadline is capped too", ms(10000), renewCall{took: ms(6000)}, ms(10000)},
		{"an error answered at once (a 503) keeps the call timeout", ms(5000), renewCall{took: ms(3)}, ms(2500)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := nextRenewAllowance(tc.allowed, tc.last, tm); got != tc.want {
				t.Errorf("nextRenewAllowance(%s, %+v) = %s, want %s", tc.allowed, tc.last, got, tc.want)
			}
		})
	}
}

// TestCloseToLapse: after a conflict the next renew goes at once when validity ends
// before a renew sent a retry period from now could use its whole allowance; the
// allowance is the renew's current one, so on a slow hub (a longer allowance) that
// happens earlier.
func TestCloseToLapse(t *testing.T) {
	now := time.Unix(1000, 0)
	for _, tc := range []struct {
		name    string
		left    time.Duration
		allowed time.Duration
		want    bool
	}{
		{"plenty left", 10 * time.Second, 2500 * time.Millisecond, false},
		{"less than retry + allowance", 4 * time.Second, 2500 * time.Millisecond, true},
		{"exactly retry + allowance", 4500 * time.Millisecond, 2500 * time.Millisecond, false},
		{"a longer allowance on a slow hub", 10 * time.Second, 10 * time.Second, true},
		{"already ended", 0, 2500 * time.Millisecond, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := closeToLapse(now.Add(tc.left), now, 2*time.Second, tc.allowed); got != tc.want {
				t.Errorf("closeToLapse(%s left, retry 2s, allowed %s) = %v, want %v", tc.left, tc.allowed, got, tc.want)
			}
		})
	}
}
