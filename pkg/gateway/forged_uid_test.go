package gateway

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"anchorage/internal/testenv"
	"anchorage/pkg/anchor"
)

// TestAPlaneReportingAnotherProjectsUIDsReachesNothingOfIt: project "proj"'s plane (a
// fake API server: the tenant controls it) reports a namespace and a terminating
// Gateway with the UIDs of another project's, so the finalizer is pointed at that
// project's hub namespace, anchor and downstream Gateway. Nothing of the other project's
// is deleted, whether its hub namespace is labelled (refused before any delete, with an
// error the finalizer keeps) or not (the downstream Gateway and the anchor carry the
// other project's labels, so neither is deleted).
func TestAPlaneReportingAnotherProjectsUIDsReachesNothingOfIt(t *testing.T) {
	ctx := context.Background()
	crds, err := testenv.HubCRDs()
	if err != nil {
		t.Fatal(err)
	}
	cfg := testenv.StartAPIServer(t, crds...)
	hub, err := client.New(cfg, client.Options{Scheme: guardScheme(t)})
	if err != nil {
		t.Fatal(err)
	}
	anchors := startAnchorCache(t, ctx, cfg)
	for _, labelled := range []bool{true, false} {
		nsUID, gwUID := uuid.NewUUID(), uuid.NewUUID()
		// The other project's hub state: its mapped namespace, anchor and Gateway.
		victim := anchor.Owner{Project: "victim", Group: gatewayv1.GroupName, Kind: kindGateway, Namespace: "team", Name: "web", UID: gwUID}
		hubNS := anchor.MappedNamespace(nsUID)
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: hubNS}}
		if labelled {
			ns.Labels = map[string]string{anchor.LabelClusterName: anchor.ClusterNameValue("victim"), anchor.LabelNamespace: "team"}
		}
		if err := hub.Create(ctx, ns); err != nil {
			t.Fatal(err)
		}
		a := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: hubNS, Name: anchor.Name(gwUID), Labels: victim.Labels()}}
		if err := hub.Create(ctx, a); err != nil {
			t.Fatal(err)
		}
		down := &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: hubNS, Name: "web", Labels: victim.Labels(),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: a.Name, UID: a.UID}}},
			Spec: gatewayv1.GatewaySpec{GatewayClassName: "edge", Listeners: []gatewayv1.Listener{{Name: "http", Port: 80, Protocol: gatewayv1.HTTPProtocolType}}}}
		if err := hub.Create(ctx, down); err != nil {
			t.Fatal(err)
		}
		waitIndexed(t, ctx, anchors, a.Name, 1)

		// The forging plane of project "proj".
		forged := &gatewayv1.Gateway{
			ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "web", UID: gwUID, Finalizers: []string{GatewayFinalizer}, DeletionTimestamp: ptr.To(metav1.Now())},
			Spec:       gatewayv1.GatewaySpec{GatewayClassName: "ours", Listeners: []gatewayv1.Listener{{Name: "http", Port: 80, Protocol: gatewayv1.HTTPProtocolType}}},
		}
		project := fake.NewClientBuilder().WithScheme(guardScheme(t)).WithObjects(
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team", UID: nsUID}}, forged).Build()
		m, _ := guardMetrics(t)
		r := &GatewayReconciler{
			Clusters:  fakeClusters{cluster: &fakeCluster{cached: project, live: project}, hub: hub},
			Admission: OpenAdmission{}, Config: testConfig("ours"), Metrics: m, Anchors: anchors,
		}
		_, err := r.Reconcile(ctx, reconcileRequestOf(forged))
		if !errors.Is(err, anchor.ErrForeign) {
			t.Errorf("labelled %v: finalizing the forged Gateway: %v, want an error wrapping ErrForeign", labelled, err)
		}
		for _, obj := range []client.Object{&gatewayv1.Gateway{}, &corev1.ConfigMap{}} {
			key := client.ObjectKey{Namespace: hubNS, Name: "web"}
			if _, isCM := obj.(*corev1.ConfigMap); isCM {
				key.Name = a.Name
			}
			if err := hub.Get(ctx, key, obj); err != nil || obj.GetDeletionTimestamp() != nil {
				t.Errorf("labelled %v: the other project's %T %s was deleted (get: %v)", labelled, obj, key, err)
			}
		}
	}
}
