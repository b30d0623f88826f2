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

// reconcileSteps is one reconcile over scope S, as a list of phases.
type reconcileSteps[S any] struct {
	// load reads the scope; a nil scope means there is nothing to do.
	load func(context.Context, mcreconcile.Request) (*S, error)
	// phases run in order until one is done or fails.
	phases []phase[S]
	// finish, when set, runs after the phases however they ended, as cluster-api's
	// machine reconciler patches status in a defer: what the phases decided is written
	// on every exit. It sees the phases' error (nil when they all passed or one ended
	// the reconcile cleanly) and returns the result of a reconcile that ends without
	// error; its own error is joined with theirs. It is not a Go defer: a phase that
	// panics writes nothing.
	finish func(ctx context.Context, s *S, phasesErr error) (reconcile.Result, error)
}

// admitAndRun enters the project's admission (checked again here although the gating
// provider already filters: a delayed requeue can run after a hand-over), loads the
// scope, runs the phases and then the finish step. Every reconciler is this runner
// with its own steps.
func admitAndRun[S any](ctx context.Context, adm Admission, req mcreconcile.Request, steps reconcileSteps[S]) (reconcile.Result, error) {
	admitted, release, err := adm.Enter(ctx, string(req.ClusterName))
	if err != nil {
		return refused(ctx, err)
	}
	defer release()
	s, err := steps.load(admitted, req)
	if s == nil || err != nil {
		return reconcile.Result{}, quietIfNotHeld(admitted, err)
	}
	err = runPhases(admitted, s, steps.phases)
	if steps.finish == nil {
		return reconcile.Result{}, err
	}
	result, finishErr := steps.finish(admitted, s, err)
	if finishErr != nil {
		err = errors.Join(err, finishErr)
	}
	if err != nil {
		return reconcile.Result{}, err
	}
	return result, nil
}

// runPhases runs phases in order until one is done or fails, and returns the error
// that ended them.
func runPhases[S any](ctx context.Context, s *S, phases []phase[S]) error {
	for _, p := range phases {
		if done, err := p(ctx, s); done || err != nil {
			return err
		}
	}
	return nil
}

// refused ends a request that admission refused: quietly for a project not held, after
// the refusal's own delay when it gives one (the shard's claim on the project being
// written), else with backoff.
func refused(ctx context.Context, err error) (reconcile.Result, error) {
	var retry interface{ RetryAfter() time.Duration }
	if errors.As(err, &retry) {
		return reconcile.Result{RequeueAfter: retry.RetryAfter()}, nil
	}
	return reconcile.Result{}, quietIfNotHeld(ctx, err)
}

// quietIfNotHeld ends a request for a project this replica may not work on without an
// error (docs/design.md, gate and admission): it is not a failure, and retrying it here
// would only spin.
func quietIfNotHeld(ctx context.Context, err error) error {
	if errors.Is(err, multicluster.ErrClusterNotFound) {
		logf.FromContext(ctx).V(4).Info("Dropping request for a project this replica does not hold", "reason", err.Error())
		return nil
	}
	return err
}
