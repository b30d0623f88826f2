// Package app assembles one anchorage replica: the multicluster manager, the project
// provider and the controllers. cmd/manager parses flags into Options and calls Run; the
// integration harness builds several replicas in one process the same way.
package app

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
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
	"anchorage/pkg/gateway"
	"anchorage/pkg/shard"
)

// Options configures one replica. Zero values take the documented defaults.
type Options struct {
	// Hub is the REST config of the hub cluster, where project Secrets, Leases and
	// downstream objects live.
	Hub *rest.Config
	// ProviderNamespace holds the projects' kubeconfig Secrets. Default "anchorage-system".
	ProviderNamespace string
	// LeaseNamespace holds member and project Leases. Default ProviderNamespace.
	LeaseNamespace string
	// Identity names this replica (the pod name in a Deployment). Required.
	Identity string
	// MetricsAddr serves /metrics; "0" turns it off. Default ":8443".
	MetricsAddr string
	// InsecureMetrics serves /metrics in plain HTTP to anyone who can reach the port,
	// for local runs only (--metrics-secure=false). By default it is served over HTTPS,
	// and every scrape must carry a bearer token the hub authenticates (TokenReview)
	// and authorizes for get on /metrics (SubjectAccessReview): series carry project
	// names, which one tenant must not learn of another.
	InsecureMetrics bool
	// HealthAddr serves /healthz and /readyz; "0" turns it off. Default ":8081".
	HealthAddr string
	// Registry receives anchorage's own metrics. Default controller-runtime's global
	// registry; tests running several replicas in one process give each its own.
	Registry prometheus.Registerer
	// Logger is the replica's logger. Default ctrl.Log.
	Logger logr.Logger
	// HubCheckTimeout bounds the start-up probe of the hub. Default 10s.
	HubCheckTimeout time.Duration
	// ProjectCallTimeout is the deadline of each project plane request but watches
	// (shard.BoundPlaneCalls). Default shard.DefaultPlaneCallTimeout.
	ProjectCallTimeout time.Duration
	// ClusterOptions are applied to every project cluster the shard builds for a held
	// project (the kubeconfig provider's clusters are discovery-only).
	ClusterOptions []cluster.Option
	// ProjectRESTOptions adjust the REST config built from each project's kubeconfig
	// (tests wrap the transport to cut a replica off).
	ProjectRESTOptions []func(*rest.Config) error
	// Timings of the sharding protocol; zero fields take client-go's defaults.
	Timings shard.Timings
	// Weight scales this replica's share of projects. Default 1.
	Weight float64
	// Clock is injected into the sharding protocol. Default the real clock.
	Clock clock.WithTicker
	// Recorder, when set, receives a record of every admitted unit of project work.
	Recorder shard.Recorder
	// Observer, when set, is told of the replica's incarnations and of Start stopping
	// the controllers.
	Observer Observer
	// Exit ends the process when a planned hand-over's drain passes its deadline.
	// Default os.Exit(1); in-process test replicas stop abruptly instead.
	Exit func()
	// Gateway configures the gateway data path (gateway classes, controller name,
	// certificate issuer). Zero values take pkg/gateway's defaults.
	Gateway gateway.Config
	// Resync configures the anchor resync, on unless Resync.Disabled. Zero values take
	// pkg/anchor's defaults.
	Resync resync.Options
	// ResyncRecorder, when set, receives every anchor examination of the resync.
	ResyncRecorder resync.ExaminationRecorder
}

func (o *Options) defaults() error {
	if o.Hub == nil {
		return errors.New("no hub configuration")
	}
	if o.Identity == "" {
		return errors.New("identity must not be empty (set --identity or POD_NAME)")
	}
	if o.ProviderNamespace == "" {
		o.ProviderNamespace = "anchorage-system"
	}
	if o.LeaseNamespace == "" {
		o.LeaseNamespace = o.ProviderNamespace
	}
	if o.MetricsAddr == "" {
		o.MetricsAddr = ":8443"
	}
	if o.HealthAddr == "" {
		o.HealthAddr = ":8081"
	}
	if o.Registry == nil {
		o.Registry = ctrlmetrics.Registry
	}
	if o.Logger.GetSink() == nil {
		o.Logger = ctrl.Log
	}
	if o.HubCheckTimeout == 0 {
		o.HubCheckTimeout = 10 * time.Second
	}
	if o.ProjectCallTimeout == 0 {
		o.ProjectCallTimeout = shard.DefaultPlaneCallTimeout
	}
	if o.Resync.Clock == nil {
		// The resync runs on the replica's clock unless given its own (tests step it).
		o.Resync.Clock = o.Clock
	}
	return nil
}

