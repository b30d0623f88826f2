package gateway

import (
	"context"
	"errors"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"anchorage/api/v1alpha"
)

// TestCollectOrphans: once a proxy is gone, collectOrphans deletes (each with its UID)
// what the cache shows it still controls and nothing else owns, only when a live read proves the proxy
// absent or names a newer proxy of that name; it reads nothing live when nothing of the
// proxy is left, and deletes nothing on a read that proves nothing.
func TestCollectOrphans(t *testing.T) {
	s := guardScheme(t)
	gone := cachedProxy() // UID p1; read live as tc.live says
	newer := cachedProxy()
	newer.UID = "p2"
	owned := func(obj client.Object, p *v1alpha.HTTPProxy) client.Object {
		obj.SetOwnerReferences([]metav1.OwnerReference{proxyController(p)})
		return obj
	}
	meta := func(name string, uid types.UID) metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: "team", Name: name, UID: uid, ResourceVersion: "1"}
	}
	children := []client.Object{
		owned(&gatewayv1.Gateway{ObjectMeta: meta("web", "g1")}, gone),
		owned(&gatewayv1.HTTPRoute{ObjectMeta: meta("web", "r1")}, gone),
		owned(&corev1.Service{ObjectMeta: meta("web-backend-0", "s1")}, gone),
		owned(&discoveryv1.EndpointSlice{ObjectMeta: meta("web-0-0", "e1"), AddressType: discoveryv1.AddressTypeFQDN}, gone),
	}
	newersSlice := owned(&discoveryv1.EndpointSlice{ObjectMeta: meta("web-backend-1", "e2"), AddressType: discoveryv1.AddressTypeFQDN}, newer)
	terminating := owned(&discoveryv1.EndpointSlice{ObjectMeta: meta("web-1-0", "e3"), AddressType: discoveryv1.AddressTypeFQDN}, gone)
	terminating.SetDeletionTimestamp(ptr.To(metav1.Now()))
	terminating.SetFinalizers([]string{HTTPRouteFinalizer})
	shared := owned(&corev1.Service{ObjectMeta: meta("web-shared", "s2")}, gone)
	shared.SetOwnerReferences(append(shared.GetOwnerReferences(), metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "keeper", UID: "c1"}))
	othersRoute := owned(&gatewayv1.HTTPRoute{ObjectMeta: meta("api", "r9")}, &v1alpha.HTTPProxy{ObjectMeta: metav1.ObjectMeta{Name: "api", UID: "p9"}})
	proxies := schema.GroupResource{Group: v1alpha.GroupVersion.Group, Resource: "httpproxies"}

	tests := []struct {
		name    string
		cached  []client.Object
		live    error              // the live read's error; nil: tc.proxy is read
		proxy   *v1alpha.HTTPProxy // the live proxy of that name, when live is nil
		deleted []string           // "<UID>" of each delete, in the order made
		err     bool
	}{
		{"gone, proven by a NotFound naming it", append(slices.Clone(children), othersRoute, terminating, shared), apierrors.NewNotFound(proxies, "web"), nil, []string{"g1", "r1", "s1", "e1"}, false},
		{"replaced by a newer proxy of the name", append(slices.Clone(children), newersSlice), nil, newer, []string{"g1", "r1", "s1", "e1"}, false},
		{"live after all (the cache missed it)", children, nil, gone, nil, false},
		{"a NotFound naming another resource proves nothing", children, apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, "team"), nil, nil, true},
		{"a failed read proves nothing", children, apierrors.NewInternalError(errors.New("etcd")), nil, nil, true},
		{"nothing of it left: no live read", []client.Object{othersRoute, terminating}, errors.New("unexpected live read"), nil, nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var deleted []string
			cached := fake.NewClientBuilder().WithScheme(s).WithObjects(tc.cached...).WithInterceptorFuncs(interceptor.Funcs{
				Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
					o := &client.DeleteOptions{}
					o.ApplyOptions(opts)
					if o.Preconditions == nil || o.Preconditions.UID == nil || *o.Preconditions.UID != obj.GetUID() {
						t.Errorf("delete of %s without its UID as a precondition", obj.GetName())
					}
					deleted = append(deleted, string(obj.GetUID()))
					return c.Delete(ctx, obj, opts...)
				},
			}).Build()
			live := liveWith(s, tc.proxy)
			if tc.live != nil {
				live = failingOn(t, live, "live plane", tc.name == "nothing of it left: no live read")
				live = interceptedGets(live, tc.live)
			}
			err := collectOrphans(context.Background(), &fakeCluster{cached: cached, live: live}, types.NamespacedName{Namespace: "team", Name: "web"})
			if (err != nil) != tc.err {
				t.Fatalf("err = %v, want an error: %v", err, tc.err)
			}
			slices.Sort(deleted)
			want := slices.Sorted(slices.Values(tc.deleted))
			if !slices.Equal(deleted, want) {
				t.Errorf("deleted %v, want %v", deleted, want)
			}
		})
	}
}

// interceptedGets answers every Get of c with err.
func interceptedGets(c client.WithWatch, err error) client.WithWatch {
	return interceptor.NewClient(c, interceptor.Funcs{Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
		return err
	}})
}
