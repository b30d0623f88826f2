package integration

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"anchorage/api/v1alpha"
)

// TestBackendsAimedAtThePlatformAreRefused: a proxy whose endpoint is the cloud
// metadata server is Accepted=False/Invalid with the reason, and a tenant's own
// ExternalName Service naming the API server, behind a route of its own on a Gateway of
// this manager's class, gets ResolvedRefs=False/RefNotPermitted and nothing on the hub
// for that backend.
func TestBackendsAimedAtThePlatformAreRefused(t *testing.T) {
	gt := newGatewayTest(t, planeA)
	g, ctx, pc := gt.g, gt.ctx, gt.plane.Client
	gt.startManager("policy")

	p := gt.newProxy("metadata", "metadata-"+gatewayv1.Hostname(gt.project)+".example.com")
	p.Spec.Rules[0].Matches = nil
	p.Spec.Rules[0].Backends[0].Endpoint = "http://metadata.google.internal"
	gt.createProxy(p)
	g.Eventually(func(g Gomega) {
		got := &v1alpha.HTTPProxy{}
		g.Expect(pc.Get(ctx, client.ObjectKeyFromObject(p), got)).To(Succeed())
		c := meta.FindStatusCondition(got.Status.Conditions, v1alpha.ConditionAccepted)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(v1alpha.ReasonInvalid))
		g.Expect(c.Message).To(ContainSubstring(`host "metadata.google.internal" is not a public DNS name`))
	}, gwProgrammedWithin, gwPoll).Should(Succeed())

	host := gatewayv1.Hostname("direct-" + gt.project + ".example.com")
	gw := &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: gt.ns.Name, Name: "direct"}, Spec: gatewayv1.GatewaySpec{
		GatewayClassName: gatewayv1.ObjectName(gt.class),
		Listeners:        []gatewayv1.Listener{{Name: "http", Hostname: &host, Port: 80, Protocol: gatewayv1.HTTPProtocolType}},
	}}
	g.Expect(pc.Create(ctx, gw)).To(Succeed())
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: gt.ns.Name, Name: "apiserver"}, Spec: corev1.ServiceSpec{
		Type: corev1.ServiceTypeExternalName, ExternalName: "kubernetes.default.svc.cluster.local",
		Ports: []corev1.ServicePort{{Name: "https", Port: 443, AppProtocol: ptr.To("https")}},
	}}
	g.Expect(pc.Create(ctx, svc)).To(Succeed())
	route := &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: gt.ns.Name, Name: "direct"}, Spec: gatewayv1.HTTPRouteSpec{
		CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Name: "direct"}}},
		Hostnames:       []gatewayv1.Hostname{host},
		Rules: []gatewayv1.HTTPRouteRule{{BackendRefs: []gatewayv1.HTTPBackendRef{{BackendRef: gatewayv1.BackendRef{
			BackendObjectReference: gatewayv1.BackendObjectReference{Name: "apiserver", Port: ptr.To(gatewayv1.PortNumber(443))}}}}}},
	}}
	g.Expect(pc.Create(ctx, route)).To(Succeed())
	gt.expectRefNotPermitted(route, `host "kubernetes.default.svc.cluster.local" is not a public DNS name`)
}
