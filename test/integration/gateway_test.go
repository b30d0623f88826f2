package integration

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"anchorage/api/v1alpha"
	"anchorage/internal/app"
	"anchorage/pkg/anchor"
	"anchorage/pkg/anchor/resync"
	"anchorage/pkg/gateway"
)

// TestGatewayProxyProgramsTheHub: an HTTPProxy yields the upstream Gateway and
// HTTPRoute, and on the hub ns-<uid>, the downstream Gateway, HTTPRoute and a
// Certificate per HTTPS listener, each with the five labels and a reference to the right
// anchor; the proxy reports Programmed=True. Then the hub watch and the enqueue hook
// each repair a hand-made change.
func TestGatewayProxyProgramsTheHub(t *testing.T) {
	gt := newGatewayTest(t, planeA)
	g, ctx := gt.g, gt.ctx
	m := gt.startManager("prog")
	gt.createProxy(gt.newProxy("web", "a.example.com", "b.example.com"))
	start := time.Now()
	p := gt.waitProgrammed("web")
	t.Logf("programmed %s after the proxy was created", time.Since(start).Round(time.Millisecond))

	// Proxy status.
	g.Expect(meta.IsStatusConditionTrue(p.Status.Conditions, v1alpha.ConditionAccepted)).To(BeTrue())
	g.Expect(p.Status.Hostnames).To(Equal([]gatewayv1.Hostname{"a.example.com", "b.example.com"}))
	g.Expect(p.Finalizers).To(ContainElement(v1alpha.HTTPProxyFinalizer))

	// Upstream objects: controlled by the proxy, finalized, of the test's class.
	gw, route := gt.upstream("web")
	for _, o := range []client.Object{gw, route} {
		g.Expect(metav1.IsControlledBy(o, p)).To(BeTrue(), "%T controlled by the proxy", o)
	}
	g.Expect(gw.Finalizers).To(ContainElement(gateway.GatewayFinalizer))
	g.Expect(route.Finalizers).To(ContainElement(gateway.HTTPRouteFinalizer))
	g.Expect(string(gw.Spec.GatewayClassName)).To(Equal(gt.class))
	svc := &corev1.Service{}
	g.Expect(gt.plane.Client.Get(ctx, client.ObjectKey{Namespace: gt.ns.Name, Name: "web-backend-0"}, svc)).To(Succeed())
	g.Expect(svc.Spec.Type).To(Equal(corev1.ServiceTypeExternalName))
	g.Expect(svc.Spec.ExternalName).To(Equal("api.example.com"))
	g.Expect(metav1.IsControlledBy(svc, p)).To(BeTrue())

	// The hub namespace.
	hubNS := &corev1.Namespace{}
	g.Expect(hub.Client.Get(ctx, client.ObjectKey{Name: gt.hubNS()}, hubNS)).To(Succeed())
	g.Expect(hubNS.Labels).To(HaveKeyWithValue(anchor.LabelNamespace, gt.ns.Name))
	g.Expect(hubNS.Labels).To(HaveKeyWithValue(anchor.LabelClusterName, "cluster-"+gt.project))

	// Anchors: one per upstream Gateway and HTTPRoute, empty, unowned, labelled.
	gwOwner, routeOwner := gt.owner("Gateway", gw), gt.owner("HTTPRoute", route)
	gwAnchor, routeAnchor := &corev1.ConfigMap{}, &corev1.ConfigMap{}
	g.Expect(hub.Client.Get(ctx, client.ObjectKey{Namespace: gt.hubNS(), Name: anchor.Name(gw.UID)}, gwAnchor)).To(Succeed())
	g.Expect(hub.Client.Get(ctx, client.ObjectKey{Namespace: gt.hubNS(), Name: anchor.Name(route.UID)}, routeAnchor)).To(Succeed())
	for _, a := range []struct {
		cm    *corev1.ConfigMap
		owner anchor.Owner
	}{{gwAnchor, gwOwner}, {routeAnchor, routeOwner}} {
		g.Expect(a.cm.Labels).To(Equal(a.owner.Labels()))
		g.Expect(a.cm.Data).To(BeEmpty())
		g.Expect(a.cm.OwnerReferences).To(BeEmpty())
	}

	// Downstream Gateway and HTTPRoute.
	downGW, downRoute := &gatewayv1.Gateway{}, &gatewayv1.HTTPRoute{}
	g.Expect(hub.Client.Get(ctx, client.ObjectKey{Namespace: gt.hubNS(), Name: "web"}, downGW)).To(Succeed())
	g.Expect(hub.Client.Get(ctx, client.ObjectKey{Namespace: gt.hubNS(), Name: "web"}, downRoute)).To(Succeed())
	expectAttached(g, downGW, gwOwner, gwAnchor)
	expectAttached(g, downRoute, routeOwner, routeAnchor)
	g.Expect(string(downGW.Spec.GatewayClassName)).To(Equal(gateway.DefaultConfig().DownstreamGatewayClassName))
	g.Expect(downGW.Spec.Listeners).To(HaveLen(2+2*len(p.Spec.Hostnames)), "the platform hostname's two listeners, and HTTP and HTTPS per hostname")
	for _, l := range downGW.Spec.Listeners {
		g.Expect(l.Hostname).NotTo(BeNil(), "listener %s has no hostname", l.Name)
	}
	g.Expect(downRoute.Spec.ParentRefs).To(HaveLen(1))
	g.Expect(string(downRoute.Spec.ParentRefs[0].Name)).To(Equal(downGW.Name))
	g.Expect(downRoute.Spec.ParentRefs[0].Namespace).To(BeNil())

	// One Certificate per HTTPS listener, <gateway>-<listener>, on the Gateway's anchor.
	var wantCerts []string
	for _, l := range gw.Spec.Listeners {
		if l.Protocol != gatewayv1.HTTPSProtocolType {
			continue
		}
		name := gateway.CertificateName(gw.Name, l.Name)
		wantCerts = append(wantCerts, name)
		cert := certificate()
		g.Expect(hub.Client.Get(ctx, client.ObjectKey{Namespace: gt.hubNS(), Name: name}, cert)).To(Succeed())
		expectAttached(g, cert, gwOwner, gwAnchor)
		dns, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
		secret, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName")
		issuer, _, _ := unstructured.NestedString(cert.Object, "spec", "issuerRef", "name")
		g.Expect(dns).To(Equal([]string{string(*l.Hostname)}))
		g.Expect(secret).To(Equal(name))
		g.Expect(issuer).To(Equal(gateway.DefaultConfig().CertificateIssuer.Name))
	}
	g.Expect(wantCerts).To(HaveLen(3), "the two hostnames' and the platform hostname's")
	var gotCerts []string
	for _, c := range certificatesIn(ctx, g, gt.hubNS()) {
		gotCerts = append(gotCerts, c.GetName())
	}
	g.Expect(gotCerts).To(ConsistOf(wantCerts))

	created, err := m.Gauge("anchorage_downstream_writes_total", "kind", "Certificate", "result", "created")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(created).To(BeNumerically(">=", 2))

	// Hub watch: a hand edit of the downstream Gateway is reverted.
	edited := downGW.DeepCopy()
	edited.Spec.GatewayClassName = "hand-edited"
	g.Expect(hub.Client.Update(ctx, edited)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(hub.Client.Get(ctx, client.ObjectKeyFromObject(downGW), edited)).To(Succeed())
		g.Expect(string(edited.Spec.GatewayClassName)).To(Equal(gateway.DefaultConfig().DownstreamGatewayClassName))
	}, gwCleanWithin, gwPoll).Should(Succeed())

	// Enqueue hook: Certificates are not watched, so one deleted by hand comes back when
	// its Gateway is enqueued. (A smoke test: the routing itself is unit-tested, and a
	// reconcile still in flight could restore it too.)
	lost := certificate()
	lost.SetNamespace(gt.hubNS())
	lost.SetName(wantCerts[0])
	g.Expect(hub.Client.Delete(ctx, lost)).To(Succeed())
	g.Expect(m.Replica.Gateway.Enqueue(gwOwner)).To(Succeed())
	g.Eventually(func(g Gomega) {
		back := certificate()
		g.Expect(hub.Client.Get(ctx, client.ObjectKey{Namespace: gt.hubNS(), Name: wantCerts[0]}, back)).To(Succeed())
		expectAttached(g, back, gwOwner, gwAnchor)
	}, gwCleanWithin, gwPoll).Should(Succeed())
}

