package integration

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"anchorage/api/v1alpha"
	"anchorage/internal/harness"
	"anchorage/pkg/anchor"
	"anchorage/pkg/anchor/resync"
	"anchorage/pkg/gateway"
)

// backendObjects are the hub objects of backendRef ref of rule of the route with
// routeUID, in hubNS: the Service, the EndpointSlice and the BackendTLSPolicy (which
// only an https backend has).
func backendObjects(hubNS string, routeUID string, rule, ref int) []client.Object {
	name := gateway.BackendObjectName(k8stypes.UID(routeUID), rule, ref)
	meta := metav1.ObjectMeta{Namespace: hubNS, Name: name}
	return []client.Object{&corev1.Service{ObjectMeta: meta}, &discoveryv1.EndpointSlice{ObjectMeta: meta}, &gatewayv1.BackendTLSPolicy{ObjectMeta: meta}}
}

// proxyCondition reads condition typ of the proxy name.
func (gt *gatewayTest) proxyCondition(g Gomega, name, typ string) *metav1.Condition {
	p := &v1alpha.HTTPProxy{}
	g.Expect(gt.plane.Client.Get(gt.ctx, client.ObjectKey{Namespace: gt.ns.Name, Name: name}, p)).To(Succeed())
	c := meta.FindStatusCondition(p.Status.Conditions, typ)
	g.Expect(c).NotTo(BeNil(), "%s condition", typ)
	g.Expect(c.ObservedGeneration).To(Equal(p.Generation))
	return c
}

// TestProgrammedGoesFalseWhileTheHubRouteDoesNotResolve: a backend's hub Service
// deleted by hand, while the hub refuses to have it written again, takes the proxy's
// Programmed to False with a reason at the next watch event, and the edge's own
// verdict on the hub route says the backend is gone; once the hub takes writes again
// the manager restores the Service and the proxy is Programmed again.
func TestProgrammedGoesFalseWhileTheHubRouteDoesNotResolve(t *testing.T) {
	gt := newGatewayTest(t, planeA)
	g, ctx := gt.g, gt.ctx
	edge := gt.startEdge()
	m := gt.startManager("unresolved", edgeReportsStatus)
	p := gt.newProxy("web", "web.example.com")
	p.Spec.Rules[0].Backends[0].Endpoint = "http://origin.example.org:8080"
	p.Spec.Rules[0].Matches = nil
	gt.createProxy(p)
	gt.waitProgrammed("web")
	_, route := gt.upstream("web")
	svc := backendObjects(gt.hubNS(), string(route.UID), 0, 0)[0]
	g.Expect(hub.Client.Get(ctx, client.ObjectKeyFromObject(svc), svc)).To(Succeed())

	refused := errors.New("injected: the hub refuses Service creates")
	m.SetFault(func(tr harness.Traffic, r *http.Request) (time.Duration, error) {
		if tr == harness.HubTraffic && r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/services") {
			return 0, refused
		}
		return 0, nil
	})
	g.Expect(hub.Client.Delete(ctx, svc)).To(Succeed())
	start := time.Now()
	g.Eventually(func(g Gomega) {
		c := gt.proxyCondition(g, "web", v1alpha.ConditionProgrammed)
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse), "Programmed while its hub Service is gone: %s %s", c.Reason, c.Message)
		g.Expect(c.Reason).NotTo(BeEmpty())
		g.Expect(c.Message).To(ContainSubstring(svc.GetName()), "the reason names what is missing")
	}, gwCleanWithin, gwPoll).Should(Succeed())
	c := gt.proxyCondition(g, "web", v1alpha.ConditionProgrammed)
	t.Logf("Programmed=False %s after the hub Service's deletion: %s: %s", time.Since(start).Round(time.Millisecond), c.Reason, c.Message)

	// The edge, reading the hub meanwhile, cannot resolve the route either.
	g.Eventually(func(g Gomega) {
		v, err := edge.Translate(ctx, gt.hubNS())
		g.Expect(err).NotTo(HaveOccurred())
		var resolved *metav1.Condition
		for _, r := range v.HTTPRoutes {
			if r.Name == "web" && len(r.Status.Parents) > 0 {
				resolved = meta.FindStatusCondition(r.Status.Parents[0].Conditions, string(gatewayv1.RouteConditionResolvedRefs))
			}
		}
		g.Expect(resolved).NotTo(BeNil())
		g.Expect(resolved.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(resolved.Reason).To(Equal(string(gatewayv1.RouteReasonBackendNotFound)))
	}, gwCleanWithin, gwPoll).Should(Succeed())

	m.SetFault(nil)
	start = time.Now()
	gt.waitProgrammed("web")
	t.Logf("Programmed=True again %s after the hub took writes again", time.Since(start).Round(time.Millisecond))
	g.Expect(hub.Client.Get(ctx, client.ObjectKeyFromObject(svc), svc)).To(Succeed(), "the Service is back on the hub")
}

