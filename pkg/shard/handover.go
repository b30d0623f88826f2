package shard

import (
	"context"
	"errors"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// handOver runs the owner's side of a planned hand-over: drain (exiting past
// DrainDeadline), stop the cluster, write the next holder (docs/design.md).
func (s *Shard) handOver(h *holding, lease *coordinationv1.Lease) {
	next := lease.Annotations[AnnotationNextHolder]
	log := s.log.WithValues("project", h.project, "holder", h.holder, "next", next)
	start := s.clock.Now()
	s.m.handOversInProgress.Inc()
	defer s.m.handOversInProgress.Dec()
	s.mu.Lock()
	s.handOverStarts[h.project] = start // for the oldest-drain gauge
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.handOverStarts, h.project)
		s.mu.Unlock()
	}()
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

// writeNextHolder writes next as holder, conditional on lease: "success", "lost" or "invalid".
func (s *Shard) writeNextHolder(lease *coordinationv1.Lease, holder, next string) string {
	l := reassigned(lease, next, s.clock.Now())
	for {
		_, err := s.writeProjectLease(context.Background(), holder, l, false)
		switch {
		case err == nil:
			return "success"
		case errors.Is(err, ErrValidityEnded):
			return "invalid"
		case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
			return s.nextHolderConflictResult(lease.Name, holder, next)
		}
		<-s.clock.After(s.t.RetryPeriod) // unknown outcome: the same precondition commits at most once
	}
}

// reassigned copies lease naming holder as of now: one more transition, no claim or next holder.
func reassigned(lease *coordinationv1.Lease, holder string, now time.Time) *coordinationv1.Lease {
	l := lease.DeepCopy()
	l.Spec.HolderIdentity = ptr.To(holder)
	l.Spec.AcquireTime = &metav1.MicroTime{Time: now}
	l.Spec.LeaseTransitions = ptr.To(ptr.Deref(l.Spec.LeaseTransitions, 0) + 1)
	delete(l.Annotations, AnnotationClaim)
	delete(l.Annotations, AnnotationNextHolder)
	return l
}

// writeNextHolderAgainLocked resends a hand-over's missing write, on lease as observed. s.mu is held.
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

// nextHolderConflictResult re-reads the Lease after a conflict: "success" or "lost".
func (s *Shard) nextHolderConflictResult(name, holder, next string) string {
	ctx, cancel := context.WithTimeout(context.Background(), s.t.CallTimeout)
	defer cancel()
	cur, err := s.cs.CoordinationV1().Leases(s.opts.Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "lost"
	}
	s.observer.observe(cur, true)
	if cur.Spec.HolderIdentity != nil && *cur.Spec.HolderIdentity == next && cur.Annotations[AnnotationNextHolder] == "" {
		return "success"
	}
	if cur.Spec.HolderIdentity != nil && *cur.Spec.HolderIdentity == holder {
		s.releaseProject(ctx, cur)
	}
	return "lost"
}

// Shutdown hands every held project over, at most ShutdownDeadline; later calls return at
// once. Call Stopping first, and this before stopping the controllers (docs/design.md).
func (s *Shard) Shutdown() {
	s.shutdownOnce.Do(func() {
		holder := s.Holder()
		s.draining.Store(true)
		s.member.draining.Store(true)
		poke(s.member.kick) // renew now, publishing the draining mark
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

// handedOverAreClaimed reports whether every project holder handed over is claimed anew.
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

// beginHandOverLocked starts a planned hand-over once per holding (with one made if none).
func (s *Shard) beginHandOverLocked(ctx context.Context, project string, h *holding, lease *coordinationv1.Lease) {
	if h == nil {
		hctx, cancel := context.WithCancel(ctx)
		h = &holding{project: project, holder: *lease.Spec.HolderIdentity, ctx: hctx, cancel: cancel, st: holdingClaiming}
		s.holdings[project] = h
	}
	h.mu.Lock()
	begun := h.moveLocked(holdingHandingOver) // admission closes; in-flight work goes on
	h.mu.Unlock()
	if !begun {
		return // already handing over, or closed
	}
	s.handedOff[project] = handOff{holder: h.holder, lease: lease.UID, transitions: ptr.Deref(lease.Spec.LeaseTransitions, 0)}
	go s.handOver(h, lease.DeepCopy())
}

// awaitHolder returns h's project Lease once it names h.holder; nil when called off.
func (s *Shard) awaitHolder(ctx context.Context, h *holding) *coordinationv1.Lease {
	for {
		ob, ok := s.observer.project(h.project)
		switch {
		case ok && ob.Holder() == h.holder:
			return ob.Lease
		case !ok || ob.Lease.Annotations[AnnotationNextHolder] != h.holder:
			return nil
		}
		if !sleep(ctx, s.clock, s.t.RetryPeriod/8) {
			return nil
		}
	}
}

// requestHandOver asks the project's holder, through its Lease, to hand over to next.
func (s *Shard) requestHandOver(ctx context.Context, coordinator, project string, ob Observed, next, reason string) bool {
	l := ob.Lease.DeepCopy()
	metav1.SetMetaDataAnnotation(&l.ObjectMeta, AnnotationNextHolder, next)
	wrote, err := s.writeProjectLease(ctx, coordinator, l, false)
	if err != nil {
		return false
	}
	s.m.rebalanceMoves.WithLabelValues(reason).Inc()
	s.eventf(coordinator, wrote, "Normal", "HandOverRequested", "Project %s: hand-over from %s to %s requested (%s)", project, ob.Holder(), next, reason)
	s.log.Info("Requested planned hand-over", "project", project, "from", ob.Holder(), "to", next, "reason", reason)
	return true
}
