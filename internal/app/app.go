// Package app assembles one anchorage replica from Options (docs/design.md, One replica,
// wired): New builds the manager, shard, gateway controllers and resync; Start runs them.
// cmd/manager calls it with parsed flags; the integration harness, several times in a process.
//
// Files: app.go (start here) holds Options, New and Start; discovery.go the kubeconfig
// provider's discovery-only clusters; mapper.go the held projects' REST mapper, which
// keeps only the kinds it is asked for; buildinfo.go the build info gauge; rbac.go the
// RBAC markers that no controller's code carries.
//
// Words: a held project is one the shard has assigned to this replica (only those get a
// cluster with informers); a discovery-only cluster carries a REST config and nothing else.
package app

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	"sigs.k8s.io/multicluster-runtime/providers/kubeconfig"

	"anchorage/api/v1alpha"
	"anchorage/pkg/anchor/resync"
	"anchorage/pkg/domain"
	"anchorage/pkg/gateway"
	"anchorage/pkg/netpolicy"
	"anchorage/pkg/shard"
)

// Options configures one replica: the configuration file's settings (pkg/config, whose
// Default holds every default) and the process's own. None of the file's is defaulted.
type Options struct {
	Hub                *rest.Config  // the hub cluster's REST config, its rate included; required
	ProviderNamespace  string        // holds the projects' kubeconfig Secrets
	LeaseNamespace     string        // holds member and project Leases
	Identity           string        // names this replica (the pod name in a Deployment); required
	MetricsAddr        string        // serves /metrics; "0" turns it off
	HealthAddr         string        // serves /healthz and /readyz; "0" turns it off
	HubCheckTimeout    time.Duration // bounds the start-up probe of the hub
	ProjectCallTimeout time.Duration // the deadline of each project plane request but watches (shard.BoundPlaneCalls)
	Timings            shard.Timings // of the sharding protocol
	Weight             float64       // scales this replica's share of projects; positive
	Gateway            gateway.Config
	// Resync configures the anchor resync, on unless Resync.Disabled; a nil Clock takes
	// Clock; its ClaimsNamespace is the gateway's.
	Resync resync.Options
	// InsecureMetrics serves /metrics in plain HTTP to anyone, for local runs only;
	// otherwise HTTPS with every scrape authorized by the hub (docs/operations.md, Metrics).
	InsecureMetrics bool
	// ClusterOptions are applied to every cluster the shard builds for a held project.
	ClusterOptions []cluster.Option
	// ProjectRESTOptions adjust the REST config built from each project's kubeconfig,
	// its rate included.
	ProjectRESTOptions []func(*rest.Config) error
	Registry           prometheus.Registerer // receives anchorage's own metrics; default controller-runtime's
	Logger             logr.Logger           // default ctrl.Log
	Clock              clock.WithTicker      // injected into the sharding protocol; default the real clock
	Recorder           shard.Recorder        // when set, receives a record of every admitted unit of project work
	// Observer, when set, is told of the replica's incarnations and of Start stopping
	// the controllers.
	Observer Observer
	Exit     func() // ends the process when a planned hand-over's drain passes its deadline; default os.Exit(1)
	// ResyncObserver, when set, sees every anchor examination and pass of the resync.
	ResyncObserver resync.Observer
	// Domains verifies the projects' Domains, when Gateway.VerifyHostnames is on.
	Domains Domains
}

// Domains configures the Domain verification (pkg/domain).
type Domains struct {
	Settings domain.Settings
	Checker  domain.Checker
	Workers  int
}

func (o *Options) defaults() error {
	if o.Hub == nil {
		return errors.New("no hub configuration")
	}
	if o.Identity == "" {
		return errors.New("identity must not be empty (set --identity or POD_NAME)")
	}
	o.Registry = cmp.Or[prometheus.Registerer](o.Registry, ctrlmetrics.Registry)
	if o.Logger.GetSink() == nil {
		o.Logger = ctrl.Log
	}
	o.Resync.Clock = cmp.Or(o.Resync.Clock, o.Clock)
	return nil
}

// Scheme returns the scheme every anchorage client uses, hub and projects alike.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := (&runtime.SchemeBuilder{clientgoscheme.AddToScheme, v1alpha.AddToScheme, gatewayv1.Install}).AddToScheme(s); err != nil {
		panic(fmt.Sprintf("building scheme: %v", err))
	}
	return s
}

// Replica is one assembled anchorage replica, ready to Start.
type Replica struct {
	Options Options
	Manager mcmanager.Manager
	// Provider is the inner kubeconfig provider: it only discovers projects.
	Provider *kubeconfig.Provider
	// Shard gates every project: GetCluster, admission and hub writes.
	Shard *shard.Shard
	// Gateway is the gateway data path.
	Gateway *gateway.Setup
}

// Observer is told of what tests check about a replica's life.
type Observer interface {
	shard.Observer
	ControllersStopping() // called as Start stops the controllers
}

