package integration

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"anchorage/api/v1alpha"
	"anchorage/internal/harness"
	"anchorage/pkg/gateway"
)

// TestEdgeServesIPBackends: proxies whose endpoints are public IP addresses, as the
// previous manager allowed them, are served by the edge oracle: an IPv4 backend over
// http and an IPv6 backend over https (its certificate checked for tls.hostname) each
// get a hub EndpointSlice of their family and a cluster reaching the address. Proxies
// aimed at the cloud metadata address, or at a private address spelled as an
// IPv4-mapped IPv6 address, are Accepted=False with a condition saying why, and a
// tenant's own IPv4 EndpointSlice of a private address behind a route of its own is
// RefNotPermitted, with nothing on the hub for it.
func TestEdgeServesIPBackends(t *testing.T) {
	gt := newGatewayTest(t, planeA)
	g, ctx, pc := gt.g, gt.ctx, gt.plane.Client
	edge := gt.startEdge()
	gt.startManager("ipbackends", edgeReportsStatus)

	proxy := func(name, endpoint string, tlsHostname *string) *v1alpha.HTTPProxy {
		host := gatewayv1.Hostname(name + "-" + gt.project + ".example.com")
		backend := v1alpha.HTTPProxyBackend{Endpoint: endpoint}
		if tlsHostname != nil {
			backend.TLS = &v1alpha.HTTPProxyBackendTLS{Hostname: tlsHostname}
		}
		return &v1alpha.HTTPProxy{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: gt.ns.Name}, Spec: v1alpha.HTTPProxySpec{
			Hostnames: []gatewayv1.Hostname{host},
			Rules:     []v1alpha.HTTPProxyRule{{Backends: []v1alpha.HTTPProxyBackend{backend}}},
		}}
	}
	served := []struct {
		proxy       *v1alpha.HTTPProxy
		addressType discoveryv1.AddressType
		endpoint    string // the cluster's endpoint, address:port
		tlsName     string // SNI and validated name; "" for plain HTTP
	}{
		{proxy("ipv4", "http://203.0.113.10:8080", nil), discoveryv1.AddressTypeIPv4, "203.0.113.10:8080", ""},
		{proxy("ipv6", "https://[2001:db8::10]", ptr.To("origin.example.org")), discoveryv1.AddressTypeIPv6, "2001:db8::10:443", "origin.example.org"},
	}
	refused := map[string]struct{ endpoint, why string }{
		"metadata": {"http://169.254.169.254/latest/meta-data", `host "169.254.169.254" is the cloud metadata service's address (link-local 169.254.0.0/16): an address a tenant names must be public unicast`},
		"mapped":   {"http://[::ffff:10.0.0.1]:8080", `host "::ffff:10.0.0.1" is the IPv4-mapped IPv6 form of 10.0.0.1, which is a private range (RFC 1918 10.0.0.0/8)`},
	}
	for _, s := range served {
		gt.createProxy(s.proxy)
	}
	for name, r := range refused {
		gt.createProxy(proxy(name, r.endpoint, nil))
	}

	// A tenant's own backend slice, of a private address, behind its own route.
	host := gatewayv1.Hostname("direct-" + gt.project + ".example.com")
	g.Expect(pc.Create(ctx, &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: gt.ns.Name, Name: "direct"}, Spec: gatewayv1.GatewaySpec{
		GatewayClassName: gatewayv1.ObjectName(gt.class),
		Listeners:        []gatewayv1.Listener{{Name: "http", Hostname: &host, Port: 80, Protocol: gatewayv1.HTTPProtocolType}},
	}})).To(Succeed())
	g.Expect(pc.Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: gt.ns.Name, Name: "private"},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.5"}}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](80), Protocol: ptr.To(corev1.ProtocolTCP)}},
	})).To(Succeed())
	direct := &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: gt.ns.Name, Name: "direct"}, Spec: gatewayv1.HTTPRouteSpec{
		CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Name: "direct"}}},
		Hostnames:       []gatewayv1.Hostname{host},
		Rules: []gatewayv1.HTTPRouteRule{{BackendRefs: []gatewayv1.HTTPBackendRef{{BackendRef: gatewayv1.BackendRef{
			BackendObjectReference: gatewayv1.BackendObjectReference{
				Group: ptr.To(gatewayv1.Group(discoveryv1.GroupName)), Kind: ptr.To(gatewayv1.Kind("EndpointSlice")),
				Name: "private", Port: ptr.To(gatewayv1.PortNumber(80)),
			}}}}}},
	}}
	g.Expect(pc.Create(ctx, direct)).To(Succeed())

	// Served: Programmed (the edge's verdict), a hub slice of the backend's family.
	for _, s := range served {
		gt.waitProgrammed(s.proxy.Name)
		_, route := gt.upstream(s.proxy.Name)
		slice := &discoveryv1.EndpointSlice{}
		key := client.ObjectKey{Namespace: gt.hubNS(), Name: gateway.BackendObjectName(route.UID, 0, 0)}
		g.Expect(hub.Client.Get(ctx, key, slice)).To(Succeed())
		g.Expect(slice.AddressType).To(Equal(s.addressType), "hub slice of %s", s.proxy.Name)
	}
	v, err := edge.Translate(ctx, gt.hubNS())
	g.Expect(err).NotTo(HaveOccurred())
	clusters, err := harness.Resources[harness.EnvoyCluster](v, harness.XDSCluster)
	g.Expect(err).NotTo(HaveOccurred())
	byName := map[string]harness.EnvoyCluster{}
	for _, c := range clusters {
		byName[c.Name] = c
	}
	assignments, err := harness.Resources[harness.EnvoyLoadAssignment](v, harness.XDSEndpoints)
	g.Expect(err).NotTo(HaveOccurred())
	routeConfigs, err := harness.Resources[harness.EnvoyRouteConfig](v, harness.XDSRoutes)
	g.Expect(err).NotTo(HaveOccurred())
	for _, s := range served {
		t.Run(s.proxy.Name, func(t *testing.T) {
			g := NewWithT(t)
			var route *gatewayv1.HTTPRoute
			for i := range v.HTTPRoutes {
				if v.HTTPRoutes[i].Name == s.proxy.Name {
					route = &v.HTTPRoutes[i]
				}
			}
			g.Expect(route).NotTo(BeNil(), "the edge sees no HTTPRoute %s", s.proxy.Name)
			g.Expect(route.Status.Parents).NotTo(BeEmpty())
			for _, typ := range []gatewayv1.RouteConditionType{gatewayv1.RouteConditionAccepted, gatewayv1.RouteConditionResolvedRefs} {
				c := meta.FindStatusCondition(route.Status.Parents[0].Conditions, string(typ))
				g.Expect(c).NotTo(BeNil(), "no %s", typ)
				g.Expect(c.Status).To(Equal(metav1.ConditionTrue), "%s: %s %s", typ, c.Reason, c.Message)
			}
			clusterName := fmt.Sprintf("httproute/%s/%s/rule/0", gt.hubNS(), s.proxy.Name)
			c, ok := byName[clusterName]
			g.Expect(ok).To(BeTrue(), "no cluster %s among %v", clusterName, slices.Sorted(maps.Keys(byName)))
			// An address is no name to resolve: the cluster's endpoints come by EDS.
			g.Expect(c.Type).To(Equal("EDS"), "cluster %s", clusterName)
			var endpoints []string
			for _, a := range assignments {
				if a.ClusterName == clusterName {
					endpoints = append(endpoints, a.Addresses()...)
				}
			}
			g.Expect(endpoints).To(ConsistOf(s.endpoint), "cluster %s reaches the address", clusterName)
			snis, names := c.SNIAndNames()
			rewrites := harness.RewritesTo(routeConfigs, clusterName)
			g.Expect(rewrites).NotTo(BeEmpty(), "no route sends traffic to %s", clusterName)
			if s.tlsName == "" {
				g.Expect(c.TLS()).To(BeEmpty(), "TLS towards an http backend")
				for _, r := range rewrites {
					g.Expect(r.HostRewriteLiteral).To(BeEmpty(), "http to an IP address keeps the client's Host")
				}
				return
			}
			g.Expect(snis).To(ConsistOf(s.tlsName), "SNI is tls.hostname")
			g.Expect(names).To(ConsistOf(s.tlsName), "the certificate is checked for tls.hostname")
			for _, r := range rewrites {
				g.Expect(r.HostRewriteLiteral).To(Equal(s.tlsName), "https to an IP address sends tls.hostname as Host")
			}
		})
	}
	if t.Failed() {
		t.Logf("translator input:\n%s", v.Input)
	}

	// Refused: Accepted=False with the reason, and nothing written for them.
	for name, r := range refused {
		g.Eventually(func(g Gomega) {
			c := gt.proxyCondition(g, name, v1alpha.ConditionAccepted)
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(v1alpha.ReasonInvalid))
			g.Expect(c.Message).To(ContainSubstring(r.why))
		}, gwProgrammedWithin, gwPoll).Should(Succeed(), "proxy %s", name)
		g.Expect(pc.Get(ctx, client.ObjectKey{Namespace: gt.ns.Name, Name: name}, &gatewayv1.HTTPRoute{})).NotTo(Succeed(), "a route for the refused proxy %s", name)
	}

	// The tenant's own slice: RefNotPermitted, and no hub objects for it.
	gt.expectRefNotPermitted(direct, `EndpointSlice private: host "10.0.0.5" is a private range (RFC 1918 10.0.0.0/8)`)

	// The IPv4 backend moves to another IPv4 address (its route unchanged: the address
	// is only in its slice), to IPv6, then to a DNS name: an address type cannot change,
	// so each slice is replaced, upstream and on the hub; the name's Service takes the
	// last slice's place upstream.
	_, route := gt.upstream("ipv4")
	hubSlice := client.ObjectKey{Namespace: gt.hubNS(), Name: gateway.BackendObjectName(route.UID, 0, 0)}
	upSlice := client.ObjectKey{Namespace: gt.ns.Name, Name: "ipv4-backend-0"}
	for _, step := range []struct {
		endpoint    string
		addressType discoveryv1.AddressType
		address     string
	}{
		{"http://203.0.113.11:8080", discoveryv1.AddressTypeIPv4, "203.0.113.11"}, // the route stays as it was
		{"http://[2001:db8::20]:8080", discoveryv1.AddressTypeIPv6, "2001:db8::20"},
		{"http://origin.example.org:8080", discoveryv1.AddressTypeFQDN, "origin.example.org"},
	} {
		p := &v1alpha.HTTPProxy{}
		g.Expect(pc.Get(ctx, client.ObjectKey{Namespace: gt.ns.Name, Name: "ipv4"}, p)).To(Succeed())
		p.Spec.Rules[0].Backends[0].Endpoint = step.endpoint
		g.Expect(pc.Update(ctx, p)).To(Succeed())
		gt.waitProgrammed("ipv4")
		g.Eventually(func(g Gomega) {
			s := &discoveryv1.EndpointSlice{}
			g.Expect(hub.Client.Get(ctx, hubSlice, s)).To(Succeed())
			g.Expect(s.AddressType).To(Equal(step.addressType))
			g.Expect(s.Endpoints).To(HaveLen(1))
			g.Expect(s.Endpoints[0].Addresses).To(Equal([]string{step.address}))
		}, gwProgrammedWithin, gwPoll).Should(Succeed(), "hub slice for %s", step.endpoint)
		up := &discoveryv1.EndpointSlice{}
		if step.addressType == discoveryv1.AddressTypeFQDN {
			g.Eventually(func() bool {
				return gone(ctx, pc, &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: upSlice.Namespace, Name: upSlice.Name}})
			}, gwCleanWithin, gwPoll).
				Should(BeTrue(), "the upstream slice of a backend now named by DNS is pruned")
			g.Expect(pc.Get(ctx, upSlice, &corev1.Service{})).To(Succeed(), "the backend's ExternalName Service")
			continue
		}
		g.Expect(pc.Get(ctx, upSlice, up)).To(Succeed())
		g.Expect(up.AddressType).To(Equal(step.addressType))
	}
}
