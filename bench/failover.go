package bench

import (
	"context"
	"fmt"
	"sort"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"anchorage/internal/harness"
	"anchorage/pkg/shard"
)

// FailoverOptions configure a failure hand-over of many lightweight projects on a slow hub.
type FailoverOptions struct {
	Coordinator Coordinator
	Projects    int
	Replicas    int
	// HubDelay delays every hub answer to every replica (each behind its own fault
	// proxy) from the replicas' start, so convergence and hand-over both run on it.
	HubDelay time.Duration
	// OwnedWithin bounds the wait for every project to be owned before the kill;
	// TakenWithin the wait for the victim's projects to be owned by another replica.
	OwnedWithin, TakenWithin time.Duration
	// Sample is the Observer's period: a measured time overstates by up to one period.
	Sample time.Duration
	// Timings replace harness.FastTimings when set (a diagnostic run; the bound follows).
	Timings *shard.Timings
}

// Failover1000 is issue 19's run: the Lease-write runs' 1,000 light projects, 3 replicas,
// every hub answer delayed 200 ms. Convergence takes minutes there: each replica's
// kubeconfig provider takes one delayed hub round trip per Secret (about 5 a second).
var Failover1000 = FailoverOptions{Projects: 1000, Replicas: 3, HubDelay: 200 * time.Millisecond,
	OwnedWithin: 6 * time.Minute, TakenWithin: 2 * time.Minute, Sample: 250 * time.Millisecond}

// RunFailover starts the replicas behind delaying proxies, waits until every project is
// owned, SIGKILLs a replica that holds projects and is not anchorage's coordinator, and
// measures per victim project the time from the kill until a live replica owns it: its
// project Lease claimed (anchorage) or its fence Lease held unexpired (the baseline).
// Light projects carry no load, so ownership, not a reconcile, is the measure.
func (e *Env) RunFailover(ctx context.Context, bins Binaries, o FailoverOptions, logf func(string, ...any)) (Failover, error) {
	timings := harness.FastTimings
	if o.Timings != nil {
		timings = *o.Timings
	}
	f := Failover{Coordinator: o.Coordinator, Projects: o.Projects, Replicas: o.Replicas, HubDelay: o.HubDelay,
		Sample: o.Sample, Bound: FailureBound(timings), LeaseDuration: timings.LeaseDuration}
	if o.Timings != nil && o.Timings.CallTimeout != harness.FastTimings.CallTimeout && o.Timings.LeaseDuration == harness.FastTimings.LeaseDuration {
		f.CallTimeout = o.Timings.CallTimeout
	}
	run, err := e.NewRun(ctx, fmt.Sprintf("failover-%s-p%d", o.Coordinator, o.Projects))
	if err != nil {
		return f, err
	}
	defer run.Close(context.Background())
	var replicas []*Replica
	defer func() { killAll(replicas) }()
	users := map[string]string{}
	joined := markAudit(e.Hub.AuditLogPath)
	for i := 0; i < o.Replicas; i++ {
		r, err := run.StartReplica(bins, o.Coordinator, fmt.Sprintf("%s-%d", run.ID, i), ReplicaOptions{NoResync: true, HubFaults: true, Timings: o.Timings})
		if err != nil {
			return f, err
		}
		r.Proxy.AddRules(harness.FaultRule{Rate: 1, Delay: o.HubDelay})
		replicas = append(replicas, r)
		users[r.User] = r.Name
	}
	// As in RunLight, the projects appear once every replica has joined, so the shares
	// are even and the victim holds about a third.
	if err := waitJoined(ctx, joined, users); err != nil {
		return f, err
	}
	var names []string
	for i := 0; i < o.Projects; i++ {
		name := fmt.Sprintf("%s-l%d", run.ID, i)
		if err := run.AddLightweightProject(ctx, name); err != nil {
			return f, err
		}
		names = append(names, name)
	}
	obs := NewObserver(run, o.Coordinator, names)
	obsCtx, stopObs := context.WithCancel(ctx)
	defer stopObs()
	go obs.Run(obsCtx, o.Sample, false)

	alive := map[string]bool{}
	for _, r := range replicas {
		alive[r.Name] = true
	}
	began := time.Now()
	for obs.OwnedCount(alive) < o.Projects && time.Since(began) < o.OwnedWithin && sleepCtx(ctx, 500*time.Millisecond) {
	}
	f.OwnedAfter = time.Since(began)
	if n := obs.OwnedCount(alive); n < o.Projects {
		return f, fmt.Errorf("failover %s: only %d of %d projects owned after %s", o.Coordinator, n, o.Projects, o.OwnedWithin)
	}
	logf("  %s: %d projects owned after %.1f s (every hub answer +%s)", o.Coordinator, o.Projects, f.OwnedAfter.Seconds(), o.HubDelay)
	// Let the last claims settle so the victim's share is stable at the kill; projects
	// that change owner meanwhile mean the run was not steady when the victim died.
	before := obs.latest()
	sleepCtx(ctx, timings.LeaseDuration)
	f.MovedBeforeKill = movedOwners(before, obs.latest())
	if f.MovedBeforeKill > 0 {
		logf("  %s: %d projects changed owner in the %s before the kill", o.Coordinator, f.MovedBeforeKill, timings.LeaseDuration)
	}
	victim := failoverVictim(replicas, coordinatorOf(ctx, run, o.Coordinator), obs)
	if victim == nil {
		return f, fmt.Errorf("failover %s: no replica other than the coordinator owns a project", o.Coordinator)
	}
	f.Victim = victim.Name
	held := obs.Owned(victim.Name, time.Now())
	f.VictimProjects = len(held)
	killed := time.Now()
	if err := victim.Kill(); err != nil {
		return f, err
	}
	delete(alive, victim.Name)
	logf("  %s: killed %s, owning %d projects", o.Coordinator, victim.Name, len(held))
	for time.Since(killed) < o.TakenWithin && sleepCtx(ctx, 500*time.Millisecond) {
		if _, missing := TakeOverTimes(obs.snapshot(), held, alive, killed); missing == 0 {
			break
		}
	}
	sleepCtx(ctx, o.Sample) // one more sample
	times, missing := TakeOverTimes(obs.snapshot(), held, alive, killed)
	f.Missing = missing
	f.Max, f.Median = maxMedian(times)
	logf("  %s: %d of %d taken over; max %.2f s, median %.2f s (bound %.2f s)", o.Coordinator, len(times), len(held),
		f.Max.Seconds(), f.Median.Seconds(), f.Bound.Seconds())
	return f, nil
}

