package gateway

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	"anchorage/api/v1alpha"
	"anchorage/pkg/anchor"
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
		return reconcile.Result{}, quietIfNotHeld(ctx, err)
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

// releaseAnchor is the last step of every upstream finalizer: delete the owner's anchor
// (found by name across the hub, so it goes even when the downstream objects or the
// upstream namespace already have), then remove the finalizer from obj.
func (m *Metrics) releaseAnchor(ctx context.Context, hub client.Client, owner anchor.Owner, project client.Client, obj client.Object, finalizer string, rec events.EventRecorder) error {
	err := anchor.Delete(ctx, hub, owner)
	m.anchorDelete(owner.Kind, err)
	if err != nil {
		rec.Eventf(obj, nil, corev1.EventTypeWarning, v1alpha.ReasonHubWriteFailed, "Finalizing", "Deleting the anchor of the %s failed: %v", owner.Kind, err)
		return fmt.Errorf("deleting the anchor of %s: %w", owner, err)
	}
	return removeFinalizer(ctx, project, obj, finalizer)
}
