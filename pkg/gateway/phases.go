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
	// finish, when set, runs after the phases however they ended (not on a panic). It
	// sees their error and returns the result of a reconcile without error; its own
	// error is joined with theirs.
	finish func(ctx context.Context, s *S, phasesErr error) (reconcile.Result, error)
}

// admitAndRun is every reconciler: it enters the project's admission (docs/design.md,
// The gate covers every path), loads the scope, runs the phases and the finish step.
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

// refused ends a request that admission refused (see Admission).
func refused(ctx context.Context, err error) (reconcile.Result, error) {
	var retry interface{ RetryAfter() time.Duration }
	if errors.As(err, &retry) {
		return reconcile.Result{RequeueAfter: retry.RetryAfter()}, nil
	}
	return reconcile.Result{}, quietIfNotHeld(ctx, err)
}

// quietIfNotHeld drops the error of a request for a project this replica does not
// hold: not a failure, and a retry would only spin.
func quietIfNotHeld(ctx context.Context, err error) error {
	if errors.Is(err, multicluster.ErrClusterNotFound) {
		logf.FromContext(ctx).V(4).Info("Dropping request for a project this replica does not hold", "reason", err.Error())
		return nil
	}
	return err
}
