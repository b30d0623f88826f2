package gateway

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"anchorage/api/v1alpha"
	"anchorage/pkg/anchor"
)

// collectOrphans deletes, as a garbage collector would, the upstream objects still
// controlled by the proxy key names once that proxy is gone without this manager's
// finalizer having run: the previous manager finished a proxy's deletion on a plane
// that runs no garbage collector, so its Gateway, HTTPRoute and backend EndpointSlices
// stayed, and with them their anchors and every hub object (the resync keeps an anchor
// whose owner is live). Their own finalizers then clear the hub.
//
// The proxy's cache has missed it already; the orphans are found in the cache, the
// proxy's absence is proven live (NotFoundProvesAbsence), or a live proxy of that name
// is a newer one whose UID they do not name, and each delete carries the orphan's UID.
// A project with nothing left of a gone proxy costs no API call.
func collectOrphans(ctx context.Context, cl cluster.Cluster, key types.NamespacedName) error {
	var candidates []client.Object
	for _, list := range []client.ObjectList{&gatewayv1.GatewayList{}, &gatewayv1.HTTPRouteList{}, &corev1.ServiceList{}, &discoveryv1.EndpointSliceList{}} {
		if err := cl.GetClient().List(ctx, list, client.InNamespace(key.Namespace)); err != nil {
			return fmt.Errorf("listing %T in %s: %w", list, key.Namespace, err)
		}
		_ = meta.EachListItem(list, func(o runtime.Object) error {
			if obj := o.(client.Object); orphanOf(obj, key.Name, "") {
				candidates = append(candidates, obj)
			}
			return nil
		})
	}
	if len(candidates) == 0 {
		return nil
	}
	live, err := liveProxyUID(ctx, cl.GetAPIReader(), key)
	if err != nil {
		return err
	}
	for _, obj := range candidates {
		if !orphanOf(obj, key.Name, live) {
			continue
		}
		logf.FromContext(ctx).V(1).Info("Deleting an upstream object whose HTTPProxy is gone", "object", klog.KObj(obj), "kind", fmt.Sprintf("%T", obj), "proxyUID", controllingProxy(obj).UID)
		if err := deleteExact(ctx, cl.GetClient(), obj); err != nil {
			return err
		}
	}
	return nil
}

// liveProxyUID reads the proxy key names live: its UID, or "" when a NotFound proves it
// absent. Any other answer is an error: nothing is deleted on a guess.
func liveProxyUID(ctx context.Context, reader client.Reader, key types.NamespacedName) (types.UID, error) {
	proxy := &v1alpha.HTTPProxy{}
	err := reader.Get(ctx, key, proxy)
	switch {
	case err == nil:
		return proxy.UID, nil
	case apierrors.IsNotFound(err) && anchor.NotFoundProvesAbsence(err, v1alpha.GroupVersion.WithResource("httpproxies").GroupResource(), key.Name):
		return "", nil
	}
	return "", fmt.Errorf("reading HTTPProxy %s live: %w", key, err)
}

// orphanOf reports whether obj is not being deleted yet and has one owner, its
// controller, an HTTPProxy named proxy whose UID is not live ("": no proxy of that name
// is live). An object with another owner is left, as a garbage collector leaves an
// object while one of its owners exists.
func orphanOf(obj client.Object, proxy string, live types.UID) bool {
	p := controllingProxy(obj)
	return p != nil && p.Name == proxy && p.UID != live && len(obj.GetOwnerReferences()) == 1 && obj.GetDeletionTimestamp() == nil
}
