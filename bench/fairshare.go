package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"anchorage/api/v1alpha"
	"anchorage/internal/harness"
	"anchorage/pkg/shard"
)

// FairShareOptions size the fair-share section: one hostile project beside Normal
// normal ones, all held by one replica (the bounds are per replica), measured twice on
// the same planes: the normal projects alone, then beside the hostile one.
type FairShareOptions struct {
	// Normal is how many normal projects; PerNormal the proxies each creates in the
	// measured phase, at an even pace over CreateOver.
	Normal, PerNormal int
	// Hostile is how many proxies the hostile project holds before the replica starts;
	// HostileDelay how late its plane answers every request (a fault proxy in front).
	Hostile      int
	HostileDelay time.Duration
	CreateOver   time.Duration
	// ProgrammedWithin bounds the wait, after the last create, for the normal proxies.
	ProgrammedWithin time.Duration
	// Target is the most the normal projects' time to Programmed beside the hostile
	// one may be, as a multiple of the time alone.
	Target float64
}

// FullFairShare is the scenario; SmallFairShare a development size.
var (
	FullFairShare  = FairShareOptions{Normal: 9, PerNormal: 10, Hostile: 10000, HostileDelay: 200 * time.Millisecond, CreateOver: 30 * time.Second, ProgrammedWithin: 5 * time.Minute, Target: 1.5}
	SmallFairShare = FairShareOptions{Normal: 9, PerNormal: 5, Hostile: 1000, HostileDelay: 200 * time.Millisecond, CreateOver: 15 * time.Second, ProgrammedWithin: 3 * time.Minute, Target: 1.5}
)

// FairShareRun is one measurement: the normal projects' latencies, and how far the
// hostile project got meanwhile.
type FairShareRun struct {
	Label         string          `json:"label"`
	Hostile       int             `json:"hostile"`
	ToProgrammed  []time.Duration `json:"toProgrammed"`
	NotProgrammed int             `json:"notProgrammed"`
	// HostileProgrammed and HostileLimited count the hostile proxies Programmed and
	// those refused with ProxyLimitReached when the measurement ended.
	HostileProgrammed int      `json:"hostileProgrammed"`
	HostileLimited    int      `json:"hostileLimited"`
	Errors            []string `json:"errors,omitempty"`
}

// Programmed summarizes the normal projects' latencies.
func (r FairShareRun) Programmed() Latency { return LatencyOf(r.ToProgrammed) }

// FairShareResult is the section: the two runs side by side and their ratios.
type FairShareResult struct {
	Options FairShareOptions `json:"options"`
	Alone   FairShareRun     `json:"alone"`
	Beside  FairShareRun     `json:"beside"`
}

// Ratios are the p50 and p99 time to Programmed beside the hostile project over alone.
func (f FairShareResult) Ratios() (p50, p99 float64) {
	a, b := f.Alone.Programmed(), f.Beside.Programmed()
	if a.P50 <= 0 || a.P99 <= 0 {
		return 0, 0
	}
	return float64(b.P50) / float64(a.P50), float64(b.P99) / float64(a.P99)
}

// WithinTarget reports whether both ratios are at most the target and every normal
// proxy was programmed in both runs.
func (f FairShareResult) WithinTarget() bool {
	p50, p99 := f.Ratios()
	return f.Alone.NotProgrammed == 0 && f.Beside.NotProgrammed == 0 && p50 > 0 && p50 <= f.Options.Target && p99 <= f.Options.Target
}

// RunFairShare starts its own planes (the hostile plane first, then one per normal
// project) and measures the normal projects alone, then beside the hostile project.
func RunFairShare(ctx context.Context, bins Binaries, o FairShareOptions, dir string, logf func(string, ...any)) (FairShareResult, error) {
	res := FairShareResult{Options: o}
	env, err := StartDataPathEnv(o.Normal+1, dir)
	if err != nil {
		return res, err
	}
	defer env.Stop()
	if res.Alone, err = env.fairShareRun(ctx, bins, o, false, logf); err != nil {
		return res, err
	}
	if res.Beside, err = env.fairShareRun(ctx, bins, o, true, logf); err != nil {
		return res, err
	}
	p50, p99 := res.Ratios()
	logf("fair share: beside a hostile project of %d proxies, the normal projects' time to Programmed is %.2f× (p50) and %.2f× (p99) of alone; target %.1f×: within %v",
		o.Hostile, p50, p99, o.Target, res.WithinTarget())
	return res, nil
}

