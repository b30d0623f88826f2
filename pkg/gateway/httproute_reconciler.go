package gateway

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	"anchorage/api/v1alpha"
	"anchorage/pkg/anchor"
	"anchorage/pkg/netpolicy"
)

// Hub RBAC (the project plane's is internal/planerbac, config/rbac/project-role.yaml):
// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=httproutes,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;create;patch
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups=discovery.k8s.io,resources=endpointslices,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=backendtlspolicies,verbs=get;list;watch;create;update;delete

// HTTPRouteReconciler mirrors upstream HTTPRoutes attached to our Gateways to the hub:
// a downstream HTTPRoute attached to the downstream Gateways and each backend's hub
// objects, all on the route's anchor. Its finalizer deletes them and the anchor.
type HTTPRouteReconciler struct {
	Clusters  Clusters
	Admission Admission
	Config    Config
	Metrics   *Metrics
	// Anchors is the hub's anchor cache (anchor.DeleteIndexed). Nil: the finalizer
	// deletes no anchor and retries.
	Anchors anchor.NameIndex
	// Written remembers this replica's hub writes. Nil: the finalizer reads each first.
	Written *WrittenObjects
	// HubCache names the backend objects a route no longer has, for deletion after a
	// live read. Nil: only those in Written are found.
	HubCache client.Reader
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
			r.finalize,                   // terminating: delete the downstream route and the anchor
			skipHandsOff[*routeScope],    // controlled by a proxy with a backend this manager cannot program: leave it
			r.findOurParents,             // attached to none of our Gateways: leave it
			ensureFinalizer[*routeScope], // ours: make sure it carries our finalizer
			guardLive[*routeScope],       // the live route, and the proxy controlling it, must still be the ones this reconcile is about
			r.program,                    // mapped namespace, anchor, downstream HTTPRoute, status
		},
		finish: func(_ context.Context, s *routeScope, _ error) (reconcile.Result, error) { return s.requeued(), nil },
	})
}

func (r *HTTPRouteReconciler) load(ctx context.Context, req mcreconcile.Request) (*routeScope, error) {
	route := &gatewayv1.HTTPRoute{}
	u, err := loadUpstream(ctx, r.Clusters, r.Config, req, route, gatewayv1.SchemeGroupVersion.WithKind(kindHTTPRoute), HTTPRouteFinalizer)
	if u == nil || err != nil {
		return nil, err
	}
	u.anchors, u.written, u.metrics = r.Anchors, r.Written, r.Metrics
	return &routeScope{upstream: *u, route: route}, nil
}

// finalize deletes the downstream route and backend objects that hang on this route's
// anchor, then the anchor, whether or not the route's Gateways still exist.
func (r *HTTPRouteReconciler) finalize(ctx context.Context, s *routeScope) (bool, error) {
	return s.finalize(ctx, func(ctx context.Context, w hubWriter) error { return r.deleteHubCopy(ctx, s, w) })
}

// deleteHubCopy deletes the downstream route and backend objects that hang on this
// route's anchor in w's namespace.
func (r *HTTPRouteReconciler) deleteHubCopy(ctx context.Context, s *routeScope, w hubWriter) error {
	if err := w.deleteAttached(ctx, kindHTTPRoute, &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Name: s.route.Name, Namespace: w.ns}}); err != nil {
		return err
	}
	return r.deleteBackendObjects(ctx, s, w, nil)
}

// findOurParents records the route's parent references to Gateways of our class, and
// ends the reconcile when there are none (the Gateway watch brings the route back).
func (r *HTTPRouteReconciler) findOurParents(ctx context.Context, s *routeScope) (bool, error) {
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
			return true, fmt.Errorf("reading parent Gateway %s: %w", key, err)
		}
		if string(gw.Spec.GatewayClassName) == r.Config.GatewayClassName {
			s.parents = append(s.parents, p)
		}
	}
	if len(s.parents) == 0 {
		s.log.V(4).Info("Skipping HTTPRoute attached to none of this manager's Gateways")
		return true, nil
	}
	return false, nil
}

