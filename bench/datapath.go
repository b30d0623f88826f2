// The data-path run: P project planes × N HTTPProxies on 3 replicas, for each
// coordinator on one shared set of control planes; time from create to Programmed and
// from delete to nothing left on the hub, hub requests per proxy by verb, peak RSS.

package bench

import (
	"context"
	"errors"
	"fmt"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"anchorage/internal/harness"
	"anchorage/internal/testenv"
	"anchorage/pkg/anchor"
	"anchorage/pkg/gateway"
	"anchorage/pkg/shard"
)

// DataPathOptions size and pace the data-path run.
type DataPathOptions struct {
	// Planes is how many project planes (one project each); Proxies the HTTPProxies
	// in total, spread evenly over them; Replicas the replicas of each coordinator.
	Planes, Proxies, Replicas int
	// CreateOver and DeleteOver spread the creates and the deletes evenly over that
	// long (each plane at its own even pace).
	CreateOver, DeleteOver time.Duration
	// ProgrammedWithin bounds the wait, after the last create, for every proxy to be
	// Programmed; CleanWithin the wait, after the last delete, for the hub to hold
	// nothing of the run.
	ProgrammedWithin, CleanWithin time.Duration
	// ResyncPeriod is the replicas' anchor resync period: longer than the run, so the
	// finalizers alone clean up and no resync pass is counted as their cost.
	ResyncPeriod time.Duration
	// Timings are the replicas' Lease timings; nil: the scenarios' (harness.FastTimings,
	// a 3 s Lease).
	Timings *shard.Timings
}

// FullDataPath is make bench's data-path section; SmallDataPath a development size.
var (
	// At the full size a 2-core machine programs about 2.5 to 3 proxies a second with 21
	// API servers running (CPU-bound: bench/README.md, data path), so the creates are
	// spread over 2 minutes and the waits are long enough for every proxy to finish: a
	// run that stops halfway measures nothing. The waits are bounds; a converging run
	// ends as soon as the last proxy is Programmed, or clean.
	FullDataPath = DataPathOptions{Planes: 20, Proxies: 1000, Replicas: 3, CreateOver: 2 * time.Minute, DeleteOver: 2 * time.Minute,
		ProgrammedWithin: 8 * time.Minute, CleanWithin: 6 * time.Minute, ResyncPeriod: time.Hour}
	SmallDataPath = DataPathOptions{Planes: 3, Proxies: 30, Replicas: 3, CreateOver: 10 * time.Second, DeleteOver: 10 * time.Second,
		ProgrammedWithin: time.Minute, CleanWithin: time.Minute, ResyncPeriod: time.Hour}
)

// DataPathHostnames is how many hostnames each proxy of the run has.
const DataPathHostnames = 1

// DataPathResult is one coordinator through the data-path run.
type DataPathResult struct {
	Coordinator Coordinator `json:"coordinator"`
	Planes      int         `json:"planes"`
	Proxies     int         `json:"proxies"`
	Replicas    int         `json:"replicas"`
	Hostnames   int         `json:"hostnames"`
	// The create phase runs from the first create to the first delete; the delete
	// phase from the first delete until the hub held nothing of the run (or the wait
	// ended).
	CreateStart time.Time `json:"createStart"`
	DeleteStart time.Time `json:"deleteStart"`
	DeleteEnd   time.Time `json:"deleteEnd"`
	// ToProgrammed is, per proxy seen Programmed, the time from its create request to
	// the first Programmed=True a watch saw; ToClean, per proxy, from its delete
	// request to the hub's last delete of what was created for it.
	ToProgrammed []time.Duration `json:"toProgrammed"`
	ToClean      []time.Duration `json:"toClean"`
	// Created and Deleted count the proxies the run created and deleted.
	Created int `json:"created"`
	Deleted int `json:"deleted"`
	// NotProgrammed and NotClean count the proxies that never got there.
	NotProgrammed int `json:"notProgrammed"`
	NotClean      int `json:"notClean"`
	// CreateRequests and DeleteRequests are the replicas' hub requests in each phase.
	CreateRequests RequestCount `json:"createRequests"`
	DeleteRequests RequestCount `json:"deleteRequests"`
	// CertificateListsOfDeleted counts the Certificate LISTs sent for a proxy after its
	// deletion was requested (CertificateListsOfDeleted), whichever phase they fell in.
	CertificateListsOfDeleted int `json:"certificateListsOfDeleted"`
	// CertificateOrders are the Certificates ordered for the run's proxies.
	CertificateOrders CertificateOrders `json:"certificateOrders"`
	// MinimumCreate and MinimumDelete are DesignMinimum per proxy for this run.
	MinimumCreate MinimumCost `json:"minimumCreate"`
	MinimumDelete MinimumCost `json:"minimumDelete"`
	PeakRSS       []uint64    `json:"peakRSS"`
	Errors        []string    `json:"errors,omitempty"`
}

