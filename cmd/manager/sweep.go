package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/go-logr/zapr"
	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/multicluster-runtime/providers/kubeconfig"

	"anchorage/internal/app"
	"anchorage/pkg/anchor/resync"
	"anchorage/pkg/shard"
)

// resyncFlags are the anchor resync's knobs, shared by the replica and the sweep.
type resyncFlags struct {
	enabled, dryRun                        bool
	period, jitter, confirmAfter, minAge   time.Duration
	stuckAfter, liveTimeout                time.Duration
	maxDeletions, haltAbove, deletionBurst int
	deletionQPS, liveQPS, dependentsQPS    float64
	liveBurst, workers, dependentsBurst    int
	claimPasses                            int
	// ownerKinds and extraDependentKinds: nil takes the resync's defaults.
	ownerKinds, extraDependentKinds []schema.GroupKind
	// prefix is what the flags' names start with ("resync-" on a replica, "" in sweep).
	prefix string
}

// register adds the flags; the replica gets the loop's flags too.
func (r *resyncFlags) register(fs *flag.FlagSet, replica bool) {
	d := resync.Options{}.WithDefaults()
	prefix := "resync-"
	if replica {
		fs.BoolVar(&r.enabled, "resync", true, "run the anchor resync (collects anchors whose upstream owner is gone)")
		fs.DurationVar(&r.period, prefix+"period", d.Period, "time between two resync passes over one project")
		fs.DurationVar(&r.jitter, prefix+"initial-jitter", d.InitialJitter, "upper bound of the random delay of a project's first pass after it is claimed")
		fs.IntVar(&r.workers, prefix+"workers", d.Workers, "resync passes running at once")
	} else {
		prefix = ""
	}
	r.prefix = prefix
	fs.BoolVar(&r.dryRun, prefix+"dry-run", false, "decide and report, delete nothing")
	fs.DurationVar(&r.confirmAfter, prefix+"confirm-after", d.ConfirmAfter, "a proof of absence must hold again this long after it was first seen")
	fs.DurationVar(&r.minAge, prefix+"min-age", d.MinAge, "anchors younger than this are never collected")
	fs.DurationVar(&r.stuckAfter, prefix+"stuck-after", d.StuckAfter, "an owner terminating with our finalizer for longer is reported unknown")
	fs.IntVar(&r.maxDeletions, prefix+"max-deletions-per-pass", d.MaxDeletionsPerPass, "anchors one pass over one project may collect; the rest wait for the next pass")
	fs.IntVar(&r.haltAbove, prefix+"halt-above", d.HaltAbove, "a pass in which more anchors of one project qualify deletes none and raises an alert")
	fs.Float64Var(&r.deletionQPS, prefix+"deletion-qps", float64(d.DeletionQPS), "anchor deletions per second")
	fs.IntVar(&r.deletionBurst, prefix+"deletion-burst", d.DeletionBurst, "burst of anchor deletions")
	fs.Float64Var(&r.liveQPS, prefix+"live-qps", float64(d.LiveQPS), "live reads of one project plane per second")
	fs.IntVar(&r.liveBurst, prefix+"live-burst", d.LiveBurst, "burst of live reads of one project plane")
	fs.DurationVar(&r.liveTimeout, prefix+"live-timeout", d.LiveTimeout, "timeout of each live read of a project plane")
	fs.Float64Var(&r.dependentsQPS, prefix+"dependents-qps", float64(d.DependentsQPS), "hub lists per second reading anchors' dependents")
	fs.IntVar(&r.dependentsBurst, prefix+"dependents-burst", d.DependentsBurst, "burst of hub lists reading anchors' dependents")
	fs.IntVar(&r.claimPasses, prefix+"claim-passes", d.ClaimPasses, "passes a dependent claimed by a live owner may keep a stale anchor before the claim is reported expired (and the pass after collects it)")
	fs.Func(prefix+"owner-kinds", "owner kinds read live on a project's plane, as group/Kind,... (the plane's role must grant get on each); anchors of other kinds stay unknown, kind-not-configured (default "+
		resync.FormatGroupKinds(resync.DefaultLiveOwnerKinds)+"; never Secrets)", func(v string) error {
		kinds, err := groupKindsFlag(v, func(ks []schema.GroupKind) resync.Options { return resync.Options{LiveOwnerKinds: ks} })
		r.ownerKinds = kinds
		return err
	})
	fs.Func(prefix+"extra-dependent-kinds", "hub kinds the dependents check lists besides anchors and what the live path writes, as group/Kind,...: only for legacy dependents of other kinds, and each needs its own list grant (docs/operations.md; default none; never Secrets)", func(v string) error {
		kinds, err := groupKindsFlag(v, func(ks []schema.GroupKind) resync.Options { return resync.Options{ExtraDependentKinds: ks} })
		r.extraDependentKinds = kinds
		return err
	})
}

// groupKindsFlag parses a group/Kind list flag and validates it as the resync option
// opts puts it in. An empty value is an empty list, not the default.
func groupKindsFlag(v string, opts func([]schema.GroupKind) resync.Options) ([]schema.GroupKind, error) {
	kinds, err := resync.ParseGroupKinds(v)
	if err != nil {
		return nil, err
	}
	if kinds == nil {
		kinds = []schema.GroupKind{}
	}
	return kinds, opts(kinds).Validate()
}

