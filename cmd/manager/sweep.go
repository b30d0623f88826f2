package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/multicluster-runtime/providers/kubeconfig"

	"anchorage/internal/app"
	"anchorage/internal/cutover"
	"anchorage/pkg/anchor/resync"
	"anchorage/pkg/shard"
)

// resyncFlags are the anchor resync's knobs, shared by the replica and the sweep; the
// resync's other options keep their defaults (resync.Options.WithDefaults).
type resyncFlags struct {
	enabled, dryRun                      bool
	period, jitter, confirmAfter, minAge time.Duration
	maxDeletions, haltAbove, workers     int
	deletionQPS                          float64
	// ownerKinds and extraDependentKinds: nil takes the resync's defaults.
	ownerKinds, extraDependentKinds kindsValue
	// prefix starts the flags' names: "resync-" on a replica, "" in sweep.
	prefix string
}

// kindsValue is a group/Kind list flag, validated as the resync option it fills.
type kindsValue struct {
	kinds  []schema.GroupKind
	def    string // shown while the flag is not given
	option func([]schema.GroupKind) resync.Options
}

// Set parses a group/Kind list. An empty value is an empty list, not the default.
func (k *kindsValue) Set(v string) error {
	kinds, err := resync.ParseGroupKinds(v)
	if err != nil {
		return err
	}
	if kinds == nil {
		kinds = []schema.GroupKind{}
	}
	if err := k.option(kinds).Validate(); err != nil {
		return err
	}
	k.kinds = kinds
	return nil
}

func (k *kindsValue) String() string {
	if k.kinds == nil {
		return k.def
	}
	return resync.FormatGroupKinds(k.kinds)
}

func (k *kindsValue) Type() string { return "group/Kind,..." }

// register adds the flags; the replica gets the loop's flags too.
func (r *resyncFlags) register(fs *pflag.FlagSet, replica bool) {
	d := resync.Options{}.WithDefaults()
	dryRunUsage := "decide and report, delete nothing"
	if replica {
		r.prefix = "resync-"
		fs.BoolVar(&r.enabled, "resync", true, "run the anchor resync (collects anchors whose upstream owner is gone)")
		durationVar(fs, &r.period, "resync-period", d.Period, "time between two resync passes over one project")
		durationVar(fs, &r.jitter, "resync-initial-jitter", d.InitialJitter, "upper bound of the random delay of a project's first pass after it is claimed")
		fs.IntVar(&r.workers, "resync-workers", d.Workers, "resync passes running at once")
	} else {
		dryRunUsage += " (the default without --delete; refused together with it)"
	}
	fs.BoolVar(&r.dryRun, r.prefix+"dry-run", false, dryRunUsage)
	durationVar(fs, &r.confirmAfter, r.prefix+"confirm-after", d.ConfirmAfter, "a proof of absence must hold again this long after it was first seen")
	durationVar(fs, &r.minAge, r.prefix+"min-age", d.MinAge, "anchors younger than this are never collected")
	fs.IntVar(&r.maxDeletions, r.prefix+"max-deletions-per-pass", d.MaxDeletionsPerPass, "anchors one pass over one project may collect; the rest wait for the next pass")
	fs.IntVar(&r.haltAbove, r.prefix+"halt-above", d.HaltAbove, "a pass in which more anchors of one project can be collected deletes none and raises an alert (terminating anchors and anchors kept for their dependents do not count)")
	fs.Float64Var(&r.deletionQPS, r.prefix+"deletion-qps", float64(d.DeletionQPS), "anchor deletions per second")
	r.ownerKinds = kindsValue{def: resync.FormatGroupKinds(resync.DefaultLiveOwnerKinds),
		option: func(ks []schema.GroupKind) resync.Options { return resync.Options{LiveOwnerKinds: ks} }}
	fs.Var(&r.ownerKinds, r.prefix+"owner-kinds", "owner kinds (group/Kind,..., Kind alone for the core group) read live on a project's plane to prove them absent; an anchor of any other kind stays unknown (kind-not-configured, the detail names what to grant). Each needs get on it in the plane's role (docs/operations.md, Owner kinds beyond the defaults). Secrets are refused")
	r.extraDependentKinds = kindsValue{
		option: func(ks []schema.GroupKind) resync.Options { return resync.Options{ExtraDependentKinds: ks} }}
	fs.Var(&r.extraDependentKinds, r.prefix+"extra-dependent-kinds", "off by default: hub kinds (group/Kind,...) the dependents check lists besides anchors and what the live path writes, for legacy dependents of other kinds (docs/operations.md, Legacy dependents of other kinds). Each needs its own list grant. Secrets and wildcards are refused")
}

