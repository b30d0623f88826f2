package shard

import (
	"fmt"
	"time"
)

// Timings are the sharding protocol's time knobs. Validate applies client-go's rules.
type Timings struct {
	// LeaseDuration: how long a member Lease may go unchanged before its member may be
	// declared expired, and a rejoin's wait.
	LeaseDuration time.Duration
	RenewDeadline time.Duration // the validity a renew grants from its send
	RetryPeriod   time.Duration // between renews and coordinator passes
	ClaimDeadline time.Duration // an assignment not claimed this long moves on
	// CallTimeout bounds protocol calls; below LeaseDuration - RenewDeadline.
	CallTimeout time.Duration
	// DrainDeadline bounds a hand-over's wait for in-flight work; past it the process exits.
	DrainDeadline    time.Duration
	ShutdownDeadline time.Duration // bounds a graceful stop
}

// NewTimings derives every timing from the three of client-go's leader election: the
// claim deadline 2 x leaseDuration, the call timeout half of leaseDuration -
// renewDeadline, the drain deadline 2 x renewDeadline, the shutdown deadline 4 x
// leaseDuration.
func NewTimings(leaseDuration, renewDeadline, retryPeriod time.Duration) Timings {
	return Timings{
		LeaseDuration: leaseDuration, RenewDeadline: renewDeadline, RetryPeriod: retryPeriod,
		ClaimDeadline: 2 * leaseDuration, CallTimeout: (leaseDuration - renewDeadline) / 2,
		DrainDeadline: 2 * renewDeadline, ShutdownDeadline: 4 * leaseDuration,
	}
}

// DefaultTimings returns client-go's defaults: 15s, 10s, 2s.
func DefaultTimings() Timings { return NewTimings(15*time.Second, 10*time.Second, 2*time.Second) }

// Validate rejects timings under which validity could outlive a takeover.
func (t Timings) Validate() error { return t.ValidateNaming(timingWords) }

// TimingNames say how ValidateNaming's errors name each timing (words, or flags).
type TimingNames struct {
	LeaseDuration, RenewDeadline, RetryPeriod, CallTimeout string
	ClaimDeadline, DrainDeadline, ShutdownDeadline         string
}

var timingWords = TimingNames{
	LeaseDuration: "lease duration", RenewDeadline: "renew deadline", RetryPeriod: "retry period",
	CallTimeout: "call timeout", ClaimDeadline: "claim deadline",
	DrainDeadline: "drain deadline", ShutdownDeadline: "shutdown deadline",
}

// ValidateNaming is Validate with the errors naming each timing as n says.
func (t Timings) ValidateNaming(n TimingNames) error {
	switch {
	case t.RetryPeriod <= 0:
		return fmt.Errorf("%s must be positive, got %s", n.RetryPeriod, t.RetryPeriod)
	case float64(t.RenewDeadline) <= 1.2*float64(t.RetryPeriod):
		return fmt.Errorf("%s (%s) must be greater than 1.2 x %s (%s)", n.RenewDeadline, t.RenewDeadline, n.RetryPeriod, t.RetryPeriod)
	case t.LeaseDuration <= t.RenewDeadline:
		return fmt.Errorf("%s (%s) must be greater than %s (%s)", n.LeaseDuration, t.LeaseDuration, n.RenewDeadline, t.RenewDeadline)
	case t.CallTimeout <= 0 || t.CallTimeout >= t.LeaseDuration-t.RenewDeadline:
		return fmt.Errorf("%s (%s) must be positive and below %s - %s (%s)", n.CallTimeout, t.CallTimeout, n.LeaseDuration, n.RenewDeadline, t.LeaseDuration-t.RenewDeadline)
	case t.ClaimDeadline <= 0:
		return fmt.Errorf("%s must be positive, got %s", n.ClaimDeadline, t.ClaimDeadline)
	case t.DrainDeadline <= 0 || t.ShutdownDeadline <= 0:
		return fmt.Errorf("%s (%s) and %s (%s) must be positive", n.DrainDeadline, t.DrainDeadline, n.ShutdownDeadline, t.ShutdownDeadline)
	}
	return nil
}
