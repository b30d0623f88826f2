package shard

import "time"

// renewCall is what one renew's call told about the hub.
type renewCall struct {
	took     time.Duration
	timedOut bool // ran out of its allowance without an answer
}

// nextRenewAllowance is how long the renew after last may take, given the allowance
// last had: twice that allowance when last timed out, twice what last took when it
// was answered (whatever the answer), within [CallTimeout, RenewDeadline]. A renew is
// the one protocol call allowed more than CallTimeout (docs/design.md, Membership and
// validity).
func nextRenewAllowance(allowed time.Duration, last renewCall, t Timings) time.Duration {
	next := 2 * last.took
	if last.timedOut {
		next = 2 * allowed
	}
	return min(max(next, t.CallTimeout), t.RenewDeadline)
}
