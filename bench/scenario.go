package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"anchorage/api/v1alpha"
	"anchorage/internal/harness"
	"anchorage/pkg/anchor"
	"anchorage/pkg/shard"
)

// Schedule is how long the runner waits between the steps of a scenario.
type Schedule struct {
	// Warm is the load's run time before the first fault.
	Warm time.Duration
	// Hold is how long the runner keeps going after every project has an owner again.
	Hold time.Duration
	// OwnedWithin bounds the wait for every project to have an owner.
	OwnedWithin time.Duration
	// Settle bounds the wait, after the last proxy is deleted, for its anchors to go.
	Settle time.Duration
	// LoadInterval is the time between two operations on one project.
	LoadInterval time.Duration
	// HubFaultSteps is how many faults the hub-faults scenario draws, from HubFaultSeed.
	HubFaultSteps int
	HubFaultSeed  uint64
}

// FullSchedule is make bench's; SmokeSchedule make bench-smoke's.
var (
	FullSchedule  = Schedule{Warm: 5 * time.Second, Hold: 5 * time.Second, OwnedWithin: 90 * time.Second, Settle: 45 * time.Second, LoadInterval: 300 * time.Millisecond, HubFaultSteps: HubFaultSteps(false)}
	SmokeSchedule = Schedule{Warm: 5 * time.Second, Hold: 3 * time.Second, OwnedWithin: 30 * time.Second, Settle: 20 * time.Second, LoadInterval: 300 * time.Millisecond, HubFaultSteps: HubFaultSteps(true)}
)

// PauseFor is how long a replica stays stopped: well past its membership's duration
// (anchorage's member Lease; the sharded coordinator's peer Lease TTL, after which the
// others drop it from their snapshot).
func PauseFor(c Coordinator) time.Duration {
	if c == Sharded {
		return shardedPeerTTL*3/2 + 3*harness.FastTimings.LeaseDuration
	}
	return 3 * harness.FastTimings.LeaseDuration
}

// scenarioRun is the state of one scenario run.
type scenarioRun struct {
	c        Coordinator
	s        Scenario
	bins     Binaries
	sched    Schedule
	run      *Run
	projects []ProjectLoad
	obs      *Observer
	load     *Load
	log      func(format string, args ...any)

	mu       sync.Mutex
	replicas []*Replica
	faults   []Fault
	next     int
	errors   []string
	// recovery and recovered: how long after the hub faults were lifted every project
	// was owned again, and whether it was within OwnedWithin.
	recovery  time.Duration
	recovered bool
}

// RunScenario runs scenario s with coordinator c on the env's real planes, R=3.
func (e *Env) RunScenario(ctx context.Context, c Coordinator, s Scenario, bins Binaries, sched Schedule, logf func(string, ...any)) (ScenarioResult, error) {
	run, err := e.NewRun(ctx, string(c)+"-"+string(s))
	if err != nil {
		return ScenarioResult{}, err
	}
	defer run.Close(context.Background())
	sr := &scenarioRun{c: c, s: s, bins: bins, sched: sched, run: run, log: logf}
	cursors := map[string]auditCursor{"hub": markAudit(e.Hub.AuditLogPath)}
	var names []string
	for i := range e.Planes {
		p := ProjectLoad{Name: fmt.Sprintf("%s-p%d", run.ID, i), Plane: i, Namespace: "bench-" + run.ID}
		if p.NamespaceUID, err = run.CreateUpstreamNamespace(ctx, i, p.Namespace); err != nil {
			return ScenarioResult{}, err
		}
		if err := run.AddProject(ctx, p.Name, i); err != nil {
			return ScenarioResult{}, err
		}
		cursors[p.Name] = markAudit(e.Planes[i].AuditLogPath)
		sr.projects = append(sr.projects, p)
		names = append(names, p.Name)
	}
	defer sr.cleanupUpstream()
	sr.obs = NewObserver(run, c, names)
	obsCtx, stopObs := context.WithCancel(ctx)
	defer stopObs()
	go sr.obs.Run(obsCtx, 250*time.Millisecond, true)

	start := time.Now()
	for i := 0; i < 3; i++ {
		if err := sr.start(); err != nil {
			return ScenarioResult{}, err
		}
	}
	defer sr.stopAll()
	if !sr.waitAllOwned(ctx) {
		sr.note("not every project had an owner %s after start", sched.OwnedWithin)
	}
	sr.load = NewLoad(run, sr.projects, sched.LoadInterval, start.UnixNano())
	loadCtx, stopLoad := context.WithCancel(ctx)
	loadDone := make(chan struct{})
	go func() { sr.load.Run(loadCtx); close(loadDone) }()
	sr.sleep(ctx, sched.Warm)

	if err := sr.faultSchedule(ctx); err != nil {
		sr.note("fault schedule: %v", err)
	}
	stopLoad()
	<-loadDone
	if err := sr.load.DeleteAll(ctx); err != nil {
		sr.note("deleting proxies: %v", err)
	}
	left := sr.settle(ctx)
	end := time.Now()
	sr.stopAll()
	stopObs()
	return sr.result(start, end, left, cursors)
}