// TestGatewayDeletingTheProxyLeavesNoAnchor: deleting the proxy removes both anchors
// within seconds, the proxy and its upstream objects go, and the hub's garbage
// collector removes the downstream objects. The manager runs with only the generated
// roles, on the hub and on the plane (every test's default), so the markers are proven
// sufficient for the whole round trip.
func TestGatewayDeletingTheProxyLeavesNoAnchor(t *testing.T) {
	gt := newGatewayTest(t, planeA)
	g, ctx := gt.g, gt.ctx
	gt.startManager("del")
	p := gt.createProxy(gt.newProxy("web", "a.example.com"))
	gt.waitProgrammed("web")
	gw, route := gt.upstream("web")
	downstream := []client.Object{
		&gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: gt.hubNS(), Name: "web"}},
		&gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: gt.hubNS(), Name: "web"}},
	}
	for _, c := range certificatesIn(ctx, g, gt.hubNS()) {
		downstream = append(downstream, c.DeepCopy())
	}
	g.Expect(downstream).To(HaveLen(4), "the Gateway, the route, the Certificates of the hostname and of the platform hostname")

	g.Expect(gt.plane.Client.Delete(ctx, p)).To(Succeed())
	start := time.Now()
	g.Eventually(func(g Gomega) {
		g.Expect(anchorsNamed(ctx, g, string(gw.UID))).To(BeEmpty(), "Gateway anchor")
		g.Expect(anchorsNamed(ctx, g, string(route.UID))).To(BeEmpty(), "HTTPRoute anchor")
	}, gwCleanWithin, gwPoll).Should(Succeed())
	t.Logf("no anchor left %s after the delete", time.Since(start).Round(time.Millisecond))
	g.Eventually(func() bool {
		return gone(ctx, gt.plane.Client, p) && gone(ctx, gt.plane.Client, gw) && gone(ctx, gt.plane.Client, route)
	}, gwCleanWithin, gwPoll).Should(BeTrue(), "proxy, Gateway and HTTPRoute gone upstream")
	for _, o := range downstream {
		g.Eventually(func() bool { return gone(ctx, hub.Client, o) }, gwGCWithin, gwPoll).Should(BeTrue(), "%T %s collected", o, o.GetName())
	}
	t.Logf("downstream objects collected %s after the delete", time.Since(start).Round(time.Millisecond))
}

