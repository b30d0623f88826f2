package bench

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"anchorage/internal/harness"
	"anchorage/pkg/shard"
)

// FailureBound is how long after the faults clear every project must be owned again:
// a failure hand-over's bound, 1.3 × the Lease duration plus the retry period.
func FailureBound(t shard.Timings) time.Duration {
	return t.LeaseDuration*13/10 + t.RetryPeriod
}

// hubFaults carries out the scenario's schedule, then lifts every fault and measures how
// long until every project is owned again.
func (sr *scenarioRun) hubFaults(ctx context.Context) {
	steps := HubFaultSchedule(sr.sched.HubFaultSeed, sr.sched.HubFaultSteps, harness.FastTimings.LeaseDuration)
	sr.log("  hub-faults seed %d: %d faults", sr.sched.HubFaultSeed, len(steps))
	var lasting sync.WaitGroup
	for _, st := range steps {
		sr.sleep(ctx, st.After)
		if ctx.Err() != nil {
			break
		}
		if err := sr.applyHubFault(ctx, st, &lasting); err != nil {
			sr.note("hub-faults seed %d: %s: %v", sr.sched.HubFaultSeed, st.Kind, err)
		}
	}
	lasting.Wait()
	for _, r := range sr.running() {
		if r.Proxy != nil {
			r.Proxy.Clear()
		}
	}
	cleared := time.Now()
	owned := sr.waitAllOwned(ctx)
	sr.recovery = time.Since(cleared)
	sr.recovered = owned
	if !owned {
		sr.note("hub-faults seed %d: not every project owned again %s after the faults cleared", sr.sched.HubFaultSeed, sr.sched.OwnedWithin)
	} else {
		sr.log("  every project owned again %.2f s after the faults cleared", sr.recovery.Seconds())
	}
	sr.sleep(ctx, sr.sched.Hold)
}

// applyHubFault applies one step; a lasting one is lifted by a goroutine counted in lasting.
func (sr *scenarioRun) applyHubFault(ctx context.Context, st HubFaultStep, lasting *sync.WaitGroup) error {
	rs := sr.running()
	if len(rs) == 0 {
		return fmt.Errorf("no replica running")
	}
	target := rs[st.Replica%len(rs)]
	project := sr.projects[st.Project%len(sr.projects)].Name
	lift := func(after time.Duration, f func()) {
		lasting.Add(1)
		go func() {
			defer lasting.Done()
			sr.sleep(ctx, after)
			f()
		}()
	}
	switch st.Kind {
	case FaultCoordinatorWatchStall, FaultWatchStall:
		coord := sr.coordinatorName()
		var others []string
		for _, r := range rs {
			if r.Name != coord {
				others = append(others, sr.memberLeaseName(ctx, r.Name))
			}
		}
		var lifts []func()
		for _, r := range rs {
			if r.Name == coord {
				lifts = append(lifts, r.Proxy.StallWatches("leases"),
					r.Proxy.AddRules(harness.FaultRule{Verbs: []string{"get"}, Resources: []string{"leases"}, Names: others, Rate: 1, Status: http.StatusServiceUnavailable}))
			} else if st.Kind == FaultWatchStall {
				lifts = append(lifts, r.Proxy.StallWatches("leases"))
			}
		}
		who := "coordinator " + coord
		if st.Kind == FaultWatchStall {
			who = "every replica; " + who
		}
		sr.hubFault(st, Fault{Replica: coord, Coordinator: true}, who)
		lift(st.For, func() { runAll(lifts) })
	case FaultErrorBurst:
		remove := target.Proxy.AddRules(harness.FaultRule{Rate: st.Rate, Status: st.Status})
		sr.hubFault(st, Fault{Replica: target.Name}, fmt.Sprintf("%s: %d at %.0f %%", target.Name, st.Status, 100*st.Rate))
		lift(st.For, remove)
	case FaultSlowHub:
		var lifts []func()
		for _, r := range rs {
			lifts = append(lifts, r.Proxy.AddRules(harness.FaultRule{Rate: 1, Delay: st.Delay}))
		}
		sr.hubFault(st, Fault{}, fmt.Sprintf("every replica: +%s", st.Delay))
		lift(st.For, func() { runAll(lifts) })
	case FaultMemberLeaseDeleted:
		name := sr.memberLeaseName(ctx, target.Name)
		sr.hubFault(st, Fault{Replica: target.Name}, target.Name+": "+name)
		return sr.deleteLease(ctx, name)
	case FaultProjectLeaseDeleted:
		name := sr.projectLeaseName(project)
		sr.hubFault(st, Fault{Project: project}, project+": "+name)
		return sr.deleteLease(ctx, name)
	case FaultProjectLeaseRecreated:
		name := sr.projectLeaseName(project)
		sr.hubFault(st, Fault{Project: project}, project+": "+name)
		return sr.recreateLease(ctx, name)
	case FaultHubRestart:
		i := sr.hubFault(st, Fault{}, fmt.Sprintf("down %s", st.For))
		err := sr.run.Env.Hub.RestartAPIServer(ctx, st.For)
		// The outage lasts until the restarted API server is ready, seconds past the
		// planned down time on a loaded machine: that is what explains what follows.
		sr.mu.Lock()
		sr.faults[i].For = time.Since(sr.faults[i].At)
		sr.mu.Unlock()
		return err
	}
	return nil
}

