package gateway

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"
)

func testScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := gatewayv1.Install(s); err != nil {
		t.Fatal(err)
	}
	return s
}

// fakeCluster is a project cluster with separate cached and live views.
type fakeCluster struct {
	cluster.Cluster
	cached, live client.Client
}

func (c *fakeCluster) GetClient() client.Client    { return c.cached }
func (c *fakeCluster) GetAPIReader() client.Reader { return c.live }
func (c *fakeCluster) GetEventRecorder(string) events.EventRecorder {
	return events.NewFakeRecorder(10)
}

type fakeClusters struct {
	cluster cluster.Cluster
	hub     client.Client
}

func (f fakeClusters) Project(context.Context, string) (cluster.Cluster, error) {
	return f.cluster, nil
}
func (f fakeClusters) Hub(context.Context, string) (client.Client, client.Reader, error) {
	return f.hub, f.hub, nil
}

// refusingAdmission refuses every project, as a replica that does not hold it.
type refusingAdmission struct{}

func (refusingAdmission) Enter(context.Context, string) (context.Context, func(), error) {
	return nil, nil, multicluster.ErrClusterNotFound
}

// pendingAdmission refuses with a retry delay, as a replica whose claim on the project
// is being written.
type pendingAdmission struct{ after time.Duration }

func (p pendingAdmission) Error() string             { return "claim in progress" }
func (p pendingAdmission) RetryAfter() time.Duration { return p.after }

func (p pendingAdmission) Enter(context.Context, string) (context.Context, func(), error) {
	return nil, nil, fmt.Errorf("project: %w", p)
}

// unexpectedCalls is a client that fails the test on any call.
func unexpectedCalls(t *testing.T, s *runtime.Scheme, what string) client.Client {
	return failingOn(t, fake.NewClientBuilder().WithScheme(s).Build(), what, true)
}

// failingOn wraps c so that every write fails the test (and every read too, when
// reads is set): client-go's catch-all reactor, for tests that must prove a decision
// touches nothing.
func failingOn(t *testing.T, c client.WithWatch, what string, reads bool) client.WithWatch {
	fail := func(verb string) error {
		t.Errorf("unexpected %s call to the %s", verb, what)
		return errors.New("unexpected call")
	}
	funcs := interceptor.Funcs{
		Create: func(context.Context, client.WithWatch, client.Object, ...client.CreateOption) error {
			return fail("Create")
		},
		Update: func(context.Context, client.WithWatch, client.Object, ...client.UpdateOption) error {
			return fail("Update")
		},
		Patch: func(context.Context, client.WithWatch, client.Object, client.Patch, ...client.PatchOption) error {
			return fail("Patch")
		},
		Delete: func(context.Context, client.WithWatch, client.Object, ...client.DeleteOption) error {
			return fail("Delete")
		},
		SubResourcePatch: func(context.Context, client.Client, string, client.Object, client.Patch, ...client.SubResourcePatchOption) error {
			return fail("status Patch")
		},
	}
	if reads {
		funcs.Get = func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
			return fail("Get")
		}
		funcs.List = func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
			return fail("List")
		}
	}
	return interceptor.NewClient(c, funcs)
}

// TestGatewayReconcilerWritesNothingWhenTheLiveObjectIsNotTheCachedOne: whatever the
// cache shows, a reconcile whose live read disagrees touches neither the hub nor the
// project (any call to either fails the test), and ends without error.
func TestGatewayReconcilerWritesNothingWhenTheLiveObjectIsNotTheCachedOne(t *testing.T) {
	s := testScheme(t)
	cached := &gatewayv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "web", UID: "u1", ResourceVersion: "5", Finalizers: []string{GatewayFinalizer}},
		Spec:       gatewayv1.GatewaySpec{GatewayClassName: "ours"},
	}
	liveAs := func(uid types.UID, deleting bool, finalizers ...string) []client.Object {
		o := cached.DeepCopy()
		o.UID, o.Finalizers, o.ResourceVersion = uid, finalizers, ""
		if deleting {
			o.DeletionTimestamp = ptr.To(metav1.Now())
		}
		return []client.Object{o}
	}
	cases := []struct {
		reason string
		live   []client.Object
		want   guardVerdict
	}{
		{"finalized and gone", nil, guardGone},
		{"recreated under the same name", liveAs("u2", false, GatewayFinalizer), guardReplaced},
		{"deleted since the cache saw it", liveAs("u1", true, GatewayFinalizer), guardTerminating},
		{"our finalizer removed since", liveAs("u1", false, "someone-else/f"), guardUnfinalized},
	}
	for _, tc := range cases {
		t.Run(tc.reason, func(t *testing.T) {
			live := fake.NewClientBuilder().WithScheme(s).WithObjects(tc.live...).Build()
			cachedView := interceptor.NewClient(fake.NewClientBuilder().WithScheme(s).WithObjects(cached.DeepCopy()).Build(), interceptor.Funcs{
				Patch: func(context.Context, client.WithWatch, client.Object, client.Patch, ...client.PatchOption) error {
					t.Error("unexpected project write")
					return errors.New("unexpected")
				},
				SubResourcePatch: func(context.Context, client.Client, string, client.Object, client.Patch, ...client.SubResourcePatchOption) error {
					t.Error("unexpected project status write")
					return errors.New("unexpected")
				},
			})
			reg := prometheus.NewRegistry()
			m, err := NewMetrics(reg)
			if err != nil {
				t.Fatal(err)
			}
			r := &GatewayReconciler{
				Clusters:  fakeClusters{cluster: &fakeCluster{cached: cachedView, live: live}, hub: unexpectedCalls(t, s, "hub")},
				Admission: OpenAdmission{},
				Config:    testConfig("ours"),
				Metrics:   m,
			}
			req := mcreconcile.Request{ClusterName: "proj", Request: reconcile.Request{NamespacedName: client.ObjectKeyFromObject(cached)}}
			if _, err := r.Reconcile(context.Background(), req); err != nil {
				t.Fatalf("Reconcile: %v", err)
			}
			if got := counterValue(t, reg, "anchorage_live_guard_refusals_total", kindGateway, string(tc.want)); got != 1 {
				t.Errorf("refusals{reason=%s} = %v, want 1", tc.want, got)
			}
		})
	}
}