// New checks the hub is reachable and assembles a replica.
func New(ctx context.Context, opts Options) (*Replica, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	if err := checkHub(ctx, opts.Hub, opts.HubCheckTimeout); err != nil {
		return nil, err
	}
	if err := registerBuildInfo(opts.Registry); err != nil {
		return nil, err
	}
	opts.Hub = rest.CopyConfig(opts.Hub)
	userAgent := UserAgent(opts.Identity)
	opts.Hub.UserAgent = cmp.Or(opts.Hub.UserAgent, userAgent)
	// The shard's guards come before the caller's options (docs/design.md, Threat model).
	opts.ProjectRESTOptions = append([]func(*rest.Config) error{shard.RefuseUnsafeRESTConfig, shard.RefuseRedirects,
		shard.BoundPlaneCalls(opts.ProjectCallTimeout, shard.PlaneAnswerCeiling), func(c *rest.Config) error {
			c.UserAgent = userAgent
			return nil
		}}, opts.ProjectRESTOptions...)
	scheme := Scheme()
	provider := kubeconfig.New(kubeconfig.Options{
		Namespace:      opts.ProviderNamespace,
		ClusterOptions: append(append([]cluster.Option{func(o *cluster.Options) { o.Scheme = scheme }}, opts.ClusterOptions...), DiscoveryOnlyClusterOption()),
		RESTOptions:    opts.ProjectRESTOptions,
	})
	// The hub's clock, read from its responses, judges an anchor's minimum age
	// (docs/design.md, Delete).
	hubClock := resync.NewHubClock(opts.Clock)
	opts.Hub.Wrap(hubClock.Wrap)
	sh, err := shard.New(shard.Options{
		Hub: opts.Hub, Namespace: opts.LeaseNamespace, SecretNamespace: opts.ProviderNamespace,
		Pod: opts.Identity, Weight: opts.Weight, Timings: opts.Timings, Clock: opts.Clock,
		Scheme: scheme, ClusterOptions: append([]cluster.Option{resync.StrictCacheOption(), func(o *cluster.Options) { o.MapperProvider = NewKindMapper }}, opts.ClusterOptions...), Registry: opts.Registry,
		Recorder: opts.Recorder, Observer: opts.Observer, Logger: opts.Logger, Exit: opts.Exit, WarmKinds: gateway.WatchedKinds(),
	})
	if err != nil {
		return nil, fmt.Errorf("building the shard: %w", err)
	}
	// The reconcilers' hub client sends each create once, after its live guard; the
	// shard's Lease clients keep client-go's retries (docs/design.md, Residual windows).
	mgrHub := rest.CopyConfig(opts.Hub)
	mgrHub.Wrap(gateway.SendCreatesOnce)
	mgr, err := mcmanager.New(mgrHub, sh, manager.Options{
		Scheme:                 scheme,
		Logger:                 opts.Logger,
		Metrics:                MetricsServerOptions(opts.MetricsAddr, opts.InsecureMetrics),
		HealthProbeBindAddress: opts.HealthAddr,
		// Off: with it on, the kubeconfig provider's Secret watch would run on one replica.
		LeaderElection:          false,
		GracefulShutdownTimeout: ptr.To(opts.Timings.ShutdownDeadline + 10*time.Second),
		Controller:              config.Controller{SkipNameValidation: ptr.To(true)},
		Cache:                   cache.Options{ByObject: HubCacheByObject(opts.ProviderNamespace)},
	}, mcmanager.WithCoordinator(sh))
	if err != nil {
		return nil, fmt.Errorf("building the multicluster manager: %w", err)
	}
	if err := provider.SetupWithManager(ctx, mgr); err != nil {
		return nil, fmt.Errorf("setting up the kubeconfig provider: %w", err)
	}
	refused, err := shard.NewKubeconfigRefusedGauge(opts.Registry)
	if err != nil {
		return nil, err
	}
	local := mgr.GetLocalManager()
	check := &shard.KubeconfigCheck{Reader: local.GetClient(), Events: local.GetEventRecorder("anchorage-shard"), Refused: refused, Key: kubeconfig.DefaultKubeconfigSecretKey}
	if err := check.SetupWithManager(local, opts.ProviderNamespace, kubeconfig.DefaultKubeconfigSecretLabel); err != nil {
		return nil, fmt.Errorf("setting up the kubeconfig check: %w", err)
	}
	anchors, err := resync.AddAnchorCache(ctx, mgr)
	if err != nil {
		return nil, err
	}
	// The hub API server's address is no tenant's backend (docs/design.md, Threat model).
	opts.Gateway.BackendDeniedNetworks = append(slices.Clone(opts.Gateway.BackendDeniedNetworks), netpolicy.HubAPIServerDenied(opts.Hub.Host)...)
	opts.Domains.Checker.Denied = append(slices.Clone(opts.Domains.Checker.Denied), netpolicy.HubAPIServerDenied(opts.Hub.Host)...)
	gw, err := gateway.SetupWithManager(ctx, mgr, gateway.Options{
		Config: opts.Gateway, Clusters: sh, Admission: sh, Registry: opts.Registry, Anchors: anchors,
	})
	if err != nil {
		return nil, fmt.Errorf("setting up the gateway controllers: %w", err)
	}
	if opts.Gateway.VerifyHostnames {
		opts.Logger.Info("Verifying Domains through these nameservers", "nameservers", opts.Domains.Checker.Nameservers)
		checks, err := domain.NewChecks(opts.Registry)
		if err != nil {
			return nil, err
		}
		r := &domain.Reconciler{Clusters: sh, Admission: sh, Settings: opts.Domains.Settings, Prover: opts.Domains.Checker, Clock: cmp.Or[clock.PassiveClock](opts.Clock, clock.RealClock{}), Checks: checks}
		if err := domain.Setup(mgr, r, opts.Domains.Workers, gw.Defer); err != nil {
			return nil, err
		}
	}
	if !opts.Resync.Disabled {
		opts.Resync.ClaimsNamespace = opts.Gateway.HostnameClaimsNamespace
		_, err = resync.Setup(ctx, mgr, resync.Config{
			Options: opts.Resync, Admission: sh, Hub: sh, Holder: sh.Holder, Enqueue: gw.Enqueue, Anchors: anchors,
			RetiredAdmission: resync.CoordinatorAccess{Shard: sh}, RetiredHub: resync.CoordinatorAccess{Shard: sh},
			ProviderNamespace: opts.ProviderNamespace, LeaseNamespace: opts.LeaseNamespace,
			SecretLabel: kubeconfig.DefaultKubeconfigSecretLabel, SecretProjectAnnotation: shard.AnnotationProject,
			Observer: opts.ResyncObserver, HubClock: hubClock, Registry: opts.Registry, Logger: opts.Logger,
		})
		if err != nil {
			return nil, fmt.Errorf("setting up the anchor resync: %w", err)
		}
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, fmt.Errorf("adding health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("member-validity", sh.Ready); err != nil {
		return nil, fmt.Errorf("adding readiness check: %w", err)
	}
	sh.SetHubClients(local.GetClient(), local.GetAPIReader())
	return &Replica{Options: opts, Manager: mgr, Provider: provider, Shard: sh, Gateway: gw}, nil
}

// MetricsServerOptions serves /metrics on addr, over HTTPS and authorized against the hub
// unless insecure.
func MetricsServerOptions(addr string, insecure bool) metricsserver.Options {
	if insecure {
		return metricsserver.Options{BindAddress: addr}
	}
	return metricsserver.Options{
		BindAddress:    addr,
		SecureServing:  true,
		FilterProvider: filters.WithAuthenticationAndAuthorization,
		// HTTP/1.1 only: HTTP/2 rapid reset (CVE-2023-44487, CVE-2023-39325).
		TLSOpts: []func(*tls.Config){func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }},
	}
}

