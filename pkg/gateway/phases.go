package gateway

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

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

// upstream is what a reconcile of one upstream Gateway or HTTPRoute works on, besides
// the object itself.
type upstream struct {
	project string
	cluster cluster.Cluster
	hub     client.Client // live
	owner   anchor.Owner
	log     logr.Logger
	events  events.EventRecorder
}

// loadUpstream reaches the project, reads obj (of kind, in the Gateway API group) from
// its cache, and reaches the hub. A nil result means the object is gone: nothing to do.
func loadUpstream(ctx context.Context, clusters Clusters, cfg Config, req mcreconcile.Request, obj client.Object, kind string) (*upstream, error) {
	project := string(req.ClusterName)
	cl, err := clusters.Project(ctx, project)
	if err != nil {
		return nil, fmt.Errorf("reaching project %q: %w", project, err)
	}
	if err := cl.GetClient().Get(ctx, req.NamespacedName, obj); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	hub, err := hubFor(ctx, clusters, project)
	if err != nil {
		return nil, err
	}
	return &upstream{
		project: project,
		cluster: cl,
		hub:     hub,
		owner:   anchor.OwnerOf(project, gatewayv1.SchemeGroupVersion.WithKind(kind), obj),
		log:     logf.FromContext(ctx).WithValues("project", project, strings.ToLower(kind), klog.KObj(obj)),
		events:  cl.GetEventRecorder(cfg.EventSource),
	}, nil
}
