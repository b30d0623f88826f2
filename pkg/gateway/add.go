package gateway

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	mcbuilder "sigs.k8s.io/multicluster-runtime/pkg/builder"
	mccontroller "sigs.k8s.io/multicluster-runtime/pkg/controller"
	mchandler "sigs.k8s.io/multicluster-runtime/pkg/handler"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"
	mcsource "sigs.k8s.io/multicluster-runtime/pkg/source"

	"anchorage/api/v1alpha"
	"anchorage/pkg/anchor"
	"anchorage/pkg/anchor/resync"
	"anchorage/pkg/domain"
	"anchorage/pkg/platform"
)

// Options configure SetupWithManager: Config as given (pkg/config checks it), a nil
// dependency its documented default.
type Options struct {
	Config
	// Clusters reaches projects and the hub. Default ManagerClusters(mgr).
	Clusters Clusters
	// Admission is entered around every reconcile. Default OpenAdmission.
	Admission Admission
	// Registry receives the package's metrics. Default controller-runtime's registry.
	Registry prometheus.Registerer
	// Anchors is the hub's anchor cache that the finalizers' ambiguity check reads
	// (anchor.DeleteIndexed). Default: resync.AddAnchorCache on the manager.
	Anchors anchor.NameIndex
	// Written remembers the hub objects the reconcilers wrote, for their finalizers.
	// Default: NewWrittenObjects(DefaultWrittenOwners).
	Written *WrittenObjects
}

// Setup is the gateway data path wired into a manager.
type Setup struct {
	// Metrics are the counters the reconcilers update.
	Metrics *Metrics

	proxies, gateways, routes *enqueuer
	gates                     *projectGates
}

// WatchesAllKinds reports whether project's deferred watches have started: an HTTPProxy
// or one of our Gateways has been reconciled there since it was engaged.
func (s *Setup) WatchesAllKinds(project string) bool {
	return s.gates != nil && s.gates.isOpen(multicluster.ClusterName(project))
}

// enqueueControllingProxy enqueues the HTTPProxy controlling an object, as Owns does.
func enqueueControllingProxy(name multicluster.ClusterName, cl cluster.Cluster) handler.TypedEventHandler[client.Object, mcreconcile.Request] {
	return mchandler.ForCluster(handler.WithLowPriorityWhenUnchanged(handler.EnqueueRequestForOwner(
		cl.GetScheme(), cl.GetRESTMapper(), &v1alpha.HTTPProxy{}, handler.OnlyControllerOwner())), name)
}

// routeParentIndex indexes HTTPRoutes by the "<namespace>/<name>" of every Gateway
// they attach to, so a Gateway event finds its routes without a full list.
const routeParentIndex = "anchorage.parentGateway"