// UserAgent is the user agent of every request a replica sends: "anchorage/<identity>".
func UserAgent(identity string) string { return "anchorage/" + identity }

// Start runs the replica until ctx ends, then hands every project over (Shard.Shutdown)
// while the controllers still serve, and only then stops the manager, which runs on its
// own context for that reason (docs/design.md, Graceful shutdown).
func (r *Replica) Start(ctx context.Context) error {
	run, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	go func() {
		select {
		case <-ctx.Done():
			r.Shard.Stopping()
			r.Shard.Shutdown()
			if r.Options.Observer != nil {
				r.Options.Observer.ControllersStopping()
			}
			cancel()
		case <-run.Done():
		}
	}()
	return r.Manager.Start(run)
}

// checkHub fails, naming the hub, when it does not answer within timeout.
func checkHub(ctx context.Context, cfg *rest.Config, timeout time.Duration) error {
	c := rest.CopyConfig(cfg)
	c.Timeout = timeout
	dc, err := discovery.NewDiscoveryClientForConfig(c)
	if err != nil {
		return fmt.Errorf("hub %s: %w", cfg.Host, err)
	}
	done := make(chan error, 1)
	go func() { _, err := dc.ServerVersion(); done <- err }()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("hub %s unreachable: %w", cfg.Host, err)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("hub %s: %w", cfg.Host, ctx.Err())
	}
}

// HubCacheByObject scopes the hub cache: pkg/gateway's downstream objects, and Secrets
// only in the provider namespace (so a namespaced Role suffices).
func HubCacheByObject(providerNamespace string) map[client.Object]cache.ByObject {
	byObject := gateway.HubCacheByObject()
	byObject[&corev1.Secret{}] = cache.ByObject{Namespaces: map[string]cache.Config{providerNamespace: {}}}
	return byObject
}
