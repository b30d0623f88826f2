package gateway

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"anchorage/internal/testenv"
)

// TestHubGatewaysAreValidUnderBothChannels: what the Gateway reconciler writes to the
// hub is accepted by the Gateway API CRDs of both channels, the experimental one (which
// the previous manager's hubs run) refusing a terminating listener without a
// certificate: a proxy's Gateway, one the previous manager shaped (HTTPS listeners with
// only TLS options, its canonical listeners), a direct Gateway whose certificate
// references point at another namespace, and a platform listener on the shared Secret.
func TestHubGatewaysAreValidUnderBothChannels(t *testing.T) {
	if testing.Short() {
		t.Skip("needs an API server")
	}
	const canonical = "abc.edge.anchorage.test"
	issuerOnly := &gatewayv1.ListenerTLSConfig{Mode: ptr.To(gatewayv1.TLSModeTerminate),
		Options: map[gatewayv1.AnnotationKey]gatewayv1.AnnotationValue{"gateway.networking.datumapis.com/certificate-issuer": "auto"}}
	previous := upstreamGateway(
		listenerOn("default-http", 80, ""), gatewayv1.Listener{Name: "default-https", Port: 443, Protocol: gatewayv1.HTTPSProtocolType, TLS: issuerOnly},
		listenerOn("http-hostname-0", 80, "a.example.com"),
		gatewayv1.Listener{Name: "https-hostname-0", Port: 443, Protocol: gatewayv1.HTTPSProtocolType, Hostname: ptr.To(gatewayv1.Hostname("a.example.com")), TLS: issuerOnly},
	)
	elsewhere := httpsListener("web", "https-b", "b.example.com")
	elsewhere.TLS.CertificateRefs[0].Namespace = ptr.To(gatewayv1.Namespace("other"))
	direct := upstreamGateway(listenerOn("http", 80, ""), elsewhere)
	spec, _, err := buildGatewaySpec(proxy("web", []gatewayv1.Hostname{"c.example.com"}), nil, "anchorage", DefaultConfig().Platform)
	if err != nil {
		t.Fatal(err)
	}
	proxys := upstreamGateway(spec.Listeners...)
	cases := map[string]struct {
		gw    *gatewayv1.Gateway
		certs listenerCertificates
	}{
		"a proxy's":                         {gw: proxys},
		"the previous manager's":            {gw: previous},
		"direct, refs elsewhere":            {gw: direct},
		"the platform's on a shared Secret": {gw: proxys, certs: listenerCertificates{platformHosts: []string{canonical}, shared: "platform-wildcard"}},
	}
	for _, channel := range []string{"standard", "experimental"} {
		t.Run(channel, func(t *testing.T) {
			crds, err := testenv.GatewayChannelCRDs(channel)
			if err != nil {
				t.Fatal(err)
			}
			c, err := client.New(testenv.StartAPIServer(t, crds...), client.Options{Scheme: guardScheme(t)})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: hubNS}}); err != nil {
				t.Fatal(err)
			}
			for name, tc := range cases {
				down := downstreamGateway(withPlatformHostname(tc.gw, canonical), hubNS, "edge", tc.certs)
				down.GenerateName, down.Name = "web-", ""
				if err := c.Create(ctx, down); err != nil {
					t.Errorf("%s Gateway refused under the %s channel: %v", name, channel, err)
				}
			}
		})
	}
}
