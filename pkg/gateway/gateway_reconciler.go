package gateway

import (
	"context"
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	"anchorage/api/v1alpha"
	"anchorage/pkg/anchor"
)

// Hub RBAC (the project plane's is internal/planerbac, config/rbac/project-role.yaml):
// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=gateways,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups=cert-manager.io,resources=certificates,verbs=get;list;create;update;delete
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;create;patch
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create;delete

// GatewayReconciler mirrors upstream Gateways of our class to the hub: a downstream
// Gateway with the listeners whose hostnames it holds and a Certificate per HTTPS
// listener, on the Gateway's anchor. Its finalizer deletes them, the anchor and claims.
type GatewayReconciler struct {
	Clusters  Clusters
	Admission Admission
	Config    Config
	Metrics   *Metrics
	// Anchors is the hub's anchor cache (anchor.DeleteIndexed). Nil: the finalizer
	// deletes no anchor and retries.
	Anchors anchor.NameIndex
	// Written remembers this replica's hub writes. Nil: the finalizer reads each first.
	Written *WrittenObjects
	// Routes, when set, reconciles a Gateway's routes again when its programmed
	// hostnames change (HTTPRouteReconciler.keepHeldHostnames).
	Routes func(ctx context.Context, project string, gw *gatewayv1.Gateway)
	// programmed remembers what noticeHostnames last saw; set with Routes.
	programmed *hostnameSets
}

// gatewayScope is what one reconcile of one Gateway works on.
type gatewayScope struct {
	upstream
	gw      *gatewayv1.Gateway
	refused refusedHostnames // the listener hostnames not programmed
}

// Reconcile runs the phases in order; a phase that is done or fails ends the reconcile.
func (r *GatewayReconciler) Reconcile(ctx context.Context, req mcreconcile.Request) (reconcile.Result, error) {
	return admitAndRun(ctx, r.Admission, req, reconcileSteps[gatewayScope]{
		load: r.load,
		phases: []phase[gatewayScope]{
			r.finalize,                     // terminating: delete the downstream objects and the anchor
			r.skipOtherClass,               // not our class: leave it
			skipHandsOff[*gatewayScope],    // controlled by a proxy with a backend this manager cannot program: leave it
			ensureFinalizer[*gatewayScope], // ours: make sure it carries our finalizer
			guardLive[*gatewayScope],       // the live Gateway, and the proxy controlling it, must still be the ones this reconcile is about
			r.program,                      // mapped namespace, anchor, downstream Gateway, Certificates, status
		},
		finish: func(_ context.Context, s *gatewayScope, _ error) (reconcile.Result, error) { return s.requeued(), nil },
	})
}

// load reaches the project and the hub and reads the Gateway from the cache. A nil
// scope means there is nothing to do.
func (r *GatewayReconciler) load(ctx context.Context, req mcreconcile.Request) (*gatewayScope, error) {
	gw := &gatewayv1.Gateway{}
	u, err := loadUpstream(ctx, r.Clusters, r.Config, req, gw, gatewayv1.SchemeGroupVersion.WithKind(kindGateway), GatewayFinalizer)
	if u == nil || err != nil {
		return nil, err
	}
	u.anchors, u.written, u.metrics = r.Anchors, r.Written, r.Metrics
	return &gatewayScope{upstream: *u, gw: gw}, nil
}

// finalize releases the Gateway's hostname claims, deletes the downstream Gateway and
// the Certificates its listeners name or Written remembers (listing none), then the
// anchor, and removes the finalizer.
func (r *GatewayReconciler) finalize(ctx context.Context, s *gatewayScope) (bool, error) {
	if s.gw.DeletionTimestamp != nil && controllerutil.ContainsFinalizer(s.gw, GatewayFinalizer) {
		// By their labels: a listener removed earlier may have left one.
		if err := r.releaseClaims(ctx, s); err != nil {
			return true, err
		}
	}
	return s.finalize(ctx, func(ctx context.Context, w hubWriter) error {
		if err := w.deleteAttached(ctx, kindGateway, &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Name: s.gw.Name, Namespace: w.ns}}); err != nil {
			return err
		}
		for _, name := range certificateNamesToDelete(s.gw, w.written.namesOf(w.owner.UID, kindCertificate, w.ns)) {
			if err := w.deleteAttached(ctx, kindCertificate, certificateRef(name, w.ns)); err != nil {
				return err
			}
		}
		return nil
	})
}

