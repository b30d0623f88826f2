package shard

import (
	"context"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// runHoldings reconciles this replica's holdings with the project Leases it observes.
func (s *Shard) runHoldings(ctx context.Context) {
	s.everyRetry(ctx, s.observer.notify, func() {
		s.syncHoldings(ctx)
		s.noteViewFreshness()
		s.updateGauges()
	})
	s.voidAll(s.Holder())
}

// syncHoldings plans one holder sync (PlanHolderSync) and carries it out.
func (s *Shard) syncHoldings(ctx context.Context) {
	holder, _ := s.member.current()
	shown := s.member.viewShownAt() // before the snapshot; published after acting on it
	_, leases, synced := s.observer.snapshot()
	if !synced {
		return
	}
	projects := s.discoveredProjects()
	gens := make(map[string]uint64, len(projects))
	for p, d := range projects {
		gens[p] = d.gen
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	views := make(map[string]HoldingView, len(s.holdings))
	for p, h := range s.holdings {
		views[p] = h.view()
	}
	plan := PlanHolderSync(HolderInput{
		Holder: holder, Valid: s.member.valid(holder), ShuttingDown: s.draining.Load(),
		Leases: leases, Projects: gens, Holdings: views, HandedOff: s.handedOff, Undiscovered: s.undiscovered,
		Now: s.clock.Now(), Timings: s.t,
	})
	s.carryOutLocked(ctx, holder, plan, projects)
	s.member.publishViewFresh(shown)
}

// carryOutLocked carries out a holder sync's plan. s.mu is held.
func (s *Shard) carryOutLocked(ctx context.Context, holder string, plan HolderPlan, projects map[string]discovered) {
	for _, c := range plan.Close {
		h := s.holdings[c.Project]
		delete(s.holdings, c.Project)
		go h.close()
		s.log.Info("Closing admission for a project no longer held", "project", c.Project, "holder", h.holder, "reason", c.Reason)
		if c.Release != nil {
			go s.releaseProject(ctx, c.Release)
		}
	}
	for _, c := range plan.Claim {
		s.startClaimLocked(ctx, c.Project, holder, c.RV, projects[c.Project], c.Lease)
	}
	for _, ho := range plan.HandOver {
		s.beginHandOverLocked(ctx, ho.Project, s.holdings[ho.Project], ho.Lease)
	}
	for _, w := range plan.WriteNextHolder {
		s.writeNextHolderAgainLocked(w.Project, w.Lease)
	}
	for _, r := range plan.Release {
		s.log.Info("Releasing the Lease of a project this replica does not discover", "project", r.Project, "since", s.undiscovered[r.Project])
		go s.releaseProject(ctx, r.Lease.DeepCopy())
	}
	s.undiscovered = plan.Undiscovered
	for _, project := range plan.ForgetHandOffs {
		delete(s.handedOff, project)
	}
}

// releaseProject clears this replica's holder and claim from a project Lease.
func (s *Shard) releaseProject(ctx context.Context, lease *coordinationv1.Lease) {
	l := lease.DeepCopy()
	l.Spec.HolderIdentity = nil
	delete(l.Annotations, AnnotationClaim)
	cctx, cancel := context.WithTimeout(ctx, s.t.CallTimeout)
	defer cancel()
	_, err := s.cs.CoordinationV1().Leases(s.opts.Namespace).Update(cctx, l, metav1.UpdateOptions{})
	s.m.leaseWrite("project", err)
	if err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
		s.log.Info("Releasing a removed project's Lease failed", "project", l.Annotations[AnnotationProject], "error", err.Error())
	}
}

// discoveredProjects maps engageable projects (named by one Secret) to their discovery.
func (s *Shard) discoveredProjects() map[string]discovered {
	s.mu.Lock()
	defer s.mu.Unlock()
	count := map[string]int{}
	for _, d := range s.found {
		count[d.project]++
	}
	out := map[string]discovered{}
	dup := 0
	for _, d := range s.found {
		switch {
		case d.project == "": // its name is not read yet
		case count[d.project] > 1:
			dup++
		default:
			out[d.project] = d
		}
	}
	s.m.unengageable.Set(float64(dup))
	return out
}

// updateGauges recomputes the ownership gauges from what this replica observes.
func (s *Shard) updateGauges() {
	members, leases, synced := s.observer.snapshot()
	if !synced {
		return
	}
	now := s.clock.Now()
	live := liveHolders(members, now, s.t.LeaseDuration)
	var unowned, unclaimed float64
	for p := range s.discoveredProjects() {
		ob := leases[ProjectLeaseName(p)]
		switch st, _ := ToProjectState(ob, live, now, s.t.ClaimDeadline); st {
		case ProjectUnassigned, ProjectOrphaned:
			unowned++
		case ProjectAssigned, ProjectClaimOverdue:
			unclaimed++
		}
	}
	s.m.unowned.Set(unowned)
	s.m.unclaimed.Set(unclaimed)
	s.mu.Lock()
	s.m.held.Set(float64(len(s.openHoldingsLocked())))
	var oldest time.Duration
	for _, start := range s.handOverStarts {
		oldest = max(oldest, now.Sub(start))
	}
	s.mu.Unlock()
	s.m.oldestHandOver.Set(oldest.Seconds())
}
