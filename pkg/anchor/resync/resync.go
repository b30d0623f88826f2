package resync

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	"anchorage/pkg/anchor"
)

// Config wires a Resync into a replica.
type Config struct {
	Options Options
	// Admission and Hub are the shard's: each step runs inside Enter, writing through
	// the validity-guarded writer.
	Admission Admission
	Hub       HubAccess
	// RetiredAdmission and RetiredHub (CoordinatorAccess) let the coordinator collect
	// retired projects (retired.go). Nil: only reported.
	RetiredAdmission Admission
	RetiredHub       HubAccess
	Holder           func() string            // this replica's current incarnation, for records and reports
	Enqueue          func(anchor.Owner) error // asks the live path to reconcile an owner (Setup.Enqueue). Nil: none
	// ProviderNamespace holds the kubeconfig Secrets; LeaseNamespace the plane identity
	// records, tombstones and the deletion switch.
	ProviderNamespace       string
	LeaseNamespace          string
	SecretLabel             string // marks kubeconfig Secrets. Default DefaultSecretLabel
	SecretProjectAnnotation string // names a Secret's project (the shard's AnnotationProject)
	// Anchors is the hub anchor cache; HubReader, uncached, serves the unowned report.
	Anchors    *AnchorCache
	Dependents DependentLister
	HubReader  client.Reader
	Events     events.EventRecorder // records collections and halts on the hub. Nil: none
	Observer   Observer             // sees every examination and pass. Nil: none
	HubClock   *HubClock            // gives the hub's time, for minimum ages. Nil: the local clock
	Registry   prometheus.Registerer
	Logger     logr.Logger
}

// Resync collects orphaned anchors of the projects this replica holds: a multicluster
// Runnable running one loop per engaged project, at most Options.Workers passes at once.
type Resync struct {
	passDeps // shared by every pass; the holder is set per pass
	cfg      Config
	m        *resyncMetrics
	log      logr.Logger
	workers  chan struct{}
	started  chan struct{}
	wg       sync.WaitGroup

	mu     sync.Mutex
	loops  map[string]*projectLoop
	halted map[string]string

	retired map[string]*projectMemory // the memory of passes over retired projects; Start's goroutine only
}

// projectLoop is one engagement's loop.
type projectLoop struct {
	cluster cluster.Cluster
	cancel  context.CancelFunc
}

// New builds a Resync, to add to the multicluster manager (which registers it with the shard).
func New(cfg Config) (*Resync, error) {
	if err := cfg.Options.Validate(); err != nil {
		return nil, fmt.Errorf("resync options: %w", err)
	}
	if cfg.Admission == nil || cfg.Hub == nil || cfg.Anchors == nil || cfg.Dependents == nil || cfg.HubReader == nil {
		return nil, errors.New("resync: admission, hub access, anchor cache, dependents lister and hub reader are required")
	}
	if (cfg.RetiredAdmission == nil) != (cfg.RetiredHub == nil) {
		return nil, errors.New("resync: retired admission and retired hub access are set together or not at all")
	}
	if cfg.ProviderNamespace == "" || cfg.LeaseNamespace == "" {
		return nil, errors.New("resync: provider and lease namespaces are required")
	}
	cfg.SecretLabel = cmp.Or(cfg.SecretLabel, DefaultSecretLabel)
	if cfg.Holder == nil {
		cfg.Holder = func() string { return "" }
	}
	if cfg.Registry == nil {
		cfg.Registry = prometheus.NewRegistry()
	}
	opts := cfg.Options
	opts.Clock = cmp.Or[clock.WithTicker](opts.Clock, clock.RealClock{})
	m, err := newResyncMetrics(cfg.Registry)
	if err != nil {
		return nil, fmt.Errorf("registering resync metrics: %w", err)
	}
	return &Resync{
		cfg: cfg, m: m, log: cfg.Logger.WithName("resync"),
		passDeps: passDeps{
			admission: cfg.Admission, hub: cfg.Hub, anchors: cfg.Anchors, dependents: cfg.Dependents,
			secrets:        secrets{namespace: cfg.ProviderNamespace, label: cfg.SecretLabel, projectAnnotation: cfg.SecretProjectAnnotation},
			leaseNamespace: cfg.LeaseNamespace, events: cfg.Events, enqueue: cfg.Enqueue, observer: cfg.Observer, hubClock: cfg.HubClock,
			opts: opts, deletes: flowcontrol.NewTokenBucketRateLimiter(opts.DeletionQPS, deletionBurst), recordIdentity: true,
		},
		workers: make(chan struct{}, opts.Workers),
		started: make(chan struct{}),
		loops:   map[string]*projectLoop{}, halted: map[string]string{},
		retired: map[string]*projectMemory{},
	}, nil
}

