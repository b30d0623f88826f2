package gateway

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	"anchorage/api/v1alpha"
	"anchorage/pkg/anchor"
)

// Project plane: see internal/planerbac (the generated config/rbac/project-role.yaml).
//
// Hub:
// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=httproutes,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;create;patch
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create;delete

// HTTPRouteReconciler mirrors upstream HTTPRoutes attached to our Gateways to the hub:
// a downstream HTTPRoute in ns-<namespace UID>, attached to the downstream Gateways,
// hanging on the route's anchor. Its finalizer deletes it and the anchor.
type HTTPRouteReconciler struct {
	Clusters  Clusters
	Admission Admission
	Config    Config
	Metrics   *Metrics
	// Anchors is the hub's anchor cache, which the finalizer's ambiguity check reads
	// (anchor.DeleteIndexed). Nil: the finalizer deletes no anchor and retries.
	Anchors anchor.NameIndex
	// Written remembers the hub objects this replica wrote, so that the finalizer
	// deletes each with one conditional call. Nil: the finalizer reads each first.
	Written *WrittenObjects
}

// routeScope is what one reconcile of one HTTPRoute works on.
type routeScope struct {
	upstream
	route   *gatewayv1.HTTPRoute
	parents []gatewayv1.ParentReference // the route's parents that are our Gateways
}

// Reconcile runs the phases in order; a phase that is done or fails ends the reconcile.
func (r *HTTPRouteReconciler) Reconcile(ctx context.Context, req mcreconcile.Request) (reconcile.Result, error) {
	return admitAndRun(ctx, r.Admission, req, reconcileSteps[routeScope]{
		load: r.load,
		phases: []phase[routeScope]{
			r.finalize,        // terminating: delete the downstream route and the anchor
			r.findOurParents,  // attached to none of our Gateways: leave it
			r.ensureFinalizer, // ours: make sure it carries our finalizer
			r.guard,           // the live route, and the proxy controlling it, must still be the ones this reconcile is about
			r.program,         // mapped namespace, anchor, downstream HTTPRoute, status
		},
		finish: func(_ context.Context, s *routeScope, _ error) (reconcile.Result, error) { return s.requeued(), nil },
	})
}

func (r *HTTPRouteReconciler) load(ctx context.Context, req mcreconcile.Request) (*routeScope, error) {
	route := &gatewayv1.HTTPRoute{}
	u, err := loadUpstream(ctx, r.Clusters, r.Config, req, route, kindHTTPRoute)
	if u == nil || err != nil {
		return nil, err
	}
	u.anchors, u.written = r.Anchors, r.Written
	return &routeScope{upstream: *u, route: route}, nil
}

// finalize deletes the downstream route (when there and hanging on this route's
// anchor) and then the anchor, whether or not the route's Gateways still exist.
func (r *HTTPRouteReconciler) finalize(ctx context.Context, s *routeScope) (bool, error) {
	return r.Metrics.finalizeUpstream(ctx, &s.upstream, s.route, kindHTTPRoute, HTTPRouteFinalizer, func(ctx context.Context, w hubWriter) error {
		return w.deleteAttached(ctx, kindHTTPRoute, &gatewayv1.HTTPRoute{ObjectMeta: objectMeta(s.route.Name, w.ns)})
	})
}

// findOurParents records the route's parents that are our Gateways, and ends the
// reconcile for a route attached to none of them (another controller's, or one whose
// Gateway is not there yet: the Gateway watch brings it back).
func (r *HTTPRouteReconciler) findOurParents(ctx context.Context, s *routeScope) (bool, error) {
	parents, err := r.ourParents(ctx, s)
	if err != nil {
		return true, err
	}
	if len(parents) == 0 {
		s.log.V(4).Info("Skipping HTTPRoute attached to none of this manager's Gateways")
		return true, nil
	}
	s.parents = parents
	return false, nil
}

// ensureFinalizer puts our finalizer on the route before anything is written to the
// hub for it, so that everything written is deleted with it.
func (r *HTTPRouteReconciler) ensureFinalizer(ctx context.Context, s *routeScope) (bool, error) {
	if err := addFinalizer(ctx, s.cluster.GetClient(), s.route, HTTPRouteFinalizer); err != nil {
		return true, client.IgnoreNotFound(err)
	}
	return false, nil
}

