// Package config is the manager's configuration file: one versioned document holding
// every setting that is the same for every replica (the namespaces, the sharding
// timings, the resync, the gateway data path and the clients), read once at start by
// `manager --config` and `manager sweep --config` (docs/operations.md, Configuration).
// What differs per process (kubeconfig, identity, weight, addresses, logging, the
// record file) stays on the command line.
//
// Files: config.go (start here) holds the type, its defaults and Load; validate.go the
// one Validate; previous.go reads the previous manager's NetworkServicesOperator
// document into this type, key by key.
//
// Defaulting: Load decodes the file onto Default(), so a key the file leaves out keeps
// its default and a key it sets, zero included, is what it says; Validate then refuses
// a zero that means nothing. Only two defaults derive from another key, and they are
// pointers so that absent and set stay apart: leaseNamespace (providerNamespace) and
// sharding.claimDeadline (2 x sharding.leaseDuration).
package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"reflect"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"anchorage/pkg/anchor/resync"
	"anchorage/pkg/domain"
	"anchorage/pkg/gateway"
	"anchorage/pkg/netpolicy"
	"anchorage/pkg/platform"
	"anchorage/pkg/shard"
)

// The document's apiVersion and kind.
var GroupVersion = schema.GroupVersion{Group: "config.anchorage.datumapis.com", Version: "v1alpha1"}

const Kind = "ManagerConfiguration"

// ManagerConfiguration is the manager's configuration file.
type ManagerConfiguration struct {
	metav1.TypeMeta `json:",inline"`
	// ProviderNamespace is the hub namespace holding the projects' kubeconfig Secrets.
	ProviderNamespace string `json:"providerNamespace"`
	// LeaseNamespace is the hub namespace holding the member, coordinator and project
	// Leases, the plane identity records and the deletion switch. Absent: providerNamespace.
	LeaseNamespace *string `json:"leaseNamespace,omitempty"`
	// HubTimeout is how long a replica waits for the hub at start; an unreachable hub
	// ends the process with exit code 1.
	HubTimeout metav1.Duration `json:"hubTimeout"`
	// Sharding holds the member Lease protocol's timings, the same on every replica.
	Sharding Sharding `json:"sharding"`
	// Resync is the anchor resync, which collects anchors whose upstream owner is gone.
	Resync Resync `json:"resync"`
	// Gateway is the data path that programs proxies onto the hub.
	Gateway Gateway `json:"gateway"`
	// DomainVerification is the proof that a project owns the domains of its hostnames.
	DomainVerification DomainVerification `json:"domainVerification"`
	// Platform is the platform's own hostnames: every Gateway's canonical hostname and
	// its DNS records.
	Platform Platform `json:"platform"`
	// Clients are the rates of the manager's API clients.
	Clients Clients `json:"clients"`
}

// DomainVerification is the Domain verification's settings (docs/operations.md,
// Verified domains).
type DomainVerification struct {
	// Enabled programs a hostname only while a Verified Domain in the proxy's namespace
	// equals it or is a parent of it; off, any hostname no other Gateway holds is
	// programmed (the previous manager's disableHostnameVerification).
	Enabled bool `json:"enabled"`
	// DNSRecordPrefix is the first label of the TXT record that proves ownership:
	// <prefix>.<domainName>.
	DNSRecordPrefix string `json:"dnsRecordPrefix"`
	// HTTPTokenPath is the path of the HTTP token that proves ownership:
	// http://<domainName>/<path>/<Domain UID>.
	HTTPTokenPath string `json:"httpTokenPath"`
	// RetryIntervals is the schedule of checks of a pending Domain: each interval applies
	// while the Domain has been pending at most maxElapsed; the last step has none.
	RetryIntervals []RetryInterval `json:"retryIntervals"`
	// RetryJitter is the largest fraction of an interval added at random.
	RetryJitter float64 `json:"retryJitter"`
	// Workers is how many Domains are checked at once.
	Workers int `json:"workers"`
	// Nameservers are the host:port addresses the TXT records and the token URL's host
	// are looked up at, in order. Empty: the replica's /etc/resolv.conf, named in the log.
	Nameservers []string `json:"nameservers"`
	// Timeout bounds each DNS exchange and each HTTP token fetch.
	Timeout metav1.Duration `json:"timeout"`
	// HTTPPort is the port the HTTP token is fetched from; 80 but in a test rig.
	HTTPPort int `json:"httpPort"`
	// AllowPrivateAddresses lets the HTTP token fetch dial loopback and private
	// addresses; off, a domain resolving only to such addresses is not fetched from.
	AllowPrivateAddresses bool `json:"allowPrivateAddresses"`
}

