package gateway

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	"anchorage/api/v1alpha"
	"anchorage/pkg/anchor"
)

// Hub RBAC (the project plane's is internal/planerbac): the proxy's own anchor, if a
// previous manager left one; the anchor cache watches anchors for the ambiguity check.
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;delete

// finalizeRecheck is how soon a terminating proxy looks again at the upstream objects
// it deleted; their deletion events normally bring it back sooner.
const finalizeRecheck = 5 * time.Second

// HTTPProxyReconciler turns an HTTPProxy into an upstream Gateway, HTTPRoute and one
// ExternalName Service per backend (an EndpointSlice for one named by an IP address),
// all controlled by the proxy, and reports Accepted
// and Programmed. Its finalizer deletes them and waits for them to be gone.
type HTTPProxyReconciler struct {
	Clusters  Clusters
	Admission Admission
	Config    Config
	Metrics   *Metrics
	// Anchors is the hub's anchor cache (anchor.DeleteIndexed). Nil: the finalizer
	// deletes no anchor and retries.
	Anchors anchor.NameIndex
	// Slots caps the proxies a project programs. Nil: no cap.
	Slots *proxySlots
}

// proxyScope is what one reconcile of one proxy works on.
type proxyScope struct {
	project      string
	cluster      cluster.Cluster
	proxy        *v1alpha.HTTPProxy
	before       *v1alpha.HTTPProxy // as read, for the status patch
	desired      *proxyObjects
	gateway      *gatewayv1.Gateway   // as written
	route        *gatewayv1.HTTPRoute // as written
	guard        ownersGuard          // the proxy, read live
	refused      bool                 // the live guard refused: no status either
	requeueAfter time.Duration
	log          logr.Logger
	events       events.EventRecorder
}

// Reconcile runs the phases in order until one is done or fails, then writes the status
// they decided whatever they returned.
func (r *HTTPProxyReconciler) Reconcile(ctx context.Context, req mcreconcile.Request) (reconcile.Result, error) {
	return admitAndRun(ctx, r.Admission, req, reconcileSteps[proxyScope]{
		load: r.load,
		phases: []phase[proxyScope]{
			r.finalize,        // terminating: delete what the proxy produced, wait, drop the finalizer
			r.withinCap,       // past the project's cap: wait for a slot, produce nothing
			r.ensureFinalizer, // our finalizer before anything is produced
			r.guard,           // the live proxy must still be the one this reconcile is about
			r.build,           // desired upstream objects; Accepted
			r.write,           // Services, Gateway, HTTPRoute in the project
			r.observe,         // Programmed from the Gateway's and route's status
		},
		finish: r.writeStatusAndRequeue, // on every exit: the status; finalize's recheck
	})
}

func (r *HTTPProxyReconciler) load(ctx context.Context, req mcreconcile.Request) (*proxyScope, error) {
	project := string(req.ClusterName)
	cl, err := r.Clusters.Project(ctx, project)
	if err != nil {
		return nil, fmt.Errorf("reaching project %q: %w", project, err)
	}
	proxy := &v1alpha.HTTPProxy{}
	if err := cl.GetClient().Get(ctx, req.NamespacedName, proxy); err != nil {
		if !apierrors.IsNotFound(err) {
			return nil, err
		}
		// Gone: what it still controls goes too, on a plane with no garbage collector.
		r.Metrics.proxyGone(project, req.NamespacedName)
		return nil, collectOrphans(ctx, cl, req.NamespacedName)
	}
	return &proxyScope{
		project: project,
		cluster: cl,
		proxy:   proxy,
		before:  proxy.DeepCopy(),
		guard: ownersGuard{
			reader:  cl.GetAPIReader(),
			owners:  []guarded{{kind: kindHTTPProxy, obj: proxy, finalizer: v1alpha.HTTPProxyFinalizer}},
			metrics: r.Metrics,
		},
		log:    logf.FromContext(ctx).WithValues("project", project, "httpproxy", klog.KObj(proxy)),
		events: admittedEvents{ctx: ctx, next: cl.GetEventRecorder(eventSource)},
	}, nil
}

