package gateway

import (
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"anchorage/api/v1alpha"
)

// Status from the live read. Every status a reconciler writes is written after its
// live guard passed, and the guard has just read the object from the API server. The
// status is built on that read, not on the cache: its conditions start from the live
// ones, the "unchanged, nothing to write" check compares with them, and the patch is
// conditional on the live resourceVersion.
//
// The cache can lag behind the reconciler's own last write. A reconcile retried a few
// milliseconds after a failure (a hub write refused, then accepted) can read from the
// cache the status from before that failure, compute it again and find nothing to
// write, while the API server shows the failure. Before the For watches dropped
// status-only updates (own_changes.go), the failure status's own update event brought
// one more pass that corrected it; judged on the live status, the retry writes it
// itself. A status judged on the live read also no longer fails with a conflict
// because the cache was behind.

// adoptLiveStatus gives obj, an object read from the cache, the status and
// resourceVersion of live, the same object just read from the API server, so that the status the phases then set on obj is
// built on, compared with and locked to what the API server has. The rest of obj (its
// spec and metadata, as the phases before the guard saw them) is kept. Objects of
// other kinds, and a nil live, are left alone.
func adoptLiveStatus(obj, live client.Object) {
	switch o := obj.(type) {
	case *v1alpha.HTTPProxy:
		l, ok := live.(*v1alpha.HTTPProxy)
		if !ok || l == nil {
			return
		}
		o.Status = *l.Status.DeepCopy()
	case *gatewayv1.Gateway:
		l, ok := live.(*gatewayv1.Gateway)
		if !ok || l == nil {
			return
		}
		o.Status = *l.Status.DeepCopy()
	case *gatewayv1.HTTPRoute:
		l, ok := live.(*gatewayv1.HTTPRoute)
		if !ok || l == nil {
			return
		}
		o.Status = *l.Status.DeepCopy()
	default:
		return
	}
	obj.SetResourceVersion(live.GetResourceVersion())
}