// AddAnchorCache builds the hub anchor cache on mgr's hub connection and adds it to mgr.
func AddAnchorCache(ctx context.Context, mgr mcmanager.Manager) (*AnchorCache, error) {
	local := mgr.GetLocalManager()
	anchors, err := NewAnchorCache(ctx, local.GetConfig(), local.GetHTTPClient(), local.GetRESTMapper())
	if err != nil {
		return nil, fmt.Errorf("building the anchor cache: %w", err)
	}
	if err := local.Add(anchors); err != nil {
		return nil, fmt.Errorf("adding the anchor cache: %w", err)
	}
	return anchors, nil
}

// Setup builds the Resync (and the anchor cache unless cfg.Anchors is set) and adds them
// to mgr; only project work goes through cfg.Hub, the rest uses the hub manager's.
func Setup(ctx context.Context, mgr mcmanager.Manager, cfg Config) (*Resync, error) {
	local := mgr.GetLocalManager()
	if cfg.Anchors == nil {
		anchors, err := AddAnchorCache(ctx, mgr)
		if err != nil {
			return nil, err
		}
		cfg.Anchors = anchors
	}
	deps, err := NewHubDependentLister(local.GetConfig(), local.GetHTTPClient(), DependentKindsOf(cfg.Options.Writes, cfg.Options.ExtraDependentKinds), dependentsQPS, dependentsBurst)
	if err != nil {
		return nil, err
	}
	cfg.Dependents = deps
	if cfg.HubReader == nil {
		cfg.HubReader = local.GetAPIReader()
	}
	if cfg.Events == nil {
		cfg.Events = local.GetEventRecorder("anchorage-resync")
	}
	r, err := New(cfg)
	if err != nil {
		return nil, err
	}
	if err := mgr.Add(r); err != nil {
		return nil, fmt.Errorf("adding the resync: %w", err)
	}
	return r, nil
}

// Start runs until ctx ends, every period reporting unowned anchors and, on the
// coordinator, passing over retired projects.
func (r *Resync) Start(ctx context.Context) error {
	close(r.started)
	defer func() {
		r.mu.Lock()
		for _, l := range r.loops {
			l.cancel()
		}
		r.mu.Unlock()
		r.wg.Wait()
	}()
	if !r.cfg.Anchors.WaitForCacheSync(ctx) {
		return nil
	}
	for {
		delay := r.opts.Period
		if retired, ok := r.reportUnowned(ctx); ok {
			delay = r.collectRetired(ctx, retired)
		}
		t := r.opts.Clock.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C():
		}
	}
}

// Engage implements multicluster.Aware: it starts (or, for a new cluster, restarts) the
// project's loop.
func (r *Resync) Engage(ctx context.Context, name multicluster.ClusterName, cl cluster.Cluster) error {
	if r.opts.Disabled {
		return nil
	}
	project := string(name)
	r.mu.Lock()
	defer r.mu.Unlock()
	if l, ok := r.loops[project]; ok {
		if l.cluster == cl {
			return nil
		}
		l.cancel()
	} else {
		// A re-engagement keeps the original time.
		r.m.heldSince.WithLabelValues(project).Set(float64(r.opts.Clock.Now().Unix()))
	}
	lctx, cancel := context.WithCancel(ctx)
	l := &projectLoop{cluster: cl, cancel: cancel}
	r.loops[project] = l
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer cancel()
		r.runProject(lctx, project, cl)
		r.mu.Lock()
		if r.loops[project] == l {
			delete(r.loops, project)
			delete(r.halted, project)
			r.m.lastSuccess.DeleteLabelValues(project)
			r.m.heldSince.DeleteLabelValues(project)
			r.updateHaltedLocked()
		}
		r.mu.Unlock()
	}()
	return nil
}

