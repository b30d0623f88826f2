// Command baseline-manager runs anchorage's reconcilers (pkg/gateway and the anchor
// resync of pkg/anchor) under multicluster-runtime v0.23.3's coordinator/sharded in
// place of pkg/shard: the baseline bench/ measures anchorage against. It is built only
// by the bench harness; nothing of it is reachable from cmd/manager.
//
// Admission is open (the sharded coordinator engages controllers only for clusters
// whose fence Lease it holds, and has no per-reconcile gate); every reconcile is
// recorded in the same record-file format as bin/manager's.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/go-logr/zapr"
	"go.uber.org/zap"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	"sigs.k8s.io/multicluster-runtime/pkg/manager/coordinator/sharded"
	"sigs.k8s.io/multicluster-runtime/pkg/manager/coordinator/sharded/peers"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
	"sigs.k8s.io/multicluster-runtime/providers/kubeconfig"

	"anchorage/internal/app"
	"anchorage/pkg/anchor/resync"
	"anchorage/pkg/gateway"
	"anchorage/pkg/shard"
)

type flags struct {
	kubeconfig, identity, providerNamespace, leaseNamespace, recordFile string
	leaseDuration, renew, probe, fenceThrottle                          time.Duration
	resyncPeriod, resyncJitter, resyncConfirmAfter, resyncMinAge        time.Duration
	resync                                                              bool
	gatewayWorkers                                                      int
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "baseline-manager: %v\n", err)
		os.Exit(1)
	}
}

func parse() (flags, error) {
	var f flags
	fs := flag.NewFlagSet("baseline-manager", flag.ContinueOnError)
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "hub kubeconfig")
	fs.StringVar(&f.identity, "identity", "", "this replica's name (peer ID)")
	fs.StringVar(&f.providerNamespace, "provider-namespace", "anchorage-system", "namespace of the project kubeconfig Secrets")
	fs.StringVar(&f.leaseNamespace, "lease-namespace", "", "namespace of the peer and fence Leases (default --provider-namespace)")
	fs.StringVar(&f.recordFile, "record-file", "", "record file (JSON lines)")
	fs.DurationVar(&f.leaseDuration, "lease-duration", 3*time.Second, "fence Lease duration")
	fs.DurationVar(&f.renew, "renew", time.Second, "fence Lease renew period")
	fs.DurationVar(&f.probe, "probe", time.Second, "synchronization probe period")
	fs.DurationVar(&f.fenceThrottle, "fence-throttle", 750*time.Millisecond, "back-off after a failed fence acquisition")
	fs.BoolVar(&f.resync, "resync", true, "run the anchor resync")
	fs.IntVar(&f.gatewayWorkers, "gateway-workers", gateway.DefaultConfig().Workers, "reconciles each gateway controller runs at once (the manager's --gateway-workers, same default)")
	fs.DurationVar(&f.resyncPeriod, "resync-period", resync.DefaultOptions().Period, "resync period")
	fs.DurationVar(&f.resyncJitter, "resync-initial-jitter", resync.DefaultOptions().InitialJitter, "resync initial jitter")
	fs.DurationVar(&f.resyncConfirmAfter, "resync-confirm-after", resync.DefaultOptions().ConfirmAfter, "resync confirm-after")
	fs.DurationVar(&f.resyncMinAge, "resync-min-age", resync.DefaultOptions().MinAge, "resync min age")
	if err := fs.Parse(os.Args[1:]); err != nil {
		return f, err
	}
	if f.identity == "" {
		return f, errors.New("--identity is required")
	}
	if f.leaseNamespace == "" {
		f.leaseNamespace = f.providerNamespace
	}
	if f.gatewayWorkers < 1 {
		return f, fmt.Errorf("--gateway-workers must be at least 1, got %d", f.gatewayWorkers)
	}
	return f, nil
}