func (sr *scenarioRun) note(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	sr.mu.Lock()
	sr.errors = append(sr.errors, msg)
	sr.mu.Unlock()
	sr.log("  ! %s", msg)
}

func (sr *scenarioRun) sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

func (sr *scenarioRun) fault(kind string, r *Replica) { sr.faultAt(kind, r, time.Now()) }

// faultAt records a fault that happened at at and logs it with what the replica owned.
func (sr *scenarioRun) faultAt(kind string, r *Replica, at time.Time) {
	f := Fault{At: at, Kind: kind, Replica: r.Name}
	if kind == "kill" || kind == "stop" || kind == "term" {
		f.Coordinator = sr.coordinatorName() == r.Name
	}
	sr.mu.Lock()
	sr.faults = append(sr.faults, f)
	sr.mu.Unlock()
	suffix := ""
	if f.Coordinator {
		suffix = " (coordinator)"
	}
	sr.log("  %s %s%s, owning %v", kind, r.Name, suffix, sr.obs.Owned(r.Name, f.At))
}

// start starts one more replica.
func (sr *scenarioRun) start() error {
	sr.mu.Lock()
	name := fmt.Sprintf("%s-%d", sr.run.ID, sr.next)
	sr.mu.Unlock()
	r, err := sr.run.StartReplica(sr.bins, sr.c, name, sr.replicaOptions())
	if err != nil {
		return err
	}
	sr.mu.Lock()
	sr.next++
	sr.replicas = append(sr.replicas, r)
	sr.mu.Unlock()
	return nil
}

// replicaOptions are the options of the next replica: in the skew scenario, the skew
// build with the next clock offset of SkewOffsets.
func (sr *scenarioRun) replicaOptions() ReplicaOptions {
	if sr.s != ScenarioSkew {
		return ReplicaOptions{HubFaults: sr.s == ScenarioHubFaults}
	}
	sr.mu.Lock()
	defer sr.mu.Unlock()
	return ReplicaOptions{Binary: sr.bins[SkewBuild(sr.c)], ClockOffset: skewOffset(sr.next)}
}

// running returns the replicas still running.
func (sr *scenarioRun) running() []*Replica {
	sr.mu.Lock()
	defer sr.mu.Unlock()
	var out []*Replica
	for _, r := range sr.replicas {
		if r.Running() {
			out = append(out, r)
		}
	}
	return out
}

// coordinatorName returns anchorage's elected coordinator ("" for the baseline).
func (sr *scenarioRun) coordinatorName() string {
	return coordinatorOf(context.Background(), sr.run, sr.c)
}

// victim picks a running replica that owns at least one project; coordinator selects
// anchorage's coordinator (true) or any other replica (false).
func (sr *scenarioRun) victim(coordinator bool) *Replica {
	coord := sr.coordinatorName()
	var fallback *Replica
	for _, r := range sr.running() {
		if coordinator != (r.Name == coord) && sr.c != Sharded {
			continue
		}
		if len(sr.obs.Owned(r.Name, time.Now())) > 0 {
			return r
		}
		fallback = r
	}
	return fallback
}

func (sr *scenarioRun) waitAllOwned(ctx context.Context) bool {
	deadline := time.Now().Add(sr.sched.OwnedWithin)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		alive := map[string]bool{}
		for _, r := range sr.running() {
			alive[r.Name] = true
		}
		if sr.obs.OwnedCount(alive) == len(sr.projects) {
			return true
		}
		sr.sleep(ctx, 250*time.Millisecond)
	}
	return false
}

