package gateway

import (
	"cmp"
	"slices"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
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

// Defaults of Config.
const (
	// DefaultGatewayClassName is the class of the upstream Gateways the manager programs.
	DefaultGatewayClassName = "anchorage"
	// DefaultDownstreamGatewayClassName is the class written into downstream Gateways.
	DefaultDownstreamGatewayClassName = "anchorage-edge"
	// DefaultControllerName identifies the manager in Gateway API status.
	DefaultControllerName = "gateway.networking.datumapis.com/gateway-controller"
	// DefaultIssuerName is the cert-manager issuer every downstream Certificate names.
	DefaultIssuerName = "anchorage"
	// DefaultIssuerKind is the kind of DefaultIssuerName.
	DefaultIssuerKind = "ClusterIssuer"
	// DefaultIssuerGroup is the API group of cert-manager's issuers.
	DefaultIssuerGroup = "cert-manager.io"
	// DefaultEventSource names the reporting component of every Event.
	DefaultEventSource = "anchorage-gateway"
	// DefaultWorkers is how many reconciles each controller runs at once.
	DefaultWorkers = 8
	// DefaultProjectWorkers is how many of a controller's workers one project may hold.
	DefaultProjectWorkers = 2
	// DefaultProjectHubWritesPerSecond is each project's share of hub writes.
	DefaultProjectHubWritesPerSecond = 20
	// DefaultProxiesPerProject is how many proxies one project programs.
	DefaultProxiesPerProject = 1000
)

// IssuerRef is every downstream Certificate's spec.issuerRef.
type IssuerRef struct {
	// Name of the issuer. Default DefaultIssuerName.
	Name string
	// Kind of the issuer, Issuer or ClusterIssuer. Default DefaultIssuerKind.
	Kind string
	// Group of the issuer. Default DefaultIssuerGroup.
	Group string
}

// Config is what the gateway data path is told by the configuration file (pkg/config,
// which checks it). Zero values take the Default constants.
type Config struct {
	// GatewayClassName is the class of the upstream Gateways this manager writes and
	// mirrors; Gateways of other classes are never touched.
	GatewayClassName string
	// DownstreamGatewayClassName is the class written into downstream Gateways.
	DownstreamGatewayClassName string
	// ControllerName identifies this manager in HTTPRoute status.parents.
	ControllerName string
	// CertificateIssuer is the issuer of every downstream Certificate.
	CertificateIssuer IssuerRef
	// EventSource is the reporting component of Events.
	EventSource string
	// AssumeWrittenIsProgrammed counts a written downstream copy as accepted and
	// programmed, for hubs where no edge controller writes status. Off, Programmed
	// follows the edge and is False with reason Pending until it has spoken.
	AssumeWrittenIsProgrammed bool
	// Workers is how many reconciles each controller runs at once.
	Workers int
	// ProjectWorkers is how many of each controller's Workers one project may hold.
	ProjectWorkers int
	// ProjectHubWritesPerSecond is one project's rate of hub writes, burst twice that.
	ProjectHubWritesPerSecond float64
	// ProxiesPerProject is how many proxies one project programs, the oldest first; the
	// others are Accepted=False with reason ProxyLimitReached.
	ProxiesPerProject int
	// HostnameClaimsNamespace is the hub namespace of the hostname claims.
	HostnameClaimsNamespace string
	// BackendReservedDomains are the domains no backend may be in. Nil means
	// DefaultBackendReservedDomains; an empty, non-nil list refuses none.
	BackendReservedDomains []string
	// VerifyHostnames programs a hostname only while a Verified Domain in the Gateway's
	// namespace covers it (pkg/domain); one already held stays (docs/design.md,
	// Verified domains).
	VerifyHostnames bool
}

// WithDefaults returns c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	c.GatewayClassName = cmp.Or(c.GatewayClassName, DefaultGatewayClassName)
	c.DownstreamGatewayClassName = cmp.Or(c.DownstreamGatewayClassName, DefaultDownstreamGatewayClassName)
	c.ControllerName = cmp.Or(c.ControllerName, DefaultControllerName)
	c.CertificateIssuer.Name = cmp.Or(c.CertificateIssuer.Name, DefaultIssuerName)
	c.CertificateIssuer.Kind = cmp.Or(c.CertificateIssuer.Kind, DefaultIssuerKind)
	c.CertificateIssuer.Group = cmp.Or(c.CertificateIssuer.Group, DefaultIssuerGroup)
	c.EventSource = cmp.Or(c.EventSource, DefaultEventSource)
	c.HostnameClaimsNamespace = cmp.Or(c.HostnameClaimsNamespace, DefaultHostnameClaimsNamespace)
	if c.BackendReservedDomains == nil {
		c.BackendReservedDomains = slices.Clone(DefaultBackendReservedDomains)
	}
	c.Workers = cmp.Or(c.Workers, DefaultWorkers)
	c.ProjectWorkers = cmp.Or(c.ProjectWorkers, DefaultProjectWorkers)
	c.ProjectHubWritesPerSecond = cmp.Or(c.ProjectHubWritesPerSecond, DefaultProjectHubWritesPerSecond)
	c.ProxiesPerProject = cmp.Or(c.ProxiesPerProject, DefaultProxiesPerProject)
	return c
}

// controllerName returns ControllerName in its Gateway API type.
func (c Config) controllerName() gatewayv1.GatewayController {
	return gatewayv1.GatewayController(c.ControllerName)
}
