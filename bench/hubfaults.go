package bench

import (
	"math/rand/v2"
	"net/http"
	"time"
)

// The hub-faults scenario: a randomized schedule of what a struggling hub and its
// operators do to a running shard, drawn from a seed so a failing run can be replayed
// (bin/bench --hub-faults-seed). Every replica reaches the hub through its own
// harness.FaultProxy; the hub API server process itself is killed and started again on
// its etcd.

// HubFaultKind names one fault of the schedule.
type HubFaultKind string

const (
	// FaultCoordinatorWatchStall: the coordinator's Lease watch stalls (open, silent)
	// and its reads of the other members' Leases fail with 503, as when the hub API
	// server it reaches hangs while the others' does not. The other members renew and
	// see their Leases all along; to the coordinator every one of them looks suspect
	// (finding 1).
	FaultCoordinatorWatchStall HubFaultKind = "coordinator-watch-stall"
	// FaultWatchStall: every replica's Lease watches stall, and the coordinator's reads
	// of the other members' Leases fail with 503, as while the only hub API server
	// hangs: the holders, blind to their own renews, pause (the stale-view rule) and the
	// coordinator moves nothing (finding 1).
	FaultWatchStall HubFaultKind = "watch-stall"
	// FaultErrorBurst: one replica's hub requests fail at a rate with 429, 500 or 503.
	FaultErrorBurst HubFaultKind = "error-burst"
	// FaultSlowHub: every replica's hub answers come back late.
	FaultSlowHub HubFaultKind = "slow-hub"
	// FaultMemberLeaseDeleted: a replica's member Lease deleted by hand (finding 3).
	FaultMemberLeaseDeleted HubFaultKind = "member-lease-deleted"
	// FaultProjectLeaseDeleted: a project Lease deleted by hand.
	FaultProjectLeaseDeleted HubFaultKind = "project-lease-deleted"
	// FaultProjectLeaseRecreated: a project Lease deleted and created again naming the
	// same holder, without its claim (a restore from a backup; finding 3).
	FaultProjectLeaseRecreated HubFaultKind = "project-lease-recreated"
	// FaultHubRestart: the hub API server process killed and started again, etcd kept.
	FaultHubRestart HubFaultKind = "hub-restart"
)

// hubFaultKinds is every kind, in a fixed order the schedule shuffles.
var hubFaultKinds = []HubFaultKind{FaultCoordinatorWatchStall, FaultWatchStall, FaultErrorBurst, FaultSlowHub, FaultMemberLeaseDeleted,
	FaultProjectLeaseDeleted, FaultProjectLeaseRecreated, FaultHubRestart}

// HubFaultStep is one fault of a schedule.
type HubFaultStep struct {
	// After is the wait since the previous step began.
	After time.Duration
	Kind  HubFaultKind
	// For is how long a fault that lasts (watch-stall, error-burst, slow-hub, and the
	// hub's down time of hub-restart) lasts.
	For time.Duration
	// Replica and Project pick the target among the running replicas and the projects
	// (taken modulo their count when the step runs).
	Replica, Project int
	// Status and Rate are an error burst's answer and share; Delay a slow hub's.
	Status int
	Rate   float64
	Delay  time.Duration
}

