package gateway

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
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

// Config is what the gateway data path is told by flags. Zero values take the Default
// constants; Validate refuses what the API servers would.
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

// Validate reports every field, after defaulting, that the API servers would refuse.
func (c Config) Validate() error {
	c = c.WithDefaults()
	var errs []error
	for _, f := range []struct{ name, value string }{
		{"gateway class", c.GatewayClassName},
		{"downstream gateway class", c.DownstreamGatewayClassName},
		{"certificate issuer name", c.CertificateIssuer.Name},
		{"hostname claims namespace", c.HostnameClaimsNamespace},
		{"certificate issuer group", c.CertificateIssuer.Group},
	} {
		if msgs := validation.IsDNS1123Subdomain(f.value); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("%s %q: %s", f.name, f.value, strings.Join(msgs, "; ")))
		}
	}
	if c.Workers < 1 {
		errs = append(errs, fmt.Errorf("workers %d: want at least 1", c.Workers))
	}
	if c.ProjectWorkers < 1 {
		errs = append(errs, fmt.Errorf("project workers %d: want at least 1", c.ProjectWorkers))
	}
	if c.ProjectHubWritesPerSecond <= 0 {
		errs = append(errs, fmt.Errorf("project hub writes per second %g: want more than 0", c.ProjectHubWritesPerSecond))
	}
	if c.ProxiesPerProject < 1 {
		errs = append(errs, fmt.Errorf("proxies per project %d: want at least 1", c.ProxiesPerProject))
	}
	if c.CertificateIssuer.Kind != "Issuer" && c.CertificateIssuer.Kind != "ClusterIssuer" {
		errs = append(errs, fmt.Errorf("certificate issuer kind %q: want Issuer or ClusterIssuer", c.CertificateIssuer.Kind))
	}
	// Gateway API: a domain-prefixed path, e.g. example.com/controller.
	domain, path, ok := strings.Cut(c.ControllerName, "/")
	if !ok || path == "" || len(validation.IsDNS1123Subdomain(domain)) > 0 {
		errs = append(errs, fmt.Errorf("controller name %q: want a domain-prefixed path such as example.com/gateway-controller", c.ControllerName))
	}
	return errors.Join(errs...)
}

// controllerName returns ControllerName in its Gateway API type.
func (c Config) controllerName() gatewayv1.GatewayController {
	return gatewayv1.GatewayController(c.ControllerName)
}