// finalize deletes the Gateway, HTTPRoute, Services and EndpointSlices the proxy
// controls (UID preconditions), and once the Gateway and route are gone (read live), the
// proxy's own anchor, then removes the finalizers. Its waiting requeues call nothing on the hub.
func (r *HTTPProxyReconciler) finalize(ctx context.Context, s *proxyScope) (bool, error) {
	if s.proxy.DeletionTimestamp == nil {
		return false, nil
	}
	// Ours, and the previous manager's replicator finalizer, honoured as ours.
	finalizers := slices.DeleteFunc([]string{v1alpha.HTTPProxyFinalizer, v1alpha.HTTPProxyReplicatorFinalizer}, func(f string) bool {
		return !controllerutil.ContainsFinalizer(s.proxy, f)
	})
	if len(finalizers) == 0 {
		return true, nil
	}
	reader, writer := s.cluster.GetAPIReader(), s.cluster.GetClient()
	key := client.ObjectKeyFromObject(s.proxy)
	remaining := 0
	for _, obj := range []client.Object{&gatewayv1.Gateway{}, &gatewayv1.HTTPRoute{}} {
		err := reader.Get(ctx, key, obj)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return true, fmt.Errorf("reading %T %s: %w", obj, key, err)
		}
		if !metav1.IsControlledBy(obj, s.proxy) {
			continue
		}
		remaining++
		if err := deleteExact(ctx, writer, obj); err != nil {
			return true, err
		}
	}
	if err := deleteControlled(ctx, reader, writer, s.proxy, &corev1.ServiceList{}); err != nil {
		return true, err
	}
	// The previous manager's backend EndpointSlices, whichever of its finalizers it left:
	// a deletion it started may have ended its replicator's part and not its proxy's, and
	// on a plane without a garbage collector a slice left here keeps its anchor for ever.
	if err := deleteControlled(ctx, reader, writer, s.proxy, &discoveryv1.EndpointSliceList{}); err != nil {
		return true, err
	}
	if remaining > 0 {
		s.log.V(4).Info("Waiting for the proxy's Gateway and HTTPRoute to be finalized", "remaining", remaining)
		s.requeueAfter = finalizeRecheck
		return true, nil
	}
	if err := r.deleteOwnAnchor(ctx, s); err != nil {
		return true, err
	}
	s.log.V(2).Info("Finalized HTTPProxy", "uid", s.proxy.UID, "finalizers", finalizers)
	if err := removeFinalizer(ctx, writer, s.proxy, finalizers...); err != nil {
		return true, err
	}
	r.Slots.released(s.project, slotKey{kindHTTPProxy, key})
	return true, nil
}

// withinCap ends the reconcile of a proxy past its project's cap with Accepted=False,
// reason ProxyLimitReached, before anything is written for it; what exists is left.
func (r *HTTPProxyReconciler) withinCap(ctx context.Context, s *proxyScope) (bool, error) {
	why, err := r.Slots.refusal(ctx, s.project, s.cluster.GetClient(), s.proxy)
	if err != nil || why == "" {
		return err != nil, err
	}
	s.setCondition(v1alpha.ConditionAccepted, false, v1alpha.ReasonProxyLimitReached, why)
	s.setCondition(v1alpha.ConditionProgrammed, false, v1alpha.ReasonProxyLimitReached, "The proxy is not accepted")
	if c := meta.FindStatusCondition(s.before.Status.Conditions, v1alpha.ConditionAccepted); c == nil || c.Reason != v1alpha.ReasonProxyLimitReached {
		s.events.Eventf(s.proxy, nil, corev1.EventTypeWarning, v1alpha.ReasonProxyLimitReached, "Programming", "The proxy is not programmed: %s", why)
	}
	s.requeueAfter = slotRecheck
	return true, nil
}

// deleteControlled deletes the objects of list's kind in proxy's namespace that proxy
// controls, listed live through reader, each with a UID precondition.
func deleteControlled(ctx context.Context, reader client.Reader, writer client.Client, proxy *v1alpha.HTTPProxy, list client.ObjectList) error {
	if err := reader.List(ctx, list, client.InNamespace(proxy.Namespace)); err != nil {
		return fmt.Errorf("listing %T in %s: %w", list, proxy.Namespace, err)
	}
	return meta.EachListItem(list, func(o runtime.Object) error {
		obj := o.(client.Object)
		if !metav1.IsControlledBy(obj, proxy) {
			return nil
		}
		return deleteExact(ctx, writer, obj)
	})
}

