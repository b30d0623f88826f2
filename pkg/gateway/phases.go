package gateway

import (
	"context"
	"errors"
	"time"

	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"
)

// phase is one step of a reconcile over scope S; done ends the reconcile.
type phase[S any] func(ctx context.Context, s *S) (done bool, err error)

// admitAndRun enters the project's admission (checked again here although the gating
// provider already filters: a delayed requeue can run after a hand-over), loads the
// scope, and runs the phases in order until one is done or fails. A nil scope means
// there is nothing to do.
func admitAndRun[S any](ctx context.Context, adm Admission, req mcreconcile.Request,
	load func(context.Context, mcreconcile.Request) (*S, error), phases ...phase[S]) (reconcile.Result, error) {
	admitted, release, err := adm.Enter(ctx, string(req.ClusterName))
	if err != nil {
		return refused(ctx, err)
	}
	defer release()
	s, err := load(admitted, req)
	if s == nil || err != nil {
		return reconcile.Result{}, quietIfNotHeld(admitted, err)
	}
	for _, p := range phases {
		if done, err := p(admitted, s); done || err != nil {
			return reconcile.Result{}, err
		}
	}
	return reconcile.Result{}, nil
}

// refused ends a request that admission refused: quietly for a project not held, after
// the refusal's own delay when it gives one (a claim being written), else with backoff.
func refused(ctx context.Context, err error) (reconcile.Result, error) {
	var retry interface{ RetryAfter() time.Duration }
	if errors.As(err, &retry) {
		return reconcile.Result{RequeueAfter: retry.RetryAfter()}, nil
	}
	return reconcile.Result{}, quietIfNotHeld(ctx, err)
}

// quietIfNotHeld ends a request for a project this replica may not work on without an
// error (DESIGN.md, gate and admission): it is not a failure, and retrying it here
// would only spin.
func quietIfNotHeld(ctx context.Context, err error) error {
	if errors.Is(err, multicluster.ErrClusterNotFound) {
		logf.FromContext(ctx).V(4).Info("Dropping request for a project this replica does not hold", "reason", err.Error())
		return nil
	}
	return err
}
