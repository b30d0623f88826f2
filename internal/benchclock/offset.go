// Package benchclock is a clock set off from the local one by a fixed amount, for the
// bench harness's skew scenario: the manager with bench/mutants/skew.patch (applied by
// hack/mutant.sh to a scratch copy) runs every clock of its own on it, as a replica on a
// machine whose clock is wrong would. libfaketime cannot do this: it does not reach a
// static Go binary. Only that build imports this package, so no shipped binary has it.
package benchclock

import (
	"fmt"
	"time"

	"k8s.io/utils/clock"
)

// EnvOffset names the environment variable the skew build reads its offset from, a
// Go duration such as "60s" or "-60s".
const EnvOffset = "ANCHORAGE_BENCH_CLOCK_OFFSET"

// Offset is the local clock moved by By. Timers, tickers and sleeps wait for real
// durations, which an offset does not change; only the times Now returns, and so every
// comparison with a time from elsewhere (a Lease's renew time, the hub's Date header),
// are off. Times from Now keep Go's monotonic reading, so durations between two of them
// are exact, as on a machine whose clock is set wrong but runs at the right rate.
type Offset struct {
	clock.RealClock
	By time.Duration
}

var _ clock.WithTicker = Offset{}

// Now is the local time plus the offset.
func (o Offset) Now() time.Time { return time.Now().Add(o.By) }

// Since is the time elapsed since t on this clock.
func (o Offset) Since(t time.Time) time.Duration { return o.Now().Sub(t) }

// FromEnv returns the offset clock that getenv(EnvOffset) asks for, or nil when the
// variable is unset or empty (the real clock stays).
func FromEnv(getenv func(string) string) (clock.WithTicker, error) {
	v := getenv(EnvOffset)
	if v == "" {
		return nil, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return nil, fmt.Errorf("%s=%q: %w", EnvOffset, v, err)
	}
	return Offset{By: d}, nil
}