// Programmed and Clean summarize the latencies.
func (d DataPathResult) Programmed() Latency { return LatencyOf(d.ToProgrammed) }

// Clean summarizes the delete-to-clean latencies.
func (d DataPathResult) Clean() Latency { return LatencyOf(d.ToClean) }

// StartDataPathEnv starts the data-path section's own control planes: a hub with its
// garbage collector that audits every request (reads too, for the counts by verb)
// and n project planes, started a few at a time.
func StartDataPathEnv(n int, dir string) (*Env, error) {
	hubCRDs, err := testenv.HubCRDs()
	if err != nil {
		return nil, err
	}
	projectCRDs, err := testenv.ProjectCRDs()
	if err != nil {
		return nil, err
	}
	e := &Env{Dir: dir, Planes: make([]*harness.ControlPlane, n), projectKubeconfig: make([][]byte, n)}
	if e.Hub, err = harness.StartControlPlane("bench-dp-hub", harness.PlaneOptions{CRDs: hubCRDs, GarbageCollector: true, AuditAllRequests: true, Lean: true}); err != nil {
		return nil, err
	}
	const parallel = 4
	sem := make(chan struct{}, parallel)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			e.Planes[i], e.projectKubeconfig[i], errs[i] = startProjectPlane("bench-dp-project-"+strconv.Itoa(i), projectCRDs, false)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		e.Stop()
		return nil, err
	}
	return e, nil
}

// dataPathRun is the state of one coordinator's data-path run.
type dataPathRun struct {
	*scenarioRun
	o        DataPathOptions
	names    map[string][]string // project -> proxy names
	created  map[ProxyKey]time.Time
	deleted  map[ProxyKey]time.Time
	tracker  *programTracker
	createMu sync.Mutex
}

// RunDataPath runs the data path for coordinator c on the env's planes.
func (e *Env) RunDataPath(ctx context.Context, c Coordinator, bins Binaries, o DataPathOptions, logf func(string, ...any)) (DataPathResult, error) {
	res := DataPathResult{Coordinator: c, Planes: len(e.Planes), Proxies: o.Proxies, Replicas: o.Replicas, Hostnames: DataPathHostnames}
	run, err := e.NewRun(ctx, "datapath-"+string(c))
	if err != nil {
		return res, err
	}
	defer run.Close(context.Background())
	d := &dataPathRun{
		scenarioRun: &scenarioRun{c: c, bins: bins, run: run, log: logf, sched: Schedule{OwnedWithin: 2 * time.Minute}},
		o:           o, names: map[string][]string{}, created: map[ProxyKey]time.Time{}, deleted: map[ProxyKey]time.Time{},
	}
	var names []string
	for i := range e.Planes {
		p := ProjectLoad{Name: fmt.Sprintf("%s-p%d", run.ID, i), Plane: i, Namespace: "bench-" + run.ID}
		if p.NamespaceUID, err = run.CreateUpstreamNamespace(ctx, i, p.Namespace); err != nil {
			return res, err
		}
		if err := run.AddProject(ctx, p.Name, i); err != nil {
			return res, err
		}
		d.projects = append(d.projects, p)
		names = append(names, p.Name)
	}
	defer d.cleanupUpstream()
	d.obs = NewObserver(run, c, names)
	obsCtx, stopObs := context.WithCancel(ctx)
	defer stopObs()
	go d.obs.Run(obsCtx, 500*time.Millisecond, false)
	for i := 0; i < o.Replicas; i++ {
		if err := d.startWith(ReplicaOptions{ResyncPeriod: o.ResyncPeriod, Timings: o.Timings}); err != nil {
			return res, err
		}
	}
	defer d.stopAll()
	if !d.waitAllOwned(ctx) {
		d.note("not every project had an owner %s after start", d.sched.OwnedWithin)
	}
	if !d.waitOwnersSteady(ctx, names) {
		d.note("project owners still changing %s after every project had one", ownersSteadyWithin)
	}
	d.tracker = newProgramTracker()
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	if err := d.tracker.watchAll(watchCtx, run.Env, d.projects); err != nil {
		return res, err
	}
	hub := markAudit(e.Hub.AuditLogPath)

	res.CreateStart = time.Now()
	d.createAll(ctx)
	d.waitProgrammed(ctx)
	stopWatch()
	owners, err := d.anchorOwners(ctx)
	if err != nil {
		return res, err
	}
	res.DeleteStart = time.Now()
	d.deleteAll(ctx)
	d.waitClean(ctx)
	res.DeleteEnd = time.Now()
	for _, r := range d.running() {
		res.PeakRSS = append(res.PeakRSS, r.PeakRSS())
	}
	d.stopAll()
	stopObs()
	return d.result(res, hub, owners)
}

