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
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/multicluster-runtime/providers/kubeconfig"

	"anchorage/internal/app"
	"anchorage/internal/cutover"
	"anchorage/pkg/anchor/resync"
	"anchorage/pkg/config"
	"anchorage/pkg/shard"
)

// Output formats of the sweep.
const (
	outputTable = "table"
	outputJSON  = "json"
)

// sweepFlags is the sweep's own command line, besides the common flags; the resync's
// settings are the configuration file's (resync.*).
type sweepFlags struct {
	once, deleteAnchors, dryRun, force, cutOverCheck bool
	projects                                         []string
	output                                           string
}

func (s *sweepFlags) register(fs *pflag.FlagSet) {
	fs.BoolVar(&s.once, "once", false, "run one pass and exit (required, except with --cut-over-check, which implies it)")
	fs.BoolVar(&s.deleteAnchors, "delete", false, "delete what the pass collects; without it the sweep is a dry run that decides and reports")
	fs.BoolVar(&s.dryRun, "dry-run", false, "decide and report, delete nothing (the default without --delete; refused together with it)")
	fs.BoolVar(&s.force, "force", false, "with --delete, delete even while replicas hold valid member Leases (they may be deleting too); without it such a sweep is refused")
	fs.StringSliceVar(&s.projects, "project", nil, "sweep only these projects (as their kubeconfig Secrets name them); repeat the flag or give a comma list (default every project)")
	fs.StringVarP(&s.output, "output", "o", outputTable, "output format: table, or json (JSON Lines: one line per project, then one per anchor without a project Secret; with --cut-over-check one line per row)")
	fs.BoolVar(&s.cutOverCheck, "cut-over-check", false, "instead of a resync pass, read the hub and every project's plane (or --project's), change nothing, and print one row per finding about the cut-over from the previous manager: blocked, changed, adopted or left (docs/operations.md, Cut-over from the previous manager), and one per key of the previous manager's configuration given as --config. Implies --once; refused with --delete. Exit code 3 when a row is blocked")
}

// sweepConfig is a parsed `manager sweep` command line and its configuration file.
type sweepConfig struct {
	opts     resync.Options
	projects []string
	output   string
	force    bool
	loaded   *config.Loaded
	// cutOver, when set, runs the cut-over check with these options instead of a pass.
	cutOver *cutover.Options
}

// config checks the sweep's command line and returns what the sweep runs with.
func (s *sweepFlags) config(l *config.Loaded) (sweepConfig, error) {
	c := sweepConfig{projects: s.projects, output: s.output, force: s.force, loaded: l}
	if s.cutOverCheck {
		return s.cutOverConfig(c)
	}
	if !s.once {
		return c, errors.New("--once is required: the sweep runs one pass (the replicas run the periodic resync)")
	}
	if s.deleteAnchors && s.dryRun {
		return c, errors.New("--delete and --dry-run contradict each other: the sweep is a dry run unless --delete is given")
	}
	if err := s.checkOutputAndProjects(); err != nil {
		return c, err
	}
	c.opts = l.ResyncOptions()
	c.opts.DryRun = !s.deleteAnchors
	c.opts.Disabled = false
	// The sweep runs no period; the resync wants one longer than the confirmation delay.
	c.opts.Period = max(c.opts.Period, 2*c.opts.ConfirmAfter)
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

// cutOverConfig checks a --cut-over-check command line: --once is implied and --delete
// refused; the replicas' gateway settings come from the configuration file.
func (s *sweepFlags) cutOverConfig(c sweepConfig) (sweepConfig, error) {
	if s.deleteAnchors {
		return c, errors.New("--cut-over-check and --delete exclude each other: the check reads and deletes nothing; run the deleting sweep on its own")
	}
	if err := s.checkOutputAndProjects(); err != nil {
		return c, err
	}
	g := c.loaded.Gateway
	c.cutOver = &cutover.Options{GatewayClass: g.GatewayClassName, IssuerName: g.CertificateIssuer.Name,
		DownstreamGatewayClass: g.DownstreamGatewayClassName, Projects: s.projects, BackendReservedDomains: g.BackendReservedDomains}
	return c, nil
}

// keyRows are the cut-over check's rows for the previous manager's configuration keys:
// adopted when mapped, changed when a tenant loses what it did, left otherwise.
func keyRows(keys []config.Key) []cutover.Row {
	rows := make([]cutover.Row, 0, len(keys))
	for _, k := range keys {
		r := cutover.Row{Verdict: cutover.Left, Kind: "ConfigKey", Name: k.Path, Detail: "not served: " + k.Why}
		switch {
		case k.Became != "":
			r.Verdict, r.Detail = cutover.Adopted, "became "+k.Became
		case k.Lost:
			r.Verdict = cutover.Changed
		}
		rows = append(rows, r)
	}
	return rows
}

// exitCutOverBlocked is the exit code of a cut-over check that found a blocked row.
const exitCutOverBlocked = 3

// runCutOverCheck is `manager sweep --cut-over-check`: it runs the check over the hub and
// every project's plane and prints its rows to out.
func runCutOverCheck(ctx context.Context, out io.Writer, cfg *rest.Config, c sweepConfig) error {
	cfg = rest.CopyConfig(cfg)
	cfg.Timeout = cmp.Or(cfg.Timeout, cutover.PlaneTimeout)
	hub, err := client.New(cfg, client.Options{})
	if err != nil {
		return fmt.Errorf("building the hub client: %w", err)
	}
	planes, rows, err := cutover.Planes(ctx, hub, cutover.Secrets{
		Namespace: c.loaded.ProviderNamespace, Label: kubeconfig.DefaultKubeconfigSecretLabel, ProjectAnnotation: shard.AnnotationProject,
	}, c.projects)
	if err != nil {
		return err
	}
	found, err := cutover.Check(ctx, hub, planes, *c.cutOver)
	if err != nil {
		return err
	}
	return writeCutOver(out, slices.Concat(keyRows(c.loaded.Keys), rows, found), c.output)
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
	hub, err := common.hubConfig(c.loaded)
	if err != nil {
		return err
	}
	log := setupLogging(&common.log, cmd.ErrOrStderr(), "sweep")
	if c.cutOver != nil {
		return runCutOverCheck(ctx, out, hub, c)
	}
	if !c.opts.DryRun && !c.force {
		if err := refuseWhileReplicasRun(ctx, hub, c.loaded.LeaseNamespaceOrProvider()); err != nil {
			return err
		}
	}
	p := newSweepPrinter(out, c.output, c.projects)
	reports, unowned, err := resync.Sweep(ctx, resync.SweepOptions{
		Hub: hub, ProviderNamespace: c.loaded.ProviderNamespace, LeaseNamespace: c.loaded.LeaseNamespaceOrProvider(),
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
