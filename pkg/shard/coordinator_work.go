package shard

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ErrNotCoordinator is returned when coordinator-only work is refused because this
// replica is not leading now.
var ErrNotCoordinator = errors.New("this replica is not the coordinator")

// leadership is one term of this replica as coordinator: the incarnation that was
// elected, and the leader election's context, cancelled when the term ends.
type leadership struct {
	holder string
	ctx    context.Context
}

// lead records the term that starts with ctx, and returns the function that clears it
// when coordinate returns. A later term (a new incarnation elected again) replaces it;
// clearing an older term leaves the newer one alone.
func (s *Shard) lead(ctx context.Context, holder string) func() {
	term := &leadership{holder: holder, ctx: ctx}
	s.mu.Lock()
	s.leading = term
	s.exportLeadingLocked()
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		if s.leading == term {
			s.leading = nil
			s.exportLeadingLocked()
		}
		s.mu.Unlock()
	}
}

// exportLeadingLocked sets the coordinator gauge from the current term (s.mu held).
func (s *Shard) exportLeadingLocked() {
	if s.m == nil {
		return
	}
	if s.leading != nil {
		s.m.coordinator.Set(1)
	} else {
		s.m.coordinator.Set(0)
	}
}

// coordinatorRefusal returns the current term when coordinator-only work may run now,
// with the end of its incarnation's validity, or why it may not.
//
// Protocol rule: coordinator-only work (work that belongs to no project, such as
// collecting the anchors of retired projects) runs only while this incarnation leads
// and its member validity has not ended. Leader election keeps one leader at a time
// (the old one stops within RenewDeadline, a new one takes over only after
// LeaseDuration), and validity bounds the work of a replica that paused or lost its
// member Lease, as it does for project work.
func (s *Shard) coordinatorRefusal() (*leadership, time.Time, error) {
	s.mu.Lock()
	term := s.leading
	s.mu.Unlock()
	if term == nil || term.ctx.Err() != nil {
		return nil, time.Time{}, ErrNotCoordinator
	}
	holder, until := s.member.current()
	if gateEnforced && (holder != term.holder || !s.clock.Now().Before(until)) {
		return nil, time.Time{}, fmt.Errorf("%w: %w", ErrNotCoordinator, ErrValidityEnded)
	}
	return term, until, nil
}

// EnterCoordinator admits one unit of coordinator-only work: this incarnation leads and
// is valid. The returned context ends at the end of validity (translated to the real
// clock, as Enter does) or when leadership ends; release must be called when the work
// ends. A refusal wraps ErrNotCoordinator (and ErrValidityEnded when validity is the
// reason).
func (s *Shard) EnterCoordinator(ctx context.Context) (context.Context, func(), error) {
	term, until, err := s.coordinatorRefusal()
	if err != nil {
		return nil, nil, err
	}
	wctx, cancel, stop := s.admittedContext(ctx, until, term.ctx)
	var once sync.Once
	release := func() {
		once.Do(func() {
			stop()
			cancel()
		})
	}
	return wctx, release, nil
}

// Coordinating reports whether EnterCoordinator would admit work now, without
// admitting any: the cheap check before coordinator-only work is prepared.
func (s *Shard) Coordinating() bool {
	_, _, err := s.coordinatorRefusal()
	return err == nil
}

// CoordinatorHub returns the hub clients for coordinator-only work: the writer that
// refuses once validity ended (the same as Hub's) and the uncached reader. Unlike Hub
// it needs no held project; it refuses while this replica does not lead.
func (s *Shard) CoordinatorHub(context.Context) (client.Client, client.Reader, error) {
	if _, _, err := s.coordinatorRefusal(); err != nil {
		return nil, nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hubWriter == nil {
		return nil, nil, errors.New("hub clients not set")
	}
	return s.hubWriter, s.hubReader, nil
}