// SetupWithManager adds the HTTPProxy, Gateway, HTTPRoute and EndpointSlice controllers
// to mgr. Each watches its kind on every project; the Gateway and HTTPRoute controllers
// also watch their downstream objects on the hub, mapped back through their labels.
func SetupWithManager(ctx context.Context, mgr mcmanager.Manager, opts Options) (*Setup, error) {
	opts.Clusters = cmp.Or(opts.Clusters, ManagerClusters(mgr))
	opts.Admission = cmp.Or[Admission](opts.Admission, OpenAdmission{})
	opts.Registry = cmp.Or[prometheus.Registerer](opts.Registry, ctrlmetrics.Registry)
	metrics, err := NewMetrics(opts.Registry)
	if err != nil {
		return nil, err
	}
	if opts.Written == nil {
		opts.Written = NewWrittenObjects(DefaultWrittenOwners)
	}
	if opts.Anchors == nil {
		if opts.Anchors, err = resync.AddAnchorCache(ctx, mgr); err != nil {
			return nil, err
		}
	}
	s := &Setup{Metrics: metrics, proxies: &enqueuer{}, gateways: &enqueuer{}, routes: &enqueuer{}}
	// Fair share: hub writes and proxies by project here, workers in newController.
	opts.Clusters = fairClusters{Clusters: opts.Clusters, limits: newHubWriteLimits(opts.ProjectHubWritesPerSecond, clock.RealClock{}, metrics.hubWriteWaits)}
	slots := newProxySlots(opts.ProxiesPerProject, opts.GatewayClassName, clock.RealClock{}, func(kind string, req mcreconcile.Request) {
		if kind == kindGateway {
			s.gateways.add(req)
			return
		}
		s.proxies.add(req)
	})
	// The HTTPProxy gauge counts a project only while it is engaged here.
	if err := mgr.Add(metrics.Proxies); err != nil {
		return nil, fmt.Errorf("adding the HTTPProxy condition gauge: %w", err)
	}

	if err := mgr.GetFieldIndexer().IndexField(ctx, &gatewayv1.HTTPRoute{}, routeParentIndex, routeParentKeys); err != nil {
		return nil, fmt.Errorf("indexing HTTPRoutes by parent Gateway: %w", err)
	}
	hubCache := mgr.GetLocalManager().GetCache()

	// Watches past the three WatchedKinds wait for the project's gate (deferred_watch.go).
	gates := newProjectGates()
	proxyCtrl, err := finalizersFirst(newController(mgr, "httpproxy", opts.Config, metrics).
		For(&v1alpha.HTTPProxy{}, mcbuilder.WithPredicates(ownChanges(v1alpha.HTTPProxyFinalizer))), &v1alpha.HTTPProxy{}, v1alpha.HTTPProxyFinalizer).
		WatchesRawSource(s.proxies.source()).
		Build(opening{gates: gates, TypedReconciler: &HTTPProxyReconciler{Clusters: opts.Clusters, Admission: opts.Admission, Config: opts.Config, Metrics: metrics, Anchors: opts.Anchors, Slots: slots}})
	if err != nil {
		return nil, fmt.Errorf("setting up the HTTPProxy controller: %w", err)
	}
	owned := deferredSource{gates: gates}
	for _, kind := range []client.Object{&gatewayv1.Gateway{}, &gatewayv1.HTTPRoute{}, &corev1.Service{}, &discoveryv1.EndpointSlice{}} {
		owned.inners = append(owned.inners, mcsource.TypedKind[client.Object, mcreconcile.Request](kind, enqueueControllingProxy))
	}
	if err := proxyCtrl.MultiClusterWatch(owned); err != nil {
		return nil, fmt.Errorf("watching the objects HTTPProxies own: %w", err)
	}

	gatewayCtrl, err := finalizersFirst(newController(mgr, "gateway", opts.Config, metrics).
		For(&gatewayv1.Gateway{}, mcbuilder.WithPredicates(ofClassOrFinalized(opts.GatewayClassName), ownChanges(GatewayFinalizer))), &gatewayv1.Gateway{}, GatewayFinalizer).
		WatchesRawSource(hubSource(hubCache, &gatewayv1.Gateway{}, kindGateway)).
		WatchesRawSource(s.gateways.source()).
		Build(opening{gates: gates, TypedReconciler: &GatewayReconciler{Clusters: opts.Clusters, Admission: opts.Admission, Config: opts.Config, Metrics: metrics, Anchors: opts.Anchors, Written: opts.Written, Slots: slots, Routes: enqueueRoutesOf(opts.Clusters, s.routes), programmed: &hostnameSets{last: map[string]string{}}}})
	if err != nil {
		return nil, fmt.Errorf("setting up the Gateway controller: %w", err)
	}
	// cert-manager reporting a Certificate Ready or failed (CertificatesReady).
	if err := gatewayCtrl.Watch(hubSource(hubCache, certificateRef("", ""), kindGateway)); err != nil {
		return nil, fmt.Errorf("watching the hub's Certificates: %w", err)
	}
	// external-dns reporting it has published a DNSEndpoint's records.
	if opts.DNSEndpoints {
		if err := gatewayCtrl.Watch(hubSource(hubCache, platform.DNSEndpointRef("", ""), kindGateway)); err != nil {
			return nil, fmt.Errorf("watching the hub's DNSEndpoints: %w", err)
		}
	}
	// A Domain verified (or gone) changes what its namespace's Gateways may program.
	if opts.VerifyHostnames {
		domains := mcsource.TypedKind[client.Object, mcreconcile.Request](&v1alpha.Domain{}, gatewaysOfDomain)
		if err := gatewayCtrl.MultiClusterWatch(deferredSource{inners: []mcsource.TypedSource[client.Object, mcreconcile.Request]{domains}, gates: gates}); err != nil {
			return nil, fmt.Errorf("watching Domains for their Gateways: %w", err)
		}
	}

	routeCtrl, err := finalizersFirst(newController(mgr, "httproute", opts.Config, metrics).
		For(&gatewayv1.HTTPRoute{}, mcbuilder.WithPredicates(ownChanges(HTTPRouteFinalizer))), &gatewayv1.HTTPRoute{}, HTTPRouteFinalizer).
		WatchesRawSource(hubSource(hubCache, &gatewayv1.HTTPRoute{}, kindHTTPRoute)).
		WatchesRawSource(hubSource(hubCache, &corev1.Service{}, kindHTTPRoute)).
		WatchesRawSource(hubSource(hubCache, &discoveryv1.EndpointSlice{}, kindHTTPRoute)).
		WatchesRawSource(hubSource(hubCache, &gatewayv1.BackendTLSPolicy{}, kindHTTPRoute)).
		WatchesRawSource(s.routes.source()).
		Build(&HTTPRouteReconciler{Clusters: opts.Clusters, Admission: opts.Admission, Config: opts.Config, Metrics: metrics, Anchors: opts.Anchors, Written: opts.Written, HubCache: hubCache})
	if err != nil {
		return nil, fmt.Errorf("setting up the HTTPRoute controller: %w", err)
	}
	// A Gateway matters to routes only once it is ours, which opens the gate. Not on a
	// status-only update: routes read only a parent's existence, namespace and class.
	gatewaysForRoutes := mcsource.TypedKind[client.Object, mcreconcile.Request](&gatewayv1.Gateway{}, routesOfGateway, ownChanges(""))
	if err := routeCtrl.MultiClusterWatch(deferredSource{inners: []mcsource.TypedSource[client.Object, mcreconcile.Request]{gatewaysForRoutes}, gates: gates}); err != nil {
		return nil, fmt.Errorf("watching Gateways for their HTTPRoutes: %w", err)
	}
	// An IP backend's address is in its slice, not in the route (no Host rewrite over
	// http): a change of one of the slices this manager writes brings back the route of
	// the proxy controlling it.
	slicesForRoutes := mcsource.TypedKind[client.Object, mcreconcile.Request](&discoveryv1.EndpointSlice{}, routeOfControllingProxy,
		predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetLabels()[discoveryv1.LabelManagedBy] == endpointSliceManagedBy }))
	if err := routeCtrl.MultiClusterWatch(deferredSource{inners: []mcsource.TypedSource[client.Object, mcreconcile.Request]{slicesForRoutes}, gates: gates}); err != nil {
		return nil, fmt.Errorf("watching backend EndpointSlices for their HTTPRoutes: %w", err)
	}
	// The previous manager's backend EndpointSlices, reconciled only to be finalized.
	err = newController(mgr, "endpointslice", opts.Config, metrics).
		For(&discoveryv1.EndpointSlice{}, mcbuilder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return controllerutil.ContainsFinalizer(o, HTTPRouteFinalizer)
		}))).
		Complete(&EndpointSliceReconciler{Clusters: opts.Clusters, Admission: opts.Admission, Config: opts.Config, Metrics: metrics, Anchors: opts.Anchors})
	if err != nil {
		return nil, fmt.Errorf("setting up the EndpointSlice controller: %w", err)
	}
	s.gates = gates
	return s, nil
}