func (e *Env) fairShareRun(ctx context.Context, bins Binaries, o FairShareOptions, hostile bool, logf func(string, ...any)) (FairShareRun, error) {
	out := FairShareRun{Label: "alone"}
	if hostile {
		out.Label, out.Hostile = "beside a hostile project", o.Hostile
	}
	run, err := e.NewRun(ctx, "fair-"+map[bool]string{false: "alone", true: "hostile"}[hostile])
	if err != nil {
		return out, err
	}
	defer run.Close(context.Background())
	var normal []ProjectLoad
	for i := 1; i <= o.Normal; i++ {
		p := ProjectLoad{Name: fmt.Sprintf("%s-n%d", run.ID, i), Plane: i, Namespace: "bench-" + run.ID}
		if p.NamespaceUID, err = run.CreateUpstreamNamespace(ctx, i, p.Namespace); err != nil {
			return out, err
		}
		if err := run.AddProject(ctx, p.Name, i); err != nil {
			return out, err
		}
		normal = append(normal, p)
	}
	var bad ProjectLoad
	if hostile {
		var fp *harness.FaultProxy
		if bad, fp, err = e.layDownHostile(ctx, run, o, logf); err != nil {
			return out, err
		}
		defer fp.Close()
	}
	// The product's Lease timings: a reconcile on a plane answering 200 ms late takes
	// seconds, longer than the scenarios' 3 s Lease leaves a unit of work.
	timings := shard.DefaultTimings()
	rep, err := run.StartReplica(bins, Anchorage, run.ID+"-0", ReplicaOptions{ResyncPeriod: time.Hour, Timings: &timings})
	if err != nil {
		return out, err
	}
	defer rep.Terminate(10 * time.Second)

	// Warm up: one proxy per normal project, Programmed, so start-up (engaging the
	// projects, syncing their caches) is not measured; beside the hostile project,
	// also until its backlog is being programmed.
	tracker := newProgramTracker()
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	if err := tracker.watchAll(watchCtx, e, normal); err != nil {
		return out, err
	}
	for _, p := range normal {
		if err := e.Planes[p.Plane].Client.Create(ctx, benchProxy(p.Name, "warm", p.Namespace)); err != nil {
			return out, err
		}
	}
	if !waitUntil(ctx, 3*time.Minute, func() bool { return tracker.count() == len(normal) }) {
		return out, fmt.Errorf("%s: the warm-up proxies were not all Programmed within 3 minutes (%d of %d)", out.Label, tracker.count(), len(normal))
	}
	if hostile && !waitUntil(ctx, 3*time.Minute, func() bool { n, _ := e.hostileProgress(ctx, bad); return n > 0 }) {
		out.Errors = append(out.Errors, "no hostile proxy was Programmed within 3 minutes of the warm-up")
	}

	created := map[ProxyKey]time.Time{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, p := range normal {
		wg.Add(1)
		go func() {
			defer wg.Done()
			paced(ctx, o.PerNormal, o.CreateOver, func(k int) {
				name := fmt.Sprintf("px-%d", k)
				at := time.Now()
				if err := e.Planes[p.Plane].Client.Create(ctx, benchProxy(p.Name, name, p.Namespace)); err != nil {
					mu.Lock()
					out.Errors = append(out.Errors, fmt.Sprintf("creating %s/%s: %v", p.Name, name, err))
					mu.Unlock()
					return
				}
				mu.Lock()
				created[ProxyKey{p.Name, p.Namespace, name}] = at
				mu.Unlock()
			})
		}()
	}
	wg.Wait()
	want := len(created) + len(normal)
	waitUntil(ctx, o.ProgrammedWithin, func() bool { return tracker.count() >= want })
	seen := tracker.times()
	for k, at := range created {
		if p, ok := seen[k]; ok {
			out.ToProgrammed = append(out.ToProgrammed, max(p.Sub(at), 0))
		} else {
			out.NotProgrammed++
		}
	}
	if hostile {
		out.HostileProgrammed, out.HostileLimited = e.hostileProgress(ctx, bad)
	}
	l := out.Programmed()
	logf("  fair share, %s: %d/%d normal proxies Programmed (p50 %s, p99 %s, max %s); hostile: %d Programmed, %d ProxyLimitReached; %d errors %v",
		out.Label, l.N, len(created), l.P50, l.P99, l.Max, out.HostileProgrammed, out.HostileLimited, len(out.Errors), out.Errors[:min(len(out.Errors), 3)])
	if !hostile {
		// The next run's projects are on the same planes: the replica finalizes what this
		// run created before it stops, so the next one finds none of it.
		for _, p := range normal {
			if err := e.Planes[p.Plane].Client.DeleteAllOf(ctx, &v1alpha.HTTPProxy{}, client.InNamespace(p.Namespace)); err != nil {
				return out, err
			}
		}
		if !waitUntil(ctx, 3*time.Minute, func() bool {
			for _, p := range normal {
				list := &v1alpha.HTTPProxyList{}
				if err := e.Planes[p.Plane].Client.List(ctx, list, client.InNamespace(p.Namespace)); err != nil || len(list.Items) > 0 {
					return false
				}
			}
			return true
		}) {
			return out, fmt.Errorf("%s: the run's proxies were not finalized within 3 minutes", out.Label)
		}
	}
	return out, nil
}

// layDownHostile creates the hostile project on plane 0: Hostile proxies written before
// any replica runs, and a kubeconfig reaching the plane through a fault proxy that
// answers every request HostileDelay late.
func (e *Env) layDownHostile(ctx context.Context, run *Run, o FairShareOptions, logf func(string, ...any)) (ProjectLoad, *harness.FaultProxy, error) {
	p := ProjectLoad{Name: run.ID + "-hostile", Plane: 0, Namespace: "bench-" + run.ID}
	var err error
	if p.NamespaceUID, err = run.CreateUpstreamNamespace(ctx, 0, p.Namespace); err != nil {
		return p, nil, err
	}
	began := time.Now()
	var next atomic.Int64
	errs := make([]error, 16)
	var wg sync.WaitGroup
	for w := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1) - 1; i < int64(o.Hostile) && ctx.Err() == nil && errs[w] == nil; i = next.Add(1) - 1 {
				errs[w] = e.Planes[0].Client.Create(ctx, benchProxy(p.Name, fmt.Sprintf("hx-%d", i), p.Namespace))
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return p, nil, fmt.Errorf("creating the hostile proxies: %w", err)
	}
	logf("  fair share: %d hostile proxies created in %s", o.Hostile, time.Since(began).Round(time.Second))
	fp, err := harness.NewFaultProxy(e.Planes[0].Config, 1)
	if err != nil {
		return p, nil, err
	}
	fp.SetRules(harness.FaultRule{Rate: 1, Delay: o.HostileDelay})
	kc, err := fp.Kubeconfig()
	if err == nil {
		err = run.addSecret(ctx, p.Name, kc)
	}
	if err != nil {
		_ = fp.Close()
		return p, nil, err
	}
	return p, fp, nil
}

// hostileProgress counts the hostile project's proxies Programmed and those refused
// with ProxyLimitReached, read directly from its plane (not through the fault proxy).
func (e *Env) hostileProgress(ctx context.Context, p ProjectLoad) (programmed, limited int) {
	list := &v1alpha.HTTPProxyList{}
	if err := e.Planes[p.Plane].Client.List(ctx, list, client.InNamespace(p.Namespace)); err != nil {
		return 0, 0
	}
	for _, px := range list.Items {
		if apimeta.IsStatusConditionTrue(px.Status.Conditions, v1alpha.ConditionProgrammed) {
			programmed++
		}
		if c := apimeta.FindStatusCondition(px.Status.Conditions, v1alpha.ConditionAccepted); c != nil && c.Reason == v1alpha.ReasonProxyLimitReached {
			limited++
		}
	}
	return programmed, limited
}

// waitUntil polls cond every 250 ms until it holds (true) or within passes (false).
func waitUntil(ctx context.Context, within time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) || !sleepCtx(ctx, 250*time.Millisecond) {
			return false
		}
	}
	return true
}
