package gateway

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	"anchorage/api/v1alpha"
)

// Fixtures of the proxy guard tests: a proxy "web" in namespace "team" with our
// finalizer, and the Gateway and HTTPRoute it controls, as the cache shows them.

func guardScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := testScheme(t)
	if err := v1alpha.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

func cachedProxy() *v1alpha.HTTPProxy {
	return &v1alpha.HTTPProxy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "web", UID: "p1", ResourceVersion: "3", Finalizers: []string{v1alpha.HTTPProxyFinalizer}},
		Spec: v1alpha.HTTPProxySpec{
			Hostnames: []gatewayv1.Hostname{"a.example.com"},
			Rules:     []v1alpha.HTTPProxyRule{{Backends: []v1alpha.HTTPProxyBackend{{Endpoint: "https://backend.example.com"}}}},
		},
	}
}

func proxyController(p *v1alpha.HTTPProxy) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: v1alpha.GroupVersion.String(), Kind: kindHTTPProxy, Name: p.Name, UID: p.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}
}

func proxysGateway(p *v1alpha.HTTPProxy) *gatewayv1.Gateway {
	return &gatewayv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name, UID: "g1", ResourceVersion: "5", Finalizers: []string{GatewayFinalizer},
			OwnerReferences: []metav1.OwnerReference{proxyController(p)}},
		Spec: gatewayv1.GatewaySpec{GatewayClassName: "ours", Listeners: []gatewayv1.Listener{{Name: "http", Port: 80, Protocol: gatewayv1.HTTPProtocolType}}},
	}
}

func proxysRoute(p *v1alpha.HTTPProxy) *gatewayv1.HTTPRoute {
	return &gatewayv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name, UID: "r1", ResourceVersion: "6", Finalizers: []string{HTTPRouteFinalizer},
			OwnerReferences: []metav1.OwnerReference{proxyController(p)}},
		Spec: gatewayv1.HTTPRouteSpec{CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Name: gatewayv1.ObjectName(p.Name)}}}},
	}
}

// liveProxyAs is the proxy as a live read returns it: another UID, terminating, with
// other finalizers.
func liveProxyAs(uid types.UID, deleting bool, finalizers ...string) *v1alpha.HTTPProxy {
	p := cachedProxy()
	p.UID, p.Finalizers, p.ResourceVersion = uid, finalizers, ""
	if deleting {
		p.DeletionTimestamp = ptr.To(metav1.Now())
	}
	return p
}

// proxyRefusals are the live proxies the guard must refuse, with the verdict each gets.
var proxyRefusals = []struct {
	reason string
	live   *v1alpha.HTTPProxy // nil: NotFound
	want   guardVerdict
}{
	{"the proxy is finalized and gone", nil, guardGone},
	{"the proxy was recreated under the same name", liveProxyAs("p2", false, v1alpha.HTTPProxyFinalizer), guardReplaced},
	{"the proxy's deletion was requested since the cache saw it", liveProxyAs("p1", true, v1alpha.HTTPProxyFinalizer), guardTerminating},
	{"the proxy does not carry our finalizer", liveProxyAs("p1", false, "someone-else/f"), guardUnfinalized},
}

// wantResult is the result of a reconcile the guard refused: only an unfinalized owner
// is looked at again (nothing else brings the reconcile back once our finalizer is put
// on the proxy); the others end, as the finalizer or the new object's reconcile takes over.
func wantResult(v guardVerdict) reconcile.Result {
	if v == guardUnfinalized {
		return reconcile.Result{RequeueAfter: unfinalizedRecheck}
	}
	return reconcile.Result{}
}

// readOnly is a project cache that serves objs and fails the test on any write.
func readOnly(t *testing.T, s *runtime.Scheme, objs ...client.Object) client.WithWatch {
	return failingOn(t, fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).Build(), "project", false)
}

// liveWith is a live project view holding objs and the proxy as tc gives it.
func liveWith(s *runtime.Scheme, proxy *v1alpha.HTTPProxy, objs ...client.Object) client.WithWatch {
	if proxy != nil {
		objs = append(objs, proxy)
	}
	return fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).Build()
}

func guardMetrics(t *testing.T) (*Metrics, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	return m, reg
}

func reconcileRequestOf(obj client.Object) mcreconcile.Request {
	return mcreconcile.Request{ClusterName: "proj", Request: reconcile.Request{NamespacedName: client.ObjectKeyFromObject(obj)}}
}