// Platform is the platform hostnames' settings (docs/operations.md, Platform hostnames).
type Platform struct {
	// TargetDomain is the domain every Gateway's canonical hostname is derived under
	// (<Gateway UID without dashes>.<targetDomain>); the platform answers for it in DNS.
	TargetDomain string `json:"targetDomain"`
	// LegacyTargetDomains are earlier target domains: a Gateway named under one keeps
	// its name, and names under them stay reserved to the platform.
	LegacyTargetDomains []string `json:"legacyTargetDomains"`
	// IPFamilies are the families the edge serves (IPv4, IPv6): each gets its
	// v4./v6.<canonical> name and its records.
	IPFamilies []string `json:"ipFamilies"`
	// DNSEndpoints writes, per hub Gateway, an external-dns DNSEndpoint holding the
	// records of its platform hostnames; the hub must serve the DNSEndpoint CRD.
	DNSEndpoints bool `json:"dnsEndpoints"`
	// DefaultListenerTLSSecretName is, when set, the Secret the platform hostnames'
	// HTTPS listeners terminate with (a wildcard certificate of the target domains,
	// present in every mapped namespace): no Certificate is ordered for them. Empty:
	// each gets a Certificate of its own.
	DefaultListenerTLSSecretName string `json:"defaultListenerTLSSecretName"`
}

// RetryInterval is one step of the verification schedule.
type RetryInterval struct {
	// Interval between two checks.
	Interval metav1.Duration `json:"interval"`
	// MaxElapsed is how long a Domain may have been pending for this step to apply.
	// Absent: the last step.
	MaxElapsed *metav1.Duration `json:"maxElapsed,omitempty"`
}

// Sharding holds the member Lease protocol's timings (client-go leaderelection's rules).
type Sharding struct {
	// LeaseDuration is how long a member Lease may go unrenewed before its member may be
	// declared gone; must exceed renewDeadline.
	LeaseDuration metav1.Duration `json:"leaseDuration"`
	// RenewDeadline is the validity a renew grants from its send; must exceed
	// 1.2 x retryPeriod.
	RenewDeadline metav1.Duration `json:"renewDeadline"`
	// RetryPeriod is the interval between renews and between coordinator passes.
	RetryPeriod metav1.Duration `json:"retryPeriod"`
	// ClaimDeadline is how long an assigned project may stay unclaimed before it moves
	// on. Absent: 2 x leaseDuration.
	ClaimDeadline *metav1.Duration `json:"claimDeadline,omitempty"`
	// ProjectCallTimeout is the deadline of each request to a project's plane but
	// watches: a plane that hangs delays only its own project's work.
	ProjectCallTimeout metav1.Duration `json:"projectCallTimeout"`
}

