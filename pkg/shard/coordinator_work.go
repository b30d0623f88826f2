package shard

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ErrNotCoordinator refuses coordinator-only work while this replica is not leading.
var ErrNotCoordinator = errors.New("this replica is not the coordinator")

// leadership is one term as coordinator: the elected incarnation and the term's context.
type leadership struct {
	holder string
	ctx    context.Context
}

// lead records a term; the function returned clears it unless a later one replaced it.
func (s *Shard) lead(ctx context.Context, holder string) func() {
	term := &leadership{holder: holder, ctx: ctx}
	s.mu.Lock()
	s.leading = term
	s.m.coordinator.Set(1)
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		if s.leading == term {
			s.leading = nil
			s.m.coordinator.Set(0)
		}
		s.mu.Unlock()
	}
}

// coordinatorRefusal returns the term and its validity's end while leading validly, or why not.
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

// EnterCoordinator admits coordinator-only work while leading validly; refusals wrap ErrNotCoordinator.
func (s *Shard) EnterCoordinator(ctx context.Context) (context.Context, func(), error) {
	term, until, err := s.coordinatorRefusal()
	if err != nil {
		return nil, nil, err
	}
	wctx, cancel, stop := s.admittedContext(ctx, until, term.ctx)
	return wctx, sync.OnceFunc(func() { stop(); cancel() }), nil
}

// CoordinatorHub returns Hub's clients for coordinator-only work; refused while not leading.
func (s *Shard) CoordinatorHub(context.Context) (client.Client, client.Reader, error) {
	if _, _, err := s.coordinatorRefusal(); err != nil {
		return nil, nil, err
	}
	return s.hubClients()
}