// TestGatewayDownstreamDeletedByHandStillRemovesTheAnchor: with the downstream Gateway
// and its Certificates deleted by hand before the proxy, deletion still removes the
// anchor. The manager is stopped while the downstream objects are deleted and the
// proxy and its Gateway are marked for deletion, so the next manager meets a
// terminating Gateway whose downstream copy is already gone (and never re-creates it).
func TestGatewayDownstreamDeletedByHandStillRemovesTheAnchor(t *testing.T) {
	gt := newGatewayTest(t, planeB)
	g, ctx := gt.g, gt.ctx
	first := gt.startManager("hand1")
	p := gt.createProxy(gt.newProxy("web", "a.example.com"))
	gt.waitProgrammed("web")
	gw, route := gt.upstream("web")
	stopping := time.Now()
	gt.stopManager(first)
	t.Logf("first manager stopped in %s", time.Since(stopping).Round(time.Millisecond))

	downGW := &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: gt.hubNS(), Name: "web"}}
	g.Expect(hub.Client.Delete(ctx, downGW)).To(Succeed())
	for _, c := range certificatesIn(ctx, g, gt.hubNS()) {
		g.Expect(hub.Client.Delete(ctx, c.DeepCopy())).To(Succeed())
	}
	g.Expect(gone(ctx, hub.Client, downGW)).To(BeTrue())
	g.Expect(anchorsNamed(ctx, g, string(gw.UID))).To(HaveLen(1), "the anchor outlives its dependents")
	g.Expect(gt.plane.Client.Delete(ctx, p)).To(Succeed())
	g.Expect(gt.plane.Client.Delete(ctx, gw)).To(Succeed())

	second := gt.startManager("hand2")
	started := time.Now()
	g.Eventually(func(g Gomega) {
		g.Expect(anchorsNamed(ctx, g, string(gw.UID))).To(BeEmpty(), "Gateway anchor")
		g.Expect(anchorsNamed(ctx, g, string(route.UID))).To(BeEmpty(), "HTTPRoute anchor")
		g.Expect(gone(ctx, gt.plane.Client, p)).To(BeTrue(), "proxy finalized")
	}, gwProgrammedWithin, gwPoll).Should(Succeed())
	t.Logf("anchors removed and proxy finalized %s after the second manager started", time.Since(started).Round(time.Millisecond))
	g.Expect(hubWritesBy(g, second.User, []string{"create"}, []string{"gateways", "certificates", "configmaps"}, gt.hubNS())).To(BeEmpty(),
		"the second manager must not re-create anything for the terminating Gateway")
}