// Resync is the anchor resync's settings (docs/operations.md, The anchor resync).
type Resync struct {
	// Enabled runs the resync on every replica.
	Enabled bool `json:"enabled"`
	// DryRun decides and reports, deleting nothing.
	DryRun bool `json:"dryRun"`
	// Period is the time between two passes over one project.
	Period metav1.Duration `json:"period"`
	// InitialJitter bounds the random delay of a project's first pass after its claim.
	InitialJitter metav1.Duration `json:"initialJitter"`
	// ConfirmAfter is how long after it was first seen a proof of absence must hold
	// again; shorter than period.
	ConfirmAfter metav1.Duration `json:"confirmAfter"`
	// MinAge: anchors younger than this are never collected.
	MinAge metav1.Duration `json:"minAge"`
	// MaxDeletionsPerPass is how many anchors one pass over one project may collect; the
	// rest wait for the next pass. To delete nothing, set dryRun.
	MaxDeletionsPerPass int `json:"maxDeletionsPerPass"`
	// HaltAbove: a pass that could collect more anchors of one project deletes none and
	// raises an alert; not below maxDeletionsPerPass.
	HaltAbove int `json:"haltAbove"`
	// DeletionsPerSecond is the rate of anchor deletions.
	DeletionsPerSecond float64 `json:"deletionsPerSecond"`
	// Workers is how many passes run at once.
	Workers int `json:"workers"`
	// OwnerKinds are the owner kinds (group/Kind, Kind alone for the core group) read live
	// on a project's plane to prove an owner absent; an anchor of another kind stays
	// unknown. Each needs get in the plane's role. Secrets are refused.
	OwnerKinds []string `json:"ownerKinds"`
	// ExtraDependentKinds are hub kinds the dependents check lists besides anchors and
	// what the live path writes, for legacy dependents of other kinds. Each needs its
	// own list grant. Secrets and wildcards are refused.
	ExtraDependentKinds []string `json:"extraDependentKinds"`
}

// Gateway is the gateway data path's settings.
type Gateway struct {
	// GatewayClassName is the class of the upstream Gateways this manager programs;
	// Gateways of other classes are never touched.
	GatewayClassName string `json:"gatewayClassName"`
	// DownstreamGatewayClassName is the class written into the downstream Gateways on
	// the hub.
	DownstreamGatewayClassName string `json:"downstreamGatewayClassName"`
	// ControllerName is this manager's name in Gateway API status (a domain-prefixed path).
	ControllerName string `json:"controllerName"`
	// CertificateIssuer is the cert-manager issuer a downstream Certificate names when
	// its listener names none (or "auto", the previous manager's default option).
	CertificateIssuer Issuer `json:"certificateIssuer"`
	// ClusterIssuers maps the issuer a Gateway's listener names in its TLS option
	// gateway.networking.datumapis.com/certificate-issuer to a ClusterIssuer (the
	// previous manager's clusterIssuerMap); a listener naming one not here is refused
	// (reason UnsupportedIssuer): a tenant picks among the operator's issuers only.
	ClusterIssuers map[string]string `json:"clusterIssuers"`
	// HostnameClaimsNamespace is the hub namespace of the hostname claims (a ConfigMap
	// per hostname): a hostname is programmed for the one Gateway holding its claim.
	HostnameClaimsNamespace string `json:"hostnameClaimsNamespace"`
	// AssumeWrittenIsProgrammed, for a hub where no gateway controller writes status (a
	// hub without edges), counts a downstream copy written as programmed; off,
	// Programmed follows the edge's status and stays False (reason Pending) until then.
	AssumeWrittenIsProgrammed bool `json:"assumeWrittenIsProgrammed"`
	// BackendReservedDomains are domains no proxy backend may be in (the name or any name
	// under it), beyond the rule always applied: a backend name must be a public DNS
	// name, under a top-level domain of the public suffix list's ICANN section with a
	// label more than its public suffix, so single labels, cluster names (svc,
	// cluster.local, <name>.<namespace>, the pod form), private TLDs (internal, corp,
	// local, localhost) and arpa are refused whatever this lists, as are non-ASCII hosts
	// and numeric-looking ones that are not an IP address in canonical form. List here
	// the public-looking names an edge answers privately: a split-horizon zone, or a
	// namespace of the edge cluster named like a TLD (a name ending in it is completed
	// into a Service of that namespace).
	BackendReservedDomains []string `json:"backendReservedDomains"`
	// BackendDeniedNetworks are CIDRs no IP-address backend may be in, beyond the
	// non-public ranges always refused (loopback, link-local, private, shared,
	// multicast, reserved): the hub's own networks where they are public, such as its
	// Service or node range. The hub API server's address is denied without being
	// listed when the hub kubeconfig names it by IP.
	BackendDeniedNetworks []string `json:"backendDeniedNetworks"`
	// Workers is how many reconciles each gateway controller runs at once; never two of
	// the same object.
	Workers int `json:"workers"`
	// ProjectWorkers is how many of those one project may hold at once; the queue serves
	// projects in turn.
	ProjectWorkers int `json:"projectWorkers"`
	// ProjectHubWritesPerSecond is the hub writes one project may make a second (burst
	// twice that); a proxy costs about ten.
	ProjectHubWritesPerSecond float64 `json:"projectHubWritesPerSecond"`
	// ProxiesPerProject is how many proxies, and Gateways of the manager's class written
	// directly (not by a proxy), one project programs together, the oldest first; the
	// younger are Accepted=False with reason ProxyLimitReached.
	ProxiesPerProject int `json:"proxiesPerProject"`
	// HostnamesPerProxy is how many hostnames one proxy may ask for (its CRD allows
	// 16); a proxy with more is Accepted=False with reason TooManyHostnames and none of
	// its hostnames is claimed or programmed.
	HostnamesPerProxy int `json:"hostnamesPerProxy"`
	// HostnamesPerGateway is how many distinct listener hostnames a Gateway of the
	// manager's class written directly (not by a proxy) may have; over it, every
	// hostname listener is refused (reason TooManyHostnames) and none is claimed.
	HostnamesPerGateway int `json:"hostnamesPerGateway"`
}

