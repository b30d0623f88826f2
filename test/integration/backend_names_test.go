package integration

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"anchorage/api/v1alpha"
	"anchorage/internal/app"
	"anchorage/internal/cutover"
	"anchorage/internal/harness"
)

// TestBackendNamesThatAreNoPublicNameAreRefused: a tenant with full admin on its plane
// aims backends at names an edge's resolver completes into the cluster (a short name,
// <service>.<namespace>, the cluster DNS's pod form spelling any address, the metadata
// address among them) or answers privately (a TLD outside the public suffix list's
// ICANN section), in trailing-dot and upper-case spellings: through HTTPProxy
// endpoints, through ExternalName Services of its own behind its own route, and through
// an FQDN EndpointSlice of its own (the previous manager's stored form of a backend).
// Each proxy is Accepted=False/Invalid naming the host and why; the route's
// ResolvedRefs=False/RefNotPermitted names every refused backend; nothing carrying
// those names reaches the hub; and a second project's hub objects keep their UID and
// resourceVersion through the attack.
func TestBackendNamesThatAreNoPublicNameAreRefused(t *testing.T) {
	gt := newGatewayTest(t, planeA)
	victim := gt.another(planeB)
	g, ctx, pc := gt.g, gt.ctx, gt.plane.Client
	gt.startManager("names")

	victim.createProxy(victim.newProxy("web", gatewayv1.Hostname("web-"+victim.project+".example.com")))
	victim.waitProgrammed("web")
	before := hubState(ctx, g, victim.hubNS())
	g.Expect(before).To(HaveKey(HavePrefix("*v1.HTTPRoute/")), "the victim's hub route is there to watch")

	// Endpoints, as the tenant writes them.
	endpoints := []string{
		"http://kubernetes.default",
		"https://kubernetes.default:443",
		"http://kube-dns.kube-system:53",
		"http://a-b-c-d.default.pod",
		"http://10-0-0-1.ns.pod.cluster.local",
		"http://169-254-169-254.default.pod/computeMetadata/v1",
		"http://metadata",
		"http://METADATA./",
		"http://db.corp:5432",
		"http://foo.internal.",
		"http://KUBERNETES.DEFAULT.",
		"http://kubernetes.default.svc.",
		"http://api.example",
		"http://backend.test",
	}
	for i, e := range endpoints {
		p := gt.newProxy(fmt.Sprintf("names-%d", i), gatewayv1.Hostname(fmt.Sprintf("names-%d-%s.example.com", i, gt.project)))
		p.Spec.Rules[0].Backends[0].Endpoint = e
		gt.createProxy(p)
	}

	// The tenant's own route of this manager's class to ExternalName Services and an
	// FQDN EndpointSlice of such names.
	host := gatewayv1.Hostname("direct-" + gt.project + ".example.com")
	g.Expect(pc.Create(ctx, &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: gt.ns.Name, Name: "direct"}, Spec: gatewayv1.GatewaySpec{
		GatewayClassName: gatewayv1.ObjectName(gt.class),
		Listeners:        []gatewayv1.Listener{{Name: "http", Hostname: &host, Port: 80, Protocol: gatewayv1.HTTPProtocolType}},
	}})).To(Succeed())
	externalNames := []string{"kubernetes.default", "kube-dns.kube-system", "a-b-c-d.default.pod", "169-254-169-254.default.pod", "metadata", "db.corp", "foo.internal.", "kubernetes.default."}
	var refs []gatewayv1.HTTPBackendRef
	for i, name := range externalNames {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: gt.ns.Name, Name: fmt.Sprintf("ext-%d", i)}, Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeExternalName, ExternalName: name,
			Ports: []corev1.ServicePort{{Name: "http", Port: 80}},
		}}
		g.Expect(pc.Create(ctx, svc)).To(Succeed(), "ExternalName %s", name)
		refs = append(refs, gatewayv1.HTTPBackendRef{BackendRef: gatewayv1.BackendRef{BackendObjectReference: gatewayv1.BackendObjectReference{
			Name: gatewayv1.ObjectName(svc.Name), Port: ptr.To(gatewayv1.PortNumber(80))}}})
	}
	const sliceAddress = "169-254-169-254.kube-system.pod"
	g.Expect(pc.Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: gt.ns.Name, Name: "pod-form"},
		AddressType: discoveryv1.AddressTypeFQDN,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{sliceAddress}}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](80), Protocol: ptr.To(corev1.ProtocolTCP)}},
	})).To(Succeed())
	refs = append(refs, gatewayv1.HTTPBackendRef{BackendRef: gatewayv1.BackendRef{BackendObjectReference: gatewayv1.BackendObjectReference{
		Group: ptr.To(gatewayv1.Group(discoveryv1.GroupName)), Kind: ptr.To(gatewayv1.Kind("EndpointSlice")),
		Name: "pod-form", Port: ptr.To(gatewayv1.PortNumber(80))}}})
	// A route per backend: a condition message is bounded, and each names its host.
	var routes []*gatewayv1.HTTPRoute
	for j, ref := range refs {
		route := &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: gt.ns.Name, Name: fmt.Sprintf("direct-%d", j)}, Spec: gatewayv1.HTTPRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Name: "direct"}}},
			Hostnames:       []gatewayv1.Hostname{host},
			Rules:           []gatewayv1.HTTPRouteRule{{BackendRefs: []gatewayv1.HTTPBackendRef{ref}}},
		}}
		g.Expect(pc.Create(ctx, route)).To(Succeed())
		routes = append(routes, route)
	}

	// Every proxy refused, naming its host and why.
	for i, e := range endpoints {
		u, err := url.Parse(e)
		g.Expect(err).NotTo(HaveOccurred())
		name := fmt.Sprintf("names-%d", i)
		g.Eventually(func(g Gomega) {
			got := &v1alpha.HTTPProxy{}
			g.Expect(pc.Get(ctx, client.ObjectKey{Namespace: gt.ns.Name, Name: name}, got)).To(Succeed())
			c := meta.FindStatusCondition(got.Status.Conditions, v1alpha.ConditionAccepted)
			g.Expect(c).NotTo(BeNil(), "%s (%s): no Accepted condition", name, e)
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse), "%s (%s): Accepted %s %s", name, e, c.Reason, c.Message)
			g.Expect(c.Reason).To(Equal(v1alpha.ReasonInvalid), "%s (%s)", name, e)
			// A single label, and a trailing dot, are refused by the endpoint's parse
			// already (in lower case, in its words); every other name by the rule.
			lower := strings.ToLower(u.Hostname())
			g.Expect(c.Message).To(Or(ContainSubstring(fmt.Sprintf("host %q is not a public DNS name", u.Hostname())),
				ContainSubstring(fmt.Sprintf("host %q is a single DNS label", lower)),
				ContainSubstring(fmt.Sprintf("host %q is not a DNS name", lower))), "%s (%s)", name, e)
		}, gwProgrammedWithin, gwPoll).Should(Succeed())
	}

	// Each route: its backend refused, named, with why; nothing on the hub for it.
	for j, route := range routes {
		want := fmt.Sprintf("EndpointSlice pod-form: host %q is not a public DNS name", sliceAddress)
		if j < len(externalNames) {
			want = fmt.Sprintf("Service ext-%d: host %q is not a public DNS name", j, externalNames[j])
		}
		gt.expectRefNotPermitted(route, want)
	}

	// No hub Service or EndpointSlice, the attacker's or the victim's, carries a
	// refused name.
	refused := map[string]bool{sliceAddress: true}
	for _, e := range endpoints {
		u, _ := url.Parse(e)
		refused[strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")] = true
	}
	for _, n := range externalNames {
		refused[strings.TrimSuffix(n, ".")] = true
	}
	for _, ns := range []string{gt.hubNS(), victim.hubNS()} {
		svcs := &corev1.ServiceList{}
		g.Expect(hub.Client.List(ctx, svcs, client.InNamespace(ns))).To(Succeed())
		for _, s := range svcs.Items {
			g.Expect(refused).NotTo(HaveKey(strings.TrimSuffix(strings.ToLower(s.Spec.ExternalName), ".")), "hub Service %s/%s", ns, s.Name)
		}
		slices := &discoveryv1.EndpointSliceList{}
		g.Expect(hub.Client.List(ctx, slices, client.InNamespace(ns))).To(Succeed())
		for _, s := range slices.Items {
			for _, e := range s.Endpoints {
				for _, a := range e.Addresses {
					g.Expect(refused).NotTo(HaveKey(strings.TrimSuffix(strings.ToLower(a), ".")), "hub EndpointSlice %s/%s", ns, s.Name)
				}
			}
		}
	}

	// The victim's hub objects, untouched.
	g.Expect(hubState(ctx, g, victim.hubNS())).To(Equal(before), "the second project's hub objects (UID/resourceVersion)")
}