// TestGatewaySameNameNewUIDEndsWithOneAnchor: a proxy deleted and recreated with the
// same name ends with exactly one anchor per upstream kind, the new UID's, and the
// downstream objects hang on it.
func TestGatewaySameNameNewUIDEndsWithOneAnchor(t *testing.T) {
	gt := newGatewayTest(t, planeA)
	g, ctx := gt.g, gt.ctx
	gt.startManager("uid")
	p := gt.createProxy(gt.newProxy("web", "a.example.com"))
	gt.waitProgrammed("web")
	oldGW, oldRoute := gt.upstream("web")

	g.Expect(gt.plane.Client.Delete(ctx, p)).To(Succeed())
	g.Eventually(func() bool { return gone(ctx, gt.plane.Client, p) }, gwCleanWithin, gwPoll).Should(BeTrue())
	gt.createProxy(gt.newProxy("web", "a.example.com"))
	gt.waitProgrammed("web")
	gw, route := gt.upstream("web")
	g.Expect(gw.UID).NotTo(Equal(oldGW.UID))

	g.Eventually(func(g Gomega) {
		for _, k := range []struct {
			owner  anchor.Owner
			oldUID types.UID
			down   client.Object
		}{
			{gt.owner("Gateway", gw), oldGW.UID, &gatewayv1.Gateway{}},
			{gt.owner("HTTPRoute", route), oldRoute.UID, &gatewayv1.HTTPRoute{}},
		} {
			anchors := anchorsOf(ctx, g, k.owner)
			g.Expect(anchors).To(HaveLen(1), "anchors of %s", k.owner)
			g.Expect(anchors[0].Name).To(Equal(anchor.Name(k.owner.UID)))
			g.Expect(anchorsNamed(ctx, g, string(k.oldUID))).To(BeEmpty())
			g.Expect(hub.Client.Get(ctx, client.ObjectKey{Namespace: gt.hubNS(), Name: "web"}, k.down)).To(Succeed())
			expectAttached(g, k.down, k.owner, &anchors[0])
		}
		gwAnchor := anchorsOf(ctx, g, gt.owner("Gateway", gw))
		certs := certificatesIn(ctx, g, gt.hubNS())
		g.Expect(certs).To(HaveLen(2), "the hostname's and the platform hostname's")
		for i := range certs {
			expectAttached(g, &certs[i], gt.owner("Gateway", gw), &gwAnchor[0])
		}
	}, gwGCWithin, gwPoll).Should(Succeed())
}

