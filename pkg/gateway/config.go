package gateway

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// Finalizer names are wire format: the manager this one replaces wrote the same names,
// so objects it left behind are taken over as they are (docs/design.md, Wire formats). The
// HTTPProxy finalizer lives with the API type (v1alpha.HTTPProxyFinalizer).
const (
	// GatewayFinalizer is put on every upstream Gateway of our class. It deletes the
	// downstream Gateway, its Certificates and the Gateway's anchor.
	GatewayFinalizer = "gateway.networking.datumapis.com/gateway-controller"
	// HTTPRouteFinalizer is put on every upstream HTTPRoute attached to one of our
	// Gateways. It deletes the downstream HTTPRoute and the route's anchor.
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
	// DefaultWorkers is how many reconciles each of the three controllers runs at once.
	// A reconcile spends most of its time waiting on sequential round trips (the hub,
	// and the project's plane, which may be slow), so one worker (controller-runtime's
	// default) leaves a replica idle while a backlog of proxies waits. Eight, with at
	// most DefaultProjectWorkers per project, leave six to the other projects while one
	// project's plane is slow or its backlog huge (bench/README.md, Fair share), and
	// keep the hub client (50 QPS) busy.
	DefaultWorkers = 8
	// DefaultProjectWorkers is how many of a controller's workers one project may hold
	// at once (fair_queue.go): a quarter of DefaultWorkers, so a project whose plane
	// hangs or whose backlog is huge leaves three quarters to every other project.
	DefaultProjectWorkers = 2
	// DefaultProjectHubWritesPerSecond is each project's share of hub writes (burst
	// twice that): a proxy costs about ten hub writes, so a project programs two new
	// proxies a second, and no project takes more than two fifths of a replica's hub
	// client (50 a second).
	DefaultProjectHubWritesPerSecond = 20
	// DefaultProxiesPerProject is how many proxies one project programs; the younger
	// ones wait with ProxyLimitReached (proxy_slots.go).
	DefaultProxiesPerProject = 1000
)

// IssuerRef names the cert-manager issuer of downstream Certificates; it is written as
// the Certificate's spec.issuerRef.
type IssuerRef struct {
	// Name of the issuer. Default DefaultIssuerName.
	Name string
	// Kind of the issuer, Issuer or ClusterIssuer. Default DefaultIssuerKind.
	Kind string
	// Group of the issuer. Default DefaultIssuerGroup.
	Group string
}

// Config is what the gateway data path is told by flags. Zero values take the
// documented defaults; Validate reports a value the API servers would refuse, so a bad
// flag stops the process at start instead of failing every reconcile.
type Config struct {
	// GatewayClassName is the class the HTTPProxy reconciler gives upstream Gateways, and
	// the class whose Gateways the Gateway reconciler mirrors to the hub. Gateways of
	// other classes belong to other controllers and are never touched. Default
	// DefaultGatewayClassName.
	GatewayClassName string
	// DownstreamGatewayClassName is the class written into downstream Gateways on the
	// hub. Default DefaultDownstreamGatewayClassName.
	DownstreamGatewayClassName string
	// ControllerName identifies this manager in HTTPRoute status.parents. Default
	// DefaultControllerName.
	ControllerName string
	// CertificateIssuer is the issuer of every downstream Certificate. Default the
	// ClusterIssuer DefaultIssuerName.
	CertificateIssuer IssuerRef
	// EventSource is the reporting component of Events. Default DefaultEventSource.
	EventSource string
	// AssumeWrittenIsProgrammed is for hubs where no gateway controller writes status on
	// the downstream Gateways and HTTPRoutes (a hub without edges, such as the demo's):
	// a downstream copy written counts as accepted and programmed. Off (the default),
	// Programmed follows what the edge's controller reports on the hub, and stays False
	// with reason Pending until it has.
	AssumeWrittenIsProgrammed bool
	// Workers is how many reconciles each controller (HTTPProxy, Gateway, HTTPRoute)
	// runs at once. Two reconciles of the same object never run together (the
	// workqueue hands a key to one worker at a time), so finalizers and per-project
	// admission hold with any count. Default DefaultWorkers.
	Workers int
	// ProjectWorkers is how many of each controller's Workers one project may hold at
	// once; its other requests wait while the other projects' are served in turn
	// (fair_queue.go). Default DefaultProjectWorkers.
	ProjectWorkers int
	// ProjectHubWritesPerSecond is the rate of hub writes one project may make, with a
	// burst of twice that (fair_share.go). Default DefaultProjectHubWritesPerSecond.
	ProjectHubWritesPerSecond float64
	// ProxiesPerProject is how many proxies one project programs, the oldest first; the
	// others are Accepted=False with reason ProxyLimitReached (proxy_slots.go). Default
	// DefaultProxiesPerProject.
	ProxiesPerProject int
	// HostnameClaimsNamespace is the hub namespace of the hostname claims
	// (hostname_claims.go), the previous manager's. Default DefaultHostnameClaimsNamespace.
	HostnameClaimsNamespace string
	// BackendReservedDomains are the domains no backend may be in (backend_policy.go).
	// Default (nil) DefaultBackendReservedDomains; an empty, non-nil list refuses none.
	BackendReservedDomains []string
}