// Defer wraps a per-project source so that it starts with the project's deferred
// watches: an idle project does not pay for it.
func (s *Setup) Defer(src mcsource.TypedSource[client.Object, mcreconcile.Request]) mcsource.TypedSource[client.Object, mcreconcile.Request] {
	return deferredSource{inners: []mcsource.TypedSource[client.Object, mcreconcile.Request]{src}, gates: s.gates}
}

// gatewaysOfDomain enqueues the Gateways in a Domain's namespace with a listener
// hostname the Domain covers.
func gatewaysOfDomain(name multicluster.ClusterName, cl cluster.Cluster) handler.TypedEventHandler[client.Object, mcreconcile.Request] {
	return handler.TypedEnqueueRequestsFromMapFunc[client.Object, mcreconcile.Request](func(ctx context.Context, obj client.Object) []mcreconcile.Request {
		d, ok := obj.(*v1alpha.Domain)
		gws := &gatewayv1.GatewayList{}
		if !ok || cl.GetClient().List(ctx, gws, client.InNamespace(d.Namespace)) != nil {
			return nil
		}
		var out []mcreconcile.Request
		for i := range gws.Items {
			for h := range listenerHostnames(&gws.Items[i]) {
				if domain.Covers(d.Spec.DomainName, h) {
					out = append(out, mcreconcile.Request{ClusterName: name, Request: reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&gws.Items[i])}})
					break
				}
			}
		}
		return out
	})
}