// program writes the hub side and reports per parent what the edge made of it; a hub
// refusal is also an Event and an error, retried with backoff.
func (r *HTTPRouteReconciler) program(ctx context.Context, s *routeScope) (bool, error) {
	down, resolved, err := r.writeHub(ctx, s, s.guardedHub())
	if isGuardRefusal(err) {
		return endOnRefusal(s.log, err, &s.requeueAfter)
	}
	before := s.route.DeepCopy()
	controller := r.Config.controllerName()
	written := err == nil
	var accepted verdict
	if !written {
		accepted, err = s.notWritten(before, controller, err)
	} else if !resolved.ok && !meta.IsStatusConditionFalse(flattenParents(before, controller), string(gatewayv1.RouteConditionResolvedRefs)) {
		// Once, when the route's references stop resolving.
		s.events.Eventf(s.route, nil, corev1.EventTypeWarning, resolved.reason, "Programming", "%s", resolved.message)
	}
	var parents []parentVerdict
	for _, p := range s.parents {
		pv := parentVerdict{parent: p, accepted: accepted, refs: resolved}
		if written {
			pv.accepted, pv.refs = routeEdgeVerdict(down, downstreamParent(down, p, s.route.Namespace), controller, resolved, r.Config.AssumeWrittenIsProgrammed)
		}
		parents = append(parents, pv)
	}
	setRouteParentStatus(s.route, parents, controller)
	if statusErr := patchStatus(ctx, s.cluster.GetClient(), before, s.route); statusErr != nil {
		err = errors.Join(err, statusErr)
	}
	return true, err
}

// notWritten judges a hub write that failed with err, or wrote nothing on purpose: the
// Accepted verdict of every parent, an Event (for a refusal, only when it starts,
// judged on before, the route as read) and a requeue. It returns nil instead of err
// when the status says it all and a retry cannot help.
func (s *routeScope) notWritten(before *gatewayv1.HTTPRoute, controller gatewayv1.GatewayController, err error) (verdict, error) {
	was := meta.FindStatusCondition(flattenParents(before, controller), string(gatewayv1.RouteConditionAccepted))
	var notHeld *hostnamesNotHeldError
	var refused *routeRefusedError
	switch {
	case errors.As(err, &notHeld):
		// Nothing written: on a hostname-less listener it would serve every hostname.
		s.requeueAfter = claimRetryAfter
		if notHeld.pending {
			s.requeueAfter = finalizeRecheck
		}
		if !notHeld.pending && (was == nil || was.Status != metav1.ConditionFalse) {
			s.events.Eventf(s.route, nil, corev1.EventTypeWarning, ReasonHostnamesInUse, "Programming", "%s", notHeld.Error())
		}
		return verdict{false, notHeld.reason(), notHeld.Error()}, nil
	case errors.As(err, &refused):
		// Only a change of the route's spec, which brings it back, can help.
		reason := string(gatewayv1.RouteReasonUnsupportedValue)
		if was == nil || was.Reason != reason {
			s.events.Eventf(s.route, nil, corev1.EventTypeWarning, reason, "Programming", "%s", refused.Error())
		}
		return verdict{false, reason, refused.Error()}, nil
	}
	s.events.Eventf(s.route, nil, corev1.EventTypeWarning, v1alpha.ReasonHubWriteFailed, "Programming", "Writing the HTTPRoute to the hub failed: %v", err)
	return verdict{false, v1alpha.ReasonHubWriteFailed, fmt.Sprintf("Writing to the hub failed: %v", err)}, err
}

// routeRefusedError: the route carries what its hub copy may not (checkRouteReferences)
// and is not accepted; it has no copy on the hub.
type routeRefusedError struct{ refused []routeRefusal }

func (e *routeRefusedError) Error() string {
	return "The route is not programmed on the hub: " + refusalMessages(e.refused, "backendRef")
}

// flattenParents returns the conditions of route's parent entries of controller.
func flattenParents(route *gatewayv1.HTTPRoute, controller gatewayv1.GatewayController) []metav1.Condition {
	var out []metav1.Condition
	for _, ps := range route.Status.Parents {
		if ps.ControllerName == controller {
			out = append(out, ps.Conditions...)
		}
	}
	return out
}