// Issuer names a cert-manager issuer.
type Issuer struct {
	// Name of the issuer.
	Name string `json:"name"`
	// Kind of the issuer: ClusterIssuer or Issuer.
	Kind string `json:"kind"`
	// Group is the issuer's API group.
	Group string `json:"group"`
}

// Clients are the rates of the manager's API clients.
type Clients struct {
	// Hub is the client of the hub (Leases, anchors, every downstream object).
	Hub ClientConnection `json:"hub"`
	// Project is the client of each project's plane.
	Project ClientConnection `json:"project"`
}

// ClientConnection is one API client's rate limit.
type ClientConnection struct {
	// QPS is the sustained requests a second before client-side throttling.
	QPS float32 `json:"qps"`
	// Burst is the requests allowed at once above qps.
	Burst int `json:"burst"`
}

// Default returns the configuration of a file that sets nothing: the components' own
// defaults (shard.DefaultTimings, resync.DefaultOptions, gateway.DefaultConfig).
func Default() ManagerConfiguration {
	t, r, g := shard.DefaultTimings(), resync.DefaultOptions(), gateway.DefaultConfig()
	d := func(d time.Duration) metav1.Duration { return metav1.Duration{Duration: d} }
	return ManagerConfiguration{
		TypeMeta:          metav1.TypeMeta{APIVersion: GroupVersion.String(), Kind: Kind},
		ProviderNamespace: "anchorage-system",
		HubTimeout:        d(10 * time.Second),
		Sharding: Sharding{LeaseDuration: d(t.LeaseDuration), RenewDeadline: d(t.RenewDeadline), RetryPeriod: d(t.RetryPeriod),
			ProjectCallTimeout: d(shard.DefaultPlaneCallTimeout)},
		Resync: Resync{
			Enabled: !r.Disabled, DryRun: r.DryRun, Period: d(r.Period), InitialJitter: d(r.InitialJitter), ConfirmAfter: d(r.ConfirmAfter), MinAge: d(r.MinAge),
			MaxDeletionsPerPass: r.MaxDeletionsPerPass, HaltAbove: r.HaltAbove, DeletionsPerSecond: float64(r.DeletionQPS), Workers: r.Workers,
			OwnerKinds: formatKinds(r.LiveOwnerKinds), ExtraDependentKinds: formatKinds(r.ExtraDependentKinds),
		},
		Gateway: Gateway{
			GatewayClassName: g.GatewayClassName, DownstreamGatewayClassName: g.DownstreamGatewayClassName, ControllerName: g.ControllerName,
			CertificateIssuer:       Issuer{Name: g.CertificateIssuer.Name, Kind: g.CertificateIssuer.Kind, Group: g.CertificateIssuer.Group},
			ClusterIssuers:          map[string]string{},
			HostnameClaimsNamespace: g.HostnameClaimsNamespace, AssumeWrittenIsProgrammed: g.AssumeWrittenIsProgrammed,
			BackendReservedDomains: g.BackendReservedDomains, BackendDeniedNetworks: []string{}, Workers: g.Workers, ProjectWorkers: g.ProjectWorkers,
			ProjectHubWritesPerSecond: g.ProjectHubWritesPerSecond, ProxiesPerProject: g.ProxiesPerProject,
			HostnamesPerProxy: g.HostnamesPerProxy, HostnamesPerGateway: g.HostnamesPerGateway,
		},
		DomainVerification: DomainVerification{
			Enabled: g.VerifyHostnames, DNSRecordPrefix: "datum-custom-hostname", HTTPTokenPath: ".well-known/datum-custom-hostname-challenge",
			RetryIntervals: []RetryInterval{
				{Interval: metav1.Duration{Duration: 5 * time.Second}, MaxElapsed: &metav1.Duration{Duration: 5 * time.Minute}},
				{Interval: metav1.Duration{Duration: time.Minute}, MaxElapsed: &metav1.Duration{Duration: 15 * time.Minute}},
				{Interval: metav1.Duration{Duration: 5 * time.Minute}},
			},
			RetryJitter: 0.25, Workers: 20, Nameservers: []string{}, Timeout: metav1.Duration{Duration: 5 * time.Second}, HTTPPort: 80,
		},
		Platform: Platform{TargetDomain: g.Platform.TargetDomain, LegacyTargetDomains: append([]string{}, g.Platform.LegacyTargetDomains...),
			IPFamilies: families(g.Platform.Families), DNSEndpoints: g.DNSEndpoints, DefaultListenerTLSSecretName: g.PlatformTLSSecret},
		Clients: Clients{Hub: ClientConnection{QPS: 50, Burst: 100}, Project: ClientConnection{QPS: 50, Burst: 100}},
	}
}