// HubCacheByObject restricts the hub cache's Gateways, HTTPRoutes, Services,
// EndpointSlices, BackendTLSPolicies, Certificates and DNSEndpoints to those carrying
// the cluster-name label, the downstream objects. Pass it as the hub manager's cache.Options.ByObject.
func HubCacheByObject() map[client.Object]cache.ByObject {
	req, err := labels.NewRequirement(anchor.LabelClusterName, selection.Exists, nil)
	if err != nil {
		panic(fmt.Sprintf("building the downstream label selector: %v", err))
	}
	downstream := labels.NewSelector().Add(*req)
	return map[client.Object]cache.ByObject{
		&gatewayv1.Gateway{}:            {Label: downstream},
		&gatewayv1.HTTPRoute{}:          {Label: downstream},
		&corev1.Service{}:               {Label: downstream},
		&discoveryv1.EndpointSlice{}:    {Label: downstream},
		&gatewayv1.BackendTLSPolicy{}:   {Label: downstream},
		platform.DNSEndpointRef("", ""): {Label: downstream},
		certificateRef("", ""):          {Label: downstream},
	}
}

// hubSource watches downstream objects of obj's type on the hub and enqueues their
// upstream owners of kind.
func hubSource(hubCache cache.Cache, obj client.Object, kind string) source.TypedSource[mcreconcile.Request] {
	return source.TypedKind[client.Object, mcreconcile.Request](hubCache, obj,
		handler.TypedEnqueueRequestsFromMapFunc[client.Object, mcreconcile.Request](upstreamOf(gatewayv1.GroupName, kind)))
}

// ofClassOrFinalized passes Gateways of class and Gateways carrying our finalizer (a
// Gateway whose class changed away must still be finalized when deleted).
func ofClassOrFinalized(class string) predicate.Predicate {
	return predicate.NewPredicateFuncs(func(obj client.Object) bool {
		gw, ok := obj.(*gatewayv1.Gateway)
		return ok && (string(gw.Spec.GatewayClassName) == class || controllerutil.ContainsFinalizer(gw, GatewayFinalizer))
	})
}

// routeParentKeys returns the index keys of a route: its parent Gateways.
func routeParentKeys(obj client.Object) []string {
	route, ok := obj.(*gatewayv1.HTTPRoute)
	if !ok {
		return nil
	}
	var keys []string
	for _, p := range route.Spec.ParentRefs {
		if isGatewayParent(p) {
			keys = append(keys, parentNamespace(p, route.Namespace)+"/"+string(p.Name))
		}
	}
	return keys
}