// Owners are steady once no project changed hands for ownersSteadyFor; the wait is
// bounded by ownersSteadyWithin. A coordinator that hands projects on as its peers
// join (the baseline learns of a peer at its registry's refresh) would otherwise
// count its start-up in the data path's latencies.
const (
	ownersSteadyFor    = 10 * time.Second
	ownersSteadyWithin = time.Minute
)

// waitOwnersSteady waits until the owner of every project has not changed for
// ownersSteadyFor, and reports whether that happened within ownersSteadyWithin.
func (d *dataPathRun) waitOwnersSteady(ctx context.Context, projects []string) bool {
	owners := func() string {
		now := time.Now()
		out := ""
		for _, p := range projects {
			out += p + "=" + d.obs.OwnerAt(p, now) + ","
		}
		return out
	}
	began, last, since := time.Now(), owners(), time.Now()
	for time.Since(since) < ownersSteadyFor {
		if time.Since(began) > ownersSteadyWithin || !sleepCtx(ctx, 500*time.Millisecond) {
			return false
		}
		if now := owners(); now != last {
			last, since = now, time.Now()
		}
	}
	return true
}

// perPlane returns how many proxies plane i gets: Proxies spread evenly, the first
// planes taking the remainder.
func (d *dataPathRun) perPlane(i int) int {
	n := d.o.Proxies / len(d.projects)
	if i < d.o.Proxies%len(d.projects) {
		n++
	}
	return n
}

// paced runs step(i) for i in [0, n) at an even pace over the duration.
func paced(ctx context.Context, n int, over time.Duration, step func(i int)) {
	if n == 0 {
		return
	}
	interval := over / time.Duration(n)
	next := time.Now()
	for i := 0; i < n && ctx.Err() == nil; i++ {
		step(i)
		next = next.Add(interval)
		sleepCtx(ctx, time.Until(next))
	}
}

// eachPlane runs f for every project at once and waits.
func (d *dataPathRun) eachPlane(f func(i int, p ProjectLoad)) {
	var wg sync.WaitGroup
	for i, p := range d.projects {
		wg.Add(1)
		go func() { defer wg.Done(); f(i, p) }()
	}
	wg.Wait()
}

// createAll creates every proxy, each plane at an even pace over CreateOver.
func (d *dataPathRun) createAll(ctx context.Context) {
	d.eachPlane(func(i int, p ProjectLoad) {
		c := d.run.Env.Planes[p.Plane].Client
		paced(ctx, d.perPlane(i), d.o.CreateOver, func(k int) {
			name := fmt.Sprintf("px-%d", k)
			at := time.Now()
			if err := c.Create(ctx, benchProxy(p.Name, name, p.Namespace)); err != nil {
				d.note("creating %s/%s: %v", p.Name, name, err)
				return
			}
			d.createMu.Lock()
			d.created[ProxyKey{p.Name, p.Namespace, name}] = at
			d.names[p.Name] = append(d.names[p.Name], name)
			d.createMu.Unlock()
		})
	})
}

