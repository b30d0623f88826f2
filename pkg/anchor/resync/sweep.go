package resync

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"anchorage/pkg/anchor"
)

// SweepOptions configure Sweep.
type SweepOptions struct {
	// Hub is the hub's REST config.
	Hub *rest.Config
	// ProviderNamespace holds the kubeconfig Secrets; LeaseNamespace the plane identity
	// records and the deletion switch. LeaseNamespace defaults to ProviderNamespace.
	ProviderNamespace string
	LeaseNamespace    string
	// SecretLabel marks kubeconfig Secrets. Default DefaultSecretLabel.
	SecretLabel string
	// SecretProjectAnnotation, on a Secret, names its project.
	SecretProjectAnnotation string
	// Resync holds the decision and throttle knobs (DryRun included). Its Clock must be
	// real: the sweep waits for the confirmation delay.
	Resync Options
	// Scheme for the clients. Default client-go's.
	Scheme *runtime.Scheme
	Logger logr.Logger
	// Projects, when not empty, limits the sweep to these projects (named as their
	// kubeconfig Secrets name them); anchors of other projects are neither passed over
	// nor reported.
	Projects []string
	// OnReport, when set, receives each project's report as soon as it is final (after
	// its confirmation round when it needs one), so a caller can stream rows. Sweep
	// still returns every report.
	OnReport func(PassReport)
}

// Sweep runs one resync pass, without sharding, over every project that has a
// kubeconfig Secret, and reports the anchors of projects that have none (never touched).
// Proofs of absence seen in a first round are confirmed by a second round after the
// confirmation delay, so a sweep takes about Resync.ConfirmAfter. Owners are read live
// (a one-shot sweep has no caches). It is meant for an operator, against a hub where the
// replicas are stopped or set to dry-run, or with --dry-run.
func Sweep(ctx context.Context, opts SweepOptions) ([]PassReport, []AnchorReport, error) {
	ro := opts.Resync.WithDefaults()
	if err := ro.Validate(); err != nil {
		return nil, nil, fmt.Errorf("resync options: %w", err)
	}
	if opts.Scheme == nil {
		opts.Scheme = runtime.NewScheme()
		if err := corev1.AddToScheme(opts.Scheme); err != nil {
			return nil, nil, err
		}
	}
	if opts.LeaseNamespace == "" {
		opts.LeaseNamespace = opts.ProviderNamespace
	}
	if opts.SecretLabel == "" {
		opts.SecretLabel = DefaultSecretLabel
	}
	log := opts.Logger
	if log.GetSink() == nil {
		log = logr.Discard()
	}
	hub, err := client.New(opts.Hub, client.Options{Scheme: opts.Scheme})
	if err != nil {
		return nil, nil, fmt.Errorf("building the hub client: %w", err)
	}
	deps, err := NewHubDependentLister(opts.Hub, nil, DependentKindsOf(ro.Writes, ro.ExtraDependentKinds), ro.DependentsQPS, ro.DependentsBurst)
	if err != nil {
		return nil, nil, err
	}
	anchors, _, err := listAnchors(ctx, hub)
	if err != nil {
		return nil, nil, err
	}
	sec := secrets{namespace: opts.ProviderNamespace, label: opts.SecretLabel, projectAnnotation: opts.SecretProjectAnnotation}
	planes, duplicates, err := sweepPlanes(ctx, hub, sec, opts.Scheme)
	if err != nil {
		return nil, nil, err
	}
	// Projects with no Secret that a tombstone retires are passed over too, with no
	// plane: their anchors are collected once the retirement is confirmed.
	retired, err := tombstones(ctx, hub, opts.LeaseNamespace)
	if err != nil {
		return nil, nil, err
	}
	for project := range anchors.byProject {
		if _, ok := planes[project]; ok || duplicates[project] != nil || retired[project] == "" {
			continue
		}
		planes[project] = Plane{}
	}

	var recorder events.EventRecorder
	if !ro.DryRun {
		cs, err := kubernetes.NewForConfig(opts.Hub)
		if err != nil {
			return nil, nil, err
		}
		b := events.NewBroadcaster(&events.EventSinkImpl{Interface: cs.EventsV1()})
		b.StartRecordingToSink(ctx.Done())
		defer b.Shutdown()
		recorder = b.NewRecorder(opts.Scheme, "anchorage-sweep")
	}

	shared := passDeps{
		holder: "sweep", admission: openAdmission{}, hub: staticHub{c: hub},
		anchors: anchors, dependents: deps, secrets: sec, leaseNamespace: opts.LeaseNamespace,
		events: recorder, opts: ro, deletes: newDeletionLimiter(ro), recordIdentity: !ro.DryRun,
	}
	passes := map[string]*projectMemory{}
	run := func(project string, plane Plane) (PassReport, error) {
		mem := passes[project]
		if mem == nil {
			mem = newProjectMemory(ro)
			passes[project] = mem
		}
		p := newPass(shared, project, plane, mem, log.WithValues("project", project))
		return p.run(ctx)
	}

	names := make([]string, 0, len(planes))
	for p := range planes {
		names = append(names, p)
	}
	sort.Strings(names)
	reports := map[string]PassReport{}
	for project, names := range duplicates {
		reports[project] = PassReport{
			Project: project, Holder: "sweep", Start: ro.Clock.Now(), DryRun: ro.DryRun, Plane: PlaneUnverified,
			Aborted: fmt.Sprintf("named by %d kubeconfig Secrets (%s): skipped until only one names it", len(names), strings.Join(names, ", ")),
		}
	}
	var errs []error
	due := time.Time{}
	for _, project := range names {
		rep, err := run(project, planes[project])
		if err != nil {
			errs = append(errs, fmt.Errorf("project %q: %w", project, err))
		}
		reports[project] = rep
		if !rep.PendingConfirmation.IsZero() && rep.PendingConfirmation.After(due) {
			due = rep.PendingConfirmation
		}
	}
	if !due.IsZero() {
		select {
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		case <-ro.Clock.After(due.Sub(ro.Clock.Now())):
		}
		for _, project := range names {
			if reports[project].PendingConfirmation.IsZero() {
				continue
			}
			rep, err := run(project, planes[project])
			if err != nil {
				errs = append(errs, fmt.Errorf("project %q: %w", project, err))
			}
			reports[project] = rep
		}
	}
	out := make([]PassReport, 0, len(reports))
	for _, project := range names {
		out = append(out, reports[project])
	}
	for project := range duplicates {
		out = append(out, reports[project])
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Project < out[j].Project })
	return out, unownedReports(anchors, reports, ro.Clock.Now()), errors.Join(errs...)
}