// TestGatewayHubRefusalIsReportedAndNothingDeleted: a hub that refuses the write (here:
// the mapped namespace belongs to another upstream namespace) gives a condition and an
// Event on the upstream Gateway and a condition on the proxy, deletes nothing, and is
// retried until the hub accepts.
func TestGatewayHubRefusalIsReportedAndNothingDeleted(t *testing.T) {
	gt := newGatewayTest(t, planeB)
	g, ctx := gt.g, gt.ctx
	foreign := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:   gt.hubNS(),
		Labels: map[string]string{anchor.LabelNamespace: "someone-else"},
	}}
	g.Expect(hub.Client.Create(ctx, foreign)).To(Succeed())
	gt.startManager("refuse")
	gt.createProxy(gt.newProxy("web", "a.example.com"))

	g.Eventually(func(g Gomega) {
		p := &v1alpha.HTTPProxy{}
		g.Expect(gt.plane.Client.Get(ctx, client.ObjectKey{Namespace: gt.ns.Name, Name: "web"}, p)).To(Succeed())
		c := meta.FindStatusCondition(p.Status.Conditions, v1alpha.ConditionProgrammed)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(v1alpha.ReasonHubWriteFailed))
		g.Expect(c.Message).To(ContainSubstring("someone-else"))

		gw := &gatewayv1.Gateway{}
		g.Expect(gt.plane.Client.Get(ctx, client.ObjectKey{Namespace: gt.ns.Name, Name: "web"}, gw)).To(Succeed())
		gc := meta.FindStatusCondition(gw.Status.Conditions, string(gatewayv1.GatewayConditionProgrammed))
		g.Expect(gc).NotTo(BeNil())
		g.Expect(gc.Reason).To(Equal(v1alpha.ReasonHubWriteFailed))

		events := &eventsv1.EventList{}
		g.Expect(gt.plane.Client.List(ctx, events, client.InNamespace(gt.ns.Name))).To(Succeed())
		var reasons []string
		for _, ev := range events.Items {
			if ev.Regarding.Kind == "Gateway" && ev.Regarding.Name == "web" {
				reasons = append(reasons, ev.Reason)
			}
		}
		g.Expect(reasons).To(ContainElement(v1alpha.ReasonHubWriteFailed))
	}, gwProgrammedWithin, gwPoll).Should(Succeed())

	got := &corev1.Namespace{}
	g.Expect(hub.Client.Get(ctx, client.ObjectKey{Name: gt.hubNS()}, got)).To(Succeed())
	g.Expect(got.UID).To(Equal(foreign.UID), "the refusing namespace is not replaced")
	g.Expect(got.Labels).To(Equal(foreign.Labels), "nor changed")

	// Once the hub accepts, the retries (with backoff) program the proxy.
	got.Labels = nil
	g.Expect(hub.Client.Update(ctx, got)).To(Succeed())
	gt.waitProgrammed("web")
}