// deleteAll deletes every proxy created, each plane at an even pace over DeleteOver.
func (d *dataPathRun) deleteAll(ctx context.Context) {
	d.eachPlane(func(_ int, p ProjectLoad) {
		c := d.run.Env.Planes[p.Plane].Client
		d.createMu.Lock()
		names := append([]string(nil), d.names[p.Name]...)
		d.createMu.Unlock()
		paced(ctx, len(names), d.o.DeleteOver, func(k int) {
			px := benchProxy(p.Name, names[k], p.Namespace)
			at := time.Now()
			if err := client.IgnoreNotFound(c.Delete(ctx, px)); err != nil {
				d.note("deleting %s/%s: %v", p.Name, names[k], err)
				return
			}
			d.createMu.Lock()
			d.deleted[ProxyKey{p.Name, p.Namespace, names[k]}] = at
			d.createMu.Unlock()
		})
	})
}

// waitProgrammed waits until every created proxy was seen Programmed, or
// ProgrammedWithin passes.
func (d *dataPathRun) waitProgrammed(ctx context.Context) {
	deadline := time.Now().Add(d.o.ProgrammedWithin)
	for d.tracker.count() < len(d.created) {
		if time.Now().After(deadline) || !sleepCtx(ctx, 250*time.Millisecond) {
			d.note("%d of %d proxies Programmed %s after the last create", d.tracker.count(), len(d.created), d.o.ProgrammedWithin)
			return
		}
	}
}

// waitClean waits until no proxy of the run is left on its plane and the hub holds no
// anchor, downstream Gateway, HTTPRoute, Certificate or backend object (Service,
// EndpointSlice, BackendTLSPolicy) of the run, or CleanWithin
// passes. The hub is listed only once the planes hold no proxy: a proxy's finalizer
// deletes its hub objects before it goes, and these lists (a label-selected ConfigMap
// list over the whole hub per project, six lists per mapped namespace) would
// otherwise compete, twice a second, with the replicas they measure. The latencies
// come from the audit log, not from this wait, which only ends the phase.
func (d *dataPathRun) waitClean(ctx context.Context) {
	deadline := time.Now().Add(d.o.CleanWithin)
	for {
		left, proxies, err := 0, d.proxiesLeft(ctx), error(nil)
		if proxies == 0 {
			left, err = d.hubLeft(ctx)
			if err == nil && left == 0 {
				return
			}
		}
		if time.Now().After(deadline) || !sleepCtx(ctx, time.Second) {
			if proxies > 0 {
				left, err = d.hubLeft(context.WithoutCancel(ctx))
			}
			d.note("%s after the last delete: %d proxies and %d hub objects left (%v)", d.o.CleanWithin, proxies, left, err)
			return
		}
	}
}

// hubLeft counts the run's anchors and downstream objects still on the hub.
func (d *dataPathRun) hubLeft(ctx context.Context) (int, error) {
	n, err := d.anchorsLeft(ctx)
	if err != nil {
		return 0, err
	}
	hub := d.run.Env.Hub.Client
	for _, p := range d.projects {
		ns := client.InNamespace(anchor.MappedNamespace(p.NamespaceUID))
		certs := &unstructured.UnstructuredList{}
		certs.SetGroupVersionKind(gateway.CertificateGVK.GroupVersion().WithKind(gateway.CertificateGVK.Kind + "List"))
		gws, routes := &gatewayv1.GatewayList{}, &gatewayv1.HTTPRouteList{}
		svcs, slices, policies := &corev1.ServiceList{}, &discoveryv1.EndpointSliceList{}, &gatewayv1.BackendTLSPolicyList{}
		for _, list := range []client.ObjectList{gws, routes, certs, svcs, slices, policies} {
			if err := hub.List(ctx, list, ns); err != nil {
				return 0, err
			}
		}
		n += len(gws.Items) + len(routes.Items) + len(certs.Items) + len(svcs.Items) + len(slices.Items) + len(policies.Items)
	}
	return n, nil
}