// routesOfGateway enqueues the routes attached to a Gateway when it changes, so a route
// created before its Gateway (or before the Gateway became ours) is programmed.
func routesOfGateway(name multicluster.ClusterName, cl cluster.Cluster) handler.TypedEventHandler[client.Object, mcreconcile.Request] {
	return handler.TypedEnqueueRequestsFromMapFunc[client.Object, mcreconcile.Request](func(ctx context.Context, gw client.Object) []mcreconcile.Request {
		return routeRequestsOf(ctx, name, cl, gw)
	})
}

// routeOfControllingProxy enqueues the HTTPRoute of the HTTPProxy controlling an
// object: the route named after the proxy, in its namespace.
func routeOfControllingProxy(name multicluster.ClusterName, _ cluster.Cluster) handler.TypedEventHandler[client.Object, mcreconcile.Request] {
	return handler.TypedEnqueueRequestsFromMapFunc[client.Object, mcreconcile.Request](func(_ context.Context, obj client.Object) []mcreconcile.Request {
		ref := metav1.GetControllerOf(obj)
		if ref == nil || ref.Kind != kindHTTPProxy || !strings.HasPrefix(ref.APIVersion, v1alpha.GroupVersion.Group+"/") {
			return nil
		}
		return []mcreconcile.Request{{ClusterName: name, Request: reconcile.Request{NamespacedName: client.ObjectKey{Namespace: obj.GetNamespace(), Name: ref.Name}}}}
	})
}

// routeRequestsOf returns the requests of the routes in cl's cache whose parent is gw.
func routeRequestsOf(ctx context.Context, name multicluster.ClusterName, cl cluster.Cluster, gw client.Object) []mcreconcile.Request {
	routes := &gatewayv1.HTTPRouteList{}
	key := gw.GetNamespace() + "/" + gw.GetName()
	if err := cl.GetClient().List(ctx, routes, client.MatchingFields{routeParentIndex: key}); err != nil {
		// A provider that did not apply the index: fall back to a full list.
		if err := cl.GetClient().List(ctx, routes); err != nil {
			return nil
		}
	}
	var out []mcreconcile.Request
	for i := range routes.Items {
		if slices.Contains(routeParentKeys(&routes.Items[i]), key) {
			out = append(out, mcreconcile.Request{ClusterName: name, Request: reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&routes.Items[i])}})
		}
	}
	return out
}

// enqueueRoutesOf has the HTTPRoute controller (routes) reconcile gw's routes again.
func enqueueRoutesOf(clusters Clusters, routes *enqueuer) func(context.Context, string, *gatewayv1.Gateway) {
	return func(ctx context.Context, project string, gw *gatewayv1.Gateway) {
		cl, err := clusters.Project(ctx, project)
		if err != nil {
			return
		}
		for _, req := range routeRequestsOf(ctx, multicluster.ClusterName(project), cl, gw) {
			routes.add(req)
		}
	}
}

// newController starts controller name's builder with the workers, the fair queue and
// the manager's SkipNameValidation (which the multicluster builder does not copy).
func newController(mgr mcmanager.Manager, name string, c Config, m *Metrics) *mcbuilder.Builder {
	depth := m.queueDepth.WithLabelValues(name)
	return mcbuilder.ControllerManagedBy(mgr).Named(name).WithOptions(mccontroller.Options{
		SkipNameValidation:      mgr.GetControllerOptions().SkipNameValidation,
		MaxConcurrentReconciles: c.Workers,
		NewQueue: func(_ string, limiter workqueue.TypedRateLimiter[mcreconcile.Request]) workqueue.TypedRateLimitingInterface[mcreconcile.Request] {
			q := newFairQueue(c.ProjectWorkers, limiter, clock.RealClock{})
			q.depth = func(n int) { depth.Set(float64(n)) }
			return q
		},
	})
}