// PlatformSettings are the platform hostnames' settings (Validate has checked them).
func (c *ManagerConfiguration) PlatformSettings() platform.Settings {
	s := platform.Settings{TargetDomain: c.Platform.TargetDomain}
	if len(c.Platform.LegacyTargetDomains) > 0 {
		s.LegacyTargetDomains = slices.Clone(c.Platform.LegacyTargetDomains)
	}
	for _, f := range c.Platform.IPFamilies {
		s.Families = append(s.Families, platform.Family(f))
	}
	return s
}

func families(fs []platform.Family) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = string(f)
	}
	return out
}

// DomainSettings are the Domain verification's settings and its checker. Empty
// nameservers are read from /etc/resolv.conf here.
func (c *ManagerConfiguration) DomainSettings() (domain.Settings, domain.Checker, error) {
	v := c.DomainVerification
	s := domain.Settings{DNSRecordPrefix: v.DNSRecordPrefix, HTTPTokenPath: v.HTTPTokenPath, Jitter: v.RetryJitter}
	for _, r := range v.RetryIntervals {
		step := domain.RetryInterval{Interval: r.Interval.Duration}
		if r.MaxElapsed != nil {
			step.MaxElapsed = r.MaxElapsed.Duration
		}
		s.Retry = append(s.Retry, step)
	}
	ck := domain.Checker{Nameservers: slices.Clone(v.Nameservers), Timeout: v.Timeout.Duration, HTTPPort: v.HTTPPort, AllowPrivate: v.AllowPrivateAddresses,
		Denied: deniedNetworks(c.Gateway.BackendDeniedNetworks)}
	if len(ck.Nameservers) == 0 {
		var err error
		if ck.Nameservers, err = domain.FromResolvConf("/etc/resolv.conf"); err != nil {
			return s, ck, fmt.Errorf("domainVerification.nameservers is empty: %w", err)
		}
	}
	return s, ck, nil
}