// downstreamParent returns the parent reference of down that stands for the upstream
// parent p of a route in routeNS (same name and section, local when p is in routeNS),
// or p itself when down has none.
func downstreamParent(down *gatewayv1.HTTPRoute, p gatewayv1.ParentReference, routeNS string) gatewayv1.ParentReference {
	for _, dp := range down.Spec.ParentRefs {
		if dp.Name == p.Name && ptr.Deref(dp.SectionName, "") == ptr.Deref(p.SectionName, "") &&
			(parentNamespace(p, routeNS) == routeNS) == (dp.Namespace == nil) {
			return dp
		}
	}
	return p
}

// writeHub ensures the mapped namespace, the backends' hub objects, then the downstream
// route (never before its backends), and removes backend objects the route no longer
// has. It returns the route as the hub holds it and the backends' ResolvedRefs verdict.
func (r *HTTPRouteReconciler) writeHub(ctx context.Context, s *routeScope, hub client.Client) (*gatewayv1.HTTPRoute, verdict, error) {
	unknown := verdict{false, string(gatewayv1.RouteReasonBackendNotFound), "The backends were not resolved: the hub write failed first"}
	reader := s.cluster.GetAPIReader()
	hubNS, err := s.ensureMappedNamespace(ctx, hub)
	if err != nil {
		return nil, unknown, err
	}
	// Parents in other namespaces: their Gateways' reconcilers create those namespaces.
	hubNamespaces := map[string]string{}
	for _, p := range s.parents {
		ns := parentNamespace(p, s.route.Namespace)
		if ns == s.route.Namespace {
			continue
		}
		mapped, err := mappedNamespaceOf(ctx, reader, ns)
		if err != nil {
			return nil, unknown, err
		}
		if mapped == "" {
			return nil, unknown, fmt.Errorf("parent namespace %s is gone", ns)
		}
		hubNamespaces[ns] = mapped
	}
	refused := checkRouteReferences(&s.route.Spec, s.route.Namespace)
	backends, resolved, err := r.resolveBackends(ctx, s, hubNS, refused)
	if err != nil {
		return nil, unknown, err
	}
	w := s.hubWriter(hub, hubNS)
	if notAccepted := slices.DeleteFunc(slices.Clone(refused), func(r routeRefusal) bool { return !r.notAccepted() }); len(notAccepted) > 0 {
		// Not accepted: the edge must not serve it, whatever an earlier write (an
		// earlier version's, the previous manager's) left on the hub for it.
		s.requeueAfter = 0 // a missing backend does not matter until it is accepted
		if err := r.deleteHubCopy(ctx, s, w); err != nil {
			return nil, resolved, err
		}
		return nil, resolved, &routeRefusedError{notAccepted}
	}
	down, err := downstreamRoute(s.route, hubNS, s.parents, hubNamespaces)
	if err != nil {
		return nil, resolved, err
	}
	if err := r.keepHeldHostnames(ctx, s, hub, down, hubNS, hubNamespaces); err != nil {
		return nil, resolved, err
	}
	wanted := map[string]bool{}
	for _, b := range backends {
		for _, o := range b.objects() {
			wanted[o.kind+"/"+o.obj.GetName()] = true
			if _, err := w.apply(ctx, o.kind, o.obj, o.copy); err != nil {
				return nil, resolved, err
			}
		}
	}
	written, err := w.apply(ctx, kindHTTPRoute, down, copyRouteSpec)
	if err != nil {
		return nil, resolved, err
	}
	if err := r.deletePreviousBackendObjects(ctx, s, w, wanted); err != nil {
		return nil, resolved, err
	}
	return written.(*gatewayv1.HTTPRoute), resolved, r.deleteBackendObjects(ctx, s, w, wanted)
}

