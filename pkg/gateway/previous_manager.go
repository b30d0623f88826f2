package gateway

import (
	"context"
	"fmt"
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	"anchorage/api/v1alpha"
	"anchorage/pkg/anchor"
)

// DefaultHostnameClaimsNamespace is the previous manager's, so its claims are adopted.
const DefaultHostnameClaimsNamespace = "datum-downstream-gateway-hostnames"

// unsupportedBackend returns why proxy has a connector or instance backend, or "".
func unsupportedBackend(proxy *v1alpha.HTTPProxy) string {
	for i, r := range proxy.Spec.Rules {
		for _, b := range r.Backends {
			switch {
			case b.Instance != nil:
				return fmt.Sprintf("rule %d: an instance backend (%s) cannot be programmed by this manager; the objects programmed for the proxy are left as they are", i, b.Instance.Name)
			case b.Connector != nil:
				return fmt.Sprintf("rule %d: a connector backend (%s) cannot be programmed by this manager; the objects programmed for the proxy are left as they are", i, b.Connector.Name)
			}
		}
	}
	return ""
}

// handsOff reports whether obj, an upstream Gateway or HTTPRoute, is controlled by an
// HTTPProxy with an unsupportedBackend: what is programmed for it is left while the
// proxy lives; its deletion is finalized like any other.
func handsOff(ctx context.Context, reader client.Reader, obj client.Object) (bool, error) {
	ref := metav1.GetControllerOf(obj)
	if ref == nil || ref.Kind != kindHTTPProxy || !strings.HasPrefix(ref.APIVersion, v1alpha.GroupVersion.Group+"/") {
		return false, nil
	}
	proxy := &v1alpha.HTTPProxy{}
	err := reader.Get(ctx, client.ObjectKey{Namespace: obj.GetNamespace(), Name: ref.Name}, proxy)
	if err != nil {
		return false, client.IgnoreNotFound(err)
	}
	return proxy.UID == ref.UID && unsupportedBackend(proxy) != "", nil
}

// isSliceRef reports whether ref names an EndpointSlice.
func isSliceRef(ref gatewayv1.BackendObjectReference) bool {
	return ptr.Deref(ref.Group, "") == discoveryv1.GroupName && ptr.Deref(ref.Kind, "") == kindEndpointSlice
}

// buildHubBackendFromSlice is buildHubBackend for an upstream EndpointSlice of one
// address: one the previous manager wrote for a proxy backend (so the route resolves to
// the same hub objects before and after it is rewritten), or one this manager writes for
// a backend named by an IP address (backendSlice). The hub slice has the same address
// type and the address; the caller has judged the address (netpolicy.Refused,
// refusedBackendHost).
func buildHubBackendFromSlice(slice *discoveryv1.EndpointSlice, port gatewayv1.PortNumber, name, hubNS string) (hubBackend, error) {
	if slice == nil {
		return hubBackend{}, &unresolvedError{gatewayv1.RouteReasonBackendNotFound, "EndpointSlice not found"}
	}
	if len(slice.Endpoints) != 1 || len(slice.Endpoints[0].Addresses) != 1 {
		return hubBackend{}, &unresolvedError{gatewayv1.RouteReasonBackendNotFound,
			fmt.Sprintf("EndpointSlice %s is not one address: a backend slice names one DNS name or IP address", slice.Name)}
	}
	address := slice.Endpoints[0].Addresses[0]
	switch slice.AddressType {
	case discoveryv1.AddressTypeFQDN:
		if address == "connector.local" {
			return hubBackend{}, &unresolvedError{gatewayv1.RouteReasonBackendNotFound, fmt.Sprintf("EndpointSlice %s is a connector's: not reachable from an edge", slice.Name)}
		}
	case discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6:
		addr, err := netip.ParseAddr(address)
		if err != nil || addr.Is4() != (slice.AddressType == discoveryv1.AddressTypeIPv4) {
			return hubBackend{}, &unresolvedError{gatewayv1.RouteReasonBackendNotFound, fmt.Sprintf("EndpointSlice %s: %q is not an address of type %s", slice.Name, address, slice.AddressType)}
		}
		address = addr.String()
	default:
		return hubBackend{}, &unresolvedError{gatewayv1.RouteReasonBackendNotFound, fmt.Sprintf("EndpointSlice %s has address type %s", slice.Name, slice.AddressType)}
	}
	var sp *corev1.ServicePort
	for _, p := range slice.Ports {
		if ptr.Deref(p.Port, 0) == int32(port) {
			sp = &corev1.ServicePort{Name: ptr.Deref(p.Name, ""), Port: int32(port), AppProtocol: p.AppProtocol}
		}
	}
	if sp == nil {
		return hubBackend{}, &unresolvedError{gatewayv1.RouteReasonBackendNotFound, fmt.Sprintf("EndpointSlice %s has no port %d", slice.Name, port)}
	}
	return buildHubBackendAt(slice.Annotations, sp, slice.AddressType, address, name, hubNS)
}