// refuseZeroLimits refuses a deletion cap, ceiling or rate of 0, which the options would
// turn into the default, naming the ways that do delete nothing.
func (r resyncFlags) refuseZeroLimits() error {
	for _, l := range []struct {
		name string
		zero bool
	}{
		{"max-deletions-per-pass", r.maxDeletions == 0},
		{"halt-above", r.haltAbove == 0},
		{"deletion-qps", r.deletionQPS == 0},
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
		MaxDeletionsPerPass: r.maxDeletions, HaltAbove: r.haltAbove,
		DeletionQPS: float32(r.deletionQPS), Workers: r.workers,
		LiveOwnerKinds: r.ownerKinds.kinds, ExtraDependentKinds: r.extraDependentKinds.kinds,
	}
}

// Output formats of the sweep.
const (
	outputTable = "table"
	outputJSON  = "json"
)

// sweepFlags is the sweep's own command line, besides the common flags.
type sweepFlags struct {
	once, deleteAnchors, force bool
	projects                   []string
	output                     string
	resync                     resyncFlags
	cutOverCheck               bool
	cutOver                    cutover.Options // the replicas' settings the check compares with
}

// cutOverFlag is a flag only --cut-over-check reads: a replica's gateway flag of the same
// name, with its own usage, setting a field of the check's options.
type cutOverFlag struct {
	gatewayFlag
	usage string
	value *string
}

func (s *sweepFlags) cutOverFlags() []cutOverFlag {
	return []cutOverFlag{
		{gatewayFlagNamed("gateway-class"), "with --cut-over-check: the replicas' --gateway-class, the class the proxies' upstream Gateways get", &s.cutOver.GatewayClass},
		{gatewayFlagNamed("downstream-gateway-class"), "with --cut-over-check: the replicas' --downstream-gateway-class, the class the downstream Gateways on the hub get", &s.cutOver.DownstreamGatewayClass},
		{gatewayFlagNamed("issuer-name"), "with --cut-over-check: the replicas' --issuer-name, the issuer the downstream Certificates name", &s.cutOver.IssuerName},
	}
}

func (s *sweepFlags) register(fs *pflag.FlagSet) {
	fs.BoolVar(&s.once, "once", false, "run one pass and exit (required, except with --cut-over-check, which implies it)")
	fs.BoolVar(&s.deleteAnchors, "delete", false, "delete what the pass collects; without it the sweep is a dry run that decides and reports")
	fs.BoolVar(&s.force, "force", false, "with --delete, delete even while replicas hold valid member Leases (they may be deleting too); without it such a sweep is refused")
	fs.StringSliceVar(&s.projects, "project", nil, "sweep only these projects (as their kubeconfig Secrets name them); repeat the flag or give a comma list (default every project)")
	fs.StringVarP(&s.output, "output", "o", outputTable, "output format: table, or json (JSON Lines: one line per project, then one per anchor without a project Secret; with --cut-over-check one line per row)")
	fs.BoolVar(&s.cutOverCheck, "cut-over-check", false, "instead of a resync pass, read the hub and every project's plane (or --project's), change nothing, and print one row per finding about the cut-over from the previous manager: blocked, changed, adopted or left (docs/operations.md, Cut-over from the previous manager). Implies --once; refused with --delete; the resync flags are not read. Exit code 3 when a row is blocked")
	for _, f := range s.cutOverFlags() {
		fs.StringVar(f.value, f.name, f.def, f.usage)
	}
	s.resync.register(fs, false)
}

// sweepConfig is a parsed `manager sweep` command line.
type sweepConfig struct {
	opts     resync.Options
	projects []string
	output   string
	force    bool
	// cutOver, when set, runs the cut-over check with these options instead of a pass.
	cutOver *cutover.Options
}

// config checks the sweep's command line, parsed by fs, and returns what the sweep runs with.
func (s *sweepFlags) config(fs *pflag.FlagSet) (sweepConfig, error) {
	c := sweepConfig{projects: s.projects, output: s.output, force: s.force}
	if s.cutOverCheck {
		return s.cutOverConfig(c)
	}
	for _, f := range s.cutOverFlags() {
		if fs.Changed(f.name) {
			return c, fmt.Errorf("--%s is only read by --cut-over-check (a resync pass does not program gateways)", f.name)
		}
	}
	if !s.once {
		return c, errors.New("--once is required: the sweep runs one pass (the replicas run the periodic resync)")
	}
	if s.deleteAnchors && s.resync.dryRun {
		return c, errors.New("--delete and --dry-run contradict each other: the sweep is a dry run unless --delete is given")
	}
	if err := s.checkOutputAndProjects(); err != nil {
		return c, err
	}
	if err := s.resync.refuseZeroLimits(); err != nil {
		return c, err
	}
	c.opts = s.resync.options()
	c.opts.DryRun = !s.deleteAnchors
	c.opts.Disabled = false
	// The sweep runs no period; Validate wants one longer than the confirmation delay.
	c.opts.Period = max(c.opts.Period, 2*c.opts.ConfirmAfter)
	if err := c.opts.Validate(); err != nil {
		return c, fmt.Errorf("resync: %w", err)
	}
	return c, nil
}

// checkOutputAndProjects checks --output and --project, for a pass and the check alike.
func (s *sweepFlags) checkOutputAndProjects() error {
	if s.output != outputTable && s.output != outputJSON {
		return fmt.Errorf("--output %q: want table or json", s.output)
	}
	if slices.Contains(s.projects, "") {
		return errors.New("--project: an empty project name")
	}
	return nil
}

