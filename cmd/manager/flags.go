package main

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"anchorage/pkg/gateway"
	"anchorage/pkg/shard"
)

// durationValue is a duration flag whose error shows what a duration looks like.
type durationValue time.Duration

func (d *durationValue) Set(s string) error {
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("want a duration such as 15s, 1m30s or 500ms (a number needs a unit: %ss)", s)
	}
	*d = durationValue(v)
	return nil
}

func (d *durationValue) String() string { return time.Duration(*d).String() }
func (d *durationValue) Type() string   { return "duration" }

// durationVar adds a duration flag with durationValue's errors.
func durationVar(fs *pflag.FlagSet, p *time.Duration, name string, def time.Duration, usage string) {
	*p = def
	fs.Var((*durationValue)(p), name, usage)
}

// commonFlags are persistent on the root command: the replica and the sweep both take them.
type commonFlags struct {
	kubeconfig, providerNamespace, leaseNamespace string
	log                                           logFlags
}

func (c *commonFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&c.kubeconfig, "kubeconfig", "", "kubeconfig of the hub cluster (default: $KUBECONFIG, or in-cluster)")
	fs.StringVar(&c.providerNamespace, "provider-namespace", "anchorage-system", "hub namespace holding the projects' kubeconfig Secrets")
	fs.StringVar(&c.leaseNamespace, "lease-namespace", "", "hub namespace holding member, coordinator and project Leases, the plane identity records and the deletion switch (default: --provider-namespace)")
	c.log.register(fs)
}

// hubConfig loads the hub's REST config from --kubeconfig, $KUBECONFIG or the pod's
// service account, and says which of the three to give when none is there.
func (c *commonFlags) hubConfig() (*rest.Config, error) {
	loading := clientcmd.NewDefaultClientConfigLoadingRules()
	loading.ExplicitPath = c.kubeconfig // "" is the rules' own default
	hub, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(loading, &clientcmd.ConfigOverrides{}).ClientConfig()
	if clientcmd.IsEmptyConfig(err) {
		return nil, errors.New("no hub kubeconfig: pass --kubeconfig, set $KUBECONFIG, or run in a cluster")
	}
	if err != nil {
		return nil, fmt.Errorf("loading hub kubeconfig: %w", err)
	}
	return hub, nil
}

// replicaFlags is a parsed replica command line (`manager` or `manager run`).
type replicaFlags struct {
	identity, metricsAddr, healthAddr, recordFile                             string
	leaseDuration, renewDeadline, retryPeriod, hubTimeout, projectCallTimeout time.Duration
	claimDeadline                                                             time.Duration
	weight                                                                    float64
	metricsSecure                                                             bool
	resync                                                                    resyncFlags
	gateway                                                                   gateway.Config
}

func (f *replicaFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.identity, "identity", os.Getenv("POD_NAME"), "this replica's name, normally the pod name (the Deployment passes it through the downward API)")
	// Show where the default comes from, not this shell's value.
	fs.Lookup("identity").DefValue = "$POD_NAME"
	fs.StringVar(&f.metricsAddr, "metrics-bind-address", ":8443", "address serving /metrics; 0 turns it off")
	fs.BoolVar(&f.metricsSecure, "metrics-secure", true, "serve /metrics over HTTPS to callers whose token the hub authorizes for get on /metrics; false serves plain HTTP to anyone, for local runs only")
	fs.StringVar(&f.healthAddr, "health-probe-bind-address", ":8081", "address serving /healthz and /readyz; 0 turns it off")
	durationVar(fs, &f.leaseDuration, "lease-duration", 15*time.Second, "member Lease duration; must exceed --renew-deadline")
	durationVar(fs, &f.renewDeadline, "renew-deadline", 10*time.Second, "member Lease renew deadline (validity after a renew is sent); must exceed 1.2 x --retry-period")
	durationVar(fs, &f.retryPeriod, "retry-period", 2*time.Second, "member Lease retry period: the interval between renews and coordinator passes")
	durationVar(fs, &f.claimDeadline, "claim-deadline", 0, "how long an assigned project may stay unclaimed before it moves on (0: 2 x --lease-duration)")
	fs.Float64Var(&f.weight, "weight", 1, "this replica's share of projects relative to others")
	fs.StringVar(&f.recordFile, "record-file", "", "append a JSON line per admitted unit of project work (replica, project, start, end, claim) to this file, for audits and bench/")
	durationVar(fs, &f.hubTimeout, "hub-timeout", 10*time.Second, "how long to wait for the hub at start-up (an unreachable hub exits with code 1)")
	durationVar(fs, &f.projectCallTimeout, "project-call-timeout", shard.DefaultPlaneCallTimeout, "deadline of each request to a project's plane but watches: a plane that hangs delays only its own project's work")
	f.registerGateway(fs)
	f.resync.register(fs, true)
}

