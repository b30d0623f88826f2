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
