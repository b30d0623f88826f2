package integration

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	"anchorage/internal/harness"
	"anchorage/internal/testenv/anchorcache"
	"anchorage/pkg/anchor"
	"anchorage/pkg/anchor/resync"
	"anchorage/pkg/gateway"
)

// staleCluster is a project cluster whose cache lags the API server: GetClient shows
// what the test says the cache still holds, GetAPIReader reads the API server. Only the
// methods the reconcilers call are implemented.
type staleCluster struct {
	cluster.Cluster
	cached client.Client
	live   client.Client
	events events.EventRecorder
}

func (c *staleCluster) GetClient() client.Client                     { return c.cached }
func (c *staleCluster) GetAPIReader() client.Reader                  { return c.live }
func (c *staleCluster) GetEventRecorder(string) events.EventRecorder { return c.events }

// staleClient answers Get for the keys in stale with the object held there (a cache
// that has not seen a deletion or a re-creation) and passes everything else through.
type staleClient struct {
	client.Client
	stale map[client.ObjectKey]client.Object
}

func (s staleClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if held, ok := s.stale[key]; ok && reflect.TypeOf(held) == reflect.TypeOf(obj) {
		reflect.ValueOf(obj).Elem().Set(reflect.ValueOf(held.DeepCopyObject()).Elem())
		return nil
	}
	return s.Client.Get(ctx, key, obj, opts...)
}

// oneProject is a Clusters serving one project and the test hub (admin, uncached).
type oneProject struct {
	project string
	cluster cluster.Cluster
}

func (o oneProject) Project(_ context.Context, project string) (cluster.Cluster, error) {
	if project != o.project {
		return nil, fmt.Errorf("project %q: %w", project, multicluster.ErrClusterNotFound)
	}
	return o.cluster, nil
}

func (o oneProject) Hub(context.Context, string) (client.Client, client.Reader, error) {
	return hub.Client, hub.Client, nil
}

// hubAnchorCache starts the hub's anchor cache for a test that drives a reconciler
// directly (SetupWithManager builds one for the manager), and waits for it to sync.
func hubAnchorCache(t *testing.T) *resync.AnchorCache {
	t.Helper()
	return anchorcache.Start(t, context.Background(), hub.Config)
}

// programmedConfig is the gateway defaults for class, a written copy counted as programmed.
func programmedConfig(class string) gateway.Config {
	c := gateway.DefaultConfig()
	c.GatewayClassName, c.AssumeWrittenIsProgrammed = class, true
	return c
}

