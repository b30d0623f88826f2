package gateway

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/uuid"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"anchorage/internal/testenv"
	"anchorage/pkg/anchor"
)

// The cost of a Gateway's finalization on a real hub (envtest serving the Gateway API
// and cert-manager's Certificate): what a finalizer sends for the downstream objects
// and the anchor, counted on the wire.

// writtenGatewayFixture is a Gateway of class "ours" in namespace "team" of project
// "proj" (a fake plane), programmed on the hub by the reconciler it returns.
type writtenGatewayFixture struct {
	project client.WithWatch
	gw      *gatewayv1.Gateway
	hubNS   string
	setup   client.Client // the hub, uncounted
}

func programWrittenGateway(t *testing.T, ctx context.Context, r *GatewayReconciler, setup client.Client, listeners ...gatewayv1.Listener) *writtenGatewayFixture {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team", UID: uuid.NewUUID()}}
	gw := &gatewayv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "web", UID: uuid.NewUUID(), Finalizers: []string{GatewayFinalizer}},
		Spec:       gatewayv1.GatewaySpec{GatewayClassName: "ours", Listeners: listeners},
	}
	project := fake.NewClientBuilder().WithScheme(guardScheme(t)).WithObjects(ns, gw).WithStatusSubresource(gw).Build()
	r.Clusters = fakeClusters{cluster: &fakeCluster{cached: project, live: project}, hub: r.Clusters.(fakeClusters).hub}
	if _, err := r.Reconcile(ctx, reconcileRequestOf(gw)); err != nil {
		t.Fatalf("programming the Gateway: %v", err)
	}
	f := &writtenGatewayFixture{project: project, gw: gw, hubNS: anchor.MappedNamespace(ns.UID), setup: setup}
	for _, l := range certificateListeners(gw, listenerCertificates{}) {
		f.mustExist(t, ctx, certificateRef(CertificateName(gw.Name, l.Name), f.hubNS))
	}
	f.mustExist(t, ctx, &gatewayv1.Gateway{ObjectMeta: objectMeta(gw.Name, f.hubNS)})
	return f
}

func (f *writtenGatewayFixture) mustExist(t *testing.T, ctx context.Context, obj client.Object) {
	t.Helper()
	if err := f.setup.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
		t.Fatalf("%T %s on the hub: %v", obj, client.ObjectKeyFromObject(obj), err)
	}
}

// terminate requests the Gateway's deletion on the plane (it keeps its finalizer).
func (f *writtenGatewayFixture) terminate(t *testing.T, ctx context.Context) {
	t.Helper()
	if err := f.project.Delete(ctx, f.gw.DeepCopy()); err != nil {
		t.Fatal(err)
	}
}

// hubCallsOf returns the counted calls by resource, each as a verb→count map printed.
func hubCallsOf(c *callCounter, resources ...string) map[string]string {
	out := map[string]string{}
	for _, r := range resources {
		out[r] = fmt.Sprint(c.on(r))
	}
	return out
}