// coordinatorOf is anchorage's elected coordinator, the holder of its coordinator Lease
// ("" for the baseline, which has none).
func coordinatorOf(ctx context.Context, run *Run, c Coordinator) string {
	if c == Sharded {
		return ""
	}
	l := &coordinationv1.Lease{}
	key := client.ObjectKey{Namespace: run.Namespace, Name: shard.CoordinatorLeaseName}
	if err := run.Env.Hub.Client.Get(ctx, key, l); err != nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return shard.PodOf(*l.Spec.HolderIdentity)
}

// failoverVictim is the replica owning the most projects that is not the coordinator.
func failoverVictim(replicas []*Replica, coordinator string, obs *Observer) *Replica {
	var best *Replica
	most := 0
	for _, r := range replicas {
		if n := len(obs.Owned(r.Name, time.Now())); r.Name != coordinator && n > most {
			best, most = r, n
		}
	}
	return best
}

// TakeOverTimes returns, for each project in held, the time from killed until the first
// sample at or after killed in which a replica in alive owns it; missing counts projects
// no sample shows so owned.
func TakeOverTimes(samples []ownerSample, held []string, alive map[string]bool, killed time.Time) (times []time.Duration, missing int) {
	for _, p := range held {
		found := false
		for _, s := range samples {
			if s.at.Before(killed) {
				continue
			}
			if alive[s.owners[p]] {
				times = append(times, s.at.Sub(killed))
				found = true
				break
			}
		}
		if !found {
			missing++
		}
	}
	return times, missing
}

// maxMedian returns the largest and the median (the lower middle one) of ds.
func maxMedian(ds []time.Duration) (max, median time.Duration) {
	if len(ds) == 0 {
		return 0, 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)-1], s[(len(s)-1)/2]
}

// latest returns the owners of the last sample (nil before the first).
func (o *Observer) latest() map[string]string {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.samples) == 0 {
		return nil
	}
	return o.samples[len(o.samples)-1].owners
}

// movedOwners counts the projects owned in before whose owner in after differs (an
// owner gone counts as a move).
func movedOwners(before, after map[string]string) int {
	n := 0
	for p, owner := range before {
		if after[p] != owner {
			n++
		}
	}
	return n
}

// snapshot copies the samples taken so far.
func (o *Observer) snapshot() []ownerSample {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]ownerSample(nil), o.samples...)
}

// MetBound reports whether every victim project was taken over within the bound.
func (f Failover) MetBound() bool {
	return f.VictimProjects > 0 && f.Missing == 0 && f.Max <= f.Bound
}