// runProject is one project's loop: a first pass after a jittered delay, then nextDelay.
func (r *Resync) runProject(ctx context.Context, project string, cl cluster.Cluster) {
	select {
	case <-r.started:
	case <-ctx.Done():
		return
	}
	if !r.cfg.Anchors.WaitForCacheSync(ctx) {
		return
	}
	log := r.log.WithValues("project", project)
	plane := Plane{Scheme: cl.GetScheme(), Live: liveReader(cl, log), Mapper: cl.GetRESTMapper()}
	if strict, ok := StrictReader(cl.GetCache()); ok {
		plane.Cache = strict
	} else {
		log.Info("The project's cache cannot be read without starting informers; every owner is read live")
	}
	mem := newProjectMemory()
	delay := time.Duration(0)
	if r.opts.InitialJitter > 0 {
		delay = rand.N(r.opts.InitialJitter)
	}
	for {
		t := r.opts.Clock.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
		rep, err := r.runPass(ctx, r.passDeps, project, plane, mem, log)
		if ctx.Err() != nil {
			return
		}
		delay = r.nextDelay(rep, err)
	}
}

// runPass runs one pass with d, holding a worker slot, and records it. Callers stop
// when ctx has ended: then no pass ran, or it was recorded as cut short.
func (r *Resync) runPass(ctx context.Context, d passDeps, project string, plane Plane, mem *projectMemory, log logr.Logger) (PassReport, error) {
	select {
	case r.workers <- struct{}{}:
	case <-ctx.Done():
		return PassReport{}, ctx.Err()
	}
	d.holder = r.cfg.Holder()
	rep, err := newPass(d, project, plane, mem, log).run(ctx)
	<-r.workers
	err = cutShort(ctx, err)
	r.record(rep, err, log)
	return rep, err
}

// cutShort is the error a pass ended with, as an abort when the project's context ended
// by its end (the project was lost, or the replica stops): such a pass may have deleted
// anchors, so it is recorded like any abort (its deletions counted, no per-project gauge
// written for a project no longer held), never as a failure and never unrecorded.
func cutShort(ctx context.Context, err error) error {
	if ctx.Err() == nil || errors.Is(err, errAborted) {
		return err
	}
	if err == nil {
		err = context.Cause(ctx)
	}
	return fmt.Errorf("%w: the project's context ended: %w", errAborted, err)
}

// liveReader returns an uncached reader of the plane on the cluster's connections,
// without its client-side rate limiter (liveQPS paces these reads).
func liveReader(cl cluster.Cluster, log logr.Logger) client.Reader {
	cfg := rest.CopyConfig(cl.GetConfig())
	cfg.QPS, cfg.Burst, cfg.RateLimiter = -1, 0, nil
	c, err := client.New(cfg, client.Options{Scheme: cl.GetScheme(), Mapper: cl.GetRESTMapper(), HTTPClient: cl.GetHTTPClient()})
	if err != nil {
		log.Info("Reading the plane through the cluster's reader", "error", err.Error())
		return cl.GetAPIReader()
	}
	return c
}

// nextDelay is the period, cut to the earliest pending confirmation, or 5 s after an error.
func (r *Resync) nextDelay(rep PassReport, err error) time.Duration {
	if err != nil {
		return min(r.opts.Period, 5*time.Second)
	}
	if !rep.PendingConfirmation.IsZero() {
		return min(r.opts.Period, max(rep.PendingConfirmation.Sub(r.opts.Clock.Now()), time.Second))
	}
	return r.opts.Period
}