// settleAfter waits for every project to have an owner, then holds.
func (sr *scenarioRun) settleAfter(ctx context.Context, what string) {
	if !sr.waitAllOwned(ctx) {
		sr.note("not every project had an owner %s after %s", sr.sched.OwnedWithin, what)
	}
	sr.sleep(ctx, sr.sched.Hold)
}

// faultSchedule applies the scenario's faults.
func (sr *scenarioRun) faultSchedule(ctx context.Context) error {
	switch sr.s {
	case ScenarioKill:
		return sr.kills(ctx)
	case ScenarioPause:
		return sr.pause(ctx)
	case ScenarioSkew:
		// The pause first, while all three skewed clocks run, so that others take
		// over; then the kills, as kill does.
		if err := sr.pause(ctx); err != nil {
			return err
		}
		sr.settleAfter(ctx, "pause")
		return sr.kills(ctx)
	case ScenarioScale:
		if err := sr.start(); err != nil {
			return err
		}
		rs := sr.running()
		sr.fault("start", rs[len(rs)-1])
		// The sharded coordinator learns of a new peer at its registry's next refresh.
		sr.sleep(ctx, sr.sched.Hold)
		if sr.c == Sharded {
			sr.sleep(ctx, 10*time.Second)
		}
		sr.settleAfter(ctx, "scale up")
		var wg sync.WaitGroup
		for _, r := range rs[:2] {
			sr.fault("term", r)
			wg.Add(1)
			go func(r *Replica) { defer wg.Done(); r.Terminate(40 * time.Second) }(r)
		}
		wg.Wait()
		sr.settleAfter(ctx, "scale down")
	case ScenarioHubFaults:
		sr.hubFaults(ctx)
	case ScenarioRolling:
		for _, r := range sr.running() {
			sr.fault("term", r)
			r.Terminate(40 * time.Second)
			if err := sr.start(); err != nil {
				return err
			}
			rs := sr.running()
			sr.fault("start", rs[len(rs)-1])
			sr.settleAfter(ctx, "replacing "+r.Name)
		}
	}
	return nil
}

// kills kills a replica other than the coordinator that owns a project, then the
// coordinator, each followed by a settle.
func (sr *scenarioRun) kills(ctx context.Context) error {
	for _, coordinator := range []bool{false, true} {
		v := sr.victim(coordinator)
		if v == nil {
			return fmt.Errorf("no replica to kill")
		}
		sr.fault("kill", v)
		if err := v.Kill(); err != nil {
			return err
		}
		sr.settleAfter(ctx, "kill")
	}
	return nil
}

// pause stops a replica other than the coordinator that owns a project for
// PauseFor, continues it and holds.
func (sr *scenarioRun) pause(ctx context.Context) error {
	v := sr.victim(false)
	if v == nil {
		return fmt.Errorf("no replica to pause")
	}
	// The stop's time is taken right before the signal, and the log line (which reads
	// the observer) written after it: work the replica begins between the two is
	// judged against stopSlack, which a log line on a loaded machine can exceed (the
	// skew run of 2026-12-02 counted 144 records begun 100–200 ms after the time taken,
	// before the signal went out, as overlaps not frozen).
	at := time.Now()
	err := v.Pause()
	sr.faultAt("stop", v, at)
	if err != nil {
		return err
	}
	sr.sleep(ctx, PauseFor(sr.c))
	sr.fault("cont", v)
	if err := v.Continue(); err != nil {
		return err
	}
	sr.sleep(ctx, 3*sr.sched.Hold)
	return nil
}

// anchorsLeft lists the run's anchors still on the hub.
func (sr *scenarioRun) anchorsLeft(ctx context.Context) (int, error) {
	n := 0
	for _, p := range sr.projects {
		list := &corev1.ConfigMapList{}
		if err := sr.run.Env.Hub.Client.List(ctx, list, client.MatchingLabels{anchor.LabelClusterName: anchor.ClusterNameValue(p.Name)}); err != nil {
			return 0, err
		}
		for _, cm := range list.Items {
			if strings.HasPrefix(cm.Name, anchor.NamePrefix) {
				n++
			}
		}
	}
	return n, nil
}

