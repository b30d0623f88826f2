package shard

import "time"

// How long a renew may take.
//
// Every protocol call is bounded by CallTimeout, which stays below LeaseDuration -
// RenewDeadline so that a write of the protocol cannot land after the margin a successor
// waits for (docs/design.md, Residual windows). A renew is the one call that bound does
// not protect: it is conditional on the version this incarnation last wrote, so when it
// lands late it can only overwrite its own Lease (anyone else's write makes it
// conflict), and the validity it grants runs from when it was sent, so an answer that
// takes long grants less, never more. What a short bound costs instead is the
// membership itself: on a hub that answers writes later than CallTimeout but well
// within RenewDeadline (a busy etcd, an API server short of CPU), every renew is cut
// before its answer comes, each one commits unseen, and validity ends with the hub up.
//
// So a renew's allowance follows the hub: a renew that timed out is sent again at once
// with twice the time; one that was answered leaves the next twice what it took. The
// allowance never drops below CallTimeout (a healthy hub keeps today's fast failure
// detection) and never exceeds RenewDeadline; the call is also cut when validity ends.

// renewCall is what one renew's call told about the hub.
type renewCall struct {
	// took is how long the call lasted.
	took time.Duration
	// timedOut is set when the call ran out of its allowance without an answer.
	timedOut bool
}

// nextRenewAllowance is how long the renew after last may take, given the allowance
// last had: twice that allowance when last timed out, twice what last took when it
// was answered (whatever the answer), within [CallTimeout, RenewDeadline].
func nextRenewAllowance(allowed time.Duration, last renewCall, t Timings) time.Duration {
	next := 2 * last.took
	if last.timedOut {
		next = 2 * allowed
	}
	return min(max(next, t.CallTimeout), t.RenewDeadline)
}
