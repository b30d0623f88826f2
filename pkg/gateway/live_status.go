package gateway

import (
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"anchorage/api/v1alpha"
)

// adoptLiveStatus gives obj, read from the cache, the status and resourceVersion of
// live, the same object as the live guard just read it, so its status is built on and
// locked to what the API server has (docs/design.md, Programmed means served). The rest
// of obj is kept; other kinds and a nil live are left alone.
func adoptLiveStatus(obj, live client.Object) {
	switch o := obj.(type) {
	case *v1alpha.HTTPProxy:
		if l, ok := live.(*v1alpha.HTTPProxy); ok && l != nil {
			o.Status, o.ResourceVersion = *l.Status.DeepCopy(), l.ResourceVersion
		}
	case *gatewayv1.Gateway:
		if l, ok := live.(*gatewayv1.Gateway); ok && l != nil {
			o.Status, o.ResourceVersion = *l.Status.DeepCopy(), l.ResourceVersion
		}
	case *gatewayv1.HTTPRoute:
		if l, ok := live.(*gatewayv1.HTTPRoute); ok && l != nil {
			o.Status, o.ResourceVersion = *l.Status.DeepCopy(), l.ResourceVersion
		}
	}
}