// TestProxyReconcilerWritesNothingUpstreamUnlessTheLiveProxyPasses: the proxy
// reconciler reads the proxy live before it writes anything upstream; a proxy the live
// read shows gone, replaced, terminating or unfinalized gets no Gateway, HTTPRoute,
// Service or status (any project write, or any hub call, fails the test), the refusal
// is counted by the live object's kind and reason, and only the unfinalized proxy is
// looked at again.
func TestProxyReconcilerWritesNothingUpstreamUnlessTheLiveProxyPasses(t *testing.T) {
	s := guardScheme(t)
	for _, tc := range proxyRefusals {
		t.Run(tc.reason, func(t *testing.T) {
			m, reg := guardMetrics(t)
			proxy := cachedProxy()
			r := &HTTPProxyReconciler{
				Clusters:  fakeClusters{cluster: &fakeCluster{cached: readOnly(t, s, proxy), live: liveWith(s, tc.live)}, hub: unexpectedCalls(t, s, "hub")},
				Admission: OpenAdmission{},
				Config:    testConfig("ours"),
				Metrics:   m,
			}
			res, err := r.Reconcile(context.Background(), reconcileRequestOf(proxy))
			if err != nil || res != wantResult(tc.want) {
				t.Errorf("Reconcile: got (%+v, %v), want (%+v, no error)", res, err, wantResult(tc.want))
			}
			if got := counterValue(t, reg, "anchorage_live_guard_refusals_total", kindHTTPProxy, string(tc.want)); got != 1 {
				t.Errorf("refusals{kind=HTTPProxy,reason=%s} = %v, want 1", tc.want, got)
			}
		})
	}
}

// TestUpstreamReconcilersCreateNothingOnTheHubForAProxyThatIsNotLive: a Gateway or
// HTTPRoute controlled by an HTTPProxy gets nothing on the hub unless that proxy passes
// the same live check, even when the Gateway or route itself is live and finalized:
// a terminating proxy means no new hub objects for what it controls.
func TestUpstreamReconcilersCreateNothingOnTheHubForAProxyThatIsNotLive(t *testing.T) {
	s := guardScheme(t)
	proxy := cachedProxy()
	gw, route := proxysGateway(proxy), proxysRoute(proxy)
	reconcilers := map[string]func(Clusters, *Metrics) (reconcile.TypedReconciler[mcreconcile.Request], mcreconcile.Request){
		"Gateway": func(c Clusters, m *Metrics) (reconcile.TypedReconciler[mcreconcile.Request], mcreconcile.Request) {
			return &GatewayReconciler{Clusters: c, Admission: OpenAdmission{}, Config: testConfig("ours"), Metrics: m}, reconcileRequestOf(gw)
		},
		"HTTPRoute": func(c Clusters, m *Metrics) (reconcile.TypedReconciler[mcreconcile.Request], mcreconcile.Request) {
			return &HTTPRouteReconciler{Clusters: c, Admission: OpenAdmission{}, Config: testConfig("ours"), Metrics: m}, reconcileRequestOf(route)
		},
	}
	for name, newReconciler := range reconcilers {
		for _, tc := range proxyRefusals {
			t.Run(name+": "+tc.reason, func(t *testing.T) {
				m, reg := guardMetrics(t)
				clusters := fakeClusters{
					cluster: &fakeCluster{cached: readOnly(t, s, gw.DeepCopy(), route.DeepCopy()), live: liveWith(s, tc.live, gw.DeepCopy(), route.DeepCopy())},
					hub:     unexpectedCalls(t, s, "hub"),
				}
				r, req := newReconciler(clusters, m)
				res, err := r.Reconcile(context.Background(), req)
				if err != nil || res != wantResult(tc.want) {
					t.Errorf("Reconcile: got (%+v, %v), want (%+v, no error)", res, err, wantResult(tc.want))
				}
				if got := counterValue(t, reg, "anchorage_live_guard_refusals_total", kindHTTPProxy, string(tc.want)); got != 1 {
					t.Errorf("refusals{kind=HTTPProxy,reason=%s} = %v, want 1", tc.want, got)
				}
			})
		}
	}
}

// terminatingAfter is a live project view whose proxy turns terminating after its
// first read: the proxy's deletion is requested while a reconcile that has passed the
// guard is on its way to its first create.
func terminatingAfter(s *runtime.Scheme, objs ...client.Object) client.Client {
	var reads atomic.Int32
	return interceptor.NewClient(liveWith(s, cachedProxy(), objs...), interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if err := c.Get(ctx, key, obj, opts...); err != nil {
				return err
			}
			if p, ok := obj.(*v1alpha.HTTPProxy); ok && reads.Add(1) > 1 {
				p.DeletionTimestamp = ptr.To(metav1.Now())
			}
			return nil
		},
	})
}

// countingCreates is a hub that answers reads (empty) and counts creates, refusing them.
func countingCreates(s *runtime.Scheme, creates *atomic.Int32) client.Client {
	return interceptor.NewClient(fake.NewClientBuilder().WithScheme(s).Build(), interceptor.Funcs{
		Create: func(context.Context, client.WithWatch, client.Object, ...client.CreateOption) error {
			creates.Add(1)
			return errors.New("created although the proxy is terminating")
		},
	})
}