// WithDefaults returns c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	def := func(v *string, d string) {
		if *v == "" {
			*v = d
		}
	}
	def(&c.GatewayClassName, DefaultGatewayClassName)
	def(&c.DownstreamGatewayClassName, DefaultDownstreamGatewayClassName)
	def(&c.ControllerName, DefaultControllerName)
	def(&c.CertificateIssuer.Name, DefaultIssuerName)
	def(&c.CertificateIssuer.Kind, DefaultIssuerKind)
	def(&c.CertificateIssuer.Group, DefaultIssuerGroup)
	def(&c.EventSource, DefaultEventSource)
	def(&c.HostnameClaimsNamespace, DefaultHostnameClaimsNamespace)
	if c.BackendReservedDomains == nil {
		c.BackendReservedDomains = slices.Clone(DefaultBackendReservedDomains)
	}
	if c.Workers == 0 {
		c.Workers = DefaultWorkers
	}
	if c.ProjectWorkers == 0 {
		c.ProjectWorkers = DefaultProjectWorkers
	}
	if c.ProjectHubWritesPerSecond == 0 {
		c.ProjectHubWritesPerSecond = DefaultProjectHubWritesPerSecond
	}
	if c.ProxiesPerProject == 0 {
		c.ProxiesPerProject = DefaultProxiesPerProject
	}
	return c
}

// Validate reports the first field, after defaulting, that the API servers would refuse.
func (c Config) Validate() error {
	c = c.WithDefaults()
	for _, f := range []struct{ name, value string }{
		{"gateway class", c.GatewayClassName},
		{"downstream gateway class", c.DownstreamGatewayClassName},
		{"certificate issuer name", c.CertificateIssuer.Name},
		{"hostname claims namespace", c.HostnameClaimsNamespace},
	} {
		if errs := validation.IsDNS1123Subdomain(f.value); len(errs) > 0 {
			return fmt.Errorf("%s %q: %s", f.name, f.value, strings.Join(errs, "; "))
		}
	}
	if errs := validation.IsDNS1123Subdomain(c.CertificateIssuer.Group); len(errs) > 0 {
		return fmt.Errorf("certificate issuer group %q: %s", c.CertificateIssuer.Group, strings.Join(errs, "; "))
	}
	if c.Workers < 1 {
		return fmt.Errorf("workers %d: want at least 1", c.Workers)
	}
	if c.ProjectWorkers < 1 {
		return fmt.Errorf("project workers %d: want at least 1", c.ProjectWorkers)
	}
	if c.ProjectHubWritesPerSecond <= 0 {
		return fmt.Errorf("project hub writes per second %g: want more than 0", c.ProjectHubWritesPerSecond)
	}
	if c.ProxiesPerProject < 1 {
		return fmt.Errorf("proxies per project %d: want at least 1", c.ProxiesPerProject)
	}
	if c.CertificateIssuer.Kind != "Issuer" && c.CertificateIssuer.Kind != "ClusterIssuer" {
		return fmt.Errorf("certificate issuer kind %q: want Issuer or ClusterIssuer", c.CertificateIssuer.Kind)
	}
	// Gateway API: a domain-prefixed path, e.g. example.com/controller.
	domain, path, ok := strings.Cut(c.ControllerName, "/")
	if !ok || path == "" || len(validation.IsDNS1123Subdomain(domain)) > 0 {
		return fmt.Errorf("controller name %q: want a domain-prefixed path such as example.com/gateway-controller", c.ControllerName)
	}
	return nil
}

// controllerName returns ControllerName in its Gateway API type.
func (c Config) controllerName() gatewayv1.GatewayController {
	return gatewayv1.GatewayController(c.ControllerName)
}
