package gateway

import (
	"slices"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"anchorage/pkg/netpolicy"
	"anchorage/pkg/platform"
)

// Finalizer names, wire format (docs/design.md, Finalizers); the HTTPProxy's is
// v1alpha.HTTPProxyFinalizer.
const (
	// GatewayFinalizer is on every upstream Gateway of our class; it deletes the
	// downstream Gateway, its Certificates and the Gateway's anchor.
	GatewayFinalizer = "gateway.networking.datumapis.com/gateway-controller"
	// HTTPRouteFinalizer is on every upstream HTTPRoute attached to one of our Gateways;
	// it deletes the downstream HTTPRoute, its backend objects and the route's anchor.
	HTTPRouteFinalizer = "gateway.networking.datumapis.com/gateway-controller-gc"
)

// IssuerRef is every downstream Certificate's spec.issuerRef.
type IssuerRef struct {
	Name  string // of the issuer
	Kind  string // Issuer or ClusterIssuer
	Group string // the issuer's API group
}

// Config is what the gateway data path is told by the configuration file (pkg/config,
// which checks it and documents each key).
type Config struct {
	// GatewayClassName is the class of the upstream Gateways this manager writes and
	// mirrors; Gateways of other classes are never touched.
	GatewayClassName string
	// DownstreamGatewayClassName is the class written into downstream Gateways.
	DownstreamGatewayClassName string
	// ControllerName identifies this manager in HTTPRoute status.parents.
	ControllerName string
	// CertificateIssuer is the issuer of a downstream Certificate whose listener names
	// none, or "auto" (ListenerIssuerOption).
	CertificateIssuer IssuerRef
	// ClusterIssuers maps an issuer a listener names (ListenerIssuerOption) to a
	// ClusterIssuer; a listener naming another is refused (ReasonUnsupportedIssuer).
	ClusterIssuers map[string]string
	// AssumeWrittenIsProgrammed counts a written downstream copy as accepted and
	// programmed, for hubs where no edge controller writes status. Off, Programmed
	// follows the edge and is False with reason Pending until it has spoken.
	AssumeWrittenIsProgrammed bool
	Workers                   int     // how many reconciles each controller runs at once
	ProjectWorkers            int     // how many of each controller's Workers one project may hold
	ProjectHubWritesPerSecond float64 // one project's rate of hub writes, burst twice that
	// ProxiesPerProject is how many proxies and directly written Gateways one project
	// programs together, the oldest first; the others are Accepted=False with reason
	// ProxyLimitReached.
	ProxiesPerProject int
	// HostnamesPerProxy is how many hostnames a proxy (and the Gateway it writes for
	// itself) may ask for; one with more is Accepted=False with reason TooManyHostnames
	// and nothing of it is claimed. 0: no bound.
	HostnamesPerProxy int
	// HostnamesPerGateway is how many hostnames a Gateway not written for a proxy may
	// have; over it, every hostname listener is refused (TooManyHostnames) and none
	// claimed. 0: no bound.
	HostnamesPerGateway     int
	HostnameClaimsNamespace string   // the hub namespace of the hostname claims
	BackendReservedDomains  []string // domains no backend may be in beyond netpolicy.RefusedName; empty adds none
	// VerifyHostnames programs a hostname only while a Verified Domain in the Gateway's
	// namespace covers it (pkg/domain); one already held stays (docs/design.md,
	// Verified domains).
	VerifyHostnames bool
	// BackendDeniedNetworks are networks no IP backend may be in beyond the built-in
	// non-public ranges (netpolicy.Refused): the hub's Service range, its API server's
	// address. Empty denies none beyond those.
	BackendDeniedNetworks []netpolicy.DeniedNetwork
	// Platform names every Gateway on the platform's domain (pkg/platform).
	Platform platform.Settings
	// PlatformTLSSecret, when set, is the Secret (in every mapped namespace) the
	// platform hostnames' HTTPS listeners terminate with, a wildcard certificate of the
	// target domain: no Certificate is ordered for them. Empty: each gets its own.
	PlatformTLSSecret string
	// DNSEndpoints writes, per hub Gateway, external-dns's DNSEndpoint with the records
	// of its platform hostnames; the hub must serve the DNSEndpoint CRD.
	DNSEndpoints bool
}

// DefaultConfig is the gateway data path's defaults, pkg/config's for a file that sets none.
func DefaultConfig() Config {
	return Config{
		GatewayClassName: "anchorage", DownstreamGatewayClassName: "anchorage-edge",
		ControllerName:    "gateway.networking.datumapis.com/gateway-controller",
		CertificateIssuer: IssuerRef{Name: "anchorage", Kind: "ClusterIssuer", Group: "cert-manager.io"}, ClusterIssuers: map[string]string{},
		Workers: 8, ProjectWorkers: 2, ProjectHubWritesPerSecond: 20, ProxiesPerProject: 1000,
		HostnamesPerProxy: 16, HostnamesPerGateway: 16,
		HostnameClaimsNamespace: DefaultHostnameClaimsNamespace, BackendReservedDomains: slices.Clone(DefaultBackendReservedDomains),
		VerifyHostnames: true,
		// A placeholder under a reserved TLD: an operator sets the platform's own.
		Platform:     platform.Settings{TargetDomain: "edge.anchorage.test", Families: []platform.Family{platform.IPv4, platform.IPv6}},
		DNSEndpoints: true,
	}
}

// eventSource names the reporting component of every Event.
const eventSource = "anchorage-gateway"

// controllerName returns ControllerName in its Gateway API type.
func (c Config) controllerName() gatewayv1.GatewayController {
	return gatewayv1.GatewayController(c.ControllerName)
}