// anchorOwners names the anchors of every proxy: the upstream Gateway and HTTPRoute
// are named after their proxy, and their anchors after their UIDs.
func (d *dataPathRun) anchorOwners(ctx context.Context) (map[string]ProxyKey, error) {
	out := map[string]ProxyKey{}
	for _, p := range d.projects {
		c := d.run.Env.Planes[p.Plane].Client
		gws, routes := &gatewayv1.GatewayList{}, &gatewayv1.HTTPRouteList{}
		if err := c.List(ctx, gws, client.InNamespace(p.Namespace)); err != nil {
			return nil, err
		}
		if err := c.List(ctx, routes, client.InNamespace(p.Namespace)); err != nil {
			return nil, err
		}
		for _, g := range gws.Items {
			out[anchor.Name(g.UID)] = ProxyKey{p.Name, p.Namespace, g.Name}
		}
		for _, r := range routes.Items {
			out[anchor.Name(r.UID)] = ProxyKey{p.Name, p.Namespace, r.Name}
		}
	}
	return out, nil
}

// maxNotCleanDescribed is how many proxies that are not clean the report describes
// object by object.
const maxNotCleanDescribed = 5

// result reads the hub's audit log and fills in the latencies and request counts.
func (d *dataPathRun) result(res DataPathResult, hub auditCursor, owners map[string]ProxyKey) (DataPathResult, error) {
	events, err := readRequests(hub.path, hub.offset)
	if err != nil {
		return res, err
	}
	users := map[string]bool{}
	for _, r := range d.replicas {
		users[r.User] = true
	}
	res.CreateRequests = CountRequests(events, users, res.CreateStart, res.DeleteStart)
	res.DeleteRequests = CountRequests(events, users, res.DeleteStart, res.DeleteEnd)
	perNamespace := d.o.Proxies / max(len(d.projects), 1)
	res.MinimumCreate, res.MinimumDelete = DesignMinimum(DataPathHostnames, DataPathBackendObjects, perNamespace)

	res.Created, res.Deleted = len(d.created), len(d.deleted)
	programmed := d.tracker.times()
	for k, at := range d.created {
		if p, ok := programmed[k]; ok {
			res.ToProgrammed = append(res.ToProgrammed, max(p.Sub(at), 0))
		} else {
			res.NotProgrammed++
		}
	}
	index := ProxyIndex{Projects: map[string]ProjectLoad{}, AnchorOwner: func(name string) (ProxyKey, bool) {
		k, ok := owners[name]
		return k, ok
	}}
	for _, p := range d.projects {
		index.Projects[anchor.MappedNamespace(p.NamespaceUID)] = p
	}
	res.CertificateListsOfDeleted = CertificateListsOfDeleted(events, users, index, d.deleted)
	res.CertificateOrders = CountCertificateOrders(events, users, index, len(d.created), DataPathHostnames, d.deleted)
	lives := hubObjectLives(events, index)
	clean, notClean := cleanTimesOf(lives, d.deleted)
	for _, v := range clean {
		res.ToClean = append(res.ToClean, v)
	}
	res.NotClean = len(d.deleted) - len(clean)
	if len(notClean) > 0 {
		d.note("%d proxies with hub objects not deleted, first %s/%s", len(notClean), notClean[0].Project, notClean[0].Name)
		for _, k := range notClean[:min(len(notClean), maxNotCleanDescribed)] {
			d.note("not clean: %s/%s (deletion requested %s): %s", k.Project, k.Name, d.deleted[k].UTC().Format("15:04:05.000"),
				strings.Join(undeleted(lives[k]), "; "))
		}
	}
	pr, cl := res.Programmed(), res.Clean()
	d.log("  %s: %d/%d Programmed (p50 %s, p99 %s, max %s); %d clean (p50 %s, p99 %s, max %s); hub requests per proxy: create %v, delete %v; peak RSS %v MB",
		d.c, pr.N, len(d.created), pr.P50, pr.P99, pr.Max, cl.N, cl.P50, cl.P99, cl.Max,
		res.CreateRequests.PerProxy(pr.N), res.DeleteRequests.PerProxy(res.Deleted), mb(res.PeakRSS))
	res.Errors = d.errors
	return res, nil
}

// startWith starts one more replica with options o.
func (d *dataPathRun) startWith(o ReplicaOptions) error {
	d.mu.Lock()
	name := fmt.Sprintf("%s-%d", d.run.ID, d.next)
	d.next++
	d.mu.Unlock()
	r, err := d.run.StartReplica(d.bins, d.c, name, o)
	if err != nil {
		return err
	}
	d.mu.Lock()
	d.replicas = append(d.replicas, r)
	d.mu.Unlock()
	return nil
}
