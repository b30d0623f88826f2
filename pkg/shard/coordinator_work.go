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

// lead records the term that starts with ctx and returns the function that clears it,
// unless a later term has replaced it meanwhile.
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

// coordinatorRefusal returns the current term and the end of its incarnation's
// validity when coordinator-only work may run now (this incarnation leads and is
// valid), or why it may not.
func (s *Shard) coordinatorRefusal() (*leadership, time.Time, error) {
	s.mu.Lock()
	term := s.leading
	s.mu.Unlock()
	if term == nil || term.ctx.Err() != nil {
		return nil, time.Time{}, ErrNotCoordinator
	}
	holder, until := s.member.current()
	if holder != term.holder || !s.clock.Now().Before(until) {
		return nil, time.Time{}, fmt.Errorf("%w: %w", ErrNotCoordinator, ErrValidityEnded)
	}
	return term, until, nil
}

// EnterCoordinator admits one unit of work that belongs to no project (the resync of
// retired projects) while this incarnation leads and is valid. The context ends at the
// end of validity or when leadership ends; call release when the work ends. A refusal
// wraps ErrNotCoordinator (and ErrValidityEnded when validity is the reason).
func (s *Shard) EnterCoordinator(ctx context.Context) (context.Context, func(), error) {
	term, until, err := s.coordinatorRefusal()
	if err != nil {
		return nil, nil, err
	}
	wctx, cancel, stop := s.admittedContext(ctx, until, term.ctx)
	return wctx, sync.OnceFunc(func() { stop(); cancel() }), nil
}

// CoordinatorHub returns Hub's validity-guarded writer and uncached reader for
// coordinator-only work; it needs no held project but refuses while not leading.
func (s *Shard) CoordinatorHub(context.Context) (client.Client, client.Reader, error) {
	if _, _, err := s.coordinatorRefusal(); err != nil {
		return nil, nil, err
	}
	return s.hubClients()
}