// resolveBackends builds the hub objects of every backendRef an edge can reach and
// judges ResolvedRefs: True when every one has them, else False with the first
// refusal's reason and every refusal's message. refused (checkRouteReferences) are not
// looked up: their backendRefs, and those of a rule with a refused filter, get nothing.
func (r *HTTPRouteReconciler) resolveBackends(ctx context.Context, s *routeScope, hubNS string, refused []routeRefusal) ([]hubBackend, verdict, error) {
	var out []hubBackend
	var reason gatewayv1.RouteConditionReason
	var problems []string
	for _, f := range refused {
		if !f.notAccepted() {
			reason = cmp.Or(reason, f.reason)
			problems = append(problems, f.message("backendRef"))
		}
	}
	for i, rule := range s.route.Spec.Rules {
		for j, ref := range rule.BackendRefs {
			if refusedAt(refused, i, j) {
				continue
			}
			b, err := r.resolveBackend(ctx, s, ref.BackendObjectReference, BackendObjectName(s.route.UID, i, j), hubNS)
			var unresolved *unresolvedError
			if errors.As(err, &unresolved) {
				reason = cmp.Or(reason, unresolved.reason)
				problems = append(problems, fmt.Sprintf("rule %d backendRef %d (%s): %s", i, j, ref.Name, unresolved.msg))
				continue
			}
			if err != nil {
				return nil, verdict{}, err
			}
			out = append(out, b)
		}
	}
	if len(problems) > 0 {
		return out, verdict{false, string(reason), strings.Join(problems, "; ")}, nil
	}
	return out, verdict{true, string(gatewayv1.RouteReasonResolvedRefs), "Every backend is on the hub"}, nil
}

// resolveBackend builds the hub objects named name of one backendRef, a Service or an
// EndpointSlice of the route's namespace (judgeBackendRef).
func (r *HTTPRouteReconciler) resolveBackend(ctx context.Context, s *routeScope, ref gatewayv1.BackendObjectReference, name, hubNS string) (hubBackend, error) {
	if isSliceRef(ref) {
		return r.resolveSliceBackend(ctx, s, ref, name, hubNS)
	}
	svc := &corev1.Service{}
	err := s.cluster.GetClient().Get(ctx, client.ObjectKey{Namespace: s.route.Namespace, Name: string(ref.Name)}, svc)
	if apierrors.IsNotFound(err) {
		s.requeueAfter = backendRetryAfter
		return buildHubBackend(nil, 0, name, hubNS)
	}
	if err != nil {
		return hubBackend{}, fmt.Errorf("reading backend Service %s/%s: %w", s.route.Namespace, ref.Name, err)
	}
	if why := refusedBackendHost(svc.Spec.ExternalName, r.Config.BackendReservedDomains); svc.Spec.ExternalName != "" && why != "" {
		return hubBackend{}, &unresolvedError{gatewayv1.RouteReasonRefNotPermitted, fmt.Sprintf("Service %s: %s", svc.Name, why)}
	}
	return buildHubBackend(svc, ptr.Deref(ref.Port, 0), name, hubNS)
}

// resolveSliceBackend builds the hub objects named name of a backendRef to an upstream
// EndpointSlice, the previous manager's form of a proxy backend.
func (r *HTTPRouteReconciler) resolveSliceBackend(ctx context.Context, s *routeScope, ref gatewayv1.BackendObjectReference, name, hubNS string) (hubBackend, error) {
	slice := &discoveryv1.EndpointSlice{}
	err := s.cluster.GetClient().Get(ctx, client.ObjectKey{Namespace: s.route.Namespace, Name: string(ref.Name)}, slice)
	if apierrors.IsNotFound(err) {
		s.requeueAfter = backendRetryAfter
		return buildHubBackendFromSlice(nil, 0, name, hubNS)
	}
	if err != nil {
		return hubBackend{}, fmt.Errorf("reading backend EndpointSlice %s/%s: %w", s.route.Namespace, ref.Name, err)
	}
	for _, e := range slice.Endpoints {
		for _, a := range e.Addresses {
			if why := refusedSliceAddress(slice.AddressType, a, r.Config.BackendReservedDomains, r.Config.BackendDeniedNetworks); why != "" {
				return hubBackend{}, &unresolvedError{gatewayv1.RouteReasonRefNotPermitted, fmt.Sprintf("EndpointSlice %s: %s", slice.Name, why)}
			}
		}
	}
	return buildHubBackendFromSlice(slice, ptr.Deref(ref.Port, 0), name, hubNS)
}

