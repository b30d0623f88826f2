package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"anchorage/api/v1alpha"
	"anchorage/internal/testenv"
	"anchorage/internal/testenv/anchorcache"
	"anchorage/pkg/anchor"
	"anchorage/pkg/anchor/resync"
)

// The cost of an anchor deletion through the finalizers, counted on a real hub API
// server (envtest): the project side is a fake plane, since only the hub's calls are
// counted.

// callCounter counts the requests sent through a transport it wraps, by verb and
// resource ("get configmaps", "list configmaps", "delete configmaps", ...).
type callCounter struct {
	mu    sync.Mutex
	calls map[string]int
}

func (c *callCounter) wrap(next http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		verb, resource := verbAndResource(r)
		c.mu.Lock()
		if c.calls == nil {
			c.calls = map[string]int{}
		}
		c.calls[verb+" "+resource]++
		c.mu.Unlock()
		return next.RoundTrip(r)
	})
}

// of returns the count of verb on resource.
func (c *callCounter) of(verb, resource string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[verb+" "+resource]
}

// on returns every count on resource, by verb.
func (c *callCounter) on(resource string) map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for k, n := range c.calls {
		if verb, res, _ := strings.Cut(k, " "); res == resource {
			out[verb] = n
		}
	}
	return out
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// verbAndResource reads the API verb and resource of a request from its method and
// path (/api/v1/[namespaces/<ns>/]<resource>[/<name>] or the /apis/<group>/<version>
// form).
func verbAndResource(r *http.Request) (string, string) {
	segs := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	switch {
	case len(segs) >= 2 && segs[0] == "api":
		segs = segs[2:]
	case len(segs) >= 3 && segs[0] == "apis":
		segs = segs[3:]
	default:
		return strings.ToLower(r.Method), r.URL.Path
	}
	if len(segs) >= 3 && segs[0] == "namespaces" {
		segs = segs[2:]
	}
	if len(segs) == 0 {
		return strings.ToLower(r.Method), "discovery"
	}
	named := len(segs) > 1
	switch r.Method {
	case http.MethodGet:
		if r.URL.Query().Get("watch") == "true" {
			return "watch", segs[0]
		}
		if named {
			return "get", segs[0]
		}
		return "list", segs[0]
	case http.MethodDelete:
		if named {
			return "delete", segs[0]
		}
		return "deletecollection", segs[0]
	default:
		return strings.ToLower(r.Method), segs[0]
	}
}

// countedClient returns a client of cfg whose requests counter counts.
func countedClient(t *testing.T, cfg *rest.Config, counter *callCounter) client.Client {
	t.Helper()
	counted := rest.CopyConfig(cfg)
	counted.Wrap(counter.wrap)
	c, err := client.New(counted, client.Options{Scheme: guardScheme(t)})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// startAnchorCache starts the hub's anchor cache on cfg (its own connection, so its
// list and watch are not counted) and waits for it to sync.
func startAnchorCache(t *testing.T, ctx context.Context, cfg *rest.Config) *resync.AnchorCache {
	t.Helper()
	return anchorcache.Start(t, ctx, cfg)
}

// proxyAnchorFixture is a terminating proxy in namespace "team" of project "proj"
// whose Gateway is still being finalized, and the proxy's anchor (left by a previous
// manager) in the mapped namespace of "team" on the hub.
type proxyAnchorFixture struct {
	namespace *corev1.Namespace
	proxy     *v1alpha.HTTPProxy
	gateway   *corev1.ObjectReference
	anchor    client.ObjectKey
	project   client.WithWatch
}

func newProxyAnchorFixture(t *testing.T, ctx context.Context, hub client.Client) *proxyAnchorFixture {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team", UID: uuid.NewUUID()}}
	proxy := cachedProxy()
	proxy.UID = uuid.NewUUID()
	proxy.DeletionTimestamp = ptr.To(metav1.Now())
	gw := proxysGateway(proxy)
	gw.OwnerReferences = []metav1.OwnerReference{proxyController(proxy)}
	project := fake.NewClientBuilder().WithScheme(guardScheme(t)).WithObjects(ns, proxy, gw).Build()

	owner := anchor.OwnerOf("proj", v1alpha.GroupVersion.WithKind(kindHTTPProxy), proxy)
	hubNS := anchor.MappedNamespace(ns.UID)
	if err := hub.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: hubNS}}); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKey{Namespace: hubNS, Name: anchor.Name(proxy.UID)}
	if err := hub.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, Labels: owner.Labels()}}); err != nil {
		t.Fatal(err)
	}
	return &proxyAnchorFixture{
		namespace: ns, proxy: proxy, anchor: key, project: project,
		gateway: &corev1.ObjectReference{Namespace: gw.Namespace, Name: gw.Name},
	}
}