// settle waits until no proxy and no anchor of the run is left, or Settle passes, and
// returns the anchors left.
func (sr *scenarioRun) settle(ctx context.Context) int {
	deadline := time.Now().Add(sr.sched.Settle)
	for {
		left, err := sr.anchorsLeft(ctx)
		proxies := sr.proxiesLeft(ctx)
		if err == nil && left == 0 && proxies == 0 {
			return 0
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			if proxies > 0 {
				sr.note("%d proxies still present (finalizer not removed) %s after deletion", proxies, sr.sched.Settle)
			}
			return left
		}
		sr.sleep(ctx, 500*time.Millisecond)
	}
}

func (sr *scenarioRun) proxiesLeft(ctx context.Context) int {
	n := 0
	for _, p := range sr.projects {
		list := &v1alpha.HTTPProxyList{}
		if err := sr.run.Env.Planes[p.Plane].Client.List(ctx, list, client.InNamespace(p.Namespace)); err == nil {
			n += len(list.Items)
		}
	}
	return n
}

// stopAll continues paused replicas and stops every replica gracefully.
func (sr *scenarioRun) stopAll() {
	var wg sync.WaitGroup
	for _, r := range sr.running() {
		_ = r.Continue()
		wg.Add(1)
		go func(r *Replica) { defer wg.Done(); r.Terminate(40 * time.Second); r.CloseProxy() }(r)
	}
	wg.Wait()
}

// cleanupUpstream removes what the run leaves in the project planes, which have no
// garbage collector and no namespace controller: without it, a later run's replicas
// would program a leftover HTTPProxy or upstream Gateway under their own project.
func (sr *scenarioRun) cleanupUpstream() {
	ctx := context.Background()
	for _, p := range sr.projects {
		c := sr.run.Env.Planes[p.Plane].Client
		for _, list := range []client.ObjectList{&v1alpha.HTTPProxyList{}, &gatewayv1.GatewayList{}, &gatewayv1.HTTPRouteList{}} {
			if err := c.List(ctx, list, client.InNamespace(p.Namespace)); err != nil {
				sr.note("cleaning up %s: %v", p.Name, err)
				continue
			}
			_ = meta.EachListItem(list, func(o runtime.Object) error {
				obj := o.(client.Object)
				if len(obj.GetFinalizers()) > 0 {
					obj.SetFinalizers(nil)
					_ = c.Update(ctx, obj)
				}
				return client.IgnoreNotFound(c.Delete(ctx, obj))
			})
		}
		_ = c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: p.Namespace}})
	}
}

// readRecords reads every replica's record file.
func (sr *scenarioRun) readRecords() ([]Record, error) {
	var out []Record
	for _, r := range sr.replicas {
		recs, err := ReadRecords(r.RecordPath)
		if err != nil {
			return nil, err
		}
		out = append(out, Unskew(recs, r.ClockOffset)...)
	}
	return out, nil
}

// ReadRecords reads a record file; a missing file holds no records.
func ReadRecords(path string) ([]Record, error) {
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Record
	for _, line := range strings.Split(string(data), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		var r Record
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		out = append(out, r)
	}
	return out, nil
}

func (sr *scenarioRun) result(start, end time.Time, left int, cursors map[string]auditCursor) (ScenarioResult, error) {
	res := ScenarioResult{
		Coordinator: sr.c, Scenario: sr.s, Projects: len(sr.projects), Replicas: 3, LeaseDuration: harness.FastTimings.LeaseDuration,
		Start: start, End: end, Faults: sr.faults, AnchorsLeft: left, ProxiesDeleted: sr.load.Deleted(),
		Timeline: sr.obs.Timeline(),
	}
	if sr.s == ScenarioHubFaults {
		res.HubFaultSeed, res.Recovery, res.NotRecovered = sr.sched.HubFaultSeed, sr.recovery, !sr.recovered
	}
	records, err := sr.readRecords()
	if err != nil {
		return res, err
	}
	res.Records = len(records)
	res.Overlaps = Overlaps(records, InFlightAtStop(sr.faults))
	for _, f := range sr.faults {
		if f.Kind != "kill" && f.Kind != "stop" && f.Kind != "term" {
			continue // hub faults, and starts and wakes, hand nothing over
		}
		// The owner as the coordinator's Leases said just before the fault.
		owned := sr.obs.Owned(f.Replica, f.At)
		got, missing := HandOversAfter(f, owned, records, f.Kind == "term")
		res.HandOvers = append(res.HandOvers, got...)
		res.HandOversMissing += len(missing)
		for _, p := range missing {
			sr.note("%s of %s: project %s not reconciled by another replica before the end", f.Kind, f.Replica, p)
		}
	}
	leaseWrites, err := sr.auditChecks(&res, cursors, records)
	if err != nil {
		return res, err
	}
	sr.prematureHandOvers(&res, leaseWrites, end)
	ops, loadErrors := sr.load.Ops()
	sr.log("  load: %v; %d records; %d overlaps (%d with work frozen by a stop); %d late writes of %d; %d anchors left; %d wrongful deletions; %d hub creates after the proxy's deletion was requested, of %d (%d more in the guard's window); %d premature failure hand-overs",
		ops, res.Records, len(res.Overlaps), countFrozen(res.Overlaps), len(res.LateWrites), res.Writes, res.AnchorsLeft, res.WrongfulDeletions,
		len(res.CreatesAfterDeletion), res.HubCreatesChecked, res.CreatesInGuardWindow, len(res.PrematureHandOvers))
	if len(loadErrors) > 0 {
		sr.note("%d load operations failed, first: %s", len(loadErrors), loadErrors[0])
	}
	res.Errors = sr.errors
	return res, nil
}

