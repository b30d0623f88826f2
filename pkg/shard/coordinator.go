package shard

import (
	"context"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/ptr"
)

// runElection campaigns for coordinator with client-go's leader election, under the
// current incarnation; a lapse ends the campaign and a new one starts under the next
// incarnation.
func (s *Shard) runElection(ctx context.Context) {
	for ctx.Err() == nil {
		holder, _ := s.member.current()
		if holder == "" {
			select {
			case <-ctx.Done():
				return
			case <-s.clock.After(s.t.RetryPeriod):
			}
			continue
		}
		runCtx, cancel := context.WithCancel(ctx)
		go func() {
			// End the campaign when this incarnation is no longer current.
			tick := s.clock.NewTicker(s.t.RetryPeriod)
			defer tick.Stop()
			for {
				select {
				case <-runCtx.Done():
					return
				case <-tick.C():
					if h, _ := s.member.current(); h != holder {
						cancel()
						return
					}
				}
			}
		}()
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
	tick := s.clock.NewTicker(s.t.RetryPeriod)
	defer tick.Stop()
	for {
		members, _, _ := s.observer.snapshot()
		live := liveHolders(members, s.clock.Now(), s.t.LeaseDuration)
		if leader := le.GetLeader(); leader != "" && live[leader] {
			s.m.noCoordinator.Set(0)
		} else {
			s.m.noCoordinator.Set(1)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C():
		}
	}
}

// coordinate runs the coordinator's passes while leading. A new coordinator assigns
// nothing until its process has watched Leases for one full LeaseDuration, so it never
// mistakes "not seen yet" for "unchanged".
func (s *Shard) coordinate(ctx context.Context, holder string) {
	// Coordinator-only work (EnterCoordinator) is admitted for as long as this runs
	// under a live leadership context, warm-up included: it does not depend on the
	// Leases observed.
	defer s.lead(ctx, holder)()
	log := s.log.WithValues("coordinator", holder)
	if wait := s.observer.started.Add(s.t.LeaseDuration).Sub(s.clock.Now()); wait > 0 {
		log.Info("Coordinating after warm-up", "wait", wait)
		select {
		case <-ctx.Done():
			return
		case <-s.clock.After(wait):
		}
	}
	log.Info("Coordinating")
	tick := s.clock.NewTicker(s.t.RetryPeriod)
	defer tick.Stop()
	for {
		if s.member.valid(holder) {
			s.assignPass(ctx, holder)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C():
		}
	}
}

// assignPass expires silent members, then gives every engageable project a live holder.
func (s *Shard) assignPass(ctx context.Context, coordinator string) {
	members, _, synced := s.observer.snapshot()
	if !synced {
		return
	}
	now := s.clock.Now()
	for _, m := range members {
		if st, _ := ToMemberState(m, now, s.t.LeaseDuration); st == MemberSuspect {
			s.confirmExpired(ctx, m, coordinator)
		}
	}
	members, leases, _ := s.observer.snapshot()
	now = s.clock.Now()
	// Live members keep their projects; only eligible ones (not draining) get new ones.
	var eligible []Member
	liveSet, drainingSet := map[string]bool{}, map[string]bool{}
	for _, m := range members {
		if st, _ := ToMemberState(m, now, s.t.LeaseDuration); st != MemberLive {
			continue
		}
		liveSet[m.Holder()] = true
		if m.Lease.Annotations[AnnotationDraining] != "" {
			drainingSet[m.Holder()] = true
			continue
		}
		w, err := ParseWeight(m.Lease.Annotations[AnnotationWeight])
		if err != nil {
			w = 1
		}
		eligible = append(eligible, Member{Holder: m.Holder(), Pod: PodOf(m.Holder()), Weight: w})
	}
	projects := s.discoveredProjects()
	inFlight := 0
	for _, ob := range leases {
		if ob.Lease.Annotations[AnnotationNextHolder] != "" {
			inFlight++
		}
	}
	for project := range projects {
		ob, exists := leases[ProjectLeaseName(project)]
		st, _ := ToProjectState(ob, liveSet, now, s.t.ClaimDeadline)
		ranked := Rank(project, eligible)
		switch {
		case len(ranked) == 0:
			continue
		case st == ProjectUnassigned || st == ProjectOrphaned:
			reason := map[bool]string{true: "orphaned", false: "new"}[st == ProjectOrphaned]
			s.assign(ctx, project, ob, exists, ranked[0].Holder, reason)
		case st == ProjectClaimOverdue:
			if next, ok := NextAfter(project, ob.Holder(), eligible); ok && next.Holder != ob.Holder() {
				s.assign(ctx, project, ob, exists, next.Holder, "claim_overdue")
			}
		case st == ProjectAssigned && drainingSet[ob.Holder()]:
			// Not claimed yet, so nothing runs there: move it directly.
			s.assign(ctx, project, ob, exists, ranked[0].Holder, "draining")
		case st == ProjectClaimed && ranked[0].Holder != ob.Holder():
			next := ob.Lease.Annotations[AnnotationNextHolder]
			if next == ranked[0].Holder || (next == "" && inFlight >= s.opts.MaxHandoversInFlight) {
				continue
			}
			reason := map[bool]string{true: "draining", false: "rebalance"}[drainingSet[ob.Holder()]]
			if s.requestHandOver(ctx, project, ob, ranked[0].Holder, reason) && next == "" {
				inFlight++
			}
		}
	}
	// Leases of projects whose Secret is gone: delete once no live holder remains.
	for name, ob := range leases {
		project := ob.Lease.Annotations[AnnotationProject]
		if _, ok := projects[project]; ok && ProjectLeaseName(project) == name {
			continue
		}
		if liveSet[ob.Holder()] {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, s.t.CallTimeout)
		err := s.cs.CoordinationV1().Leases(s.opts.Namespace).Delete(cctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: ptr.To(ob.Lease.ResourceVersion)}})
		cancel()
		s.m.leaseWrite("project", true, err)
		if err == nil {
			s.log.Info("Deleted the Lease of a removed project", "project", project, "lease", name)
		}
	}
}