// TestGatewayTakesOverWireFormatState: a project and hub as the previous manager left
// them (finalizers, an unlabelled ns-<uid>, anchors (one with the legacy cluster label),
// downstream Gateway, HTTPRoute and Certificate, listener names of its own, its hostname
// claim) are adopted in place: the manager creates no hub object and deletes nothing,
// and the proxy becomes Programmed=True.
func TestGatewayTakesOverWireFormatState(t *testing.T) {
	gt := newGatewayTest(t, planeA)
	g, ctx := gt.g, gt.ctx
	pc := gt.plane.Client
	hubNS := gt.hubNS()

	// Project side.
	p := gt.newProxy("web", "a.example.com")
	p.Finalizers = []string{v1alpha.HTTPProxyFinalizer}
	g.Expect(pc.Create(ctx, p)).To(Succeed())
	ctrl := metav1.OwnerReference{APIVersion: v1alpha.GroupVersion.String(), Kind: "HTTPProxy", Name: p.Name, UID: p.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}
	upMeta := metav1.ObjectMeta{Name: "web", Namespace: gt.ns.Name, OwnerReferences: []metav1.OwnerReference{ctrl}}
	host := gatewayv1.Hostname("a.example.com")
	gw := &gatewayv1.Gateway{ObjectMeta: *upMeta.DeepCopy(), Spec: gatewayv1.GatewaySpec{
		GatewayClassName: gatewayv1.ObjectName(gt.class),
		Listeners: []gatewayv1.Listener{
			{Name: "http", Port: 80, Protocol: gatewayv1.HTTPProtocolType},
			{Name: "https-0", Hostname: &host, Port: 443, Protocol: gatewayv1.HTTPSProtocolType, TLS: &gatewayv1.ListenerTLSConfig{
				CertificateRefs: []gatewayv1.SecretObjectReference{{Name: "web-https-0"}},
			}},
		},
	}}
	gw.Finalizers = []string{gateway.GatewayFinalizer}
	g.Expect(pc.Create(ctx, gw)).To(Succeed())
	route := &gatewayv1.HTTPRoute{ObjectMeta: *upMeta.DeepCopy(), Spec: gatewayv1.HTTPRouteSpec{
		CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Name: "web"}}},
		Hostnames:       []gatewayv1.Hostname{host},
	}}
	route.Finalizers = []string{gateway.HTTPRouteFinalizer}
	g.Expect(pc.Create(ctx, route)).To(Succeed())

	// Hub side, in the wire format.
	gwOwner, routeOwner := gt.owner("Gateway", gw), gt.owner("HTTPRoute", route)
	legacyLabels := gwOwner.Labels()
	legacyLabels[anchor.LabelClusterName] = "cluster-_" + gt.project
	g.Expect(hub.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: hubNS}})).To(Succeed())
	gwAnchor := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: hubNS, Name: anchor.Name(gw.UID), Labels: legacyLabels}}
	routeAnchor := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: hubNS, Name: anchor.Name(route.UID), Labels: routeOwner.Labels()}}
	g.Expect(hub.Client.Create(ctx, gwAnchor)).To(Succeed())
	g.Expect(hub.Client.Create(ctx, routeAnchor)).To(Succeed())
	attached := func(a *corev1.ConfigMap, labels map[string]string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: hubNS, Name: "web", Labels: labels,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: a.Name, UID: a.UID}}}
	}
	downGW := &gatewayv1.Gateway{ObjectMeta: attached(gwAnchor, legacyLabels), Spec: *gw.Spec.DeepCopy()}
	downGW.Spec.GatewayClassName = "previous-edge"
	g.Expect(hub.Client.Create(ctx, downGW)).To(Succeed())
	downRoute := &gatewayv1.HTTPRoute{ObjectMeta: attached(routeAnchor, routeOwner.Labels()), Spec: *route.Spec.DeepCopy()}
	g.Expect(hub.Client.Create(ctx, downRoute)).To(Succeed())
	cert := certificate()
	cert.SetNamespace(hubNS)
	cert.SetName("web-https-0")
	cert.SetLabels(legacyLabels)
	cert.SetOwnerReferences(downGW.OwnerReferences)
	g.Expect(unstructured.SetNestedField(cert.Object, map[string]any{
		"dnsNames": []any{"a.example.com"}, "secretName": "web-https-0",
		"issuerRef": map[string]any{"name": "previous", "kind": "ClusterIssuer", "group": "cert-manager.io"},
	}, "spec")).To(Succeed())
	g.Expect(hub.Client.Create(ctx, cert)).To(Succeed())
	// The previous manager's hostname claim, in its claims namespace (the harness gives
	// each environment its own).
	g.Expect(hub.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: gt.env.ClaimsNamespace()}})).To(Succeed())
	claim := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: gt.env.ClaimsNamespace(), Name: string(host), Labels: map[string]string{
			anchor.LabelClusterName: "cluster-_" + gt.project, anchor.LabelNamespace: gt.ns.Name, anchor.LabelName: "web"}},
		Data: map[string]string{"owner": "/" + gt.project + "/" + gt.ns.Name + "/web"},
	}
	g.Expect(hub.Client.Create(ctx, claim)).To(Succeed())
	before := map[string]types.UID{"gateway": downGW.UID, "route": downRoute.UID, "cert": cert.GetUID(), "gwAnchor": gwAnchor.UID, "routeAnchor": routeAnchor.UID, "claim": claim.UID}

	// The resync's first pass comes at once, so that the checks below also cover it: it
	// records the plane's identity (its one write, in the lease namespace) and must
	// neither create nor delete anything of the proxy's.
	m := gt.startManager("takeover", func(o *app.Options) {
		o.Resync.InitialJitter = time.Millisecond
	})
	gt.waitProgrammed("web")
	g.Eventually(func(g Gomega) {
		records := &corev1.ConfigMapList{}
		g.Expect(hub.Client.List(ctx, records, client.InNamespace(gt.env.ProviderNamespace), client.MatchingLabels{resync.LabelPlaneIdentity: "true"})).To(Succeed())
		g.Expect(records.Items).NotTo(BeEmpty(), "the resync's first pass records the plane's identity")
	}, gwProgrammedWithin, gwPoll).Should(Succeed())

	// Adopted in place: same objects, the Gateway's listener name kept, nothing new.
	after := map[string]types.UID{}
	for key, o := range map[string]client.Object{"gateway": &gatewayv1.Gateway{}, "route": &gatewayv1.HTTPRoute{}, "cert": certificate()} {
		name := "web"
		if key == "cert" {
			name = "web-https-0"
		}
		g.Expect(hub.Client.Get(ctx, client.ObjectKey{Namespace: hubNS, Name: name}, o)).To(Succeed())
		after[key] = o.GetUID()
	}
	for key, a := range map[string]*corev1.ConfigMap{"gwAnchor": gwAnchor, "routeAnchor": routeAnchor, "claim": claim} {
		got := &corev1.ConfigMap{}
		g.Expect(hub.Client.Get(ctx, client.ObjectKeyFromObject(a), got)).To(Succeed())
		after[key] = got.UID
	}
	g.Expect(after).To(Equal(before))
	g.Expect(certificatesIn(ctx, g, hubNS)).To(HaveLen(2), "its own, and one for the platform hostname")
	upGW, _ := gt.upstream("web")
	g.Expect(upGW.UID).To(Equal(gw.UID))
	g.Expect(upGW.Spec.Listeners).To(ContainElement(And(HaveField("Name", gatewayv1.SectionName("https-0")), HaveField("Port", gatewayv1.PortNumber(443)))), "the previous listener name is kept")
	downNow := &gatewayv1.Gateway{}
	g.Expect(hub.Client.Get(ctx, client.ObjectKey{Namespace: hubNS, Name: "web"}, downNow)).To(Succeed())
	g.Expect(string(downNow.Spec.GatewayClassName)).To(Equal(gateway.DefaultConfig().DownstreamGatewayClassName), "adopted objects are brought to the current spec")

	hubKinds := []string{"namespaces", "configmaps", "gateways", "httproutes", "certificates"}
	// The only new object: the Certificate of the platform hostname this state's Gateway
	// never had (the previous manager's real Gateways have it: cutover_test.go).
	for _, ev := range hubWritesBy(g, m.User, []string{"create"}, hubKinds, "") {
		platformCert := ev.ObjectRef.Namespace == hubNS && ev.ObjectRef.Resource == "certificates" && ev.ObjectRef.Name == "web-default-https"
		records := ev.ObjectRef.Namespace == gt.env.ProviderNamespace && ev.ObjectRef.Resource == "configmaps"
		g.Expect(platformCert || records).To(BeTrue(),
			"the manager creates nothing on the hub but the platform hostname's Certificate and its own records in the lease namespace; created %+v", ev.ObjectRef)
	}
	g.Expect(hubWritesBy(g, m.User, []string{"delete", "deletecollection"}, hubKinds, "")).To(BeEmpty(), "nothing deleted on the hub")
}
