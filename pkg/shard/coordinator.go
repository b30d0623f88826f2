package shard

import (
	"context"
	"errors"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
)

// runElection campaigns for coordinator under each incarnation in turn.
func (s *Shard) runElection(ctx context.Context) {
	for ctx.Err() == nil {
		holder, _ := s.member.current()
		if holder == "" {
			sleep(ctx, s.clock, s.t.RetryPeriod) // the loop ends if ctx did
			continue
		}
		runCtx, cancel := context.WithCancel(ctx)
		go s.everyRetry(runCtx, nil, func() { // end the campaign when this incarnation is no longer current
			if h, _ := s.member.current(); h != holder {
				cancel()
			}
		})
		le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock: &resourcelock.LeaseLock{
				LeaseMeta:  metav1.ObjectMeta{Name: CoordinatorLeaseName, Namespace: s.opts.Namespace},
				Client:     s.cs.CoordinationV1(),
				LockConfig: resourcelock.ResourceLockConfig{Identity: holder},
			},
			LeaseDuration:   s.t.LeaseDuration,
			RenewDeadline:   s.t.RenewDeadline,
			RetryPeriod:     s.t.RetryPeriod,
			ReleaseOnCancel: true,
			Name:            "anchorage-coordinator",
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(ctx context.Context) { s.coordinate(ctx, holder) },
				OnStoppedLeading: func() { s.log.Info("Stopped coordinating", "holder", holder) },
				OnNewLeader:      func(id string) { s.log.V(1).Info("Observed coordinator", "coordinator", id) },
			},
		})
		if err != nil {
			s.log.Error(err, "Building the coordinator election")
			cancel()
			return
		}
		go s.watchCoordinator(runCtx, le)
		le.Run(runCtx)
		cancel()
	}
}

// watchCoordinator exports whether a live coordinator is observed, on every replica.
func (s *Shard) watchCoordinator(ctx context.Context, le *leaderelection.LeaderElector) {
	s.everyRetry(ctx, nil, func() {
		members, _, _ := s.observer.snapshot()
		live := liveHolders(members, s.clock.Now(), s.t.LeaseDuration)
		leader := le.GetLeader()
		s.m.noCoordinator.Set(map[bool]float64{false: 1}[leader != "" && live[leader]])
	})
}

// coordinate runs the passes while leading, after a warm-up (docs/design.md, Coordinator).
func (s *Shard) coordinate(ctx context.Context, holder string) {
	defer s.lead(ctx, holder)()
	log := s.log.WithValues("coordinator", holder)
	if wait := s.observer.started.Add(s.t.LeaseDuration).Sub(s.clock.Now()); wait > 0 {
		log.Info("Coordinating after warm-up", "wait", wait)
		if !sleep(ctx, s.clock, wait) {
			return
		}
	}
	log.Info("Coordinating")
	s.everyRetry(ctx, nil, func() {
		if s.member.valid(holder) {
			s.assignPass(ctx, holder)
		}
	})
}

// assignPass plans a pass and carries it out, planning again when a suspect was cleared.
func (s *Shard) assignPass(ctx context.Context, coordinator string) {
	in, ok := s.passInput()
	if !ok {
		return
	}
	plan := PlanPass(in)
	cleared := runParallel(ctx, len(plan.Confirm), func(ctx context.Context, i int) bool {
		return s.confirmExpired(ctx, plan.Confirm[i], coordinator)
	})
	if cleared > 0 {
		if in, ok = s.passInput(); !ok {
			return
		}
		plan = PlanPass(in)
	}
	s.mu.Lock()
	for project, holder := range plan.Claimed {
		s.claimFailures.forget(project, holder)
	}
	s.mu.Unlock()
	runParallel(ctx, len(plan.Assign), func(ctx context.Context, i int) bool {
		a := plan.Assign[i]
		if !s.assign(ctx, coordinator, a.Project, a.Lease, a.Exists, a.Holder, a.Reason) {
			return false
		}
		if a.Unclaimed != "" {
			s.mu.Lock()
			s.claimFailures.record(a.Project, a.Unclaimed, s.clock.Now(), s.t.ClaimDeadline)
			s.mu.Unlock()
		}
		return true
	})
	runParallel(ctx, len(plan.HandOvers), func(ctx context.Context, i int) bool {
		h := plan.HandOvers[i]
		return s.requestHandOver(ctx, coordinator, h.Project, h.Lease, h.Next, h.Reason)
	})
	runParallel(ctx, len(plan.Remove), func(ctx context.Context, i int) bool {
		return s.removeProjectLease(ctx, coordinator, plan.Remove[i])
	})
}

// passInput gathers what PlanPass decides from; false until the Lease watch has synced.
func (s *Shard) passInput() (PassInput, bool) {
	members, leases, synced := s.observer.snapshot()
	if !synced {
		return PassInput{}, false
	}
	projects := map[string]bool{}
	for p := range s.discoveredProjects() {
		projects[p] = true
	}
	now := s.clock.Now()
	s.mu.Lock()
	s.claimFailures.prune(now, s.t.ClaimDeadline)
	failures := make(claimFailures, len(s.claimFailures))
	for p, holders := range s.claimFailures {
		failures[p] = maps.Clone(holders)
	}
	s.mu.Unlock()
	return PassInput{
		Members: members, Vanished: s.observer.vanishedMembers(), Leases: leases, Projects: projects,
		Failures: failures, Now: now, Timings: s.t, MaxHandoversInFlight: maxHandoversInFlight,
	}, true
}