// isPreviousBackendSliceOf reports whether obj is the hub EndpointSlice the previous
// manager wrote for route (named after its UID, labelled for an upstream EndpointSlice
// of its project and namespace), which the route adopts.
func isPreviousBackendSliceOf(obj client.Object, route anchor.Owner) bool {
	if _, ok := obj.(*discoveryv1.EndpointSlice); !ok {
		return false
	}
	if !strings.HasPrefix(obj.GetName(), "route-"+string(route.UID)+"-rule-") {
		return false
	}
	labels := obj.GetLabels()
	if labels[anchor.LabelKind] != kindEndpointSlice || labels[anchor.LabelGroup] != discoveryv1.GroupName || labels[anchor.LabelNamespace] != route.Namespace {
		return false
	}
	p, err := anchor.ProjectFromClusterName(labels[anchor.LabelClusterName])
	return err == nil && p == route.Project
}

// isPreviousBackendOf reports whether obj, a hub object named for one of route's
// backendRefs, is what the previous manager wrote for that backend: its backend slice
// (isPreviousBackendSliceOf), or a Service or BackendTLSPolicy labelled for no upstream
// object and controlled by the hub HTTPRoute of the route's name. This manager's own
// are labelled for the route and hang on its anchor.
func isPreviousBackendOf(obj client.Object, route anchor.Owner) bool {
	if isPreviousBackendSliceOf(obj, route) {
		return true
	}
	switch obj.(type) {
	case *corev1.Service, *gatewayv1.BackendTLSPolicy:
	default:
		return false
	}
	if !strings.HasPrefix(obj.GetName(), "route-"+string(route.UID)+"-rule-") || obj.GetLabels()[anchor.LabelKind] != "" {
		return false
	}
	ref := metav1.GetControllerOf(obj)
	return ref != nil && ref.Kind == kindHTTPRoute && strings.HasPrefix(ref.APIVersion, gatewayv1.GroupName+"/") && ref.Name == route.Name
}

// deletePreviousBackendObjects deletes the hub objects the previous manager wrote for
// each backendRef of the route that has no hub objects wanted now (refused, such as a
// stored endpoint that is no public DNS name, or its backend gone). A resolved backend
// adopts them by writing over them; a refused one would leave them where the hub
// route's reference still reaches them, and the edge would keep serving the backend
// the proxy's condition says is refused.
func (r *HTTPRouteReconciler) deletePreviousBackendObjects(ctx context.Context, s *routeScope, w hubWriter, keep map[string]bool) error {
	for i, rule := range s.route.Spec.Rules {
		for j := range rule.BackendRefs {
			name := BackendObjectName(s.route.UID, i, j)
			for _, kind := range backendKinds {
				if keep[kind.name+"/"+name] {
					continue
				}
				existing := kind.object()
				err := w.hub.Get(ctx, client.ObjectKey{Namespace: w.ns, Name: name}, existing)
				if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
					continue
				}
				if err != nil {
					return fmt.Errorf("reading %s %s/%s on the hub: %w", kind.name, w.ns, name, err)
				}
				if !isPreviousBackendOf(existing, w.owner) || existing.GetDeletionTimestamp() != nil {
					continue
				}
				uid, rv := existing.GetUID(), existing.GetResourceVersion()
				logf.FromContext(ctx).Info("Deleting the previous manager's hub object of a backend with none wanted", "kind", kind.name, "object", klog.KObj(existing), "uid", uid)
				if err := w.hub.Delete(ctx, existing, client.Preconditions{UID: &uid, ResourceVersion: &rv}); err != nil && !apierrors.IsNotFound(err) {
					w.metrics.downstreamWrite(kind.name, resultError)
					return fmt.Errorf("deleting %s %s/%s on the hub: %w", kind.name, w.ns, name, err)
				}
				w.metrics.downstreamWrite(kind.name, resultDeleted)
			}
		}
	}
	return nil
}

// EndpointSliceReconciler finalizes the previous manager's upstream EndpointSlices
// carrying HTTPRouteFinalizer: a terminating slice's anchor goes, then the finalizer.
type EndpointSliceReconciler struct {
	Clusters  Clusters
	Admission Admission
	Config    Config
	Metrics   *Metrics
	// Anchors is the hub's anchor cache (anchor.DeleteIndexed).
	Anchors anchor.NameIndex
}

// Reconcile finalizes a terminating slice that carries the finalizer; nothing else.
func (r *EndpointSliceReconciler) Reconcile(ctx context.Context, req mcreconcile.Request) (reconcile.Result, error) {
	return admitAndRun(ctx, r.Admission, req, reconcileSteps[upstream]{
		load: r.load,
		phases: []phase[upstream]{
			r.finalize, // terminating: delete the slice's anchor, drop the finalizer
		},
	})
}

func (r *EndpointSliceReconciler) load(ctx context.Context, req mcreconcile.Request) (*upstream, error) {
	u, err := loadUpstream(ctx, r.Clusters, r.Config, req, &discoveryv1.EndpointSlice{}, discoveryv1.SchemeGroupVersion.WithKind(kindEndpointSlice), HTTPRouteFinalizer)
	if u == nil || err != nil {
		return nil, err
	}
	u.anchors, u.metrics = r.Anchors, r.Metrics
	return u, nil
}

// finalize deletes a terminating slice's anchor and removes the finalizer.
func (r *EndpointSliceReconciler) finalize(ctx context.Context, s *upstream) (bool, error) {
	return s.finalize(ctx, func(context.Context, hubWriter) error { return nil })
}