// deleteOwnAnchor deletes the anchor of the proxy itself, which only a previous manager
// wrote (anchor.DeleteIndexed).
func (r *HTTPProxyReconciler) deleteOwnAnchor(ctx context.Context, s *proxyScope) error {
	hubNS, err := mappedNamespaceOf(ctx, s.cluster.GetAPIReader(), s.proxy.Namespace)
	if err != nil {
		return err
	}
	hub, err := hubFor(ctx, r.Clusters, s.project)
	if err != nil {
		return err
	}
	owner := anchor.OwnerOf(s.project, v1alpha.GroupVersion.WithKind(kindHTTPProxy), s.proxy)
	err = anchor.DeleteIndexed(ctx, hub, r.Anchors, hubNS, owner)
	r.Metrics.anchorDelete(kindHTTPProxy, err)
	if err != nil {
		return fmt.Errorf("deleting the anchor of %s: %w", owner, err)
	}
	return nil
}

// deleteExact deletes obj unless it is already being deleted, conditional on its UID.
func deleteExact(ctx context.Context, c client.Client, obj client.Object) error {
	if obj.GetDeletionTimestamp() != nil {
		return nil
	}
	uid := obj.GetUID()
	err := c.Delete(ctx, obj, client.Preconditions{UID: &uid}, client.PropagationPolicy(metav1.DeletePropagationBackground))
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting %T %s: %w", obj, client.ObjectKeyFromObject(obj), err)
	}
	return nil
}

// ensureFinalizer puts our finalizer on the proxy before anything is produced for it.
func (r *HTTPProxyReconciler) ensureFinalizer(ctx context.Context, s *proxyScope) (bool, error) {
	if err := addFinalizer(ctx, s.cluster.GetClient(), s.proxy, v1alpha.HTTPProxyFinalizer); err != nil {
		return true, client.IgnoreNotFound(err)
	}
	// The patch refreshed the proxy; the status patch must start from it too.
	s.before = s.proxy.DeepCopy()
	return false, nil
}

// guard is the proxy's live guard phase (guard.go); the status is then built on the
// proxy as read live.
func (r *HTTPProxyReconciler) guard(ctx context.Context, s *proxyScope) (bool, error) {
	live, err := s.guard.checkLive(ctx)
	if err != nil {
		return s.endOnRefusal(err)
	}
	adoptLiveStatus(s.proxy, live)
	s.before = s.proxy.DeepCopy()
	return false, nil
}

// endOnRefusal is the package's endOnRefusal, remembering a refusal: no status then.
func (s *proxyScope) endOnRefusal(err error) (bool, error) {
	s.refused = isGuardRefusal(err)
	return endOnRefusal(s.log, err, &s.requeueAfter)
}

// build computes the upstream objects and sets Accepted. A proxy that cannot be
// programmed as written is Accepted=False, and nothing in the project is touched.
func (r *HTTPProxyReconciler) build(ctx context.Context, s *proxyScope) (bool, error) {
	if why := unsupportedBackend(s.proxy); why != "" {
		s.setCondition(v1alpha.ConditionAccepted, false, v1alpha.ReasonUnsupportedBackend, why)
		s.setCondition(v1alpha.ConditionProgrammed, false, v1alpha.ReasonUnsupportedBackend, "The proxy is not accepted")
		if c := meta.FindStatusCondition(s.before.Status.Conditions, v1alpha.ConditionAccepted); c == nil || c.Reason != v1alpha.ReasonUnsupportedBackend {
			s.events.Eventf(s.proxy, nil, corev1.EventTypeWarning, v1alpha.ReasonUnsupportedBackend, "Programming", "The proxy cannot be programmed: %s", why)
		}
		return true, nil
	}
	if n, bound := len(s.proxy.Spec.Hostnames), r.Config.HostnamesPerProxy; bound > 0 && n > bound {
		why := fmt.Sprintf("The proxy has %d hostnames and may have at most %d (gateway.hostnamesPerProxy): none of them is programmed or claimed", n, bound)
		s.setCondition(v1alpha.ConditionAccepted, false, ReasonTooManyHostnames, why)
		s.setCondition(v1alpha.ConditionProgrammed, false, ReasonTooManyHostnames, "The proxy is not accepted")
		if c := meta.FindStatusCondition(s.before.Status.Conditions, v1alpha.ConditionAccepted); c == nil || c.Reason != ReasonTooManyHostnames {
			s.events.Eventf(s.proxy, nil, corev1.EventTypeWarning, ReasonTooManyHostnames, "Programming", "The proxy cannot be programmed: %s", why)
		}
		return true, nil
	}
	existing := &gatewayv1.Gateway{}
	err := s.cluster.GetClient().Get(ctx, client.ObjectKeyFromObject(s.proxy), existing)
	switch {
	case apierrors.IsNotFound(err):
		existing = nil
	case err != nil:
		return true, fmt.Errorf("reading the proxy's Gateway: %w", err)
	case !metav1.IsControlledBy(existing, s.proxy):
		existing = nil // someone else's: write reports the conflict
	}
	desired, err := buildProxyObjects(s.proxy, existing, r.Config.GatewayClassName, r.Config.Platform)
	if err == nil {
		err = r.refused(s.proxy, desired)
	}
	if inv := (*invalidError)(nil); errors.As(err, &inv) {
		reason := cmp.Or(inv.reason, v1alpha.ReasonInvalid)
		s.setCondition(v1alpha.ConditionAccepted, false, reason, inv.Error())
		s.setCondition(v1alpha.ConditionProgrammed, false, reason, "The proxy is not accepted")
		s.events.Eventf(s.proxy, nil, corev1.EventTypeWarning, reason, "Programming", "The proxy cannot be programmed: %s", inv.Error())
		return true, nil
	}
	if err != nil {
		return true, err
	}
	s.setCondition(v1alpha.ConditionAccepted, true, v1alpha.ReasonAccepted, "The proxy is valid")
	s.desired = desired
	return false, nil
}