// Loaded is a configuration file, read, defaulted and valid.
type Loaded struct {
	ManagerConfiguration
	// Path is the file it was read from ("" for the defaults).
	Path string
	// Keys, for a previous manager's document, say what each of its keys became, served
	// or not (previous.go); empty for this manager's own document.
	Keys []Key
	// HubKubeconfig is the previous manager's downstreamResourceManagement.kubeconfigPath:
	// the hub, when --kubeconfig is not given.
	HubKubeconfig string
}

// Load reads path as this manager's ManagerConfiguration or as the previous manager's
// NetworkServicesOperator, decoded strictly (an unknown or repeated key is an error that
// names it), defaulted and validated. An empty path is the defaults.
func Load(path string) (*Loaded, error) {
	l := &Loaded{ManagerConfiguration: Default(), Path: path}
	if path == "" {
		return l, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the configuration: %w", err)
	}
	if err := l.decode(data); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := l.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return l, nil
}

// decode reads data onto l's defaults as the kind its apiVersion and kind name.
func (l *Loaded) decode(data []byte) error {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(data, &tm); err != nil {
		return err
	}
	switch tm.GroupVersionKind() {
	case GroupVersion.WithKind(Kind):
		// A list the file sets replaces the default's: JSON decodes a list's elements onto
		// the old ones, so a step without maxElapsed would keep the default step's.
		steps := l.DomainVerification.RetryIntervals
		l.DomainVerification.RetryIntervals = nil
		err := strict(data, &l.ManagerConfiguration)
		if l.DomainVerification.RetryIntervals == nil {
			l.DomainVerification.RetryIntervals = steps
		}
		return err
	case previousGroupVersion.WithKind(previousKind):
		return l.fromPrevious(data)
	}
	return fmt.Errorf("apiVersion %q kind %q: want %s %s, or the previous manager's %s %s",
		tm.APIVersion, tm.Kind, GroupVersion, Kind, previousGroupVersion, previousKind)
}

// strict decodes YAML or JSON onto out, refusing unknown and repeated keys.
func strict(data []byte, out any) error {
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(out); err != nil {
		return errors.New(unknownKey(err))
	}
	return nil
}

// unknownKey words json's errors as an operator reads them: the key, and what it wants.
func unknownKey(err error) string {
	const prefix = "json: unknown field "
	var typed *json.UnmarshalTypeError
	switch s := err.Error(); {
	case strings.HasPrefix(s, prefix):
		return "unknown key " + strings.TrimPrefix(s, prefix) + " (a misspelling? docs/operations.md, Configuration, lists every key)"
	case errors.As(err, &typed) && typed.Type == reflect.TypeFor[string]():
		return fmt.Sprintf("%s: want a string (a duration such as 15s or 1m30s, a name), got a %s; quote it", typed.Field, typed.Value)
	case errors.As(err, &typed):
		return fmt.Sprintf("%s: want a %s, got a %s", typed.Field, typed.Type, typed.Value)
	}
	return err.Error()
}

// LeaseNamespaceOrProvider is leaseNamespace, or providerNamespace when absent.
func (c *ManagerConfiguration) LeaseNamespaceOrProvider() string {
	if c.LeaseNamespace != nil {
		return *c.LeaseNamespace
	}
	return c.ProviderNamespace
}