// record updates metrics and logs after a pass, and tells the observer.
func (r *Resync) record(rep PassReport, err error, log logr.Logger) {
	result := passSuccess
	switch {
	case errors.Is(err, errAborted):
		result = passAborted
	case err != nil:
		result = passFailed
	}
	r.m.passes.WithLabelValues(result).Inc()
	r.m.duration.Observe(rep.Duration.Seconds())
	r.m.apiCalls.Observe(float64(rep.APICalls))
	// Actions taken count even in an aborted pass; decisions only in a complete one.
	for _, a := range rep.Anchors {
		if a.Decision == Collect && a.Action != ActionNone && (result != passAborted || a.Action == ActionDeleted || a.Action == ActionFailed) {
			r.m.actions.WithLabelValues(string(a.Action)).Inc()
		}
	}
	if result == passAborted {
		log.V(1).Info("Resync pass did not run to its end", "reason", err.Error(), "deleted", rep.CountAction(ActionDeleted))
		if r.cfg.Observer != nil {
			r.mu.Lock()
			r.cfg.Observer.PassDone(rep, false)
			r.mu.Unlock()
		}
		return
	}
	r.m.seen.Add(float64(len(rep.Anchors)))
	for _, a := range rep.Anchors {
		r.m.decisions.WithLabelValues(a.Decision.String(), string(a.Reason)).Inc()
	}
	if rep.Halt != "" {
		r.m.halts.WithLabelValues(rep.Halt).Inc()
	}
	if rep.SwitchedOff {
		r.m.deletionOff.Set(1)
	} else if rep.Count(Collect) > 0 {
		r.m.deletionOff.Set(0)
	}
	r.mu.Lock()
	if result == passSuccess {
		r.m.lastSuccess.WithLabelValues(rep.Project).Set(float64(r.opts.Clock.Now().Unix()))
	}
	if rep.Halt != "" {
		r.halted[rep.Project] = rep.Halt
	} else {
		delete(r.halted, rep.Project)
	}
	r.updateHaltedLocked()
	if r.cfg.Observer != nil {
		r.cfg.Observer.PassDone(rep, result == passSuccess)
	}
	r.mu.Unlock()

	kv := []any{"kept", rep.Count(Keep), "suspect", rep.Count(Suspect), "collect", rep.Count(Collect),
		"deleted", rep.CountAction(ActionDeleted), "unknown", rep.Count(Unknown), "plane", rep.Plane.String(),
		"apiCalls", rep.APICalls, "duration", rep.Duration.String()}
	switch {
	case err != nil:
		log.Error(err, "Resync pass failed", kv...)
	case rep.Halt != "" || rep.CountAction(ActionDeleted) > 0:
		log.Info("Resync pass finished", append(kv, "halt", rep.Halt)...)
	default:
		log.V(4).Info("Resync pass finished", kv...)
	}
}

func (r *Resync) updateHaltedLocked() {
	counts := map[string]int{}
	for _, reason := range r.halted {
		counts[reason]++
	}
	for _, reason := range haltReasons {
		r.m.halted.WithLabelValues(reason).Set(float64(counts[reason]))
	}
}

// reportUnowned counts the cached unowned anchors and returns, sorted, their projects a
// tombstone retires; ok is false when a read failed.
func (r *Resync) reportUnowned(ctx context.Context) (retired []string, ok bool) {
	all, err := r.secrets.list(ctx, r.cfg.HubReader)
	if err != nil {
		r.log.Info("Reporting anchors of projects without a Secret failed", "error", err.Error())
		return nil, false
	}
	known := map[string]bool{}
	for i := range all {
		known[r.secrets.projectOf(&all[i])] = true
	}
	anchors, err := r.cfg.Anchors.All(ctx)
	if err != nil {
		r.log.Info("Reporting anchors of projects without a Secret failed", "error", err.Error())
		return nil, false
	}
	count := 0
	projects := map[string]bool{}
	for i := range anchors {
		if p := projectOfLabels(anchors[i].Labels); looksLikeAnchor(&anchors[i]) && !known[p] {
			count++
			projects[p] = true
		}
	}
	r.m.unowned.Set(float64(count))
	if count == 0 {
		return nil, true
	}
	tombs, err := tombstones(ctx, r.cfg.HubReader, r.leaseNamespace)
	if err != nil {
		r.log.Info("Reading the tombstones of retired projects failed", "error", err.Error())
		return nil, false
	}
	names := slices.Sorted(maps.Keys(projects))
	for _, p := range names {
		if tombs[p] != "" {
			retired = append(retired, p)
		}
	}
	if len(names) > 10 {
		names = append(names[:10], "...")
	}
	how := "collected by the coordinator replica after the absence is confirmed on two passes"
	if r.cfg.RetiredAdmission == nil {
		how = "collected by `manager sweep --once` (replicas collect none: no coordinator admission configured)"
	}
	r.log.Info("Anchors of projects without a kubeconfig Secret: reported, never deleted unless a tombstone retires the project; those of retired projects are "+how,
		"anchors", count, "projects", names, "retired", retired)
	return retired, true
}
