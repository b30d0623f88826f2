package shard

import "time"

// renewCall is what one renew's call told about the hub.
type renewCall struct {
	took     time.Duration
	timedOut bool // ran out of its allowance without an answer
}

// nextRenewAllowance is how long the renew after last may take: twice last's allowance
// after a timeout, else twice what it took, within [CallTimeout, RenewDeadline].
func nextRenewAllowance(allowed time.Duration, last renewCall, t Timings) time.Duration {
	next := 2 * last.took
	if last.timedOut {
		next = 2 * allowed
	}
	return min(max(next, t.CallTimeout), t.RenewDeadline)
}
