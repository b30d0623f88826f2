package shard

import (
	"context"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// handOver runs the owner's side of a planned hand-over of h to the Lease's next holder
// (docs/design.md, Planned hand-over): admission is already closed; it drains (exiting
// past DrainDeadline), stops the project's cluster and writes the next holder.
func (s *Shard) handOver(h *holding, lease *coordinationv1.Lease) {
	next := lease.Annotations[AnnotationNextHolder]
	log := s.log.WithValues("project", h.project, "holder", h.holder, "next", next)
	start := s.clock.Now()
	s.m.handOversInProgress.Inc()
	defer s.m.handOversInProgress.Dec()
	s.recordHandOver(h.project, start)
	defer s.recordHandOver(h.project, time.Time{})
	log.Info("Handing over project: admission closed, waiting for in-flight work")

	select {
	case <-h.idleCh():
	case <-s.clock.After(s.t.DrainDeadline):
		log.Error(nil, "Drain deadline passed with work in flight; exiting so the project goes through failure hand-over", "drainDeadline", s.t.DrainDeadline)
		s.m.handovers.WithLabelValues("drain_timeout").Inc()
		s.opts.Exit()
		return
	}
	h.close()

	result := s.writeNextHolder(lease, h.holder, next)
	s.dropHolding(h)
	s.m.handovers.WithLabelValues(result).Inc()
	if result == "success" {
		took := s.clock.Since(start)
		s.m.handoverSeconds.Observe(took.Seconds())
		s.eventf(h.holder, lease, "Normal", "HandedOver", "Project %s handed over from %s to %s in %s", h.project, h.holder, next, took.Round(time.Millisecond))
		log.Info("Handed over project", "took", took)
	} else {
		log.Info("Hand-over ended without our write", "result", result)
	}
	s.updateGauges()
}

// writeNextHolder writes next as holder conditional on lease's resourceVersion and
// returns "success", "lost" or "invalid".
func (s *Shard) writeNextHolder(lease *coordinationv1.Lease, holder, next string) string {
	leases := s.cs.CoordinationV1().Leases(s.opts.Namespace)
	l := reassigned(lease, next, s.clock.Now())
	for {
		ctx, cancel, err := s.protocolCall(context.Background(), holder)
		if err != nil {
			return "invalid"
		}
		wrote, err := leases.Update(ctx, l, metav1.UpdateOptions{})
		cancel()
		s.m.leaseWrite("project", true, err)
		switch {
		case err == nil:
			s.observer.record(wrote)
			return "success"
		case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
			return s.nextHolderConflictResult(lease.Name, holder, next)
		}
		// Unknown outcome: retry with the same precondition only, so it commits at most once.
		<-s.clock.After(s.t.RetryPeriod)
	}
}

// reassigned returns a copy of lease that names holder as of now: one more transition,
// no claim and no next holder.
func reassigned(lease *coordinationv1.Lease, holder string, now time.Time) *coordinationv1.Lease {
	l := lease.DeepCopy()
	l.Spec.HolderIdentity = ptr.To(holder)
	l.Spec.AcquireTime = &metav1.MicroTime{Time: now}
	l.Spec.LeaseTransitions = ptr.To(ptr.Deref(l.Spec.LeaseTransitions, 0) + 1)
	delete(l.Annotations, AnnotationClaim)
	delete(l.Annotations, AnnotationNextHolder)
	return l
}

// writeNextHolderAgainLocked sends again, conditional on lease as observed now, the write
// of a hand-over begun here that ended without it: nothing else would move the project.
// Nothing is drained again; the plan paces it (nextHolderWriteDue). s.mu is held.
func (s *Shard) writeNextHolderAgainLocked(project string, lease *coordinationv1.Lease) {
	ho := s.handedOff[project]
	ho.writing, ho.wroteAt = true, s.clock.Now()
	s.handedOff[project] = ho
	lease = lease.DeepCopy()
	next := lease.Annotations[AnnotationNextHolder]
	s.log.Info("Writing the next holder again: the hand-over of this project ended without its write", "project", project, "holder", ho.holder, "next", next)
	go func() {
		result := s.writeNextHolder(lease, ho.holder, next)
		s.m.handovers.WithLabelValues(result).Inc()
		if result == "success" {
			s.eventf(ho.holder, lease, "Normal", "HandedOver", "Project %s handed over from %s to %s (the write sent again)", project, ho.holder, next)
		}
		s.mu.Lock()
		if cur, ok := s.handedOff[project]; ok && cur.holder == ho.holder && cur.lease == ho.lease {
			cur.writing = false
			s.handedOff[project] = cur
		}
		s.mu.Unlock()
	}()
}

// nextHolderConflictResult re-reads the Lease after the next holder's write definitely
// conflicted: "success" when an earlier attempt committed; otherwise "lost", releasing
// the Lease if it still names holder (a project being handed over is never reopened).
func (s *Shard) nextHolderConflictResult(name, holder, next string) string {
	ctx, cancel := context.WithTimeout(context.Background(), s.t.CallTimeout)
	defer cancel()
	cur, err := s.cs.CoordinationV1().Leases(s.opts.Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "lost"
	}
	s.observer.record(cur)
	if cur.Spec.HolderIdentity != nil && *cur.Spec.HolderIdentity == next && cur.Annotations[AnnotationNextHolder] == "" {
		return "success"
	}
	if cur.Spec.HolderIdentity != nil && *cur.Spec.HolderIdentity == holder {
		s.releaseProject(ctx, cur)
	}
	return "lost"
}

// recordHandOver tracks planned hand-overs in progress for the oldest-hand-over gauge
// (anchorage_shard_oldest_drain_seconds); a zero start ends one.
func (s *Shard) recordHandOver(project string, start time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if start.IsZero() {
		delete(s.handOverStarts, project)
		return
	}
	s.handOverStarts[project] = start
}

// Shutdown hands every held project over to the other replicas and returns once each is
// claimed by its new holder, nothing is left to hand to, or ShutdownDeadline passed.
// Call Stopping first, and call it before stopping the controllers; later calls return
// at once (docs/design.md, Graceful shutdown). It marks the member Lease draining, so the
// coordinator asks for each held project.
func (s *Shard) Shutdown() {
	s.shutdownOnce.Do(func() {
		holder := s.Holder()
		s.draining.Store(true)
		s.member.draining.Store(true)
		s.member.renewSoon()
		s.log.Info("Shutting down: handing projects over", "holder", holder, "deadline", s.t.ShutdownDeadline)
		deadline := s.clock.Now().Add(s.t.ShutdownDeadline)
		for s.clock.Now().Before(deadline) {
			if holder == "" || !s.member.valid(holder) || (s.holdsNothing(holder) && s.handedOverAreClaimed(holder)) {
				s.log.Info("All projects handed over and claimed by their new holders", "holder", holder)
				return
			}
			if !s.othersEligible(holder) {
				s.log.Info("No other live replica to hand projects to; releasing them with the member Lease", "holder", holder)
				return
			}
			<-s.clock.After(s.t.RetryPeriod / 4)
		}
		s.log.Info("Shutdown deadline passed with projects still held; they go through failure hand-over", "holder", holder)
	})
}

// holdsNothing reports whether no holding and no observed project Lease names holder.
func (s *Shard) holdsNothing(holder string) bool {
	s.mu.Lock()
	n := len(s.holdings)
	s.mu.Unlock()
	if n > 0 {
		return false
	}
	_, leases, _ := s.observer.snapshot()
	for _, ob := range leases {
		if ob.Holder() == holder {
			return false
		}
	}
	return true
}

// othersEligible reports whether a live, non-draining member other than holder exists.
func (s *Shard) othersEligible(holder string) bool {
	members, _, _ := s.observer.snapshot()
	now := s.clock.Now()
	for _, m := range members {
		if st, _ := ToMemberState(m, now, s.t.LeaseDuration); st == MemberLive && m.Holder() != holder && m.Lease.Annotations[AnnotationDraining] == "" {
			return true
		}
	}
	return false
}

// handedOverAreClaimed reports whether every project holder handed over is claimed by
// its new holder (or gone), so stopping now leaves no project unserved.
func (s *Shard) handedOverAreClaimed(holder string) bool {
	s.mu.Lock()
	var projects []string
	for p, ho := range s.handedOff {
		if ho.holder == holder {
			projects = append(projects, p)
		}
	}
	s.mu.Unlock()
	for _, p := range projects {
		ob, ok := s.observer.project(p)
		if ok && !ClaimedBy(ob.Lease.Annotations[AnnotationClaim], ob.Holder()) {
			return false
		}
	}
	return true
}

// beginHandOverLocked starts a planned hand-over once per holding. A Lease asking for
// a hand-over of a project this replica holds but has no holding for (a claim that
// failed, or a restart of the loop) is handed over too, with nothing to drain.
func (s *Shard) beginHandOverLocked(ctx context.Context, project string, h *holding, lease *coordinationv1.Lease) {
	if h == nil {
		hctx, cancel := context.WithCancel(ctx)
		h = &holding{project: project, holder: *lease.Spec.HolderIdentity, ctx: hctx, cancel: cancel, st: holdingClaiming}
		s.holdings[project] = h
	}
	if !h.startHandingOver() {
		return // already handing over, or closed
	}
	s.handedOff[project] = handOff{holder: h.holder, lease: lease.UID, transitions: ptr.Deref(lease.Spec.LeaseTransitions, 0)}
	go s.handOver(h, lease.DeepCopy())
}

// awaitHolder waits until the observed Lease of h's project names h's incarnation and
// returns it; nil when the hand-over was called off or ctx ended.
func (s *Shard) awaitHolder(ctx context.Context, h *holding) *coordinationv1.Lease {
	for {
		ob, ok := s.observer.project(h.project)
		switch {
		case ok && ob.Holder() == h.holder:
			return ob.Lease
		case !ok || ob.Lease.Annotations[AnnotationNextHolder] != h.holder:
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-s.clock.After(s.t.RetryPeriod / 8):
		}
	}
}

// requestHandOver asks the project's holder, through the Lease, to hand the project over
// to next; the write is conditional on the Lease as observed.
func (s *Shard) requestHandOver(ctx context.Context, coordinator, project string, ob Observed, next, reason string) bool {
	cctx, cancel, err := s.protocolCall(ctx, coordinator)
	if err != nil {
		return false
	}
	defer cancel()
	l := ob.Lease.DeepCopy()
	metav1.SetMetaDataAnnotation(&l.ObjectMeta, AnnotationNextHolder, next)
	wrote, err := s.cs.CoordinationV1().Leases(s.opts.Namespace).Update(cctx, l, metav1.UpdateOptions{})
	s.m.leaseWrite("project", true, err)
	if err != nil {
		return false
	}
	s.observer.record(wrote)
	s.m.rebalanceMoves.WithLabelValues(reason).Inc()
	s.eventf(coordinator, wrote, "Normal", "HandOverRequested", "Project %s: hand-over from %s to %s requested (%s)", project, ob.Holder(), next, reason)
	s.log.Info("Requested planned hand-over", "project", project, "from", ob.Holder(), "to", next, "reason", reason)
	return true
}