// Scheme returns the scheme every anchorage client uses, hub and projects alike.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v1alpha.AddToScheme, gatewayv1.Install} {
		if err := add(s); err != nil {
			panic(fmt.Sprintf("building scheme: %v", err))
		}
	}
	return s
}

// Replica is one assembled anchorage replica, ready to Start.
type Replica struct {
	Options Options
	Manager mcmanager.Manager
	// Provider is the inner kubeconfig provider: it only discovers projects. Project
	// clusters with informers exist only in Shard, for the projects this replica holds.
	Provider *kubeconfig.Provider
	// Shard gates every project: GetCluster, admission and hub writes.
	Shard *shard.Shard
	// Gateway is the gateway data path; its Enqueue hook reconciles an upstream owner.
	Gateway *gateway.Setup
	// Resync collects orphaned anchors of the held projects; nil when disabled.
	Resync *resync.Resync
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
	if opts.Hub.QPS == 0 {
		// The hub serves every project's downstream objects: client-go's default of 5
		// requests a second throttles a replica holding many projects.
		opts.Hub.QPS, opts.Hub.Burst = 50, 100
	}
	// Every request names the replica, so the API servers' audit logs attribute writes
	// to a replica even where replicas share a project's kubeconfig user.
	userAgent := UserAgent(opts.Identity)
	if opts.Hub.UserAgent == "" {
		opts.Hub.UserAgent = userAgent
	}
	// A kubeconfig that would run a program, read a file or go through a proxy is
	// refused before any client is built for it (shard.RefuseUnsafeRESTConfig).
	// A plane's redirect is never followed (shard.RefuseRedirects); a plane that hangs
	// or answers hugely fails its own calls (shard.BoundPlaneCalls).
	opts.ProjectRESTOptions = append([]func(*rest.Config) error{shard.RefuseUnsafeRESTConfig, shard.RefuseRedirects,
		shard.BoundPlaneCalls(opts.ProjectCallTimeout, shard.PlaneAnswerCeiling), func(c *rest.Config) error {
			c.UserAgent = userAgent
			if c.QPS == 0 {
				// All of a project's work goes through this client, and the live guard reads
				// the owners again before every create: client-go's default of 5 requests a
				// second makes a project with dozens of new proxies wait minutes.
				c.QPS, c.Burst = 50, 100
			}
			return nil
		}}, opts.ProjectRESTOptions...)
	scheme := Scheme()
	provider := kubeconfig.New(kubeconfig.Options{
		Namespace: opts.ProviderNamespace,
		// Discovery only: the shard builds a held project's cluster from the config.
		ClusterOptions: append(append([]cluster.Option{func(o *cluster.Options) { o.Scheme = scheme }}, opts.ClusterOptions...), DiscoveryOnlyClusterOption()),
		RESTOptions:    opts.ProjectRESTOptions,
	})
	// Every hub response's Date header tells the hub's clock, on which the resync judges
	// an anchor's minimum age (finding 12 of issue 19: the local clock may be skewed).
	// The offset is measured on the replica's clock, which the resync runs on too (see
	// defaults). A resync given a clock of its own (tests step one to age anchors) reads
	// the hub's time as that clock plus the offset, so stepping it ages anchors.
	hubClock := resync.NewHubClock(opts.Clock)
	opts.Hub = rest.CopyConfig(opts.Hub)
	opts.Hub.Wrap(hubClock.Wrap)
	sh, err := shard.New(shard.Options{
		Hub: opts.Hub, Namespace: opts.LeaseNamespace, SecretNamespace: opts.ProviderNamespace,
		Pod: opts.Identity, Weight: opts.Weight, Timings: opts.Timings, Clock: opts.Clock,
		// The resync reads owners from project caches without starting informers.
		// Each keeps only the REST mappings of the kinds it resolves (KindMapperOption).
		Scheme: scheme, ClusterOptions: append([]cluster.Option{resync.StrictCacheOption(), KindMapperOption()}, opts.ClusterOptions...), Registry: opts.Registry,
		Recorder: opts.Recorder, Observer: opts.Observer, Logger: opts.Logger, Exit: opts.Exit, WarmKinds: gateway.WatchedKinds(),
	})
	if err != nil {
		return nil, fmt.Errorf("building the shard: %w", err)
	}
	// The shard is both the manager's provider (a gate over project clusters) and its
	// coordinator (engaging controllers only with held projects); the kubeconfig provider
	// beneath it only discovers.
	// The manager's hub client is the one the reconcilers create downstream objects and
	// anchors with: each create is sent once, after its live guard (SendCreatesOnce).
	// The shard's own Lease clients keep client-go's retries.
	mgrHub := rest.CopyConfig(opts.Hub)
	mgrHub.Wrap(gateway.SendCreatesOnce)
	mgr, err := mcmanager.New(mgrHub, sh, manager.Options{
		Scheme:                 scheme,
		Logger:                 opts.Logger,
		Metrics:                MetricsServerOptions(opts.MetricsAddr, opts.InsecureMetrics),
		HealthProbeBindAddress: opts.HealthAddr,
		// Controller-runtime's leader election stays off: with it on, the kubeconfig
		// provider's Secret watcher would run only on one replica (docs/design.md, Sharding).
		LeaderElection: false,
		// A graceful stop hands every project over before releasing the member Lease.
		GracefulShutdownTimeout: ptr.To(opts.Timings.WithDefaults().ShutdownDeadline + 10*time.Second),
		Controller:              config.Controller{SkipNameValidation: ptr.To(true)},
		// The hub cache holds only downstream Gateways and HTTPRoutes, for the watches
		// that map them back to their owners.
		Cache: cache.Options{ByObject: HubCacheByObject(opts.ProviderNamespace)},
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
	// One hub anchor cache, shared by the finalizers' ambiguity check and the resync.
	anchors, err := resync.AddAnchorCache(ctx, mgr)
	if err != nil {
		return nil, err
	}
	gw, err := gateway.SetupWithManager(ctx, mgr, gateway.Options{
		Config: opts.Gateway, Clusters: sh, Admission: sh, Registry: opts.Registry, Anchors: anchors,
	})
	if err != nil {
		return nil, fmt.Errorf("setting up the gateway controllers: %w", err)
	}
	var rs *resync.Resync
	if !opts.Resync.Disabled {
		if opts.Resync.ClaimsNamespace == "" {
			// The resync releases the hostname claims of Gateways gone without their
			// finalizer (resync, claims.go).
			opts.Resync.ClaimsNamespace = opts.Gateway.WithDefaults().HostnameClaimsNamespace
		}
		rs, err = resync.Setup(ctx, mgr, resync.Config{
			Options: opts.Resync, Admission: sh, Hub: sh, Holder: sh.Holder, Enqueue: gw.Enqueue, Anchors: anchors,
			// Retired projects (a tombstone, no Secret) are collected by the coordinator.
			RetiredAdmission: resync.CoordinatorAccess{Shard: sh}, RetiredHub: resync.CoordinatorAccess{Shard: sh},
			ProviderNamespace: opts.ProviderNamespace, LeaseNamespace: opts.LeaseNamespace,
			SecretLabel: kubeconfig.DefaultKubeconfigSecretLabel, SecretProjectAnnotation: shard.AnnotationProject,
			Recorder: opts.ResyncRecorder, HubClock: hubClock, Registry: opts.Registry, Logger: opts.Logger,
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
	sh.SetHubClients(mgr.GetLocalManager().GetClient(), mgr.GetLocalManager().GetAPIReader())
	return &Replica{Options: opts, Manager: mgr, Provider: provider, Shard: sh, Gateway: gw, Resync: rs}, nil
}

// MetricsServerOptions serves /metrics on addr: over HTTPS (a self-signed certificate
// unless one is mounted in the metrics server's certificate directory), authenticated
// and authorized against the hub, unless insecure.
func MetricsServerOptions(addr string, insecure bool) metricsserver.Options {
	if insecure {
		return metricsserver.Options{BindAddress: addr}
	}
	return metricsserver.Options{
		BindAddress:    addr,
		SecureServing:  true,
		FilterProvider: filters.WithAuthenticationAndAuthorization,
		// HTTP/1.1 only: HTTP/2's stream resets let an unauthenticated client make the
		// server work before any token is checked (CVE-2023-44487, CVE-2023-39325).
		TLSOpts: []func(*tls.Config){func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }},
	}
}

// UserAgent is the user agent of every request a replica sends: "anchorage/<identity>".
func UserAgent(identity string) string { return "anchorage/" + identity }

// Start runs the replica until ctx ends, then stops in this order: the shard learns the
// process is stopping (Shard.Stopping) and hands every project over (Shard.Shutdown)
// while the controllers still serve, and only then are the controllers and the rest of
// the manager stopped. The manager runs on its own context for that reason.
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

// checkHub fails fast, with a message an operator can act on, when the hub cannot be
// reached: a replica that starts anyway would only report unready forever.
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

// HubCacheByObject scopes the hub cache: Secrets only in the provider namespace (so a
// namespaced Role suffices), downstream Gateways and HTTPRoutes only.
func HubCacheByObject(providerNamespace string) map[client.Object]cache.ByObject {
	byObject := gateway.HubCacheByObject()
	byObject[&corev1.Secret{}] = cache.ByObject{Namespaces: map[string]cache.Config{providerNamespace: {}}}
	return byObject
}