// HubFaultSchedule draws steps faults from seed for replicas whose Lease lasts lease:
// the first len(hubFaultKinds) steps are every kind once, in a drawn order, so even a
// short schedule covers them all; later steps draw their kind freely. Steps begin one
// to two Lease durations apart; a watch stall lasts three Lease durations (long enough
// for every member to turn suspect), a burst or a slow spell one to two.
func HubFaultSchedule(seed uint64, steps int, lease time.Duration) []HubFaultStep {
	rng := rand.New(rand.NewPCG(seed, seed^0x5851f42d4c957f2d))
	order := append([]HubFaultKind(nil), hubFaultKinds...)
	rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	between := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(rng.Int64N(int64(hi-lo)+1)) }
	out := make([]HubFaultStep, 0, steps)
	for i := range steps {
		kind := hubFaultKinds[rng.IntN(len(hubFaultKinds))]
		if i < len(order) {
			kind = order[i]
		}
		s := HubFaultStep{After: between(lease, 2*lease), Kind: kind, Replica: rng.IntN(3), Project: rng.IntN(1 << 16)}
		if i == 0 {
			s.After = 0
		}
		switch kind {
		case FaultCoordinatorWatchStall, FaultWatchStall:
			s.For = 3 * lease
		case FaultErrorBurst:
			s.For = between(lease, 2*lease)
			s.Status = []int{http.StatusTooManyRequests, http.StatusInternalServerError, http.StatusServiceUnavailable}[rng.IntN(3)]
			s.Rate = 0.2 + 0.6*rng.Float64()
		case FaultSlowHub:
			s.For = between(lease, 2*lease)
			s.Delay = between(50*time.Millisecond, 300*time.Millisecond)
		case FaultHubRestart:
			s.For = between(500*time.Millisecond, 2*time.Second)
		}
		out = append(out, s)
	}
	return out
}

// HubFaultSteps is how many faults a hub-faults run draws: every kind once in the smoke
// run, twice as many in the full run.
func HubFaultSteps(smoke bool) int {
	if smoke {
		return len(hubFaultKinds)
	}
	return 2 * len(hubFaultKinds)
}

// stalls reports whether kind stalls a Lease watch.
func stalls(kind string) bool {
	return kind == string(FaultCoordinatorWatchStall) || kind == string(FaultWatchStall)
}

// StalledViewHandOvers are the premature failure hand-overs that a Lease watch stall
// explains and nothing else does: each began while a stall lasted or within a Lease
// duration after it, and no other fault of the schedule had cut its replica (or its
// project) off. A stalled view is no evidence that a member failed (finding 1), so with
// the rule in place there are none; with it reverted, the coordinator moves the projects
// of members that renewed all along. The faults that do explain a hand-over, until
// explainedFor after they end: an error burst on the replica, its member Lease deleted,
// its project's Lease deleted or re-created, and a hub restart (any replica; it ends
// when the restarted API server is ready, not when the planned down time does).
func StalledViewHandOvers(premature []PrematureHandOver, faults []Fault, lease time.Duration) []PrematureHandOver {
	within := func(t, from, to time.Time) bool { return !t.Before(from) && !t.After(to) }
	explains := func(f Fault, t time.Time) bool { return within(t, f.At, f.At.Add(f.For+explainedFor(lease))) }
	explained := func(p PrematureHandOver) bool {
		for _, f := range faults {
			switch HubFaultKind(f.Kind) {
			case FaultErrorBurst, FaultMemberLeaseDeleted:
				if f.Replica == p.Replica && explains(f, p.At) {
					return true
				}
			case FaultProjectLeaseDeleted, FaultProjectLeaseRecreated:
				if p.Project != "" && f.Project == p.Project && explains(f, p.At) {
					return true
				}
			case FaultHubRestart:
				if explains(f, p.At) {
					return true
				}
			}
		}
		return false
	}
	var out []PrematureHandOver
	for _, p := range premature {
		for _, f := range faults {
			if stalls(f.Kind) && within(p.At, f.At, f.At.Add(f.For+lease)) {
				if !explained(p) {
					out = append(out, p)
				}
				break
			}
		}
	}
	return out
}

// explainedFor is how long after a fault ends a failure hand-over may still be its
// doing: a hub that restarts takes seconds to answer again, the memberships that lapsed
// meanwhile wait a Lease duration for their old incarnations' Leases to go unchanged,
// rejoin, and the coordinator (elected again, perhaps) gives their projects to the new
// incarnations at its next pass; in the bench's hub-faults runs all of that took up to
// 3.6 Lease durations after the planned down time (the restarted API server's own
// start-up included).
func explainedFor(lease time.Duration) time.Duration { return 4 * lease }
