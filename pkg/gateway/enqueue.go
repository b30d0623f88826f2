package gateway

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	"anchorage/api/v1alpha"
	"anchorage/pkg/anchor"
)

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