// TestGuardIsReadAgainJustBeforeEachCreate: a proxy whose deletion is requested after
// the guard phase passed still gets nothing created: each create, on the hub for its
// Gateway and upstream for the proxy itself, reads the owners live again just before
// it is sent. The reconcile ends quietly, writes no status and counts the refusal.
func TestGuardIsReadAgainJustBeforeEachCreate(t *testing.T) {
	s := guardScheme(t)
	proxy := cachedProxy()
	gw := proxysGateway(proxy)
	upstreamNS := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: proxy.Namespace, UID: "00000000-0000-0000-0000-000000000001"}}
	cfg := testConfig("ours")
	cases := []struct {
		reason     string
		reconciler func(Clusters, *Metrics) reconcile.TypedReconciler[mcreconcile.Request]
		req        mcreconcile.Request
		project    func(t *testing.T, creates *atomic.Int32) (cached, live client.Client)
		hub        func(t *testing.T, creates *atomic.Int32) client.Client
	}{
		{
			reason: "the Gateway's hub objects",
			reconciler: func(c Clusters, m *Metrics) reconcile.TypedReconciler[mcreconcile.Request] {
				return &GatewayReconciler{Clusters: c, Admission: OpenAdmission{}, Config: cfg, Metrics: m}
			},
			req: reconcileRequestOf(gw),
			project: func(t *testing.T, _ *atomic.Int32) (client.Client, client.Client) {
				return readOnly(t, s, gw.DeepCopy()), terminatingAfter(s, gw.DeepCopy(), upstreamNS.DeepCopy())
			},
			hub: func(_ *testing.T, creates *atomic.Int32) client.Client { return countingCreates(s, creates) },
		},
		{
			reason: "the proxy's upstream objects",
			reconciler: func(c Clusters, m *Metrics) reconcile.TypedReconciler[mcreconcile.Request] {
				return &HTTPProxyReconciler{Clusters: c, Admission: OpenAdmission{}, Config: cfg, Metrics: m}
			},
			req: reconcileRequestOf(proxy),
			project: func(t *testing.T, creates *atomic.Int32) (client.Client, client.Client) {
				cached := interceptor.NewClient(readOnly(t, s, proxy.DeepCopy()), interceptor.Funcs{
					Create: func(context.Context, client.WithWatch, client.Object, ...client.CreateOption) error {
						creates.Add(1)
						return errors.New("created although the proxy is terminating")
					},
				})
				return cached, terminatingAfter(s)
			},
			hub: func(t *testing.T, _ *atomic.Int32) client.Client { return unexpectedCalls(t, s, "hub") },
		},
	}
	for _, tc := range cases {
		t.Run(tc.reason, func(t *testing.T) {
			var creates atomic.Int32
			m, reg := guardMetrics(t)
			cached, live := tc.project(t, &creates)
			r := tc.reconciler(fakeClusters{cluster: &fakeCluster{cached: cached, live: live}, hub: tc.hub(t, &creates)}, m)
			res, err := r.Reconcile(context.Background(), tc.req)
			if err != nil || res != (reconcile.Result{}) {
				t.Errorf("Reconcile: got (%+v, %v), want a quiet end", res, err)
			}
			if n := creates.Load(); n != 0 {
				t.Errorf("%d creates sent for a terminating proxy", n)
			}
			if got := counterValue(t, reg, "anchorage_live_guard_refusals_total", kindHTTPProxy, string(guardTerminating)); got != 1 {
				t.Errorf("refusals{kind=HTTPProxy,reason=terminating} = %v, want 1", got)
			}
		})
	}
}

// TestControllingProxy: only a controller reference to an HTTPProxy of our group names
// the proxy the guard must also read.
func TestControllingProxy(t *testing.T) {
	p := cachedProxy()
	ref := proxyController(p)
	with := func(change func(*metav1.OwnerReference)) []metav1.OwnerReference {
		r := ref
		change(&r)
		return []metav1.OwnerReference{r}
	}
	cases := []struct {
		reason string
		refs   []metav1.OwnerReference
		want   bool
	}{
		{"controlled by an HTTPProxy", []metav1.OwnerReference{ref}, true},
		{"no owner", nil, false},
		{"owned by an HTTPProxy, not controlled", with(func(r *metav1.OwnerReference) { r.Controller = nil }), false},
		{"controlled by a kind named HTTPProxy of another group", with(func(r *metav1.OwnerReference) { r.APIVersion = "example.com/v1" }), false},
		{"controlled by something else of our group", with(func(r *metav1.OwnerReference) { r.Kind = "Other" }), false},
	}
	for _, tc := range cases {
		gw := &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "web", OwnerReferences: tc.refs}}
		got := controllingProxy(gw)
		if (got != nil) != tc.want {
			t.Errorf("%s: got %v, want a proxy: %v", tc.reason, got, tc.want)
			continue
		}
		if got != nil && (got.Namespace != "team" || got.Name != p.Name || got.UID != p.UID) {
			t.Errorf("%s: got %s/%s uid %s, want team/%s uid %s", tc.reason, got.Namespace, got.Name, got.UID, p.Name, p.UID)
		}
	}
}