// prematureHandOvers fills res's clock offsets and, for anchorage, its failure
// hand-overs of replicas that had not failed, up to end (the graceful stops after it
// are no faults).
func (sr *scenarioRun) prematureHandOvers(res *ScenarioResult, leaseWrites []LeaseWrite, end time.Time) {
	members := map[string]string{}
	for _, r := range sr.replicas {
		members[shard.MemberLeaseName(r.Name)] = r.Name
		if r.ClockOffset != 0 {
			if res.ClockOffsets == nil {
				res.ClockOffsets = map[string]time.Duration{}
			}
			res.ClockOffsets[r.Name] = r.ClockOffset
		}
	}
	if sr.c == Sharded {
		return
	}
	var changes []OwnerChange
	for _, c := range sr.obs.OwnerChanges() {
		if c.At.Before(end) {
			changes = append(changes, c)
		}
	}
	var writes []LeaseWrite
	for _, w := range leaseWrites {
		if w.At.Before(end) {
			writes = append(writes, w)
		}
	}
	res.PrematureHandOvers = PrematureHandOvers(changes, writes, members, FailedAt(sr.faults, harness.FastTimings.LeaseDuration))
	for _, p := range res.PrematureHandOvers {
		sr.log("  premature failure hand-over at %s: %s", offsetFrom(res.Start, p.At), describePremature(p))
	}
}