func runAll(fs []func()) {
	for _, f := range fs {
		f()
	}
}

// hubFault records a schedule step among the run's faults and returns its index: f
// names its target (a replica or a project), what says what was done.
func (sr *scenarioRun) hubFault(st HubFaultStep, f Fault, what string) int {
	f.At, f.Kind, f.For, f.Detail = time.Now(), string(st.Kind), st.For, what
	sr.mu.Lock()
	sr.faults = append(sr.faults, f)
	i := len(sr.faults) - 1
	sr.mu.Unlock()
	sr.log("  %s (%s)", st.Kind, what)
	return i
}

// memberLeaseName is a replica's membership Lease: anchorage's member Lease, the
// sharded coordinator's peer Lease (found by its holder).
func (sr *scenarioRun) memberLeaseName(ctx context.Context, replica string) string {
	if sr.c != Sharded {
		return shard.MemberLeaseName(replica)
	}
	var leases coordinationv1.LeaseList
	if err := sr.run.Env.Hub.Client.List(ctx, &leases, client.InNamespace(sr.run.Namespace)); err == nil {
		for _, l := range leases.Items {
			if strings.HasPrefix(l.Name, "mcr-peer") && l.Spec.HolderIdentity != nil && strings.Contains(*l.Spec.HolderIdentity, replica) {
				return l.Name
			}
		}
	}
	return ""
}

// projectLeaseName is a project's ownership Lease: anchorage's project Lease, the sharded
// coordinator's fence Lease.
func (sr *scenarioRun) projectLeaseName(project string) string {
	if sr.c == Sharded {
		return FenceLeaseName(project)
	}
	return shard.ProjectLeaseName(project)
}

func (sr *scenarioRun) deleteLease(ctx context.Context, name string) error {
	if name == "" {
		return fmt.Errorf("no such Lease")
	}
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: sr.run.Namespace, Name: name}}
	return client.IgnoreNotFound(sr.run.Env.Hub.Client.Delete(ctx, l))
}

// recreateLease deletes a Lease and creates it again as a restore would: same holder,
// labels and transitions, without anchorage's claim annotation.
func (sr *scenarioRun) recreateLease(ctx context.Context, name string) error {
	c := sr.run.Env.Hub.Client
	l := &coordinationv1.Lease{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: sr.run.Namespace, Name: name}, l); err != nil {
		// Gone already (an earlier step deleted it, and nobody has written it again yet):
		// there is nothing to restore.
		return client.IgnoreNotFound(err)
	}
	if err := c.Delete(ctx, l); err != nil {
		return err
	}
	again := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: l.Namespace, Name: l.Name, Labels: l.Labels, Annotations: l.Annotations},
		Spec:       l.Spec,
	}
	delete(again.Annotations, shard.AnnotationClaim)
	return c.Create(ctx, again)
}