// TestGatewayRecreateAfterFinalizeCreatesNothing drives the GatewayReconciler directly
// with a cache that still shows a Gateway whose deletion has been finalized (by another
// replica): the live path creates no hub namespace, no anchor and no downstream object,
// neither when the Gateway is gone nor when one of the same name and a new UID exists.
// A reconcile with a current view then does program the hub, so the checks can fail,
// and its finalizer removes the anchor again.
func TestGatewayRecreateAfterFinalizeCreatesNothing(t *testing.T) {
	gt := newGatewayTest(t, planeB)
	g, ctx, pc := gt.g, gt.ctx, gt.plane.Client
	registry := prometheus.NewRegistry()
	metrics, err := gateway.NewMetrics(registry)
	g.Expect(err).NotTo(HaveOccurred())
	r := &gateway.GatewayReconciler{Admission: gateway.OpenAdmission{}, Config: programmedConfig(gt.class), Metrics: metrics, Anchors: hubAnchorCache(t)}
	key := client.ObjectKey{Namespace: gt.ns.Name, Name: "web"}
	reconcileWithCache := func(cached client.Object) error {
		cl := &staleCluster{
			cached: staleClient{Client: pc, stale: map[client.ObjectKey]client.Object{key: cached}},
			live:   pc,
			events: events.NewFakeRecorder(100),
		}
		r.Clusters = oneProject{project: gt.project, cluster: cl}
		_, err := r.Reconcile(ctx, mcreconcile.Request{ClusterName: multicluster.ClusterName(gt.project), Request: reconcile.Request{NamespacedName: key}})
		return err
	}
	newGateway := func() *gatewayv1.Gateway {
		host := gatewayv1.Hostname("a.example.com")
		gw := &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, Finalizers: []string{gateway.GatewayFinalizer}},
			Spec: gatewayv1.GatewaySpec{GatewayClassName: gatewayv1.ObjectName(gt.class), Listeners: []gatewayv1.Listener{
				{Name: "http", Port: 80, Protocol: gatewayv1.HTTPProtocolType},
				{Name: "https-a", Hostname: &host, Port: 443, Protocol: gatewayv1.HTTPSProtocolType, TLS: &gatewayv1.ListenerTLSConfig{
					CertificateRefs: []gatewayv1.SecretObjectReference{{Name: "web-https-a"}},
				}},
			}}}
		g.Expect(pc.Create(ctx, gw)).To(Succeed())
		return gw
	}
	expectNothingOnTheHub := func(why string) {
		t.Helper()
		g.Expect(gone(ctx, hub.Client, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: gt.hubNS()}})).To(BeTrue(), "%s: no hub namespace", why)
		g.Expect(gone(ctx, hub.Client, &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: gt.hubNS(), Name: key.Name}})).To(BeTrue(), "%s: no downstream Gateway", why)
	}
	refusals := func(reason string) float64 {
		v, err := harness.MetricValue(registry, "anchorage_live_guard_refusals_total", "kind", "Gateway", "reason", reason)
		g.Expect(err).NotTo(HaveOccurred())
		return v
	}

	// A Gateway as the cache last saw it: ours, finalized, live. Then another replica
	// finalizes its deletion.
	old := newGateway()
	staleView := old.DeepCopy()
	patch := client.MergeFrom(old.DeepCopy())
	old.Finalizers = nil
	g.Expect(pc.Patch(ctx, old, patch)).To(Succeed())
	g.Expect(pc.Delete(ctx, old)).To(Succeed())
	g.Expect(gone(ctx, pc, old.DeepCopy())).To(BeTrue())

	g.Expect(reconcileWithCache(staleView)).To(Succeed())
	g.Expect(anchorsNamed(ctx, g, string(old.UID))).To(BeEmpty(), "no anchor for the finalized Gateway")
	expectNothingOnTheHub("gone")
	g.Expect(refusals("gone")).To(Equal(1.0))

	// Recreated with the same name: the stale view is still about the old UID.
	fresh := newGateway()
	g.Expect(reconcileWithCache(staleView)).To(Succeed())
	g.Expect(anchorsNamed(ctx, g, string(old.UID))).To(BeEmpty(), "no anchor for the finalized Gateway")
	g.Expect(anchorsNamed(ctx, g, string(fresh.UID))).To(BeEmpty(), "nothing on behalf of a UID the request was not about")
	expectNothingOnTheHub("replaced")
	g.Expect(refusals("replaced")).To(Equal(1.0))

	// Control: a current view programs the hub.
	current := &gatewayv1.Gateway{}
	g.Expect(pc.Get(ctx, key, current)).To(Succeed())
	g.Expect(reconcileWithCache(current)).To(Succeed())
	anchors := anchorsNamed(ctx, g, string(fresh.UID))
	g.Expect(anchors).To(HaveLen(1))
	down := &gatewayv1.Gateway{}
	g.Expect(hub.Client.Get(ctx, client.ObjectKey{Namespace: gt.hubNS(), Name: key.Name}, down)).To(Succeed())
	expectAttached(g, down, anchor.OwnerOf(gt.project, gatewayv1.SchemeGroupVersion.WithKind("Gateway"), fresh), &anchors[0])
	g.Expect(anchorsNamed(ctx, g, string(old.UID))).To(BeEmpty())

	// The finalizer, through the same reconciler: the anchor goes, then the finalizer.
	g.Expect(pc.Delete(ctx, fresh)).To(Succeed())
	g.Expect(pc.Get(ctx, key, current)).To(Succeed())
	g.Expect(current.DeletionTimestamp).NotTo(BeNil())
	g.Expect(reconcileWithCache(current)).To(Succeed())
	g.Expect(anchorsNamed(ctx, g, string(fresh.UID))).To(BeEmpty())
	g.Expect(gone(ctx, pc, current)).To(BeTrue(), "finalizer removed, Gateway gone")
	g.Eventually(func() bool { return gone(ctx, hub.Client, down) }, 30*time.Second, gwPoll).Should(BeTrue(), "downstream Gateway collected")
}