// gatewayFlag is a string flag that sets one gateway.Config field.
type gatewayFlag struct {
	name, def, usage string
	field            func(*gateway.Config) *string
}

// check validates value as the flag's field of an otherwise default Config, so the
// error names the flag.
func (g gatewayFlag) check(value string) error {
	var one gateway.Config
	*g.field(&one) = value
	if err := one.Validate(); err != nil {
		return fmt.Errorf("--%s: %w", g.name, err)
	}
	return nil
}

// gatewayFlagNamed returns the gatewayFlags entry of that name, which must exist.
func gatewayFlagNamed(name string) gatewayFlag {
	return gatewayFlags[slices.IndexFunc(gatewayFlags, func(g gatewayFlag) bool { return g.name == name })]
}

// gatewayFlags are the gateway.Config string flags, in the order Validate checks them.
var gatewayFlags = []gatewayFlag{
	{"gateway-class", gateway.DefaultGatewayClassName, "class of the upstream Gateways this manager programs; Gateways of other classes are never touched",
		func(c *gateway.Config) *string { return &c.GatewayClassName }},
	{"downstream-gateway-class", gateway.DefaultDownstreamGatewayClassName, "class written into the downstream Gateways on the hub",
		func(c *gateway.Config) *string { return &c.DownstreamGatewayClassName }},
	{"controller-name", gateway.DefaultControllerName, "this manager's name in Gateway API status (a domain-prefixed path)",
		func(c *gateway.Config) *string { return &c.ControllerName }},
	{"issuer-name", gateway.DefaultIssuerName, "cert-manager issuer every downstream Certificate names",
		func(c *gateway.Config) *string { return &c.CertificateIssuer.Name }},
	{"issuer-kind", gateway.DefaultIssuerKind, "kind of that issuer: ClusterIssuer or Issuer",
		func(c *gateway.Config) *string { return &c.CertificateIssuer.Kind }},
	{"issuer-group", gateway.DefaultIssuerGroup, "API group of that issuer",
		func(c *gateway.Config) *string { return &c.CertificateIssuer.Group }},
	{"hostname-claims-namespace", gateway.DefaultHostnameClaimsNamespace, "hub namespace of the hostname claims (a ConfigMap per hostname, the previous manager's record): a hostname is programmed for the one Gateway that holds its claim",
		func(c *gateway.Config) *string { return &c.HostnameClaimsNamespace }},
}

func (f *replicaFlags) registerGateway(fs *pflag.FlagSet) {
	for _, g := range gatewayFlags {
		fs.StringVar(g.field(&f.gateway), g.name, g.def, g.usage)
	}
	fs.BoolVar(&f.gateway.AssumeWrittenIsProgrammed, "assume-written-is-programmed", false, "off by default: for a hub where no gateway controller writes status on the downstream Gateways and HTTPRoutes (a hub without edges), count a downstream copy written as accepted and programmed; off, Programmed follows the edge controller's status on the hub and stays False (reason Pending) until it has spoken")
	fs.StringSliceVar(&f.gateway.BackendReservedDomains, "backend-reserved-domains", gateway.DefaultBackendReservedDomains, "domains no proxy backend may be in (the name itself or any name under it): they name the platform, not a tenant's backend; numeric-looking and non-ASCII hosts are always refused")
	fs.IntVar(&f.gateway.Workers, "gateway-workers", gateway.DefaultWorkers, "reconciles each gateway controller (HTTPProxy, Gateway, HTTPRoute) runs at once; never two of the same object")
	fs.IntVar(&f.gateway.ProjectWorkers, "project-workers", gateway.DefaultProjectWorkers, "of those, how many one project may hold at once; the queue serves projects in turn, so one project's backlog or slow plane leaves the rest to the others")
	fs.Float64Var(&f.gateway.ProjectHubWritesPerSecond, "project-hub-writes-per-second", gateway.DefaultProjectHubWritesPerSecond, "hub writes one project may make a second (burst twice that); a proxy costs about ten")
	fs.IntVar(&f.gateway.ProxiesPerProject, "proxies-per-project", gateway.DefaultProxiesPerProject, "proxies one project programs, the oldest first; the younger ones are Accepted=False with reason ProxyLimitReached until an older one goes")
}