// cutOverConfig checks a --cut-over-check command line: --once is implied, --delete
// refused, the resync flags not read, and each gateway value checked as the replicas do.
func (s *sweepFlags) cutOverConfig(c sweepConfig) (sweepConfig, error) {
	if s.deleteAnchors {
		return c, errors.New("--cut-over-check and --delete exclude each other: the check reads and deletes nothing; run the deleting sweep on its own")
	}
	if err := s.checkOutputAndProjects(); err != nil {
		return c, err
	}
	for _, f := range s.cutOverFlags() {
		if err := f.check(*f.value); err != nil {
			return c, err
		}
	}
	opts := s.cutOver
	opts.Projects = s.projects
	c.cutOver = &opts
	return c, nil
}

// exitCutOverBlocked is the exit code of a cut-over check that found a blocked row.
const exitCutOverBlocked = 3

// runCutOverCheck is `manager sweep --cut-over-check`: it runs the check over the hub and
// every project's plane and prints its rows to out.
func runCutOverCheck(ctx context.Context, out io.Writer, cfg *rest.Config, providerNamespace string, c sweepConfig) error {
	cfg = rest.CopyConfig(cfg)
	cfg.Timeout = cmp.Or(cfg.Timeout, cutover.PlaneTimeout)
	hub, err := client.New(cfg, client.Options{})
	if err != nil {
		return fmt.Errorf("building the hub client: %w", err)
	}
	planes, rows, err := cutover.Planes(ctx, hub, cutover.Secrets{
		Namespace: providerNamespace, Label: kubeconfig.DefaultKubeconfigSecretLabel, ProjectAnnotation: shard.AnnotationProject,
	}, c.projects)
	if err != nil {
		return err
	}
	found, err := cutover.Check(ctx, hub, planes, *c.cutOver)
	if err != nil {
		return err
	}
	return writeCutOver(out, append(rows, found...), c.output)
}

// writeCutOver prints the rows, sorted, and returns an exitError (exitCutOverBlocked)
// when some are blocked.
func writeCutOver(out io.Writer, rows []cutover.Row, format string) error {
	cutover.Sort(rows)
	if err := cutover.Write(out, rows, format); err != nil {
		return err
	}
	if n := cutover.CountBlocked(rows); n > 0 {
		return &exitError{code: exitCutOverBlocked, err: fmt.Errorf("cut-over blocked: %d of %d rows are blocked (printed first); resolve them before anchorage starts", n, len(rows))}
	}
	return nil
}

// runSweep is `manager sweep`: one resync pass over every project (or those --project
// names) without sharding, or the cut-over check.
func runSweep(cmd *cobra.Command, common *commonFlags, c sweepConfig) error {
	ctx, out := cmd.Context(), cmd.OutOrStdout()
	hub, err := common.hubConfig()
	if err != nil {
		return err
	}
	log := setupLogging(&common.log, cmd.ErrOrStderr(), "sweep")
	if c.cutOver != nil {
		return runCutOverCheck(ctx, out, hub, common.providerNamespace, c)
	}
	if !c.opts.DryRun && !c.force {
		if err := refuseWhileReplicasRun(ctx, hub, cmp.Or(common.leaseNamespace, common.providerNamespace)); err != nil {
			return err
		}
	}
	p := newSweepPrinter(out, c.output, c.projects)
	reports, unowned, err := resync.Sweep(ctx, resync.SweepOptions{
		Hub: hub, ProviderNamespace: common.providerNamespace, LeaseNamespace: common.leaseNamespace,
		SecretLabel: kubeconfig.DefaultKubeconfigSecretLabel, SecretProjectAnnotation: shard.AnnotationProject,
		Resync: c.opts, Scheme: app.Scheme(), Logger: log,
		Projects: c.projects, OnReport: p.report,
	})
	return cmp.Or(err, p.finish(reports, unowned))
}

// refuseWhileReplicasRun refuses a deleting sweep while any member Lease in namespace may
// be valid: two deleters at once break the per-pass cap and ceiling each one keeps.
func refuseWhileReplicasRun(ctx context.Context, hub *rest.Config, namespace string) error {
	cs, err := kubernetes.NewForConfig(hub)
	if err != nil {
		return fmt.Errorf("building the hub client: %w", err)
	}
	leases, err := cs.CoordinationV1().Leases(namespace).List(ctx, metav1.ListOptions{LabelSelector: shard.LabelRole + "=" + shard.RoleMember})
	if err != nil {
		return fmt.Errorf("listing member Leases in %s (to check no replica runs): %w", namespace, err)
	}
	if pods := shard.ValidMembers(leases.Items, time.Now()); len(pods) > 0 {
		return fmt.Errorf("refusing to delete: replicas %s hold valid member Leases in %s and resync the same anchors; scale the Deployment to 0, or pass --force",
			strings.Join(pods, ", "), namespace)
	}
	return nil
}