// protocolCall bounds one protocol write of holder by its validity and CallTimeout.
func (s *Shard) protocolCall(ctx context.Context, holder string) (context.Context, context.CancelFunc, error) {
	h, until := s.member.current()
	if holder == "" || h != holder || !s.clock.Now().Before(until) {
		s.m.rejections.WithLabelValues(rejectInvalid).Inc()
		return nil, nil, ErrValidityEnded
	}
	cctx, cancel := s.member.callCtx(ctx, until, s.t.CallTimeout)
	return cctx, cancel, nil
}

// writeProjectLease creates or updates l as a protocol write of holder and records it.
func (s *Shard) writeProjectLease(ctx context.Context, holder string, l *coordinationv1.Lease, create bool) (*coordinationv1.Lease, error) {
	cctx, cancel, err := s.protocolCall(ctx, holder)
	if err != nil {
		return nil, err
	}
	defer cancel()
	leases := s.cs.CoordinationV1().Leases(s.opts.Namespace)
	var wrote *coordinationv1.Lease
	if create {
		wrote, err = leases.Create(cctx, l, metav1.CreateOptions{})
	} else {
		wrote, err = leases.Update(cctx, l, metav1.UpdateOptions{})
	}
	s.m.leaseWrite("project", err)
	if err == nil {
		s.observer.observe(wrote, true)
	}
	return wrote, err
}

// sleep waits d on clk; false when ctx ended first.
func sleep(ctx context.Context, clk clock.Clock, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-clk.After(d):
		return true
	}
}

// everyRetry calls f at once, then every RetryPeriod and at each wake, until ctx ends.
func (s *Shard) everyRetry(ctx context.Context, wake <-chan struct{}, f func()) {
	tick := s.clock.NewTicker(s.t.RetryPeriod)
	defer tick.Stop()
	for {
		f()
		select {
		case <-ctx.Done():
			return
		case <-wake:
		case <-tick.C():
		}
	}
}

// coordinatorWrites bounds the Lease writes a coordinator pass has in flight at once.
const coordinatorWrites = 64

// runParallel runs f for 0..n-1, coordinatorWrites at a time, counting the trues.
func runParallel(ctx context.Context, n int, f func(context.Context, int) bool) int {
	var wg sync.WaitGroup
	var done atomic.Int32
	slots := make(chan struct{}, coordinatorWrites)
	for i := range n {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			if f(ctx, i) {
				done.Add(1)
			}
		})
	}
	wg.Wait()
	return int(done.Load())
}

// removeProjectLease deletes a removed project's Lease, conditional on it as observed.
func (s *Shard) removeProjectLease(ctx context.Context, coordinator string, ob Observed) bool {
	cctx, cancel, err := s.protocolCall(ctx, coordinator)
	if err != nil {
		return false
	}
	defer cancel()
	err = s.cs.CoordinationV1().Leases(s.opts.Namespace).Delete(cctx, ob.Lease.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: ptr.To(ob.Lease.ResourceVersion)}})
	s.m.leaseWrite("project", err)
	if err != nil {
		return false
	}
	s.log.Info("Deleted the Lease of a removed project", "project", ob.Lease.Annotations[AnnotationProject], "lease", ob.Lease.Name)
	return true
}

// confirmExpired clears a suspect member's Lease if a live read finds it unchanged.
func (s *Shard) confirmExpired(ctx context.Context, m Observed, coordinator string) bool {
	cctx, cancel, err := s.protocolCall(ctx, coordinator)
	if err != nil {
		return false
	}
	defer cancel()
	cur, err := s.cs.CoordinationV1().Leases(s.opts.Namespace).Get(cctx, m.Lease.Name, metav1.GetOptions{})
	if err != nil {
		return false
	}
	if cur.ResourceVersion != m.Lease.ResourceVersion {
		s.observer.observe(cur, true)
		return false
	}
	l := cur.DeepCopy()
	l.Spec.HolderIdentity = nil
	metav1.SetMetaDataAnnotation(&l.ObjectMeta, AnnotationExpiredBy, coordinator)
	wrote, err := s.cs.CoordinationV1().Leases(s.opts.Namespace).Update(cctx, l, metav1.UpdateOptions{})
	s.m.leaseWrite("member", err)
	if err != nil {
		return false
	}
	s.observer.observe(wrote, true)
	s.eventf(coordinator, wrote, "Warning", "MemberExpired", "Member %s declared expired by %s after %s without a renew", m.Holder(), coordinator, s.t.LeaseDuration)
	s.log.Info("Declared member expired", "member", m.Holder())
	return true
}

// assign writes holder into the project's Lease, conditional on what was observed.
func (s *Shard) assign(ctx context.Context, coordinator, project string, ob Observed, exists bool, holder, reason string) bool {
	now := metav1.NewMicroTime(s.clock.Now())
	l := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{
			Name: ProjectLeaseName(project), Namespace: s.opts.Namespace,
			Labels:      map[string]string{LabelRole: roleProject, LabelProject: ProjectLabelValue(project)},
			Annotations: map[string]string{AnnotationProject: project},
		},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder), AcquireTime: &now, LeaseTransitions: ptr.To(int32(0))},
	}
	if exists {
		l = reassigned(ob.Lease, holder, now.Time)
	}
	wrote, err := s.writeProjectLease(ctx, coordinator, l, !exists)
	if err != nil {
		if !errors.Is(err, ErrValidityEnded) && !apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err) {
			s.log.Info("Assigning project failed", "project", project, "holder", holder, "error", err.Error())
		}
		return false
	}
	s.m.assignments.WithLabelValues(reason).Inc()
	s.eventf(coordinator, wrote, "Normal", "Assigned", "Project %s assigned to %s (%s, was %q)", project, holder, reason, ob.Holder())
	s.log.Info("Assigned project", "project", project, "holder", holder, "reason", reason, "previous", ob.Holder())
	return true
}