// hubState maps every object in hubNS of the kinds a route's data path writes to its
// UID and resourceVersion.
func hubState(ctx context.Context, g *WithT, hubNS string) map[string]string {
	out := map[string]string{}
	for _, list := range []client.ObjectList{&gatewayv1.GatewayList{}, &gatewayv1.HTTPRouteList{}, &corev1.ServiceList{},
		&discoveryv1.EndpointSliceList{}, &corev1.ConfigMapList{}, &gatewayv1.BackendTLSPolicyList{}} {
		g.Expect(hub.Client.List(ctx, list, client.InNamespace(hubNS))).To(Succeed())
		g.Expect(meta.EachListItem(list, func(o runtime.Object) error {
			obj := o.(client.Object)
			out[fmt.Sprintf("%T/%s", obj, obj.GetName())] = string(obj.GetUID()) + "/" + obj.GetResourceVersion()
			return nil
		})).To(Succeed())
	}
	return out
}

// TestCutOverRefusesAStoredBackendThatIsNoPublicName: the previous manager stored and
// programmed a proxy whose endpoint is a name only the edge's resolver completes
// (kubernetes.default, the API server). The cut-over check reports it as changed,
// naming the host and why, before the cut-over; after it, the proxy is Accepted=False,
// reason Invalid, with the reason (not dropped in silence), no hub object carries the
// name any more and the edge has no cluster for it, while the project's other proxy
// and a second project keep serving, the second project's hub objects unchanged.
func TestCutOverRefusesAStoredBackendThatIsNoPublicName(t *testing.T) {
	gt := newGatewayTest(t, planeA)
	victim := gt.another(planeB)
	g, ctx := gt.g, gt.ctx
	const hostile, hostileHost = "http://kubernetes.default:8080", "kubernetes.default"
	suffix := rand.String(6)
	state, err := harness.LayDownPrevious(ctx, harness.PreviousInput{
		Hub: hub.Client, Plane: gt.plane.Client, Project: gt.project, Namespace: gt.ns, Suffix: suffix,
		GatewayClass: gt.class, ControllerName: cutOverControllerName, DownstreamClass: cutOverDownstreamClass,
		Issuer: cutOverIssuer, ClaimsNamespace: gt.env.ClaimsNamespace(),
		Endpoints: map[string]string{"plain": hostile},
	})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		for _, w := range state.Webhooks {
			_ = gt.plane.Client.Delete(context.Background(), w)
		}
	})
	hubNS := state.HubNamespace
	g.Expect(hubCarries(ctx, g, hubNS, hostileHost)).NotTo(BeEmpty(), "the previous manager programmed the stored backend")

	// Before the cut-over: the check names the proxy, the host and why.
	checkOpts := cutover.Options{GatewayClass: gt.class, IssuerName: cutOverIssuer, DownstreamGatewayClass: cutOverDownstreamClass}
	rows, err := cutover.Check(ctx, hub.Client, map[string]client.Client{gt.project: gt.plane.Client}, checkOpts)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rowsOf(rows, gt.ns.Name, hubNS, suffix)).To(ContainElement(And(
		HaveField("Verdict", cutover.Changed), HaveField("Kind", cutover.KindHTTPProxy), HaveField("Name", "plain"),
		HaveField("Detail", ContainSubstring(fmt.Sprintf("host %q is not a public DNS name", hostileHost))))), "the check reports the stored backend")
	for _, w := range state.Webhooks {
		g.Expect(gt.plane.Client.Delete(ctx, w)).To(Succeed())
	}

	edge, err := harness.NewEdge(hub.Client, cutOverDownstreamClass)
	g.Expect(err).NotTo(HaveOccurred())
	edgeCtx, stopEdge := context.WithCancel(ctx)
	edgeDone := make(chan struct{})
	go func() {
		defer close(edgeDone)
		edge.Serve(edgeCtx, harness.Namespaces(hubNS, victim.hubNS()), 250*time.Millisecond)
	}()
	t.Cleanup(func() { stopEdge(); <-edgeDone })
	victim.createProxy(victim.newProxy("web", gatewayv1.Hostname("web-"+victim.project+".example.com")))
	gt.startManager("cutover-names", edgeReportsStatus, func(o *app.Options) {
		o.Gateway.ControllerName = cutOverControllerName
		o.Gateway.DownstreamGatewayClassName = cutOverDownstreamClass
		o.Gateway.CertificateIssuer.Name = cutOverIssuer
		o.Gateway.Platform.TargetDomain = harness.PreviousTargetDomain
	})
	victim.waitProgrammed("web")
	before := hubState(ctx, g, victim.hubNS())

	// The stored proxy is refused with the reason; the other keeps serving.
	g.Eventually(func(g Gomega) {
		p := &v1alpha.HTTPProxy{}
		g.Expect(gt.plane.Client.Get(ctx, client.ObjectKey{Namespace: gt.ns.Name, Name: "plain"}, p)).To(Succeed())
		c := meta.FindStatusCondition(p.Status.Conditions, v1alpha.ConditionAccepted)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse), "%s %s", c.Reason, c.Message)
		g.Expect(c.Reason).To(Equal(v1alpha.ReasonInvalid), c.Message)
		g.Expect(c.Message).To(ContainSubstring(fmt.Sprintf("backend %q may not be programmed: host %q is not a public DNS name", hostile, hostileHost)))
	}, gwProgrammedWithin, gwPoll).Should(Succeed())
	waitAcceptedByUs(gt, "secure")

	// The edge has no cluster for the name, and nothing on the hub carries it any more.
	var v *harness.EdgeVerdict
	g.Eventually(func(g Gomega) {
		var err error
		v, err = edge.Translate(ctx, hubNS)
		g.Expect(err).NotTo(HaveOccurred())
		clusters, err := harness.Resources[harness.EnvoyCluster](v, harness.XDSCluster)
		g.Expect(err).NotTo(HaveOccurred())
		for _, c := range clusters {
			for _, e := range c.Endpoints() {
				g.Expect(e).NotTo(HavePrefix(hostileHost+":"), "edge cluster %s", c.Name)
			}
		}
	}, gwProgrammedWithin, gwPoll).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(hubCarries(ctx, g, hubNS, hostileHost)).To(BeEmpty(), "hub objects still carrying %s", hostileHost)
	}, gwProgrammedWithin, gwPoll).Should(Succeed())
	secure := &v1alpha.HTTPProxy{}
	g.Expect(gt.plane.Client.Get(ctx, client.ObjectKey{Namespace: gt.ns.Name, Name: "secure"}, secure)).To(Succeed())
	t.Run("served/secure", func(t *testing.T) { expectServed(t, v, hubNS, secure) })

	g.Expect(hubState(ctx, g, victim.hubNS())).To(Equal(before), "the second project's hub objects (UID/resourceVersion)")
}

// hubCarries names the hub Services in hubNS whose ExternalName is host, and the hub
// EndpointSlices with host among their addresses.
func hubCarries(ctx context.Context, g Gomega, hubNS, host string) []string {
	var out []string
	svcs := &corev1.ServiceList{}
	g.Expect(hub.Client.List(ctx, svcs, client.InNamespace(hubNS))).To(Succeed())
	for _, s := range svcs.Items {
		if strings.TrimSuffix(strings.ToLower(s.Spec.ExternalName), ".") == host {
			out = append(out, "Service "+s.Name)
		}
	}
	slices := &discoveryv1.EndpointSliceList{}
	g.Expect(hub.Client.List(ctx, slices, client.InNamespace(hubNS))).To(Succeed())
	for _, s := range slices.Items {
		for _, e := range s.Endpoints {
			for _, a := range e.Addresses {
				if strings.TrimSuffix(strings.ToLower(a), ".") == host {
					out = append(out, "EndpointSlice "+s.Name)
				}
			}
		}
	}
	return out
}