// TestGatewayFinalizerDeletesItsHubObjectsWithoutAList: a terminating Gateway's
// finalizer lists nothing but its hostname claims (one label-selected list in the
// claims namespace, then a DELETE per claim: its two listeners' hostnames). When this replica wrote the downstream Gateway and its
// Certificates, each goes with one DELETE conditional on the UID it was written with;
// when another replica did (nothing remembered), with a GET and a DELETE; a Certificate
// of a listener removed before the live path cleaned it up still goes when remembered;
// and an object replaced on the hub since it was written (another UID, attached to no
// anchor of ours) is read, left alone and kept.
func TestGatewayFinalizerDeletesItsHubObjectsWithoutAList(t *testing.T) {
	ctx := context.Background()
	crds, err := testenv.HubCRDs()
	if err != nil {
		t.Fatal(err)
	}
	cfg := testenv.StartAPIServer(t, crds...)
	setup, err := client.New(cfg, client.Options{Scheme: guardScheme(t)})
	if err != nil {
		t.Fatal(err)
	}
	anchors := startAnchorCache(t, ctx, cfg)
	a := httpsListener("web", "https-a", "a.example.com")
	b := httpsListener("web", "https-b", "b.example.com")

	cases := []struct {
		name string
		// finalizedElsewhere: the finalizing replica is not the one that wrote.
		finalizedElsewhere bool
		// dropListenerB: the Gateway loses listener b after it was programmed.
		dropListenerB bool
		// replaceGateway: the downstream Gateway is deleted and created again by hand.
		replaceGateway bool
		want           map[string]string
		keptGateway    bool
	}{
		{name: "written here", want: map[string]string{
			"gateways": "map[delete:1]", "certificates": "map[delete:2]", "configmaps": "map[delete:3 get:1 list:1]"}},
		{name: "written by another replica", finalizedElsewhere: true, want: map[string]string{
			"gateways": "map[delete:1 get:1]", "certificates": "map[delete:2 get:2]", "configmaps": "map[delete:3 get:1 list:1]"}},
		{name: "a listener removed since", dropListenerB: true, want: map[string]string{
			"gateways": "map[delete:1]", "certificates": "map[delete:2]", "configmaps": "map[delete:3 get:1 list:1]"}},
		{name: "downstream Gateway replaced by hand", replaceGateway: true, keptGateway: true, want: map[string]string{
			"gateways": "map[delete:1 get:1]", "certificates": "map[delete:2]", "configmaps": "map[delete:3 get:1 list:1]"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			counter := &callCounter{}
			m, _ := guardMetrics(t)
			writer := &GatewayReconciler{
				Clusters:  fakeClusters{hub: countedClient(t, cfg, counter)},
				Admission: OpenAdmission{}, Config: testConfig("ours"),
				Metrics: m, Anchors: anchors, Written: NewWrittenObjects(DefaultWrittenOwners),
			}
			f := programWrittenGateway(t, ctx, writer, setup, httpListener("http", ""), a, b)
			finalizer := writer
			if tc.finalizedElsewhere {
				other := *writer
				other.Written = NewWrittenObjects(DefaultWrittenOwners)
				finalizer = &other
			}
			if tc.dropListenerB {
				gw := &gatewayv1.Gateway{}
				if err := f.project.Get(ctx, client.ObjectKeyFromObject(f.gw), gw); err != nil {
					t.Fatal(err)
				}
				gw.Spec.Listeners = gw.Spec.Listeners[:2]
				if err := f.project.Update(ctx, gw); err != nil {
					t.Fatal(err)
				}
			}
			var replacement *gatewayv1.Gateway
			if tc.replaceGateway {
				old := &gatewayv1.Gateway{ObjectMeta: objectMeta(f.gw.Name, f.hubNS)}
				if err := setup.Delete(ctx, old); err != nil {
					t.Fatal(err)
				}
				replacement = &gatewayv1.Gateway{ObjectMeta: objectMeta(f.gw.Name, f.hubNS), Spec: gatewayv1.GatewaySpec{GatewayClassName: "by-hand", Listeners: []gatewayv1.Listener{httpListener("http", "")}}}
				if err := setup.Create(ctx, replacement); err != nil {
					t.Fatal(err)
				}
			}
			waitIndexed(t, ctx, anchors, anchor.Name(f.gw.UID), 1)
			f.terminate(t, ctx)
			counter.mu.Lock()
			counter.calls = nil
			counter.mu.Unlock()

			if _, err := finalizer.Reconcile(ctx, reconcileRequestOf(f.gw)); err != nil {
				t.Fatalf("finalizing: %v", err)
			}

			if got := hubCallsOf(counter, "gateways", "certificates", "configmaps"); fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("hub calls while finalizing = %v, want %v", got, tc.want)
			}
			for _, obj := range []client.Object{certificateRef(CertificateName("web", "https-a"), f.hubNS), certificateRef(CertificateName("web", "https-b"), f.hubNS), &corev1.ConfigMap{ObjectMeta: objectMeta(anchor.Name(f.gw.UID), f.hubNS)}} {
				if err := setup.Get(ctx, client.ObjectKeyFromObject(obj), obj); !apierrors.IsNotFound(err) {
					t.Errorf("%s %s is still on the hub (get: %v)", kindOf(obj), client.ObjectKeyFromObject(obj), err)
				}
			}
			got := &gatewayv1.Gateway{}
			err := setup.Get(ctx, client.ObjectKeyFromObject(&gatewayv1.Gateway{ObjectMeta: objectMeta(f.gw.Name, f.hubNS)}), got)
			switch {
			case tc.keptGateway && (err != nil || got.UID != replacement.UID):
				t.Errorf("the Gateway made by hand is not kept: %v", err)
			case !tc.keptGateway && !apierrors.IsNotFound(err):
				t.Errorf("the downstream Gateway is still on the hub (get: %v)", err)
			}
			if tc.keptGateway {
				if err := setup.Delete(ctx, got); err != nil {
					t.Fatal(err)
				}
			}
			if err := f.project.Get(ctx, client.ObjectKeyFromObject(f.gw), &gatewayv1.Gateway{}); !apierrors.IsNotFound(err) {
				t.Errorf("the Gateway is not finalized: %v", err)
			}
		})
	}
}

// kindOf names obj's kind for a message.
func kindOf(obj client.Object) string {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return u.GetKind()
	}
	return fmt.Sprintf("%T", obj)
}

// objectMeta returns metadata naming name in namespace.
func objectMeta(name, namespace string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: namespace}
}