// auditChecks reads the API servers' audit logs for writes after validity, wrongful
// anchor deletions and hub creates after a proxy's deletion was requested; it returns
// the replicas' successful hub Lease writes.
func (sr *scenarioRun) auditChecks(res *ScenarioResult, cursors map[string]auditCursor, records []Record) ([]LeaseWrite, error) {
	byUser, names := map[string]string{}, map[string]bool{}
	for _, r := range sr.replicas {
		byUser[r.User], names[r.Name] = r.Name, true
	}
	projectOfHubNS := map[string]string{}
	fenceProject := map[string]string{}
	for _, p := range sr.projects {
		projectOfHubNS[anchor.MappedNamespace(p.NamespaceUID)] = p.Name
		fenceProject[FenceLeaseName(p.Name)] = p.Name
	}
	validity := NewValidity(harness.FastTimings.LeaseDuration)
	var writes []Write
	var hubEvents []auditEvent
	deleted := map[ProxyKey]time.Time{}
	reads := map[ProxyReader][]ProxyRead{}
	writer := func(e auditEvent) string { return writerOf(e, byUser, names) }
	unattributed := 0
	var leaseWrites []LeaseWrite
	for plane, cur := range cursors {
		events, err := cur.read()
		if err != nil {
			return nil, err
		}
		if plane == "hub" {
			hubEvents = events
		} else if p, ok := sr.project(plane); ok {
			maps.Copy(deleted, ProxyDeletions(p.Name, p.Namespace, events))
			maps.Copy(reads, ProxyReads(p.Name, p.Namespace, events, writer))
		}
		for _, e := range events {
			w := writer(e)
			if w == "" || !isWrite(e) || !succeeded(e) {
				continue
			}
			ref := e.ObjectRef
			if plane == "hub" && ref.Resource == "leases" {
				leaseWrites = append(leaseWrites, LeaseWrite{Writer: w, Name: ref.Name, At: e.RequestReceivedTimestamp})
				switch {
				case sr.c == Sharded && fenceProject[ref.Name] != "":
					validity.Renewed(w, fenceProject[ref.Name], e.RequestReceivedTimestamp)
				case sr.c != Sharded && ref.Name == shard.MemberLeaseName(w):
					validity.Renewed(w, "", e.RequestReceivedTimestamp)
				}
			}
			if isLeaseOrEvent(ref.Resource) {
				continue
			}
			wr := Write{Replica: w, Plane: plane, Verb: e.Verb, Resource: ref.Resource, Namespace: ref.Namespace, Name: ref.Name, At: e.StageTimestamp}
			if plane == "hub" {
				wr.Project = projectOfHubNS[ref.Namespace]
				if ref.Resource == "namespaces" {
					wr.Project = projectOfHubNS[ref.Name]
				}
				if ref.Resource == "configmaps" && strings.HasPrefix(ref.Name, anchor.NamePrefix) && e.Verb == "delete" {
					sr.checkAnchorDeletion(res, ref.Name, e.StageTimestamp, &unattributed)
				}
			} else {
				wr.Project = plane
			}
			writes = append(writes, wr)
		}
	}
	scope := func(w Write) string { return "" }
	if sr.c == Sharded {
		scope = func(w Write) string { return w.Project }
		// A hub write the harness cannot tie to a project (the resync's plane identity
		// records) is left out of the sharded coordinator's check rather than counted.
		kept := writes[:0]
		for _, w := range writes {
			if w.Project != "" {
				kept = append(kept, w)
			}
		}
		writes = kept
	}
	sort.Slice(writes, func(i, j int) bool { return writes[i].At.Before(writes[j].At) })
	res.Writes = len(writes)
	res.LateWrites = LateWrites(writes, validity, scope, AdmittedAt(records))
	if unattributed > 0 {
		sr.note("%d anchor deletions could not be tied to a proxy (anchor never observed)", unattributed)
	}
	sr.checkCreatesAfterDeletion(res, hubEvents, deleted, reads, writer)
	return leaseWrites, nil
}

// checkCreatesAfterDeletion lists the hub creates for a proxy that arrived later than
// the proxy's delete (deleted, from the project planes' audit logs) plus
// DeletionTolerance, other than those in the live guard's window after a read of the
// proxy (reads).
func (sr *scenarioRun) checkCreatesAfterDeletion(res *ScenarioResult, hubEvents []auditEvent, deleted map[ProxyKey]time.Time, reads map[ProxyReader][]ProxyRead, writer func(auditEvent) string) {
	index := ProxyIndex{Projects: map[string]ProjectLoad{}, AnchorOwner: sr.obs.AnchorOwner}
	for _, p := range sr.projects {
		index.Projects[anchor.MappedNamespace(p.NamespaceUID)] = p
	}
	check := CreatesAfterDeletion(hubEvents, writer, index, deleted, reads)
	res.CreatesAfterDeletion, res.HubCreatesChecked, res.CreatesInGuardWindow = check.Late, check.Checked, check.InGuardWindow
	if check.Unattributed > 0 {
		sr.note("%d anchor creates could not be tied to a proxy (anchor never observed)", check.Unattributed)
	}
}

// project returns the run's project named name.
func (sr *scenarioRun) project(name string) (ProjectLoad, bool) {
	for _, p := range sr.projects {
		if p.Name == name {
			return p, true
		}
	}
	return ProjectLoad{}, false
}

// checkAnchorDeletion counts a deletion of a live proxy's anchor as wrongful.
func (sr *scenarioRun) checkAnchorDeletion(res *ScenarioResult, name string, at time.Time, unattributed *int) {
	key, ok := sr.obs.AnchorOwner(name)
	if !ok {
		*unattributed++
		return
	}
	if deleted, ok := sr.load.DeletedAt(key); ok && !deleted.After(at) {
		return
	}
	res.WrongfulDeletions++
	sr.note("anchor %s deleted at %s while proxy %s/%s/%s lived", name, at.Format(time.RFC3339Nano), key.Project, key.Namespace, key.Name)
}