// sweepPlanes builds a live-only Plane per project from the kubeconfig Secrets, each
// carrying the UID of the Secret it was built from. A project named by two or more
// Secrets gets no plane: it is returned in duplicates with the Secrets' names, to be
// skipped and reported (as the shard refuses to engage it).
func sweepPlanes(ctx context.Context, hub client.Reader, sec secrets, scheme *runtime.Scheme) (map[string]Plane, map[string][]string, error) {
	list := &corev1.SecretList{}
	if err := hub.List(ctx, list, client.InNamespace(sec.namespace), client.MatchingLabels{sec.label: "true"}); err != nil {
		return nil, nil, fmt.Errorf("listing kubeconfig Secrets in %s: %w", sec.namespace, err)
	}
	byProject := map[string][]*corev1.Secret{}
	for i := range list.Items {
		s := &list.Items[i]
		byProject[sec.projectOf(s)] = append(byProject[sec.projectOf(s)], s)
	}
	planes, duplicates := map[string]Plane{}, map[string][]string{}
	for project, named := range byProject {
		if len(named) > 1 {
			for _, s := range named {
				duplicates[project] = append(duplicates[project], s.Name)
			}
			sort.Strings(duplicates[project])
			continue
		}
		s := named[0]
		cfg, err := clientcmd.RESTConfigFromKubeConfig(s.Data["kubeconfig"])
		if err != nil {
			return nil, nil, fmt.Errorf("reading the kubeconfig of project %q (Secret %s): %w", project, s.Name, err)
		}
		hc, err := rest.HTTPClientFor(cfg)
		if err != nil {
			return nil, nil, err
		}
		mapper, err := apiutil.NewDynamicRESTMapper(cfg, hc)
		if err != nil {
			return nil, nil, err
		}
		live, err := client.New(cfg, client.Options{Scheme: scheme, HTTPClient: hc, Mapper: mapper})
		if err != nil {
			return nil, nil, err
		}
		planes[project] = Plane{Live: live, Mapper: mapper, SecretUID: s.UID}
	}
	return planes, duplicates, nil
}

// unownedReports lists the anchors of projects that have no Secret and no pass report
// (a project with a tombstone, or named by two Secrets, has one).
func unownedReports(anchors *listedAnchors, reports map[string]PassReport, now time.Time) []AnchorReport {
	var out []AnchorReport
	for project, items := range anchors.byProject {
		if _, ok := reports[project]; ok {
			continue
		}
		for i := range items {
			obj := &items[i]
			if !looksLikeAnchor(obj) {
				continue
			}
			owner, _ := anchor.Decode(obj.Name, obj.Labels)
			out = append(out, AnchorReport{
				Namespace: obj.Namespace, Name: obj.Name, UID: obj.UID, Owner: owner, Labels: obj.Labels,
				Age:     max(now.Sub(obj.CreationTimestamp.Time), 0),
				Verdict: Verdict{Decision: Unknown, Reason: ReasonNoProjectSecret},
				Detail:  fmt.Sprintf("project %q", project),
			})
		}
	}
	return out
}

// openAdmission admits everything: the sweep runs outside sharding.
type openAdmission struct{}

func (openAdmission) Enter(ctx context.Context, _ string) (context.Context, func(), error) {
	return ctx, func() {}, nil
}

// staticHub hands out one uncached hub client for every project.
type staticHub struct{ c client.Client }

func (s staticHub) Hub(context.Context, string) (client.Client, client.Reader, error) {
	return s.c, s.c, nil
}
