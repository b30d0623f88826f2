package shard

import (
	"cmp"
	"fmt"
	"time"
)

// Timings are the sharding protocol's time knobs. Validate applies client-go's rules.
type Timings struct {
	// LeaseDuration: how long a member Lease may go unchanged before its member may be
	// declared expired, and a rejoin's wait. Default 15s.
	LeaseDuration time.Duration
	RenewDeadline time.Duration // the validity a renew grants from its send; default 10s
	RetryPeriod   time.Duration // between renews and coordinator passes; default 2s
	ClaimDeadline time.Duration // an assignment not claimed this long moves on; default 2 x LeaseDuration
	// CallTimeout bounds protocol calls; below LeaseDuration - RenewDeadline, default half.
	CallTimeout time.Duration
	// DrainDeadline bounds a hand-over's wait for in-flight work; past it the process
	// exits. Default 2 x RenewDeadline.
	DrainDeadline    time.Duration
	ShutdownDeadline time.Duration // bounds a graceful stop; default 4 x LeaseDuration
}

// DefaultTimings returns client-go's defaults.
func DefaultTimings() Timings {
	return Timings{LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second}
}

// WithDefaults fills zero fields.
func (t Timings) WithDefaults() Timings {
	d := DefaultTimings()
	t.LeaseDuration = cmp.Or(t.LeaseDuration, d.LeaseDuration)
	t.RenewDeadline = cmp.Or(t.RenewDeadline, d.RenewDeadline)
	t.RetryPeriod = cmp.Or(t.RetryPeriod, d.RetryPeriod)
	t.ClaimDeadline = cmp.Or(t.ClaimDeadline, 2*t.LeaseDuration)
	t.CallTimeout = cmp.Or(t.CallTimeout, (t.LeaseDuration-t.RenewDeadline)/2)
	t.DrainDeadline = cmp.Or(t.DrainDeadline, 2*t.RenewDeadline)
	t.ShutdownDeadline = cmp.Or(t.ShutdownDeadline, 4*t.LeaseDuration)
	return t
}

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