// Timings are the shard's timings.
func (c *ManagerConfiguration) Timings() shard.Timings {
	s := c.Sharding
	t := shard.NewTimings(s.LeaseDuration.Duration, s.RenewDeadline.Duration, s.RetryPeriod.Duration)
	if s.ClaimDeadline != nil {
		t.ClaimDeadline = s.ClaimDeadline.Duration
	}
	return t
}

// ResyncOptions are the resync's options: the file's, and resync.DefaultOptions' for
// what no key sets.
func (c *ManagerConfiguration) ResyncOptions() resync.Options {
	r, o := c.Resync, resync.DefaultOptions()
	o.LiveOwnerKinds, _ = parseKinds(r.OwnerKinds)
	o.ExtraDependentKinds, _ = parseKinds(r.ExtraDependentKinds)
	o.Disabled, o.DryRun = !r.Enabled, r.DryRun
	o.Period, o.InitialJitter, o.ConfirmAfter, o.MinAge = r.Period.Duration, r.InitialJitter.Duration, r.ConfirmAfter.Duration, r.MinAge.Duration
	o.MaxDeletionsPerPass, o.HaltAbove, o.DeletionQPS, o.Workers = r.MaxDeletionsPerPass, r.HaltAbove, float32(r.DeletionsPerSecond), r.Workers
	return o
}

// GatewayConfig is the gateway data path's configuration.
func (c *ManagerConfiguration) GatewayConfig() gateway.Config {
	g := c.Gateway
	return gateway.Config{
		GatewayClassName: g.GatewayClassName, DownstreamGatewayClassName: g.DownstreamGatewayClassName, ControllerName: g.ControllerName,
		CertificateIssuer:         gateway.IssuerRef{Name: g.CertificateIssuer.Name, Kind: g.CertificateIssuer.Kind, Group: g.CertificateIssuer.Group},
		ClusterIssuers:            maps.Clone(g.ClusterIssuers),
		HostnameClaimsNamespace:   g.HostnameClaimsNamespace,
		AssumeWrittenIsProgrammed: g.AssumeWrittenIsProgrammed, BackendReservedDomains: slices.Clone(g.BackendReservedDomains),
		Workers: g.Workers, ProjectWorkers: g.ProjectWorkers, ProjectHubWritesPerSecond: g.ProjectHubWritesPerSecond, ProxiesPerProject: g.ProxiesPerProject,
		HostnamesPerProxy: g.HostnamesPerProxy, HostnamesPerGateway: g.HostnamesPerGateway,
		VerifyHostnames:       c.DomainVerification.Enabled,
		BackendDeniedNetworks: deniedNetworks(g.BackendDeniedNetworks),
		Platform:              c.PlatformSettings(),
		DNSEndpoints:          c.Platform.DNSEndpoints,
		PlatformTLSSecret:     c.Platform.DefaultListenerTLSSecretName,
	}
}

// deniedNetworks are gateway.backendDeniedNetworks for the gateway path (nil for none);
// Validate has refused any that does not parse.
func deniedNetworks(cidrs []string) []netpolicy.DeniedNetwork {
	var out []netpolicy.DeniedNetwork
	for _, c := range cidrs {
		if p, err := netip.ParsePrefix(c); err == nil {
			out = append(out, netpolicy.DeniedNetwork{Prefix: p, Why: "listed in gateway.backendDeniedNetworks"})
		}
	}
	return out
}

// parseKinds parses group/Kind strings; an empty list stays empty (not the default).
func parseKinds(kinds []string) ([]schema.GroupKind, error) {
	out := []schema.GroupKind{}
	for _, k := range kinds {
		gk, err := resync.ParseGroupKinds(k)
		if err != nil {
			return nil, err
		}
		if len(gk) != 1 {
			return nil, fmt.Errorf("%q: want one group/Kind", k)
		}
		out = append(out, gk[0])
	}
	return out, nil
}

func formatKinds(kinds []schema.GroupKind) []string {
	out := make([]string, 0, len(kinds))
	for _, gk := range kinds {
		out = append(out, resync.FormatGroupKinds([]schema.GroupKind{gk}))
	}
	return out
}