// refuseZeroLimits refuses a deletion cap, ceiling, rate or burst of 0. In the options a
// zero takes the default (50, 500, 10/s, 20): an operator who writes 0 to mean "delete
// nothing" would get the default's deletions. The flags already start at the defaults,
// so a 0 here was written on purpose; the error names the flag and the ways that do
// delete nothing.
func (r resyncFlags) refuseZeroLimits() error {
	for _, l := range []struct {
		name string
		zero bool
	}{
		{"max-deletions-per-pass", r.maxDeletions == 0},
		{"halt-above", r.haltAbove == 0},
		{"deletion-qps", r.deletionQPS == 0},
		{"deletion-burst", r.deletionBurst == 0},
	} {
		if l.zero {
			return fmt.Errorf("--%s%s=0 is refused: it would mean the default, not zero; to delete nothing use --%sdry-run (or the deletion switch, docs/recovery.md)", r.prefix, l.name, r.prefix)
		}
	}
	return nil
}

func (r resyncFlags) options() resync.Options {
	return resync.Options{
		Disabled: !r.enabled, DryRun: r.dryRun,
		Period: r.period, InitialJitter: r.jitter, ConfirmAfter: r.confirmAfter, MinAge: r.minAge,
		StuckAfter: r.stuckAfter, LiveTimeout: r.liveTimeout,
		MaxDeletionsPerPass: r.maxDeletions, HaltAbove: r.haltAbove,
		DeletionQPS: float32(r.deletionQPS), DeletionBurst: r.deletionBurst,
		LiveQPS: float32(r.liveQPS), LiveBurst: r.liveBurst, Workers: r.workers,
		DependentsQPS: float32(r.dependentsQPS), DependentsBurst: r.dependentsBurst,
		ClaimPasses:    r.claimPasses,
		LiveOwnerKinds: r.ownerKinds, ExtraDependentKinds: r.extraDependentKinds,
	}
}

// sweepConfig is a parsed `manager sweep` command line.
type sweepConfig struct {
	kubeconfigPath, providerNamespace, leaseNamespace string
	opts                                              resync.Options
	help                                              bool
}

// parseSweep parses and checks the sweep's command line.
func parseSweep(args []string, errOut io.Writer) (sweepConfig, error) {
	var (
		c                   sweepConfig
		once, deleteAnchors bool
		r                   resyncFlags
	)
	fs := flag.NewFlagSet("manager sweep", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&c.kubeconfigPath, "kubeconfig", "", "kubeconfig of the hub cluster (default: in-cluster or $KUBECONFIG)")
	fs.StringVar(&c.providerNamespace, "provider-namespace", "anchorage-system", "hub namespace holding the projects' kubeconfig Secrets")
	fs.StringVar(&c.leaseNamespace, "lease-namespace", "", "hub namespace holding the plane identity records and the deletion switch (default: --provider-namespace)")
	fs.BoolVar(&once, "once", false, "run one pass and exit (required)")
	fs.BoolVar(&deleteAnchors, "delete", false, "delete what the pass collects; without it the sweep is a dry run that decides and reports")
	r.register(fs, false)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(errOut)
			fs.PrintDefaults()
			c.help = true
			return c, nil
		}
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if !once {
		return c, errors.New("--once is required: the sweep runs one pass (the replicas run the periodic resync)")
	}
	if deleteAnchors && r.dryRun {
		return c, errors.New("--delete and --dry-run contradict each other: the sweep is a dry run unless --delete is given")
	}
	if err := r.refuseZeroLimits(); err != nil {
		return c, err
	}
	c.opts = r.options()
	// An operator looking at a backlog deletes nothing by accident.
	c.opts.DryRun = !deleteAnchors
	c.opts.Disabled = false
	// The sweep's confirmation waits on the real clock; only the confirmation delay
	// must be shorter than a period it never runs.
	c.opts.Period = max(c.opts.Period, 2*c.opts.ConfirmAfter)
	if err := c.opts.Validate(); err != nil {
		return c, fmt.Errorf("resync: %w", err)
	}
	return c, nil
}

// runSweep is `manager sweep --once`: one resync pass over every project, without
// sharding, printing the operator's table on out.
func runSweep(args []string, out, errOut io.Writer) error {
	c, err := parseSweep(args, errOut)
	if err != nil || c.help {
		return err
	}
	kubeconfigPath, providerNamespace, leaseNamespace, opts := c.kubeconfigPath, c.providerNamespace, c.leaseNamespace, c.opts
	loading := clientcmd.NewDefaultClientConfigLoadingRules()
	if kubeconfigPath != "" {
		loading.ExplicitPath = kubeconfigPath
	}
	hub, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(loading, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return fmt.Errorf("loading hub kubeconfig: %w", err)
	}
	zl, err := zap.NewProductionConfig().Build()
	if err != nil {
		return fmt.Errorf("building logger: %w", err)
	}
	log := zapr.NewLogger(zl).WithValues("replica", "sweep")
	ctrl.SetLogger(log)
	ctx := ctrl.SetupSignalHandler()
	reports, unowned, err := resync.Sweep(ctx, resync.SweepOptions{
		Hub: hub, ProviderNamespace: providerNamespace, LeaseNamespace: leaseNamespace,
		SecretLabel: kubeconfig.DefaultKubeconfigSecretLabel, SecretProjectAnnotation: shard.AnnotationProject,
		Resync: opts, Scheme: app.Scheme(), Logger: log,
	})
	if werr := resync.WriteTable(out, reports, unowned); werr != nil && err == nil {
		err = werr
	}
	return err
}