// TestGatewayFinalizerWorksWhenTheUpstreamNamespaceIsPurged: a terminating Gateway
// whose upstream Namespace can no longer be read (purged: finalized while its objects
// were left behind), mapped to a hub namespace without labels (as older ones are),
// still gets its anchor deleted (found by name) and its downstream Gateway collected.
// The API server refuses every write into a missing namespace, so the finalizer stays
// (and the reconcile reports it) until a namespace of that name exists again; then it
// is removed.
func TestGatewayFinalizerWorksWhenTheUpstreamNamespaceIsPurged(t *testing.T) {
	gt := newGatewayTest(t, planeB)
	g, ctx, pc := gt.g, gt.ctx, gt.plane.Client
	metrics, err := gateway.NewMetrics(prometheus.NewRegistry())
	g.Expect(err).NotTo(HaveOccurred())
	r := &gateway.GatewayReconciler{
		Clusters:  oneProject{project: gt.project, cluster: &staleCluster{cached: pc, live: pc, events: events.NewFakeRecorder(100)}},
		Admission: gateway.OpenAdmission{},
		Config:    programmedConfig(gt.class),
		Metrics:   metrics,
		Anchors:   hubAnchorCache(t),
	}
	key := client.ObjectKey{Namespace: gt.ns.Name, Name: "web"}
	reconcileNow := func() error {
		_, err := r.Reconcile(ctx, mcreconcile.Request{ClusterName: multicluster.ClusterName(gt.project), Request: reconcile.Request{NamespacedName: key}})
		return err
	}
	gw := &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name},
		Spec: gatewayv1.GatewaySpec{GatewayClassName: gatewayv1.ObjectName(gt.class), Listeners: []gatewayv1.Listener{
			{Name: "http", Port: 80, Protocol: gatewayv1.HTTPProtocolType},
		}}}
	g.Expect(pc.Create(ctx, gw)).To(Succeed())
	g.Expect(reconcileNow()).To(Succeed()) // adds the finalizer, then programs the hub
	g.Expect(anchorsNamed(ctx, g, string(gw.UID))).To(HaveLen(1))
	down := &gatewayv1.Gateway{}
	g.Expect(hub.Client.Get(ctx, client.ObjectKey{Namespace: gt.hubNS(), Name: key.Name}, down)).To(Succeed())

	// An older hub namespace: no labels.
	hubNS := &corev1.Namespace{}
	g.Expect(hub.Client.Get(ctx, client.ObjectKey{Name: gt.hubNS()}, hubNS)).To(Succeed())
	hubNS.Labels = nil
	g.Expect(hub.Client.Update(ctx, hubNS)).To(Succeed())

	// Purge the upstream namespace while the Gateway, held by our finalizer, is in it.
	g.Expect(pc.Delete(ctx, gw)).To(Succeed())
	g.Expect(pc.Delete(ctx, gt.ns.DeepCopy())).To(Succeed())
	ns := &corev1.Namespace{}
	g.Expect(pc.Get(ctx, client.ObjectKey{Name: gt.ns.Name}, ns)).To(Succeed())
	ns.Spec.Finalizers = nil
	g.Expect(pc.SubResource("finalize").Update(ctx, ns)).To(Succeed())
	g.Eventually(func() bool { return gone(ctx, pc, ns) }, 10*time.Second, gwPoll).Should(BeTrue(), "upstream namespace purged")
	g.Expect(pc.Get(ctx, key, &gatewayv1.Gateway{})).To(Succeed(), "the Gateway outlives its namespace")

	err = reconcileNow()
	g.Expect(err).To(MatchError(ContainSubstring("removing finalizer")), "the finalizer cannot be removed yet, and that is reported")
	g.Expect(anchorsNamed(ctx, g, string(gw.UID))).To(BeEmpty(), "anchor found by name and deleted")
	g.Eventually(func() bool { return gone(ctx, hub.Client, down) }, 30*time.Second, gwPoll).Should(BeTrue(), "downstream Gateway collected")

	// A namespace of that name again (another UID): the finalizer goes, nothing else
	// is touched.
	g.Expect(pc.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: gt.ns.Name}})).To(Succeed())
	g.Expect(reconcileNow()).To(Succeed())
	g.Expect(gone(ctx, pc, gw.DeepCopy())).To(BeTrue(), "finalizer removed, Gateway gone")
}