// WatchedKinds are the project kinds watched from a project's engagement on (the shard
// syncs their informers first); the others wait for its gate (deferred_watch.go).
func WatchedKinds() []client.Object {
	return []client.Object{&v1alpha.HTTPProxy{}, &gatewayv1.Gateway{}, &gatewayv1.HTTPRoute{}}
}

// enqueuer feeds requests from outside a controller into its queue, keeping those made
// before the controller starts.
type enqueuer struct {
	mu      sync.Mutex
	queue   workqueue.TypedRateLimitingInterface[mcreconcile.Request]
	pending []mcreconcile.Request
}

// source returns the controller source that connects the enqueuer to its queue.
func (e *enqueuer) source() source.TypedSource[mcreconcile.Request] {
	return source.TypedFunc[mcreconcile.Request](func(_ context.Context, q workqueue.TypedRateLimitingInterface[mcreconcile.Request]) error {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.queue = q
		for _, req := range e.pending {
			q.Add(req)
		}
		e.pending = nil
		return nil
	})
}

func (e *enqueuer) add(req mcreconcile.Request) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.queue == nil {
		e.pending = append(e.pending, req)
		return
	}
	e.queue.Add(req)
}

// Enqueue asks the reconciler of owner's kind (HTTPProxy, Gateway or HTTPRoute) to
// reconcile owner, by name (the UID is ignored), under the usual admission. The resync
// uses it to have a live owner re-attach an object hanging on a stale anchor.
func (s *Setup) Enqueue(owner anchor.Owner) error {
	e, ok := map[schema.GroupKind]*enqueuer{
		{Group: gatewayv1.GroupName, Kind: kindGateway}:          s.gateways,
		{Group: gatewayv1.GroupName, Kind: kindHTTPRoute}:        s.routes,
		{Group: v1alpha.GroupVersion.Group, Kind: kindHTTPProxy}: s.proxies,
	}[schema.GroupKind{Group: owner.Group, Kind: owner.Kind}]
	if !ok { // the inner error is wrapped, as it was
		return fmt.Errorf("enqueuing %s: %w", owner, fmt.Errorf("no reconciler for kind %s in group %q", owner.Kind, owner.Group))
	}
	e.add(requestFor(owner))
	return nil
}

func requestFor(owner anchor.Owner) mcreconcile.Request {
	return mcreconcile.Request{
		ClusterName: multicluster.ClusterName(owner.Project),
		Request:     reconcile.Request{NamespacedName: types.NamespacedName{Namespace: owner.Namespace, Name: owner.Name}},
	}
}

// upstreamOf maps a downstream object on the hub to a request for its upstream owner of
// group and kind, decoded from its labels; anything else maps to nothing.
func upstreamOf(group, kind string) func(context.Context, client.Object) []mcreconcile.Request {
	return func(_ context.Context, obj client.Object) []mcreconcile.Request {
		owner, ok := downstreamOwner(obj)
		if !ok || owner.Group != group || owner.Kind != kind {
			return nil
		}
		return []mcreconcile.Request{requestFor(owner)}
	}
}

// placeholderAnchor stands in for the anchor of an object that hangs on none.
var placeholderAnchor = anchor.Name("00000000-0000-0000-0000-000000000000")

// downstreamOwner decodes the owner of a downstream object from its labels (and the
// UID from its anchor reference, when it has one).
func downstreamOwner(obj client.Object) (anchor.Owner, bool) {
	name := placeholderAnchor
	for _, ref := range obj.GetOwnerReferences() {
		if ref.APIVersion == "v1" && ref.Kind == "ConfigMap" && strings.HasPrefix(ref.Name, anchor.NamePrefix) {
			name = ref.Name
			break
		}
	}
	owner, err := anchor.Decode(name, obj.GetLabels())
	if err != nil {
		// A malformed anchor name must not hide the labels: decode with the placeholder.
		if owner, err = anchor.Decode(placeholderAnchor, obj.GetLabels()); err != nil {
			return anchor.Owner{}, false
		}
	}
	return owner, true
}