// refused returns an *invalidError when what proxy produces (desired) may not be
// programmed: a backend the backend policy refuses, or a filter or reference its route
// may not carry to the hub (checkRouteReferences, the route reconciler's own check, so
// the proxy says why rather than its route; the manager's own rewrite passes it).
func (r *HTTPProxyReconciler) refused(proxy *v1alpha.HTTPProxy, desired *proxyObjects) error {
	if why := refusedBackends(proxy, r.Config.BackendReservedDomains, r.Config.BackendDeniedNetworks); why != "" {
		return invalidf("%s", why)
	}
	if refused := checkRouteReferences(&desired.Route.Spec, proxy.Namespace); len(refused) > 0 {
		return invalidf("%s", refusalMessages(refused, "backend"))
	}
	return nil
}

// write upserts the Services, Gateway and HTTPRoute (creates guarded) and prunes Services
// no rule needs. An object of the same name the proxy does not control is a conflict.
func (r *HTTPProxyReconciler) write(ctx context.Context, s *proxyScope) (bool, error) {
	c := createsGuarded{Client: s.cluster.GetClient(), guard: s.guard}
	err := func() error {
		for _, svc := range s.desired.Services {
			if _, err := upsertControlled(ctx, c, s.proxy, svc, copyServiceSpec); err != nil {
				return err
			}
		}
		for _, slice := range s.desired.Slices {
			if err := upsertBackendSlice(ctx, c, s.proxy, slice); err != nil {
				return err
			}
		}
		gw, err := upsertControlled(ctx, c, s.proxy, s.desired.Gateway, copyGatewaySpec)
		if err != nil {
			return err
		}
		route, err := upsertControlled(ctx, c, s.proxy, s.desired.Route, copyRouteSpec)
		if err != nil {
			return err
		}
		s.gateway, s.route = gw.(*gatewayv1.Gateway), route.(*gatewayv1.HTTPRoute)
		if err := r.pruneServices(ctx, s); err != nil {
			return err
		}
		return r.pruneSlices(ctx, s)
	}()
	if err == nil {
		return false, nil
	}
	if isGuardRefusal(err) {
		return s.endOnRefusal(err)
	}
	reason := ReasonUpstreamWriteFailed
	if errors.Is(err, errNotControlled) {
		reason = ReasonConflict
	}
	s.setCondition(v1alpha.ConditionProgrammed, false, reason, err.Error())
	s.events.Eventf(s.proxy, nil, corev1.EventTypeWarning, reason, "Programming", "Writing the proxy's upstream objects failed: %v", err)
	return true, err
}

// pruneServices deletes Services the proxy controls that no rule produces any more.
func (r *HTTPProxyReconciler) pruneServices(ctx context.Context, s *proxyScope) error {
	services := &corev1.ServiceList{}
	if err := s.cluster.GetClient().List(ctx, services, client.InNamespace(s.proxy.Namespace)); err != nil {
		return fmt.Errorf("listing Services in %s: %w", s.proxy.Namespace, err)
	}
	for i := range services.Items {
		svc := &services.Items[i]
		wanted := slices.ContainsFunc(s.desired.Services, func(d *corev1.Service) bool { return d.Name == svc.Name })
		if wanted || !metav1.IsControlledBy(svc, s.proxy) {
			continue
		}
		s.log.V(2).Info("Deleting backend Service no rule needs", "service", klog.KObj(svc))
		if err := deleteExact(ctx, s.cluster.GetClient(), svc); err != nil {
			return err
		}
	}
	return nil
}