// certificateNamesToDelete returns, sorted and once each, the Certificates of gw's
// certificate listeners and the remembered ones.
func certificateNamesToDelete(gw *gatewayv1.Gateway, remembered []string) []string {
	names := slices.Clone(remembered)
	for _, l := range certificateListeners(gw) {
		names = append(names, CertificateName(gw.Name, l.Name))
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// skipOtherClass ends the reconcile for a Gateway of another class.
func (r *GatewayReconciler) skipOtherClass(_ context.Context, s *gatewayScope) (bool, error) {
	if string(s.gw.Spec.GatewayClassName) != r.Config.GatewayClassName {
		s.log.V(4).Info("Skipping Gateway of another class", "class", s.gw.Spec.GatewayClassName)
		return true, nil
	}
	return false, nil
}

// program writes the hub side and reports in the Gateway's status what the edge made
// of it; a hub refusal is also an Event and an error, retried with backoff.
func (r *GatewayReconciler) program(ctx context.Context, s *gatewayScope) (bool, error) {
	down, err := r.writeHub(ctx, s, s.guardedHub())
	if isGuardRefusal(err) {
		return endOnRefusal(s.log, err, &s.requeueAfter)
	}
	before := s.gw.DeepCopy()
	if err != nil {
		s.events.Eventf(s.gw, nil, corev1.EventTypeWarning, v1alpha.ReasonHubWriteFailed, "Programming", "Writing the Gateway to the hub failed: %v", err)
		setGatewayStatus(s.gw, verdict{false, v1alpha.ReasonHubWriteFailed, fmt.Sprintf("Writing to the hub failed: %v", err)}, nil)
	} else {
		setGatewayStatus(s.gw, gatewayEdgeVerdict(down, r.Config.AssumeWrittenIsProgrammed), down)
		s.gw.Status.Addresses = down.Status.Addresses
		r.reportRefusedHostnames(s, before)
	}
	if statusErr := patchStatus(ctx, s.cluster.GetClient(), before, s.gw); statusErr != nil {
		err = errors.Join(err, statusErr)
	}
	return true, err
}

// writeHub ensures the mapped namespace, claims the verified hostnames, writes the downstream
// Gateway and Certificates, and releases the claims and deletes the Certificates of
// listeners that are gone. It returns the downstream Gateway as the hub holds it.
func (r *GatewayReconciler) writeHub(ctx context.Context, s *gatewayScope, hub client.Client) (*gatewayv1.Gateway, error) {
	hubNS, err := s.ensureMappedNamespace(ctx, hub)
	if err != nil {
		return nil, err
	}
	// Only the listeners whose hostname this Gateway holds are programmed.
	claims := hostnameClaims{hub: hub, ns: r.Config.HostnameClaimsNamespace}
	who := claimantOf(s.project, s.gw)
	held, err := claims.held(ctx, who)
	if err != nil {
		return nil, err
	}
	unverified, err := r.unverifiedHostnames(ctx, s, held)
	if err != nil {
		return nil, err
	}
	refused, err := claims.claim(ctx, who, s.gw, held, unverified)
	if err != nil {
		return nil, err
	}
	s.refused = refused
	programmable := refused.programmable(s.gw)
	w := s.hubWriter(hub, hubNS)
	written, err := w.apply(ctx, kindGateway, downstreamGateway(programmable, hubNS, r.Config.DownstreamGatewayClassName), copyGatewaySpec)
	if err != nil {
		return nil, err
	}
	if err := claims.releaseUnless(ctx, held, listenerHostnames(programmable)); err != nil {
		return nil, err
	}
	r.noticeHostnames(s, written.(*gatewayv1.Gateway))
	certs, err := downstreamCertificates(programmable, hubNS, r.Config.CertificateIssuer)
	if err != nil {
		return nil, err
	}
	want := map[string]bool{}
	for _, c := range certs {
		want[c.GetName()] = true
		if _, err := w.apply(ctx, kindCertificate, c, setCertificateSpec); err != nil {
			return nil, err
		}
	}
	stale, err := w.certificates(ctx)
	if err != nil {
		return nil, err
	}
	for _, c := range stale {
		if !want[c.GetName()] {
			if err := w.deleteIfAttached(ctx, kindCertificate, c); err != nil {
				return nil, err
			}
		}
	}
	return written.(*gatewayv1.Gateway), nil
}

func copyGatewaySpec(dst, src client.Object) error {
	dst.(*gatewayv1.Gateway).Spec = *src.(*gatewayv1.Gateway).Spec.DeepCopy()
	return nil
}