// ourParents returns the route's parent references to Gateways of our class.
func (r *HTTPRouteReconciler) ourParents(ctx context.Context, s *routeScope) ([]gatewayv1.ParentReference, error) {
	var out []gatewayv1.ParentReference
	for _, p := range s.route.Spec.ParentRefs {
		if !isGatewayParent(p) {
			continue
		}
		gw := &gatewayv1.Gateway{}
		key := client.ObjectKey{Namespace: parentNamespace(p, s.route.Namespace), Name: string(p.Name)}
		err := s.cluster.GetClient().Get(ctx, key, gw)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("reading parent Gateway %s: %w", key, err)
		}
		if string(gw.Spec.GatewayClassName) == r.Config.GatewayClassName {
			out = append(out, p)
		}
	}
	return out, nil
}

// guard is the live guard; see GatewayReconciler.guard.
func (r *HTTPRouteReconciler) guard(ctx context.Context, s *routeScope) (bool, error) {
	live, err := r.guardOf(s).checkLive(ctx)
	if err != nil {
		return endOnRefusal(s.log, err, &s.requeueAfter)
	}
	adoptLiveStatus(s.route, live)
	return false, nil
}

// guardOf is the live guard of s: its object, then the HTTPProxy controlling it.
func (r *HTTPRouteReconciler) guardOf(s *routeScope) ownersGuard {
	return upstreamGuard(&s.upstream, s.route, kindHTTPRoute, HTTPRouteFinalizer, r.Metrics)
}

// program writes the downstream route and reports the outcome per parent in the
// route's status; a hub refusal is also an Event and an error (retried with backoff).
func (r *HTTPRouteReconciler) program(ctx context.Context, s *routeScope) (bool, error) {
	err := r.writeHub(ctx, s, s.guardedHub(r.guardOf(s)))
	if isGuardRefusal(err) {
		return endOnRefusal(s.log, err, &s.requeueAfter)
	}
	before := s.route.DeepCopy()
	controller := r.Config.controllerName()
	if err != nil {
		s.events.Eventf(s.route, nil, corev1.EventTypeWarning, v1alpha.ReasonHubWriteFailed, "Programming", "Writing the HTTPRoute to the hub failed: %v", err)
		setRouteParentStatus(s.route, s.parents, controller, false, v1alpha.ReasonHubWriteFailed, fmt.Sprintf("Writing to the hub failed: %v", err))
	} else {
		setRouteParentStatus(s.route, s.parents, controller, true, string(gatewayv1.RouteReasonAccepted), "The downstream HTTPRoute is written to the hub")
	}
	if statusErr := patchStatus(ctx, s.cluster.GetClient(), before, s.route); statusErr != nil {
		err = errors.Join(err, statusErr)
	}
	return true, err
}

// writeHub ensures the mapped namespace and the downstream route, attached to the
// anchor and to the downstream copies of the route's parents, through hub (whose
// creates pass the live guard).
func (r *HTTPRouteReconciler) writeHub(ctx context.Context, s *routeScope, hub client.Client) error {
	reader := s.cluster.GetAPIReader()
	upstreamNS := &corev1.Namespace{}
	if err := reader.Get(ctx, client.ObjectKey{Name: s.route.Namespace}, upstreamNS); err != nil {
		return fmt.Errorf("reading upstream namespace %s: %w", s.route.Namespace, err)
	}
	hubNS, err := anchor.EnsureMappedNamespace(ctx, hub, s.project, upstreamNS)
	if err != nil {
		return err
	}
	// Parents in other namespaces: their Gateways' reconcilers create those hub
	// namespaces; the route only needs their names.
	hubNamespaces := map[string]string{}
	for _, p := range s.parents {
		ns := parentNamespace(p, s.route.Namespace)
		if ns == s.route.Namespace {
			continue
		}
		mapped, err := mappedNamespaceOf(ctx, reader, ns)
		if err != nil {
			return err
		}
		if mapped == "" {
			return fmt.Errorf("parent namespace %s is gone", ns)
		}
		hubNamespaces[ns] = mapped
	}
	down, err := downstreamRoute(s.route, hubNS, s.parents, hubNamespaces)
	if err != nil {
		return err
	}
	w := s.hubWriter(hub, hubNS, r.Metrics)
	_, err = w.apply(ctx, kindHTTPRoute, down, copyRouteSpec)
	return err
}

func copyRouteSpec(dst, src client.Object) error {
	dst.(*gatewayv1.HTTPRoute).Spec = *src.(*gatewayv1.HTTPRoute).Spec.DeepCopy()
	return nil
}