// TestDeletingAProxyLeavesNoBackendObjects: deleting a proxy with an https backend
// takes its Service, EndpointSlice and BackendTLSPolicy off the hub with everything
// else, and the audit log shows no create of any of them after the delete was asked.
func TestDeletingAProxyLeavesNoBackendObjects(t *testing.T) {
	gt := newGatewayTest(t, planeA)
	g, ctx := gt.g, gt.ctx
	m := gt.startManager("backend-del")
	p := gt.createProxy(gt.newProxy("web", "a.example.com"))
	gt.waitProgrammed("web")
	gw, route := gt.upstream("web")
	objs := backendObjects(gt.hubNS(), string(route.UID), 0, 0)
	routeAnchor := anchorsNamed(ctx, g, string(route.UID))
	g.Expect(routeAnchor).To(HaveLen(1))
	for _, o := range objs {
		g.Expect(hub.Client.Get(ctx, client.ObjectKeyFromObject(o), o)).To(Succeed(), "%T on the hub", o)
		expectAttached(g, o, gt.owner("HTTPRoute", route), &routeAnchor[0])
	}

	g.Expect(gt.plane.Client.Delete(ctx, p)).To(Succeed())
	deleted := time.Now()
	g.Eventually(func(g Gomega) {
		g.Expect(anchorsNamed(ctx, g, string(gw.UID))).To(BeEmpty(), "Gateway anchor")
		g.Expect(anchorsNamed(ctx, g, string(route.UID))).To(BeEmpty(), "HTTPRoute anchor")
	}, gwCleanWithin, gwPoll).Should(Succeed())
	for _, o := range objs {
		g.Eventually(func() bool { return gone(ctx, hub.Client, o) }, gwGCWithin, gwPoll).Should(BeTrue(), "%T %s gone", o, o.GetName())
	}
	t.Logf("backend objects gone %s after the delete", time.Since(deleted).Round(time.Millisecond))
	for _, ev := range hubWritesBy(g, m.User, []string{"create"}, []string{"services", "endpointslices", "backendtlspolicies"}, gt.hubNS()) {
		g.Expect(ev.RequestReceivedTimestamp.Before(deleted)).To(BeTrue(), "%s %s created at %s, after the proxy's delete at %s",
			ev.ObjectRef.Resource, ev.ObjectRef.Name, ev.RequestReceivedTimestamp.Format(time.StampMicro), deleted.Format(time.StampMicro))
	}
}

// TestResyncCollectsStrandedBackendObjects: the anchor of an HTTPRoute that is gone,
// with a backend's Service, EndpointSlice and BackendTLSPolicy hanging on it as the
// previous manager named them, is collected by the resync and the hub's garbage
// collector takes the three; a live proxy's backend objects stay.
func TestResyncCollectsStrandedBackendObjects(t *testing.T) {
	rt := newResyncTest(t, planeA)
	g, ctx := rt.g, rt.ctx
	uid := uuid.NewUUID()
	owner := anchor.Owner{Project: rt.project, Group: gatewayv1.GroupName, Kind: "HTTPRoute", Namespace: rt.ns.Name, Name: "stranded", UID: uid}
	s := plant(ctx, g, owner, rt.hubNS(), true)
	ref := []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: s.anchor.Name, UID: s.anchor.UID}}
	name := gateway.BackendObjectName(uid, 0, 0)
	om := metav1.ObjectMeta{Name: name, Namespace: rt.hubNS(), Labels: s.anchor.Labels, OwnerReferences: ref}
	stranded := []client.Object{
		&corev1.Service{ObjectMeta: om, Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Ports: []corev1.ServicePort{{Name: "https", Port: 443}}}},
		&discoveryv1.EndpointSlice{ObjectMeta: om, AddressType: discoveryv1.AddressTypeFQDN,
			Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"gone.example.org"}}}, Ports: []discoveryv1.EndpointPort{{Name: ptr.To("https"), Port: ptr.To[int32](443)}}},
		&gatewayv1.BackendTLSPolicy{ObjectMeta: om, Spec: gatewayv1.BackendTLSPolicySpec{
			TargetRefs: []gatewayv1.LocalPolicyTargetReferenceWithSectionName{{LocalPolicyTargetReference: gatewayv1.LocalPolicyTargetReference{Kind: "Service", Name: gatewayv1.ObjectName(name)}}},
			Validation: gatewayv1.BackendTLSPolicyValidation{Hostname: "gone.example.org", WellKnownCACertificates: ptr.To(gatewayv1.WellKnownCACertificatesSystem)},
		}},
	}
	for _, o := range stranded {
		g.Expect(hub.Client.Create(ctx, o)).To(Succeed())
	}

	m := rt.startResync("backend-strand", nil)
	rt.createProxy(rt.newProxy("live", "live.example.com"))
	rt.waitProgrammed("live")
	_, route := rt.upstream("live")
	live := backendObjects(rt.hubNS(), string(route.UID), 0, 0)
	for _, o := range live {
		g.Expect(hub.Client.Get(ctx, client.ObjectKeyFromObject(o), o)).To(Succeed())
	}

	rt.passesUntil(m, rt.project, 2*time.Minute, func(g Gomega, _ resync.PassReport) {
		g.Expect(exists(ctx, g, s.anchor)).To(BeFalse(), "the stranded route's anchor")
	})
	for _, o := range append(stranded, s.downstream) {
		g.Eventually(func(g Gomega) bool { return exists(ctx, g, o) }, gwGCWithin, gwPoll).Should(BeFalse(), "stranded %T %s collected", o, o.GetName())
	}
	for _, o := range live {
		g.Expect(exists(ctx, g, o)).To(BeTrue(), "live %T %s survives", o, o.GetName())
	}
}