// releaseGateway removes the Gateway's finalizer, as the Gateway reconciler does once
// its hub objects are gone; the fake plane then deletes it.
func (f *proxyAnchorFixture) releaseGateway(t *testing.T, ctx context.Context) {
	t.Helper()
	gw := proxysGateway(f.proxy)
	if err := f.project.Get(ctx, types.NamespacedName{Namespace: f.gateway.Namespace, Name: f.gateway.Name}, gw); err != nil {
		t.Fatal(err)
	}
	gw.Finalizers = nil
	if err := f.project.Update(ctx, gw); err != nil {
		t.Fatal(err)
	}
}

// TestProxyFinalizerDeletesItsAnchorWithTwoCallsAndNoList: finalizing a proxy whose
// anchor a previous manager left costs the hub one GET and one DELETE of that anchor in
// its mapped namespace, and never a LIST of ConfigMaps: not while the finalizer waits
// for the proxy's Gateway (three requeues), not when it deletes the anchor, and not in
// the reconciles after it (three more). The anchor is gone at the end.
func TestProxyFinalizerDeletesItsAnchorWithTwoCallsAndNoList(t *testing.T) {
	ctx := context.Background()
	cfg := testenv.StartAPIServer(t)
	setup, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	counter := &callCounter{}
	hub := countedClient(t, cfg, counter)
	f := newProxyAnchorFixture(t, ctx, setup)
	m, _ := guardMetrics(t)
	r := &HTTPProxyReconciler{
		Clusters:  fakeClusters{cluster: &fakeCluster{cached: f.project, live: f.project}, hub: hub},
		Admission: OpenAdmission{},
		Config:    testConfig("ours"),
		Metrics:   m,
		Anchors:   startAnchorCache(t, ctx, cfg),
	}
	reconcileN := func(phase string, n int) {
		t.Helper()
		for i := 0; i < n; i++ {
			if _, err := r.Reconcile(ctx, reconcileRequestOf(f.proxy)); err != nil {
				t.Fatalf("%s, reconcile %d: %v", phase, i+1, err)
			}
		}
	}

	reconcileN("while the Gateway is finalized", 3)
	f.releaseGateway(t, ctx)
	reconcileN("once the Gateway is gone", 1)
	err = f.project.Get(ctx, client.ObjectKeyFromObject(f.proxy), &v1alpha.HTTPProxy{})
	if !apierrors.IsNotFound(err) {
		t.Fatalf("the proxy is not finalized and gone: %v", err)
	}
	afterRelease := counter.on("configmaps")
	reconcileN("after the anchor is gone", 3)

	if got := counter.on("configmaps"); fmt.Sprint(got) != fmt.Sprint(afterRelease) {
		t.Errorf("ConfigMap calls after the anchor was gone: before %v, after %v; want none", afterRelease, got)
	}
	if n := counter.of("list", "configmaps"); n != 0 {
		t.Errorf("LIST configmaps = %d, want 0 (calls on configmaps: %v)", n, counter.on("configmaps"))
	}
	if n := counter.of("get", "configmaps"); n != 1 {
		t.Errorf("GET configmaps = %d, want 1 (calls on configmaps: %v)", n, counter.on("configmaps"))
	}
	if n := counter.of("delete", "configmaps"); n != 1 {
		t.Errorf("DELETE configmaps = %d, want 1 (calls on configmaps: %v)", n, counter.on("configmaps"))
	}
	err = setup.Get(ctx, f.anchor, &corev1.ConfigMap{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("the proxy's anchor %s is still on the hub: %v", f.anchor, err)
	}
}

// waitIndexed waits until anchors shows exactly the anchors keys of name.
func waitIndexed(t *testing.T, ctx context.Context, anchors anchor.NameIndex, name string, want int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		items, err := anchors.Named(ctx, name)
		if err == nil && len(items) == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the anchor cache shows %d items named %s (err %v), want %d", len(items), name, err, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestUpstreamFinalizerDeletesItsAnchorWithoutAList: the Gateway finalizer (and so the
// HTTPRoute's, which shares it) deletes the Gateway's anchor with one GET and one
// DELETE of ConfigMaps and no LIST of anchors, whether the upstream namespace is there
// (the anchor is read in its mapped namespace) or gone (the anchor cache says where it
// is); with the namespace gone and no anchor cached, it calls nothing on ConfigMaps but
// the one label-selected LIST of its hostname claims (in the claims namespace, always:
// hostname_claims.go); and when the cache shows the anchor in two mapped namespaces it
// deletes and reads no anchor, keeps both and keeps its finalizer.
func TestUpstreamFinalizerDeletesItsAnchorWithoutAList(t *testing.T) {
	ctx := context.Background()
	cfg := testenv.StartAPIServer(t)
	setup, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	anchors := startAnchorCache(t, ctx, cfg)

	cases := []struct {
		name          string
		namespaceGone bool
		anchorIn      int // mapped namespaces holding an anchor of the Gateway's name
		wantCalls     map[string]int
		wantErr       error
	}{
		{"namespace known", false, 1, map[string]int{"get": 1, "delete": 1, "list": 1}, nil},
		{"namespace gone, anchor cached", true, 1, map[string]int{"get": 1, "delete": 1, "list": 1}, nil},
		{"namespace gone, no anchor", true, 0, map[string]int{"list": 1}, nil},
		{"two anchors of the name", false, 2, map[string]int{"list": 1}, anchor.ErrAmbiguous},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team", UID: uuid.NewUUID()}}
			gw := &gatewayv1.Gateway{
				ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "web", UID: uuid.NewUUID(), Finalizers: []string{GatewayFinalizer}, DeletionTimestamp: ptr.To(metav1.Now())},
				Spec:       gatewayv1.GatewaySpec{GatewayClassName: "ours"},
			}
			objs := []client.Object{gw}
			if !tc.namespaceGone {
				objs = append(objs, ns)
			}
			project := fake.NewClientBuilder().WithScheme(guardScheme(t)).WithObjects(objs...).Build()
			owner := anchor.OwnerOf("proj", gatewayv1.SchemeGroupVersion.WithKind(kindGateway), gw)
			var keys []client.ObjectKey
			for i := 0; i < tc.anchorIn; i++ {
				hubNS := anchor.MappedNamespace(ns.UID)
				if i > 0 {
					hubNS = anchor.MappedNamespace(uuid.NewUUID()) // a restored or legacy copy
				}
				if err := setup.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: hubNS}}); err != nil {
					t.Fatal(err)
				}
				key := client.ObjectKey{Namespace: hubNS, Name: anchor.Name(gw.UID)}
				if err := setup.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, Labels: owner.Labels()}}); err != nil {
					t.Fatal(err)
				}
				keys = append(keys, key)
			}
			waitIndexed(t, ctx, anchors, anchor.Name(gw.UID), tc.anchorIn)

			counter := &callCounter{}
			m, _ := guardMetrics(t)
			r := &GatewayReconciler{
				Clusters:  fakeClusters{cluster: &fakeCluster{cached: project, live: project}, hub: countedClient(t, cfg, counter)},
				Admission: OpenAdmission{},
				Config:    testConfig("ours"),
				Metrics:   m,
				Anchors:   anchors,
			}
			_, err := r.Reconcile(ctx, reconcileRequestOf(gw))
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Reconcile: %v, want %v", err, tc.wantErr)
			}
			if got := counter.on("configmaps"); fmt.Sprint(got) != fmt.Sprint(tc.wantCalls) {
				t.Errorf("calls on configmaps = %v, want %v", got, tc.wantCalls)
			}
			for _, key := range keys {
				err := setup.Get(ctx, key, &corev1.ConfigMap{})
				if kept := err == nil; kept != (tc.wantErr != nil) {
					t.Errorf("anchor %s: kept %v (get: %v), want kept %v", key, kept, err, tc.wantErr != nil)
				}
			}
			err = project.Get(ctx, client.ObjectKeyFromObject(gw), &gatewayv1.Gateway{})
			if finalized := apierrors.IsNotFound(err); finalized != (tc.wantErr == nil) {
				t.Errorf("Gateway finalized %v (get: %v), want %v", finalized, err, tc.wantErr == nil)
			}
		})
	}
}