// refusedSliceAddress returns why address, of an upstream EndpointSlice of addressType,
// may not be a backend, or "": an IP address by netpolicy.Refused (the same check as an
// HTTPProxy's endpoint, so a slice written by hand bypasses nothing), a DNS name by
// refusedBackendHost; a connector's placeholder is left to buildHubBackendFromSlice.
func refusedSliceAddress(addressType discoveryv1.AddressType, address string, reserved []string, denied []netpolicy.DeniedNetwork) string {
	switch addressType {
	case discoveryv1.AddressTypeFQDN:
		if address == "connector.local" {
			return ""
		}
		return refusedBackendHost(address, reserved)
	case discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6:
		return netpolicy.Refused(address, denied)
	}
	return fmt.Sprintf("address type %s is not a backend's", addressType)
}

// backendRetryAfter is how soon a route whose backend Service is missing looks again;
// routes do not watch Services (a proxy writes its Services before its route).
const backendRetryAfter = 30 * time.Second

// deleteBackendObjects deletes the route's backend objects in w's namespace not in keep
// (kind/name; nil keeps none, and adds the names the rules give), found in the hub
// cache and in Written, each through hubWriter.deleteAttached.
func (r *HTTPRouteReconciler) deleteBackendObjects(ctx context.Context, s *routeScope, w hubWriter, keep map[string]bool) error {
	for _, kind := range backendKinds {
		names := w.written.namesOf(w.owner.UID, kind.name, w.ns)
		if r.HubCache != nil {
			cached, err := labelledNames(ctx, r.HubCache, kind.list(), w)
			if err != nil {
				return err
			}
			names = append(names, cached...)
		}
		if keep == nil {
			for i, rule := range s.route.Spec.Rules {
				for j := range rule.BackendRefs {
					names = append(names, BackendObjectName(s.route.UID, i, j))
				}
			}
		}
		slices.Sort(names)
		for _, name := range slices.Compact(names) {
			if keep[kind.name+"/"+name] {
				continue
			}
			obj := kind.object()
			obj.SetName(name)
			obj.SetNamespace(w.ns)
			if err := w.deleteAttached(ctx, kind.name, obj); err != nil {
				return err
			}
		}
	}
	return nil
}

// labelledNames returns the names of list's kind in w's namespace labelled for w's owner.
func labelledNames(ctx context.Context, reader client.Reader, list client.ObjectList, w hubWriter) ([]string, error) {
	if err := reader.List(ctx, list, client.InNamespace(w.ns), w.ownerLabels()); err != nil {
		return nil, fmt.Errorf("listing the hub cache's %T in %s: %w", list, w.ns, err)
	}
	var out []string
	err := meta.EachListItem(list, func(o runtime.Object) error {
		out = append(out, o.(client.Object).GetName())
		return nil
	})
	return out, err
}

// backendKind is one kind of a backend's hub objects.
type backendKind struct {
	name   string
	object func() client.Object
	list   func() client.ObjectList
}

// backendKinds are the kinds of a backend's hub objects, the policy first so a
// deletion never leaves a policy naming a Service that is gone.
var backendKinds = []backendKind{
	{kindBackendTLSPolicy, func() client.Object { return &gatewayv1.BackendTLSPolicy{} }, func() client.ObjectList { return &gatewayv1.BackendTLSPolicyList{} }},
	{kindEndpointSlice, func() client.Object { return &discoveryv1.EndpointSlice{} }, func() client.ObjectList { return &discoveryv1.EndpointSliceList{} }},
	{kindService, func() client.Object { return &corev1.Service{} }, func() client.ObjectList { return &corev1.ServiceList{} }},
}

func copyRouteSpec(dst, src client.Object) error {
	dst.(*gatewayv1.HTTPRoute).Spec = *src.(*gatewayv1.HTTPRoute).Spec.DeepCopy()
	return nil
}
