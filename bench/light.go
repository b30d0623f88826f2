package bench

import (
	"context"
	"fmt"
	"time"

	"anchorage/internal/harness"
)

// LightOptions configure an ownership-only run over lightweight projects.
type LightOptions struct {
	Coordinator Coordinator
	Projects    int
	Replicas    int
	// Window is the steady-state time over which Lease writes are counted.
	Window time.Duration
	// OwnedWithin bounds the wait for every project to have an owner first.
	OwnedWithin time.Duration
}

// RunLight measures Lease writes at steady state and peak RSS: P lightweight projects
// (P kubeconfig Secrets naming one shared project plane, Env.Light, which never holds
// an HTTPProxy; the resync is off) shared by R replicas.
func (e *Env) RunLight(ctx context.Context, bins Binaries, o LightOptions, logf func(string, ...any)) (LeaseLoad, Memory, error) {
	run, err := e.NewRun(ctx, fmt.Sprintf("light-%s-p%d-r%d", o.Coordinator, o.Projects, o.Replicas))
	if err != nil {
		return LeaseLoad{}, Memory{}, err
	}
	defer run.Close(context.Background())
	var replicas []*Replica
	defer func() { killAll(replicas) }()
	users := map[string]string{}
	joined := markAudit(e.Hub.AuditLogPath)
	for i := 0; i < o.Replicas; i++ {
		r, err := run.StartReplica(bins, o.Coordinator, fmt.Sprintf("%s-%d", run.ID, i), ReplicaOptions{NoResync: true})
		if err != nil {
			return LeaseLoad{}, Memory{}, err
		}
		replicas = append(replicas, r)
		users[r.User] = r.Name
	}
	// The projects appear once every replica has joined: peak RSS then measures a
	// replica's share, not a cold start in which the first replica up holds them all
	// until the others join.
	if err := waitJoined(ctx, joined, users); err != nil {
		return LeaseLoad{}, Memory{}, err
	}
	sleepCtx(ctx, harness.FastTimings.LeaseDuration)
	var names []string
	for i := 0; i < o.Projects; i++ {
		name := fmt.Sprintf("%s-l%d", run.ID, i)
		if err := run.AddLightweightProject(ctx, name); err != nil {
			return LeaseLoad{}, Memory{}, err
		}
		names = append(names, name)
	}
	obs := NewObserver(run, o.Coordinator, names)
	obsCtx, stopObs := context.WithCancel(ctx)
	defer stopObs()
	go obs.Run(obsCtx, time.Second, false)

	began := time.Now()
	for obs.OwnedCount(nil) < o.Projects && time.Since(began) < o.OwnedWithin && sleepCtx(ctx, 500*time.Millisecond) {
	}
	owned := obs.OwnedCount(nil)
	logf("  %s P=%d R=%d: %d/%d projects owned after %s", o.Coordinator, o.Projects, o.Replicas, owned, o.Projects, time.Since(began).Round(100*time.Millisecond))
	// Let the claims' own writes pass before the window opens.
	sleepCtx(ctx, 2*harness.FastTimings.LeaseDuration)
	cursor := markAudit(e.Hub.AuditLogPath)
	from := time.Now()
	if !sleepCtx(ctx, o.Window) {
		return LeaseLoad{}, Memory{}, ctx.Err()
	}
	to := time.Now()
	events, err := cursor.read()
	if err != nil {
		return LeaseLoad{}, Memory{}, err
	}
	writes := 0
	for _, ev := range events {
		if _, ok := users[ev.User.Username]; ok && ev.ObjectRef.Resource == "leases" && isWrite(ev) &&
			!ev.RequestReceivedTimestamp.Before(from) && ev.RequestReceivedTimestamp.Before(to) {
			writes++
		}
	}
	ll := LeaseLoad{Coordinator: o.Coordinator, Projects: o.Projects, Replicas: o.Replicas, Unowned: o.Projects - owned, Window: to.Sub(from), Writes: writes,
		PerSecond: float64(writes) / to.Sub(from).Seconds()}
	mem := Memory{Coordinator: o.Coordinator, Projects: o.Projects, Replicas: o.Replicas}
	for _, r := range replicas {
		mem.PeakRSS = append(mem.PeakRSS, r.PeakRSS())
	}
	logf("  %s P=%d R=%d: %.1f Lease writes/s, peak RSS %v MB", o.Coordinator, o.Projects, o.Replicas, ll.PerSecond, mb(mem.PeakRSS))
	if owned < o.Projects {
		return ll, mem, fmt.Errorf("%s P=%d R=%d: only %d projects owned", o.Coordinator, o.Projects, o.Replicas, owned)
	}
	return ll, mem, nil
}

// joinWithin bounds the wait for every replica's first Lease write.
const joinWithin = time.Minute

// waitJoined waits until every replica (by hub user) has written a Lease since the
// mark: its member Lease (anchorage) or its peer Lease (coordinator/sharded).
func waitJoined(ctx context.Context, since auditCursor, users map[string]string) error {
	began := time.Now()
	for {
		events, err := since.read()
		if err != nil {
			return err
		}
		wrote := map[string]bool{}
		for _, ev := range events {
			if _, ok := users[ev.User.Username]; ok && ev.ObjectRef.Resource == "leases" && isWrite(ev) {
				wrote[ev.User.Username] = true
			}
		}
		if len(wrote) == len(users) {
			return nil
		}
		if time.Since(began) > joinWithin {
			return fmt.Errorf("only %d of %d replicas wrote a Lease within %s", len(wrote), len(users), joinWithin)
		}
		if !sleepCtx(ctx, 250*time.Millisecond) {
			return ctx.Err()
		}
	}
}

func mb(bs []uint64) []int {
	out := make([]int, len(bs))
	for i, b := range bs {
		out[i] = int(b >> 20)
	}
	return out
}

// sleepCtx sleeps for d and reports whether ctx is still live.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// killAll kills the replicas still running and closes their fault proxies.
func killAll(replicas []*Replica) {
	for _, r := range replicas {
		if r.Running() {
			_ = r.Kill()
		}
		r.CloseProxy()
	}
}
