package gateway

import (
	"reflect"
	"testing"

	"anchorage/pkg/platform"
)

// TestDefaultConfig pins the defaults a configuration file that sets none runs with.
func TestDefaultConfig(t *testing.T) {
	want := Config{
		GatewayClassName: "anchorage", DownstreamGatewayClassName: "anchorage-edge",
		ControllerName:    "gateway.networking.datumapis.com/gateway-controller",
		CertificateIssuer: IssuerRef{Name: "anchorage", Kind: "ClusterIssuer", Group: "cert-manager.io"}, ClusterIssuers: map[string]string{},
		Workers: 8, ProjectWorkers: 2, ProjectHubWritesPerSecond: 20, ProxiesPerProject: 1000,
		HostnamesPerProxy: 16, HostnamesPerGateway: 16,
		HostnameClaimsNamespace: "datum-downstream-gateway-hostnames",
		BackendReservedDomains:  []string{},
		VerifyHostnames:         true,
		Platform:                platform.Settings{TargetDomain: "edge.anchorage.test", Families: []platform.Family{platform.IPv4, platform.IPv6}},
		DNSEndpoints:            true,
	}
	if got := DefaultConfig(); !reflect.DeepEqual(got, want) {
		t.Errorf("DefaultConfig() = %+v, want %+v", got, want)
	}
}

// testConfig is the defaults with the upstream Gateway class set to class.
func testConfig(class string) Config {
	c := DefaultConfig()
	c.GatewayClassName = class
	c.VerifyHostnames = false // the package's tests are not about verified domains (pkg/domain, test/integration)
	return c
}