// pruneSlices deletes the backend EndpointSlices this manager wrote for the proxy
// (labelled managed by it) that no rule produces any more. The previous manager's stay
// until the proxy is finalized.
func (r *HTTPProxyReconciler) pruneSlices(ctx context.Context, s *proxyScope) error {
	list := &discoveryv1.EndpointSliceList{}
	if err := s.cluster.GetClient().List(ctx, list, client.InNamespace(s.proxy.Namespace), client.MatchingLabels{discoveryv1.LabelManagedBy: endpointSliceManagedBy}); err != nil {
		return fmt.Errorf("listing EndpointSlices in %s: %w", s.proxy.Namespace, err)
	}
	for i := range list.Items {
		slice := &list.Items[i]
		wanted := slices.ContainsFunc(s.desired.Slices, func(d *discoveryv1.EndpointSlice) bool { return d.Name == slice.Name })
		if wanted || !metav1.IsControlledBy(slice, s.proxy) {
			continue
		}
		s.log.V(2).Info("Deleting backend EndpointSlice no rule needs", "endpointslice", klog.KObj(slice))
		if err := deleteExact(ctx, s.cluster.GetClient(), slice); err != nil {
			return err
		}
	}
	return nil
}

// observe sets Programmed from what the Gateway and HTTPRoute reconcilers reported.
func (r *HTTPProxyReconciler) observe(_ context.Context, s *proxyScope) (bool, error) {
	ok, reason, message := proxyProgrammed(s.gateway, s.route, r.Config.controllerName())
	s.setCondition(v1alpha.ConditionProgrammed, ok, reason, message)
	s.showGatewayConditions(ConditionDNSRecordsProgrammed, ConditionCertificatesReady)
	programmed := s.reportHostnames(r.Config.VerifyHostnames)
	if !ok {
		return true, nil
	}
	s.proxy.Status.Hostnames = programmed
	s.proxy.Status.Addresses = append([]gatewayv1.GatewayStatusAddress(nil), s.gateway.Status.Addresses...)
	s.proxy.Status.CanonicalHostname = r.Config.Platform.Canonical(s.gateway)
	if !meta.IsStatusConditionTrue(s.before.Status.Conditions, v1alpha.ConditionProgrammed) {
		s.events.Eventf(s.proxy, nil, corev1.EventTypeNormal, v1alpha.ReasonProgrammed, "Programming", "The proxy is programmed on the hub")
	}
	return true, nil
}

// writeStatusAndRequeue is the finish step: it patches the status the phases decided,
// if it changed, and requeues when a phase asked.
func (r *HTTPProxyReconciler) writeStatusAndRequeue(ctx context.Context, s *proxyScope, _ error) (reconcile.Result, error) {
	var err error
	if !s.refused && s.proxy.DeletionTimestamp == nil && !equality.Semantic.DeepEqual(s.before.Status, s.proxy.Status) {
		err = patchStatus(ctx, s.cluster.GetClient(), s.before, s.proxy)
	}
	if err == nil && !s.refused {
		r.Metrics.proxyObserved(s.project, s.proxy)
	}
	return reconcile.Result{RequeueAfter: s.requeueAfter}, err
}

// showGatewayConditions sets the proxy's conditions of types as its Gateway has them
// for its current generation (the Gateway reconciler's DNS and certificate verdicts).
func (s *proxyScope) showGatewayConditions(types ...string) {
	for _, typ := range types {
		if c := meta.FindStatusCondition(s.gateway.Status.Conditions, typ); c != nil && c.ObservedGeneration == s.gateway.Generation {
			s.setCondition(typ, c.Status == metav1.ConditionTrue, c.Reason, c.Message)
		}
	}
}

func (s *proxyScope) setCondition(typ string, ok bool, reason, message string) {
	meta.SetStatusCondition(&s.proxy.Status.Conditions, verdict{ok, reason, message}.condition(typ, s.proxy.Generation))
}

// errNotControlled marks an upstream object that exists and is not the proxy's.
var errNotControlled = errors.New("exists and is not controlled by the proxy")

