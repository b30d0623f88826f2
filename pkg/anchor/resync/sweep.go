package resync

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"anchorage/pkg/anchor"
)

// SweepOptions configure Sweep.
type SweepOptions struct {
	Hub *rest.Config // the hub's REST config
	// ProviderNamespace holds the kubeconfig Secrets; LeaseNamespace (default the same)
	// the plane identity records, tombstones and the switch.
	ProviderNamespace       string
	LeaseNamespace          string
	SecretLabel             string          // marks kubeconfig Secrets. Default DefaultSecretLabel
	SecretProjectAnnotation string          // on a Secret, names its project
	Resync                  Options         // holds the knobs, DryRun included; its Clock must be real
	Scheme                  *runtime.Scheme // for the clients. Default client-go's
	Logger                  logr.Logger
	Projects                []string         // when not empty, the only projects swept (passes and reports)
	OnReport                func(PassReport) // when set, gets each project's final report, from Sweep's goroutine
}

// Sweep runs one pass, without sharding and with every owner read live, over every
// project with a kubeconfig Secret or a tombstone (or over opts.Projects), a second
// round ConfirmAfter later over those with a proof to confirm, and reports the unowned
// anchors. For an operator, while the replicas are stopped or in dry-run.
//
// A project named twice, one whose Secret gives no client (its anchors Unknown,
// ReasonUnreadableKubeconfig), and one of opts.Projects that matches nothing are rows
// of their own, not errors. The error joins the passes' failures; when ctx ends during
// the confirmation delay, the waiting projects are reported aborted and ctx's error is
// returned with every report.
func Sweep(ctx context.Context, opts SweepOptions) ([]PassReport, []AnchorReport, error) {
	ro := opts.Resync
	ro.Clock = cmp.Or[clock.WithTicker](ro.Clock, clock.RealClock{})
	if err := ro.Validate(); err != nil {
		return nil, nil, fmt.Errorf("resync options: %w", err)
	}
	if opts.Scheme == nil {
		opts.Scheme = runtime.NewScheme()
		if err := corev1.AddToScheme(opts.Scheme); err != nil {
			return nil, nil, err
		}
	}
	opts.LeaseNamespace = cmp.Or(opts.LeaseNamespace, opts.ProviderNamespace)
	opts.SecretLabel = cmp.Or(opts.SecretLabel, DefaultSecretLabel)
	hub, err := client.New(opts.Hub, client.Options{Scheme: opts.Scheme})
	if err != nil {
		return nil, nil, fmt.Errorf("building the hub client: %w", err)
	}
	deps, err := NewHubDependentLister(opts.Hub, nil, DependentKindsOf(ro.Writes, ro.ExtraDependentKinds), dependentsQPS, dependentsBurst)
	if err != nil {
		return nil, nil, err
	}
	anchors, err := listAnchors(ctx, hub)
	if err != nil {
		return nil, nil, err
	}
	sec := secrets{namespace: opts.ProviderNamespace, label: opts.SecretLabel, projectAnnotation: opts.SecretProjectAnnotation}
	planes, settled, err := planSweep(ctx, hub, sec, opts, anchors, ro)
	if err != nil {
		return nil, nil, err
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

	s := &sweeper{
		deps: passDeps{
			holder: "sweep", admission: openAdmission{}, hub: staticHub{c: hub},
			anchors: anchors, dependents: deps, secrets: sec, leaseNamespace: opts.LeaseNamespace,
			events: recorder, opts: ro, deletes: flowcontrol.NewTokenBucketRateLimiter(ro.DeletionQPS, deletionBurst), recordIdentity: !ro.DryRun,
		},
		log: opts.Logger, memory: map[string]*projectMemory{}, reports: map[string]PassReport{}, onReport: opts.OnReport,
	}
	for _, r := range settled {
		s.deliver(r)
	}
	err = s.passAll(ctx, planes)
	out := slices.AppendSeq(make([]PassReport, 0, len(s.reports)), maps.Values(s.reports))
	slices.SortFunc(out, func(a, b PassReport) int { return strings.Compare(a.Project, b.Project) })
	return out, unownedReports(anchors, s.reports, opts.Projects, ro.Clock.Now()), err
}

// covers reports whether a sweep of projects (every project when none) covers project.
func covers(projects []string, project string) bool {
	return len(projects) == 0 || slices.Contains(projects, project)
}

// planSweep decides, from Secrets and tombstones, which projects get a pass (a
// live-only Plane per covered project with one kubeconfig Secret, an empty one per
// retired project) and which a row final before any pass.
func planSweep(ctx context.Context, hub client.Reader, sec secrets, opts SweepOptions, anchors *listedAnchors, ro Options) (map[string]Plane, []PassReport, error) {
	list := &corev1.SecretList{}
	if err := hub.List(ctx, list, client.InNamespace(sec.namespace), client.MatchingLabels{sec.label: "true"}); err != nil {
		return nil, nil, fmt.Errorf("listing kubeconfig Secrets in %s: %w", sec.namespace, err)
	}
	retired, err := tombstones(ctx, hub, opts.LeaseNamespace)
	if err != nil {
		return nil, nil, err
	}
	byProject := map[string][]*corev1.Secret{}
	for i := range list.Items {
		s := &list.Items[i]
		if project := sec.projectOf(s); covers(opts.Projects, project) {
			byProject[project] = append(byProject[project], s)
		}
	}
	row := func(project string) PassReport {
		return PassReport{Project: project, Holder: "sweep", Start: ro.Clock.Now(), DryRun: ro.DryRun, Plane: PlaneUnverified}
	}
	planes := map[string]Plane{}
	var settled []PassReport
	for project, named := range byProject {
		if len(named) > 1 {
			var names []string
			for _, s := range named {
				names = append(names, s.Name)
			}
			sort.Strings(names)
			r := row(project)
			r.Aborted = fmt.Sprintf("named by %d kubeconfig Secrets (%s): skipped until only one names it", len(names), strings.Join(names, ", "))
			settled = append(settled, r)
			continue
		}
		plane, err := planeOfSecret(named[0], opts.Scheme)
		if err != nil {
			r := row(project)
			r.PlaneDetail = fmt.Sprintf("kubeconfig Secret %s/%s is unreadable: %v", sec.namespace, named[0].Name, err)
			r.Aborted = fmt.Sprintf("not swept: kubeconfig Secret %s/%s: %v", sec.namespace, named[0].Name, err)
			r.Anchors = untouchedAnchors(anchors.byProject[project], Verdict{Decision: Unknown, Reason: ReasonUnreadableKubeconfig},
				fmt.Sprintf("Secret %s/%s", sec.namespace, named[0].Name), ro.Clock.Now())
			settled = append(settled, r)
			continue
		}
		planes[project] = plane
	}
	for project := range anchors.byProject {
		if !covers(opts.Projects, project) || byProject[project] != nil || retired[project] == "" {
			continue
		}
		planes[project] = Plane{}
	}
	for _, project := range opts.Projects {
		done := slices.ContainsFunc(settled, func(r PassReport) bool { return r.Project == project })
		if byProject[project] != nil || retired[project] != "" || slices.ContainsFunc(anchors.byProject[project], func(o metav1.PartialObjectMetadata) bool { return looksLikeAnchor(&o) }) || done {
			continue
		}
		r := row(project)
		r.PlaneDetail = "no kubeconfig Secret"
		r.Aborted = fmt.Sprintf("no kubeconfig Secret in %s names project %q and no anchor on the hub belongs to it", sec.namespace, project)
		settled = append(settled, r)
	}
	sort.Slice(settled, func(i, j int) bool { return settled[i].Project < settled[j].Project })
	return planes, settled, nil
}

// sweeper runs the passes of one sweep and delivers each project's final report.
type sweeper struct {
	deps     passDeps
	log      logr.Logger
	memory   map[string]*projectMemory
	reports  map[string]PassReport
	onReport func(PassReport)
}

// deliver records r as its project's final report and hands it to OnReport.
func (s *sweeper) deliver(r PassReport) {
	s.reports[r.Project] = r
	if s.onReport != nil {
		s.onReport(r)
	}
}

// pass runs one pass over project, keeping the project's memory between rounds.
func (s *sweeper) pass(ctx context.Context, project string, plane Plane) (PassReport, error) {
	rep, err := newPass(s.deps, project, plane, memoryOf(s.memory, project), s.log.WithValues("project", project)).run(ctx)
	if err != nil {
		err = fmt.Errorf("project %q: %w", project, err)
	}
	return rep, err
}

// passAll runs the first round, then, at the latest confirmation time, a round over the
// projects with a proof to confirm.
func (s *sweeper) passAll(ctx context.Context, planes map[string]Plane) error {
	var errs []error
	var pending []PassReport // the first round's reports with a proof to confirm, by project
	due := time.Time{}
	for _, project := range slices.Sorted(maps.Keys(planes)) {
		rep, err := s.pass(ctx, project, planes[project])
		if err != nil {
			errs = append(errs, err)
		}
		if rep.PendingConfirmation.IsZero() {
			s.deliver(rep)
			continue
		}
		pending = append(pending, rep)
		if rep.PendingConfirmation.After(due) {
			due = rep.PendingConfirmation
		}
	}
	if len(pending) == 0 {
		return errors.Join(errs...)
	}
	clock := s.deps.opts.Clock
	select {
	case <-ctx.Done():
		for _, rep := range pending {
			rep.Aborted = fmt.Sprintf("interrupted before the confirmation round: %v", ctx.Err())
			s.deliver(rep)
		}
		return errors.Join(append(errs, ctx.Err())...)
	case <-clock.After(due.Sub(clock.Now())):
	}
	for _, first := range pending {
		rep, err := s.pass(ctx, first.Project, planes[first.Project])
		if err != nil {
			errs = append(errs, err)
		}
		s.deliver(rep)
	}
	return errors.Join(errs...)
}

// planeOfSecret builds a live-only client of the plane a kubeconfig Secret names.
func planeOfSecret(s *corev1.Secret, scheme *runtime.Scheme) (Plane, error) {
	data, ok := s.Data["kubeconfig"]
	if !ok || len(data) == 0 {
		return Plane{}, errors.New(`no "kubeconfig" key`)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(data)
	if err != nil {
		return Plane{}, fmt.Errorf("kubeconfig does not parse: %w", err)
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return Plane{}, fmt.Errorf("building the HTTP client: %w", err)
	}
	mapper, err := apiutil.NewDynamicRESTMapper(cfg, hc)
	if err != nil {
		return Plane{}, fmt.Errorf("building the REST mapper: %w", err)
	}
	live, err := client.New(cfg, client.Options{Scheme: scheme, HTTPClient: hc, Mapper: mapper})
	if err != nil {
		return Plane{}, fmt.Errorf("building the client: %w", err)
	}
	return Plane{Live: live, Mapper: mapper, SecretUID: s.UID}, nil
}

// unownedReports lists the anchors of covered projects with no pass report.
func unownedReports(anchors *listedAnchors, reports map[string]PassReport, projects []string, now time.Time) []AnchorReport {
	var out []AnchorReport
	for project, items := range anchors.byProject {
		if _, ok := reports[project]; ok || !covers(projects, project) {
			continue
		}
		out = append(out, untouchedAnchors(items, Verdict{Decision: Unknown, Reason: ReasonNoProjectSecret}, fmt.Sprintf("project %q", project), now)...)
	}
	return out
}

// untouchedAnchors makes report lines, verdict v, for the anchors among items.
func untouchedAnchors(items []metav1.PartialObjectMetadata, v Verdict, detail string, now time.Time) []AnchorReport {
	var out []AnchorReport
	for i := range items {
		obj := &items[i]
		if !looksLikeAnchor(obj) {
			continue
		}
		owner, _ := anchor.Decode(obj.Name, obj.Labels)
		out = append(out, reportOf(&item{obj: obj, owner: owner, verdict: v, detail: detail}, now))
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