func run() error {
	f, err := parse()
	if err != nil {
		return err
	}
	zl, err := zap.NewProduction()
	if err != nil {
		return err
	}
	log := zapr.NewLogger(zl).WithValues("replica", f.identity)
	ctrl.SetLogger(log)
	hub, err := clientcmd.BuildConfigFromFlags("", f.kubeconfig)
	if err != nil {
		return fmt.Errorf("loading hub kubeconfig: %w", err)
	}
	hub.QPS, hub.Burst, hub.UserAgent = 50, 100, app.UserAgent(f.identity)
	scheme := app.Scheme()
	// The coordinator renews one fence Lease per held cluster every --renew: at 100
	// clusters that alone is the reconcilers' whole 50/s budget. Its client gets no
	// client-side limit, so what the bench measures is the coordinator's own demand.
	leases := rest.CopyConfig(hub)
	leases.QPS = -1
	kube, err := client.New(leases, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}

	// The peer registry defaults its ID to the host name; replicas on one host need
	// their own. Its TTL (30 s) and renew period (10 s) are fixed in v0.23.3.
	registry := peers.NewLeaseRegistry(kube, f.leaseNamespace, "mcr-peer", f.identity, 1, log)
	coord := sharded.New(kube, log,
		sharded.WithPeerRegistry(registry),
		sharded.WithShardLease(f.leaseNamespace, "mcr-shard"),
		sharded.WithLeaseTimings(f.leaseDuration, f.renew, f.fenceThrottle),
		sharded.WithSynchronizationIntervals(f.probe, 3*f.probe),
	)
	provider := kubeconfig.New(kubeconfig.Options{
		Namespace:      f.providerNamespace,
		ClusterOptions: []cluster.Option{func(o *cluster.Options) { o.Scheme = scheme }},
		RESTOptions: []func(*rest.Config) error{func(c *rest.Config) error {
			c.UserAgent = app.UserAgent(f.identity)
			return nil
		}},
	})
	mgr, err := mcmanager.New(hub, provider, manager.Options{
		Scheme: scheme, Logger: log,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		LeaderElection:         false,
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
		Cache:                  cache.Options{ByObject: app.HubCacheByObject(f.providerNamespace)},
	}, mcmanager.WithCoordinator(coord))
	if err != nil {
		return err
	}
	ctx := ctrl.SetupSignalHandler()
	if err := provider.SetupWithManager(ctx, mgr); err != nil {
		return err
	}
	var rec shard.Recorder = discard{}
	if f.recordFile != "" {
		fr, err := shard.NewFileRecorder(f.recordFile)
		if err != nil {
			return err
		}
		defer fr.Close()
		rec = fr
	}
	// The coordinator engages controllers only with the clusters whose fence it holds,
	// but requests also come from hub watches (downstream objects mapped back to their
	// owners): admission refuses every cluster the coordinator has not engaged here,
	// the closest a user of coordinator/sharded gets to "do I own this project".
	engaged := &engagedSet{names: map[multicluster.ClusterName]int{}}
	if err := mgr.Add(engaged); err != nil {
		return err
	}
	adm := &recordingAdmission{holder: f.identity, rec: rec, engaged: engaged}
	clusters := gateway.ManagerClusters(mgr)
	gc := gateway.DefaultConfig()
	gc.Workers, gc.AssumeWrittenIsProgrammed = f.gatewayWorkers, true
	gw, err := gateway.SetupWithManager(ctx, mgr, gateway.Options{Config: gc, Clusters: clusters, Admission: adm})
	if err != nil {
		return err
	}
	ro := resync.DefaultOptions()
	ro.Disabled = !f.resync
	ro.Period, ro.InitialJitter, ro.ConfirmAfter, ro.MinAge = f.resyncPeriod, f.resyncJitter, f.resyncConfirmAfter, f.resyncMinAge
	if f.resync {
		if _, err := resync.Setup(ctx, mgr, resync.Config{
			Options: ro, Admission: adm, Hub: clusters, Holder: func() string { return f.identity }, Enqueue: gw.Enqueue,
			ProviderNamespace: f.providerNamespace, LeaseNamespace: f.leaseNamespace,
			SecretLabel: kubeconfig.DefaultKubeconfigSecretLabel, SecretProjectAnnotation: shard.AnnotationProject, Logger: log,
		}); err != nil {
			return err
		}
	}
	log.Info("Starting baseline replica (multicluster-runtime coordinator/sharded)")
	if err := mgr.Start(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// engagedSet tracks the clusters the coordinator has engaged on this replica.
type engagedSet struct {
	mu    sync.Mutex
	names map[multicluster.ClusterName]int
}

// Start implements manager.Runnable; the set has no work of its own.
func (e *engagedSet) Start(ctx context.Context) error {
	<-ctx.Done()
	return nil
}

// Engage implements multicluster.Aware: the cluster counts as engaged until ctx ends.
func (e *engagedSet) Engage(ctx context.Context, name multicluster.ClusterName, _ cluster.Cluster) error {
	e.mu.Lock()
	e.names[name]++
	e.mu.Unlock()
	context.AfterFunc(ctx, func() {
		e.mu.Lock()
		if e.names[name]--; e.names[name] <= 0 {
			delete(e.names, name)
		}
		e.mu.Unlock()
	})
	return nil
}

func (e *engagedSet) has(name string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.names[multicluster.ClusterName(name)] > 0
}

// recordingAdmission admits work for the engaged clusters (the sharded coordinator
// has no per-reconcile gate and no validity) and records each unit of work.
type recordingAdmission struct {
	holder  string
	rec     shard.Recorder
	engaged *engagedSet
}

func (a *recordingAdmission) Enter(ctx context.Context, project string) (context.Context, func(), error) {
	if !a.engaged.has(project) {
		return nil, nil, fmt.Errorf("cluster %q is not engaged on this replica: %w", project, multicluster.ErrClusterNotFound)
	}
	start := time.Now()
	var once sync.Once
	return ctx, func() {
		once.Do(func() {
			a.rec.Record(shard.Record{Holder: a.holder, Project: project, Start: start, End: time.Now()})
		})
	}, nil
}

type discard struct{}

func (discard) Record(shard.Record) {}
