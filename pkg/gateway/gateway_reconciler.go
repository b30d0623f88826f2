package gateway

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	"anchorage/api/v1alpha"
	"anchorage/pkg/anchor"
	"anchorage/pkg/platform"
)

// Hub RBAC (the project plane's is internal/planerbac, config/rbac/project-role.yaml):
// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=gateways,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups=cert-manager.io,resources=certificates,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups=externaldns.k8s.io,resources=dnsendpoints,verbs=get;list;watch;create;update;delete
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
	// Slots caps what a project programs; a Gateway it writes directly (not a proxy's
	// own) takes a slot like a proxy. Nil: no cap.
	Slots *proxySlots
	// Clock reads the time a failed Certificate's re-issue is judged at; nil: the
	// machine's.
	Clock clock.PassiveClock
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
	refused refusedHostnames // the listener hostnames not programmed ("": hostname-less)
	// canonical is the Gateway's platform hostname (pkg/platform), once writeHub has
	// checked it is the Gateway's own (ownCanonical).
	canonical string
	dns       dnsState
	certs     certState
}

// Reconcile runs the phases in order; a phase that is done or fails ends the reconcile.
func (r *GatewayReconciler) Reconcile(ctx context.Context, req mcreconcile.Request) (reconcile.Result, error) {
	return admitAndRun(ctx, r.Admission, req, reconcileSteps[gatewayScope]{
		load: r.load,
		phases: []phase[gatewayScope]{
			r.finalize,                     // terminating: delete the downstream objects and the anchor
			r.skipOtherClass,               // not our class: leave it
			skipHandsOff[*gatewayScope],    // controlled by a proxy with a backend this manager cannot program: leave it
			r.withinCap,                    // written directly and past the project's cap: wait for a slot, write nothing
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
	done, err := s.finalize(ctx, func(ctx context.Context, w hubWriter) error {
		if err := w.deleteAttached(ctx, kindGateway, &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Name: s.gw.Name, Namespace: w.ns}}); err != nil {
			return err
		}
		for _, name := range certificateNamesToDelete(s.gw, w.written.namesOf(w.owner.UID, kindCertificate, w.ns)) {
			if err := w.deleteAttached(ctx, kindCertificate, certificateRef(name, w.ns)); err != nil {
				return err
			}
		}
		if !r.Config.DNSEndpoints {
			return nil
		}
		// A hub that does not serve the kind holds none.
		if err := w.deleteAttached(ctx, kindDNSEndpoint, platform.DNSEndpointRef(s.gw.Name, w.ns)); !meta.IsNoMatchError(err) {
			return err
		}
		return nil
	})
	if done && err == nil && s.gw.DeletionTimestamp != nil && holdsOwnSlot(s.gw, r.Config.GatewayClassName) {
		r.Slots.released(s.project, slotKey{kindGateway, client.ObjectKeyFromObject(s.gw)})
	}
	return done, err
}

// withinCap ends the reconcile of a Gateway written directly (not a proxy's own) past
// its project's cap (proxies and such Gateways together, the oldest first): Accepted and
// Programmed False, reason ProxyLimitReached, before any finalizer, claim or hub write;
// what an earlier reconcile wrote is left, as for a proxy.
func (r *GatewayReconciler) withinCap(ctx context.Context, s *gatewayScope) (bool, error) {
	if ownedByItsProxy(s.gw) {
		return false, nil
	}
	why, err := r.Slots.gatewayRefusal(ctx, s.project, s.cluster.GetClient(), s.gw)
	if err != nil || why == "" {
		return err != nil, err
	}
	before := s.gw.DeepCopy()
	for _, typ := range []gatewayv1.GatewayConditionType{gatewayv1.GatewayConditionAccepted, gatewayv1.GatewayConditionProgrammed} {
		meta.SetStatusCondition(&s.gw.Status.Conditions, verdict{false, v1alpha.ReasonProxyLimitReached, why}.condition(string(typ), s.gw.Generation))
	}
	if c := meta.FindStatusCondition(before.Status.Conditions, string(gatewayv1.GatewayConditionAccepted)); c == nil || c.Reason != v1alpha.ReasonProxyLimitReached {
		s.events.Eventf(s.gw, nil, corev1.EventTypeWarning, v1alpha.ReasonProxyLimitReached, "Programming", "The Gateway is not programmed: %s", why)
	}
	s.requeueAfter = slotRecheck
	return true, patchStatus(ctx, s.cluster.GetClient(), before, s.gw)
}

// certificateNamesToDelete returns, sorted and once each, the Certificates of gw's
// certificate listeners and the remembered ones.
func certificateNamesToDelete(gw *gatewayv1.Gateway, remembered []string) []string {
	names := slices.Clone(remembered)
	for _, l := range certificateListeners(gw, listenerCertificates{}) {
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
		if len(s.refused) > 0 {
			// Why those listeners were not in the write (a Gateway whose every listener
			// is refused has none left, which the hub refuses too).
			s.gw.Status.Listeners = nil
			r.reportRefusedHostnames(s, before)
		}
	} else {
		setGatewayStatus(s.gw, gatewayEdgeVerdict(down, r.Config.AssumeWrittenIsProgrammed), down)
		s.gw.Status.Addresses = r.Config.Platform.Addresses(s.canonical)
		if r.Config.DNSEndpoints {
			meta.SetStatusCondition(&s.gw.Status.Conditions, dnsVerdict(s.dns, s.canonical).condition(ConditionDNSRecordsProgrammed, s.gw.Generation))
		}
		meta.SetStatusCondition(&s.gw.Status.Conditions, certificatesVerdict(s.certs).condition(ConditionCertificatesReady, s.gw.Generation))
		if len(s.certs.failed) > 0 {
			s.requeueAfter = min(cmp.Or(s.requeueAfter, ReissueAfter), ReissueAfter) // a failure's re-issue comes due
		}
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
//
// The Gateway's platform hostnames (pkg/platform) need no Domain and take no claim; a
// hostname-less listener and a tenant's hostname under the platform's domain are
// refused, so no hub listener answers every Host or another Gateway's platform name.
func (r *GatewayReconciler) writeHub(ctx context.Context, s *gatewayScope, hub client.Client) (*gatewayv1.Gateway, error) {
	hubNS, err := s.ensureMappedNamespace(ctx, hub)
	if err != nil {
		return nil, err
	}
	if s.canonical, err = r.ownCanonical(ctx, hub, hubNS, s); err != nil {
		return nil, err
	}
	named := withPlatformHostname(s.gw, s.canonical)
	refused := r.platformRefusals(named, s.canonical)
	maps.Copy(refused, r.issuers().refusals(named))
	tenant := withoutListenersOn(named, r.Config.Platform.Hostnames(s.canonical))
	// Only the listeners whose hostname this Gateway holds are programmed.
	claims := hostnameClaims{hub: hub, ns: r.Config.HostnameClaimsNamespace}
	who := claimantOf(s.project, s.gw)
	held, err := claims.held(ctx, who)
	if err != nil {
		return nil, err
	}
	var taken map[string]*corev1.ConfigMap
	if over := overHostnameBound(tenant, r.Config); over != nil {
		maps.Copy(refused, over) // nothing claimed; what it held is released below
	} else {
		if err := r.unverifiedHostnames(ctx, s, tenant, held, refused); err != nil {
			return nil, err
		}
		if r.programmed.refusedWrite(s.project, s.gw) {
			refused = notClaimedAfterARefusedWrite(tenant, held, refused)
		}
		if refused, taken, err = claims.claim(ctx, who, tenant, held, refused); err != nil {
			return nil, errors.Join(err, releaseAfterFailedWrite(ctx, claims, hub, hubNS, s.gw.Name, held, taken))
		}
	}
	s.refused = refused
	programmable := refused.programmable(named)
	w := s.hubWriter(hub, hubNS)
	written, err := w.apply(ctx, kindGateway, downstreamGateway(programmable, hubNS, r.Config.DownstreamGatewayClassName, r.certificates(s.canonical)), copyGatewaySpec)
	if err != nil {
		if isGuardRefusal(err) {
			return nil, err // not this Gateway's any more: its finalizer or next reconcile decides
		}
		r.programmed.rememberRefusedWrite(s.project, s.gw)
		return nil, errors.Join(err, releaseAfterFailedWrite(ctx, claims, hub, hubNS, s.gw.Name, held, taken))
	}
	if err := claims.releaseUnless(ctx, held, listenerHostnames(programmable)); err != nil {
		return nil, err
	}
	r.noticeHostnames(s, written.(*gatewayv1.Gateway))
	if r.Config.DNSEndpoints {
		if s.dns, err = r.writeDNSRecords(ctx, w, s.canonical, written.(*gatewayv1.Gateway)); err != nil {
			return nil, err
		}
	}
	if s.certs, err = r.writeCertificates(ctx, w, programmable, s.canonical, r.now()); err != nil {
		return nil, err
	}
	return written.(*gatewayv1.Gateway), nil
}

// ownCanonical is the Gateway's platform hostname (platform.Settings.Own): the name it
// carries (status, default listener) only when derived from its UID or already on its
// hub copy, which is read live, and only for a name not derived from the UID. Another
// name is whatever the tenant wrote, maybe another Gateway's: the Gateway gets its own.
func (r *GatewayReconciler) ownCanonical(ctx context.Context, hub client.Reader, hubNS string, s *gatewayScope) (string, error) {
	var readErr error
	canonical := r.Config.Platform.Own(s.gw, func(host string) bool {
		down := &gatewayv1.Gateway{}
		if err := hub.Get(ctx, client.ObjectKey{Namespace: hubNS, Name: s.gw.Name}, down); err != nil {
			readErr = client.IgnoreNotFound(err)
			return false
		}
		return notLabelledForAnotherOwner(down, s.owner) == nil && listenerHostnames(down)[host]
	})
	if readErr != nil {
		return "", fmt.Errorf("reading the hub copy of Gateway %s for its platform hostname: %w", s.gw.Name, readErr)
	}
	return canonical, nil
}

func (r *GatewayReconciler) now() time.Time {
	if r.Clock == nil {
		return time.Now()
	}
	return r.Clock.Now()
}

// certificates says where the listeners of the Gateway with platform hostname
// canonical get their certificates.
func (r *GatewayReconciler) certificates(canonical string) listenerCertificates {
	return listenerCertificates{platformHosts: r.Config.Platform.Hostnames(canonical), shared: r.Config.PlatformTLSSecret}
}

// releaseAfterFailedWrite releases, after the hub refused the Gateway's write (or
// claiming failed part way), the claims held or taken for it that the hub Gateway as it
// stands does not listen on: the hub keeps serving the previous spec, so what that serves
// stays claimed, and nothing else is. When the hub Gateway cannot be read, only what this
// reconcile took is released.
// notClaimedAfterARefusedWrite adds to refused every listener hostname of gw not held:
// the hub refused this generation's write, so nothing new is claimed until it changes.
func notClaimedAfterARefusedWrite(gw *gatewayv1.Gateway, held map[string]*corev1.ConfigMap, refused refusedHostnames) refusedHostnames {
	for h := range listenerHostnames(gw) {
		if _, no := refused[gatewayv1.Hostname(h)]; !no && held[h] == nil {
			refused[gatewayv1.Hostname(h)] = refusal{v1alpha.ReasonHubWriteFailed, fmt.Sprintf("hostname %s is not claimed: the hub refused this generation of the Gateway; change it to try again", h)}
		}
	}
	return refused
}

func releaseAfterFailedWrite(ctx context.Context, claims hostnameClaims, hub client.Reader, hubNS, name string, held, taken map[string]*corev1.ConfigMap) error {
	serving := &gatewayv1.Gateway{}
	err := hub.Get(ctx, client.ObjectKey{Namespace: hubNS, Name: name}, serving)
	switch {
	case apierrors.IsNotFound(err):
		serving = nil
	case err != nil:
		return claims.releaseUnless(ctx, taken, nil)
	}
	all, keep := claimsToRelease(held, taken, serving)
	return claims.releaseUnless(ctx, all, keep)
}

// claimsToRelease are held and taken together, and the hostnames of them to keep: those
// serving (nil: no hub Gateway) listens on.
func claimsToRelease(held, taken map[string]*corev1.ConfigMap, serving *gatewayv1.Gateway) (map[string]*corev1.ConfigMap, map[string]bool) {
	all := maps.Clone(held)
	if all == nil {
		all = map[string]*corev1.ConfigMap{}
	}
	maps.Copy(all, taken)
	keep := map[string]bool{}
	if serving != nil {
		keep = listenerHostnames(serving)
	}
	return all, keep
}

// ReasonTooManyHostnames: a proxy or Gateway asks for more hostnames than the manager's
// bound (gateway.hostnamesPerProxy, gateway.hostnamesPerGateway).
const ReasonTooManyHostnames = "TooManyHostnames"

// ownedByItsProxy reports whether gw is the Gateway a proxy writes for itself: controlled
// by an HTTPProxy of its own name (the controller's UID is checked by the live guard).
func ownedByItsProxy(gw *gatewayv1.Gateway) bool {
	p := controllingProxy(gw)
	return p != nil && p.Name == gw.Name
}

// boundedHostnames are the distinct listener hostnames of gw that count against its
// bound (the caller has left out its platform hostnames).
func boundedHostnames(gw *gatewayv1.Gateway) map[gatewayv1.Hostname]bool {
	out := map[gatewayv1.Hostname]bool{}
	for _, l := range gw.Spec.Listeners {
		if l.Hostname != nil && *l.Hostname != "" {
			out[*l.Hostname] = true
		}
	}
	return out
}

// overHostnameBound refuses every listener hostname of a Gateway with more than its
// bound (a proxy's own: HostnamesPerProxy; any other: HostnamesPerGateway; 0: none),
// or returns nil.
func overHostnameBound(gw *gatewayv1.Gateway, cfg Config) refusedHostnames {
	bound, what := cfg.HostnamesPerGateway, "gateway.hostnamesPerGateway"
	if ownedByItsProxy(gw) {
		bound, what = cfg.HostnamesPerProxy, "gateway.hostnamesPerProxy"
	}
	n := len(boundedHostnames(gw))
	if bound <= 0 || n <= bound {
		return nil
	}
	refused := refusedHostnames{}
	for _, l := range gw.Spec.Listeners {
		if l.Hostname != nil && *l.Hostname != "" {
			refused[*l.Hostname] = refusal{ReasonTooManyHostnames, fmt.Sprintf("the Gateway has %d hostnames and may have at most %d (%s): none of them is programmed or claimed", n, bound, what)}
		}
	}
	return refused
}

func copyGatewaySpec(dst, src client.Object) error {
	dst.(*gatewayv1.Gateway).Spec = *src.(*gatewayv1.Gateway).Spec.DeepCopy()
	return nil
}