// upsertControlled creates desired, or copies the fields it owns (copyContent) into the
// existing object proxy controls and updates it if that changed; it returns the result.
func upsertControlled(ctx context.Context, c client.Client, proxy *v1alpha.HTTPProxy, desired client.Object, copyContent func(dst, src client.Object) error) (client.Object, error) {
	key := client.ObjectKeyFromObject(desired)
	existing := newEmptyLike(desired)
	err := c.Get(ctx, key, existing)
	if apierrors.IsNotFound(err) {
		obj := desired.DeepCopyObject().(client.Object)
		if err := c.Create(ctx, obj); err != nil {
			return nil, fmt.Errorf("creating %T %s: %w", desired, key, err)
		}
		return obj, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %T %s: %w", desired, key, err)
	}
	if !metav1.IsControlledBy(existing, proxy) {
		return nil, fmt.Errorf("%T %s %w", desired, key, errNotControlled)
	}
	obj := existing.DeepCopyObject().(client.Object)
	if err := copyContent(obj, desired); err != nil {
		return nil, err
	}
	if equality.Semantic.DeepEqual(existing, obj) {
		return existing, nil
	}
	if err := c.Update(ctx, obj); err != nil {
		return nil, fmt.Errorf("updating %T %s: %w", desired, key, err)
	}
	return obj, nil
}

// addressTypeChangedError is an existing backend EndpointSlice of another address type
// than wanted, which only a new slice can have (the field is immutable).
type addressTypeChangedError struct{ existing *discoveryv1.EndpointSlice }

func (e *addressTypeChangedError) Error() string {
	return fmt.Sprintf("EndpointSlice %s has address type %s", e.existing.Name, e.existing.AddressType)
}

// upsertBackendSlice is upsertControlled for a backend's EndpointSlice; one the proxy
// controls of another address type (the backend moved between IPv4 and IPv6) is
// deleted, conditional on its UID, and created anew.
func upsertBackendSlice(ctx context.Context, c client.Client, proxy *v1alpha.HTTPProxy, desired *discoveryv1.EndpointSlice) error {
	_, err := upsertControlled(ctx, c, proxy, desired, copyBackendSlice)
	var changed *addressTypeChangedError
	if !errors.As(err, &changed) {
		return err
	}
	if err := deleteExact(ctx, c, changed.existing); err != nil {
		return err
	}
	if err := c.Create(ctx, desired.DeepCopy()); err != nil {
		return fmt.Errorf("creating EndpointSlice %s in place of one of address type %s: %w", desired.Name, changed.existing.AddressType, err)
	}
	return nil
}

// copyBackendSlice copies the fields of a backend EndpointSlice the proxy owns
// (endpoints, ports, our managed-by label, the certificate hostname annotation); another
// address type is an *addressTypeChangedError.
func copyBackendSlice(dst, src client.Object) error {
	d, s := dst.(*discoveryv1.EndpointSlice), src.(*discoveryv1.EndpointSlice)
	if d.AddressType != s.AddressType {
		return &addressTypeChangedError{existing: d.DeepCopy()}
	}
	if v, ok := s.Annotations[BackendCertHostnameAnnotation]; ok {
		metav1.SetMetaDataAnnotation(&d.ObjectMeta, BackendCertHostnameAnnotation, v)
	} else {
		delete(d.Annotations, BackendCertHostnameAnnotation)
	}
	metav1.SetMetaDataLabel(&d.ObjectMeta, discoveryv1.LabelManagedBy, endpointSliceManagedBy)
	d.Endpoints = append([]discoveryv1.Endpoint(nil), s.Endpoints...)
	d.Ports = append([]discoveryv1.EndpointPort(nil), s.Ports...)
	return nil
}

// copyServiceSpec copies the fields of a backend Service the proxy owns (type,
// externalName, ports, the certificate hostname annotation), not those defaulted.
func copyServiceSpec(dst, src client.Object) error {
	d, s := dst.(*corev1.Service), src.(*corev1.Service)
	if v, ok := s.Annotations[BackendCertHostnameAnnotation]; ok {
		metav1.SetMetaDataAnnotation(&d.ObjectMeta, BackendCertHostnameAnnotation, v)
	} else {
		delete(d.Annotations, BackendCertHostnameAnnotation)
	}
	d.Spec.Type = s.Spec.Type
	d.Spec.ExternalName = s.Spec.ExternalName
	d.Spec.Ports = append([]corev1.ServicePort(nil), s.Spec.Ports...)
	return nil
}