// ownChangeMatters reports whether an update changed what the reconciler acts on: UID,
// generation, labels, annotations, finalizers (but ours added alone), deletion timestamp
// or owner references. A resync (same resourceVersion) does too.
func ownChangeMatters(old, new client.Object, ours string) bool {
	if old == nil || new == nil {
		return true
	}
	if old.GetResourceVersion() == new.GetResourceVersion() {
		return true // a resync: redelivered on purpose
	}
	return old.GetUID() != new.GetUID() ||
		old.GetGeneration() != new.GetGeneration() ||
		!maps.Equal(old.GetLabels(), new.GetLabels()) ||
		!maps.Equal(old.GetAnnotations(), new.GetAnnotations()) ||
		finalizersChanged(old.GetFinalizers(), new.GetFinalizers(), ours) ||
		!old.GetDeletionTimestamp().Equal(new.GetDeletionTimestamp()) ||
		!equality.Semantic.DeepEqual(old.GetOwnerReferences(), new.GetOwnerReferences())
}

// finalizersChanged reports whether the finalizers went from old to new other than by
// ours being appended to them (controllerutil.AddFinalizer appends).
func finalizersChanged(old, new []string, ours string) bool {
	if slices.Equal(old, new) {
		return false
	}
	oursAdded := !slices.Contains(old, ours) && slices.Equal(append(slices.Clone(old), ours), new)
	return !oursAdded
}

// ownChanges is the For watch's filter, which drops the reconcile's own status and
// finalizer writes (docs/design.md, Programmed means served): updates pass when
// ownChangeMatters; create, delete and generic events always pass.
func ownChanges(ours string) predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool { return ownChangeMatters(e.ObjectOld, e.ObjectNew, ours) },
	}
}

// terminatingPriority is the queue priority of an object that started terminating
// (docs/design.md, Finalizers): above the For watch's default (0) and the initial
// list's (LowPriority). Its requeues keep it.
const terminatingPriority = 100

// startedTerminating reports whether an update is the one where obj started
// terminating while carrying finalizer.
func startedTerminating(old, new client.Object, finalizer string) bool {
	return old != nil && new != nil &&
		old.GetDeletionTimestamp() == nil && new.GetDeletionTimestamp() != nil &&
		controllerutil.ContainsFinalizer(new, finalizer)
}

// enqueueTerminatingFirst is a handler, beside the For watch's, that adds an object
// that started terminating with finalizer at terminatingPriority (the queue keeps the
// higher of two priorities, so the order of the handlers does not matter).
func enqueueTerminatingFirst(finalizer string) mchandler.TypedEventHandlerFunc[client.Object, mcreconcile.Request] {
	return func(name multicluster.ClusterName, _ cluster.Cluster) handler.TypedEventHandler[client.Object, mcreconcile.Request] {
		return handler.TypedFuncs[client.Object, mcreconcile.Request]{
			UpdateFunc: func(_ context.Context, e event.TypedUpdateEvent[client.Object], q workqueue.TypedRateLimitingInterface[mcreconcile.Request]) {
				if !startedTerminating(e.ObjectOld, e.ObjectNew, finalizer) {
					return
				}
				req := mcreconcile.Request{ClusterName: name, Request: reconcile.Request{NamespacedName: client.ObjectKeyFromObject(e.ObjectNew)}}
				if pq, ok := q.(priorityqueue.PriorityQueue[mcreconcile.Request]); ok {
					pq.AddWithOpts(priorityqueue.AddOpts{Priority: ptr.To(terminatingPriority)}, req)
					return
				}
				q.Add(req)
			},
		}
	}
}

// finalizersFirst adds to a controller of obj's kind the watch that puts its
// finalizer's requests first.
func finalizersFirst(b *mcbuilder.Builder, obj client.Object, finalizer string) *mcbuilder.Builder {
	return b.Watches(obj, enqueueTerminatingFirst(finalizer))
}