// confirmExpired reads a silent member's Lease directly; only the same resourceVersion
// as last seen proves it unchanged for LeaseDuration. The coordinator then clears its
// holder conditionally, so a late renew by that incarnation conflicts.
func (s *Shard) confirmExpired(ctx context.Context, m Observed, coordinator string) {
	cctx, cancel := context.WithTimeout(ctx, s.t.CallTimeout)
	defer cancel()
	cur, err := s.cs.CoordinationV1().Leases(s.opts.Namespace).Get(cctx, m.Lease.Name, metav1.GetOptions{})
	if err != nil {
		return
	}
	if cur.ResourceVersion != m.Lease.ResourceVersion {
		s.observer.record(cur)
		return
	}
	l := cur.DeepCopy()
	l.Spec.HolderIdentity = nil
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	l.Annotations[AnnotationExpiredBy] = coordinator
	wrote, err := s.cs.CoordinationV1().Leases(s.opts.Namespace).Update(cctx, l, metav1.UpdateOptions{})
	s.m.leaseWrite("member", true, err)
	if err != nil {
		return
	}
	s.observer.record(wrote)
	s.events.Eventf(wrote, "Warning", "MemberExpired", "Member %s declared expired by %s after %s without a renew", m.Holder(), coordinator, s.t.LeaseDuration)
	s.log.Info("Declared member expired", "member", m.Holder())
}

// assign writes holder into the project's Lease, conditional on what was observed.
func (s *Shard) assign(ctx context.Context, project string, ob Observed, exists bool, holder, reason string) {
	cctx, cancel := context.WithTimeout(ctx, s.t.CallTimeout)
	defer cancel()
	leases := s.cs.CoordinationV1().Leases(s.opts.Namespace)
	var wrote *coordinationv1.Lease
	var err error
	now := metav1.NewMicroTime(time.Now())
	if !exists {
		l := &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{
				Name: ProjectLeaseName(project), Namespace: s.opts.Namespace,
				Labels:      map[string]string{LabelRole: roleProject, LabelProject: ProjectLabelValue(project)},
				Annotations: map[string]string{AnnotationProject: project},
			},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder), AcquireTime: &now, LeaseTransitions: ptr.To(int32(0))},
		}
		wrote, err = leases.Create(cctx, l, metav1.CreateOptions{})
	} else {
		l := ob.Lease.DeepCopy()
		l.Spec.HolderIdentity = ptr.To(holder)
		l.Spec.AcquireTime = &now
		l.Spec.LeaseTransitions = ptr.To(ptr.Deref(l.Spec.LeaseTransitions, 0) + 1)
		delete(l.Annotations, AnnotationClaim)
		delete(l.Annotations, AnnotationNextHolder)
		wrote, err = leases.Update(cctx, l, metav1.UpdateOptions{})
	}
	s.m.leaseWrite("project", true, err)
	if err != nil {
		if !apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err) {
			s.log.Info("Assigning project failed", "project", project, "holder", holder, "error", err.Error())
		}
		return
	}
	s.observer.record(wrote)
	s.m.assignments.WithLabelValues(reason).Inc()
	s.events.Eventf(wrote, "Normal", "Assigned", "Project %s assigned to %s (%s, was %q)", project, holder, reason, ob.Holder())
	s.log.Info("Assigned project", "project", project, "holder", holder, "reason", reason, "previous", ob.Holder())
}

// requestHandOver asks the project's holder, through the Lease, to hand the project over
// to next; the write is conditional on the Lease as observed.
func (s *Shard) requestHandOver(ctx context.Context, project string, ob Observed, next, reason string) bool {
	cctx, cancel := context.WithTimeout(ctx, s.t.CallTimeout)
	defer cancel()
	l := ob.Lease.DeepCopy()
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	l.Annotations[AnnotationNextHolder] = next
	wrote, err := s.cs.CoordinationV1().Leases(s.opts.Namespace).Update(cctx, l, metav1.UpdateOptions{})
	s.m.leaseWrite("project", true, err)
	if err != nil {
		return false
	}
	s.observer.record(wrote)
	s.m.rebalanceMoves.WithLabelValues(reason).Inc()
	s.events.Eventf(wrote, "Normal", "HandOverRequested", "Project %s: hand-over from %s to %s requested (%s)", project, ob.Holder(), next, reason)
	s.log.Info("Requested planned hand-over", "project", project, "from", ob.Holder(), "to", next, "reason", reason)
	return true
}