// TestReconcilersTouchNothingWithoutAdmission: a refused admission ends every
// reconciler's request without an error and without reaching any cluster; a refusal
// that says when to retry (a claim being written) is retried after that delay, not with
// the controller's backoff.
func TestReconcilersTouchNothingWithoutAdmission(t *testing.T) {
	s := testScheme(t)
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	clusters := fakeClusters{cluster: &fakeCluster{cached: unexpectedCalls(t, s, "project cache"), live: unexpectedCalls(t, s, "project")}, hub: unexpectedCalls(t, s, "hub")}
	cfg := DefaultConfig()
	req := mcreconcile.Request{ClusterName: "proj", Request: reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "team", Name: "web"}}}
	cases := []struct {
		reason    string
		admission Admission
		want      reconcile.Result
	}{
		{"a project not held ends quietly", refusingAdmission{}, reconcile.Result{}},
		{"a claim being written is retried at the admission's delay", pendingAdmission{after: 37 * time.Millisecond}, reconcile.Result{RequeueAfter: 37 * time.Millisecond}},
	}
	for _, tc := range cases {
		for name, r := range map[string]reconcile.TypedReconciler[mcreconcile.Request]{
			"HTTPProxy": &HTTPProxyReconciler{Clusters: clusters, Admission: tc.admission, Config: cfg, Metrics: m},
			"Gateway":   &GatewayReconciler{Clusters: clusters, Admission: tc.admission, Config: cfg, Metrics: m},
			"HTTPRoute": &HTTPRouteReconciler{Clusters: clusters, Admission: tc.admission, Config: cfg, Metrics: m},
		} {
			if res, err := r.Reconcile(context.Background(), req); err != nil || res != tc.want {
				t.Errorf("%s: %s: got (%+v, %v), want (%+v, no error)", tc.reason, name, res, err, tc.want)
			}
		}
	}
}

// TestGatewayReconcilerLeavesOtherClassesAlone: a Gateway of another class gets no
// finalizer, no status and nothing on the hub.
func TestGatewayReconcilerLeavesOtherClassesAlone(t *testing.T) {
	s := testScheme(t)
	other := &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "web", UID: "u1"}, Spec: gatewayv1.GatewaySpec{GatewayClassName: "theirs"}}
	cachedView := interceptor.NewClient(fake.NewClientBuilder().WithScheme(s).WithObjects(other).Build(), interceptor.Funcs{
		Patch: func(context.Context, client.WithWatch, client.Object, client.Patch, ...client.PatchOption) error {
			t.Error("unexpected project write")
			return errors.New("unexpected")
		},
	})
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	r := &GatewayReconciler{
		Clusters:  fakeClusters{cluster: &fakeCluster{cached: cachedView, live: unexpectedCalls(t, s, "project")}, hub: unexpectedCalls(t, s, "hub")},
		Admission: OpenAdmission{},
		Config:    testConfig("ours"),
		Metrics:   m,
	}
	req := mcreconcile.Request{ClusterName: "proj", Request: reconcile.Request{NamespacedName: client.ObjectKeyFromObject(other)}}
	if _, err := r.Reconcile(context.Background(), req); err != nil {
		t.Fatal(err)
	}
}

func counterValue(t *testing.T, g prometheus.Gatherer, name string, labels ...string) float64 {
	t.Helper()
	families, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, metric := range f.GetMetric() {
			var values []string
			for _, lp := range metric.GetLabel() {
				values = append(values, lp.GetValue())
			}
			if len(values) == len(labels) && equalStrings(values, labels) {
				return metric.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no series %s%v", name, labels)
	return 0
}

func equalStrings(a, b []string) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