// checkGateway validates the gateway configuration, naming the flag that is wrong.
func (f *replicaFlags) checkGateway() error {
	for _, g := range gatewayFlags {
		if err := g.check(*g.field(&f.gateway)); err != nil {
			return err
		}
	}
	// A 0 was written on purpose (the flags start at the defaults): refuse it rather
	// than let the Config's zero value turn it back into the default.
	switch {
	case f.gateway.Workers < 1:
		return fmt.Errorf("--gateway-workers must be at least 1, got %d", f.gateway.Workers)
	case f.gateway.ProjectWorkers < 1:
		return fmt.Errorf("--project-workers must be at least 1, got %d", f.gateway.ProjectWorkers)
	case f.gateway.ProjectHubWritesPerSecond <= 0:
		return fmt.Errorf("--project-hub-writes-per-second must be more than 0, got %g", f.gateway.ProjectHubWritesPerSecond)
	case f.gateway.ProxiesPerProject < 1:
		return fmt.Errorf("--proxies-per-project must be at least 1, got %d", f.gateway.ProxiesPerProject)
	}
	if err := f.gateway.Validate(); err != nil {
		return fmt.Errorf("gateway flags: %w", err)
	}
	return nil
}

func (f *replicaFlags) timings() shard.Timings {
	return shard.Timings{LeaseDuration: f.leaseDuration, RenewDeadline: f.renewDeadline, RetryPeriod: f.retryPeriod, ClaimDeadline: f.claimDeadline}
}

// timingFlags name the member Lease timings in errors: by their flags, or by what they
// derive from.
var timingFlags = shard.TimingNames{
	LeaseDuration: "--lease-duration", RenewDeadline: "--renew-deadline", RetryPeriod: "--retry-period",
	CallTimeout:   "the call timeout (derived from --lease-duration and --renew-deadline)",
	ClaimDeadline: "--claim-deadline (0 means 2 x --lease-duration)",
	DrainDeadline: "the drain deadline (derived from --lease-duration)", ShutdownDeadline: "the shutdown deadline (derived from --lease-duration)",
}

// checkTimings checks the member Lease timings as the shard will, naming the flags; a
// zero is refused before the shard's defaults would replace it.
func (f *replicaFlags) checkTimings() error {
	for _, d := range []struct {
		flag  string
		value time.Duration
	}{{"--lease-duration", f.leaseDuration}, {"--renew-deadline", f.renewDeadline}, {"--retry-period", f.retryPeriod}} {
		if d.value <= 0 {
			return fmt.Errorf("%s must be positive, got %s", d.flag, d.value)
		}
	}
	if f.claimDeadline < 0 {
		return fmt.Errorf("--claim-deadline must not be negative, got %s (0 means 2 x --lease-duration)", f.claimDeadline)
	}
	return f.timings().WithDefaults().ValidateNaming(timingFlags)
}

// check validates a parsed replica command line; every error names its flag.
func (f *replicaFlags) check() error {
	if f.identity == "" {
		return errors.New("--identity is required when $POD_NAME is not set")
	}
	if err := f.checkTimings(); err != nil {
		return err
	}
	if !shard.ValidWeight(f.weight) {
		return fmt.Errorf("--weight must be positive and finite, got %g", f.weight)
	}
	if err := f.checkGateway(); err != nil {
		return err
	}
	if err := f.resync.refuseZeroLimits(); err != nil {
		return err
	}
	if err := f.resync.options().Validate(); err != nil {
		return fmt.Errorf("resync: %w", err)
	}
	return nil
}
