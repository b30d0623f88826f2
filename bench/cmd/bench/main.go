// Command bench runs the chaos and benchmark harness of bench/: real control planes,
// manager replicas as separate processes, load and faults, for anchorage and for
// multicluster-runtime's coordinator/sharded; it writes report.md, results.json and
// plots. With --smoke it runs the short correctness check CI runs and exits 1 on any
// correctness violation (never on a timing).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"anchorage/bench"
	"anchorage/internal/harness"
	"anchorage/pkg/shard"
)

type options struct {
	out, manager, baseline, nogate  string
	suspectExpires                  string
	skewManager                     string
	coordinators, scenarios         string
	hubFaultSeed                    uint64
	projects, replicas              string
	smoke, scale, failover          bool
	planes                          int
	only, dataPathTimings           string
	dataPath, dataPathSmall         bool
	fairShareSmall                  bool
	dataPathPlanes, dataPathProxies int
	dataPathPace                    time.Duration
	failoverCallTimeout             time.Duration
	failoverTimings                 string
}

func main() {
	var o options
	flag.StringVar(&o.out, "out", "bench/out", "directory for report.md, results.json and the plots")
	flag.StringVar(&o.manager, "manager", "bin/manager", "anchorage manager binary")
	flag.StringVar(&o.baseline, "baseline", "bin/baseline-manager", "baseline manager binary (coordinator/sharded)")
	flag.StringVar(&o.nogate, "nogate-manager", "bin/manager-nogate", "manager with bench/mutants/nogate.patch (hack/mutant.sh) (only used when listed in --coordinators)")
	flag.StringVar(&o.suspectExpires, "suspectexpires-manager", "bin/manager-suspectexpires", "manager with bench/mutants/suspectexpires.patch (hack/mutant.sh) (only used when listed in --coordinators)")
	flag.StringVar(&o.skewManager, "skew-manager", "bin/manager-skew", "manager with bench/mutants/skew.patch (hack/mutant.sh), which the skew scenario's anchorage replicas run (only used when skew is in --scenarios)")
	flag.StringVar(&o.coordinators, "coordinators", "", "comma-separated: anchorage, mcr-sharded, anchorage-nogate, anchorage-suspectexpires (default: both real ones; --smoke: anchorage)")
	flag.StringVar(&o.scenarios, "scenarios", "", "comma-separated: kill, pause, scale, rolling, skew, hub-faults, or none (default all; --smoke: kill,pause,hub-faults)")
	flag.StringVar(&o.projects, "projects", "10,100,1000", "project counts of the Lease-write runs")
	flag.StringVar(&o.replicas, "replicas", "1,2,4", "replica counts of the memory runs (at 100 projects)")
	flag.BoolVar(&o.smoke, "smoke", false, "short correctness run; exit 1 on an overlap, a late write in a pause, an anchor left or a wrongful deletion")
	flag.BoolVar(&o.scale, "scale", true, "run the Lease-write and memory runs (off with --smoke)")
	flag.BoolVar(&o.failover, "failover", false, "also run the failover runs (--only failover, make bench-failover) after the Lease-write and memory runs; off by default: four runs of about 4 to 6 minutes each would take make bench past 40 minutes")
	flag.Uint64Var(&o.hubFaultSeed, "hub-faults-seed", 0, "seed of the hub-faults schedule (default: drawn from the clock and printed, so a failing run can be replayed)")
	flag.IntVar(&o.planes, "planes", 3, "real project planes of the scenarios")
	flag.StringVar(&o.only, "only", "", "run one section only: data-path, failover (the failure hand-over of 1,000 light projects on a hub delayed 200 ms), or fair-share (one hostile project of 10,000 proxies on a slow plane beside nine normal ones)")
	flag.BoolVar(&o.fairShareSmall, "fair-share-small", false, "fair-share section at a development size (1,000 hostile proxies, 5 per normal project)")
	flag.BoolVar(&o.dataPath, "data-path", true, "run the data-path section (off with --smoke)")
	flag.BoolVar(&o.dataPathSmall, "data-path-small", false, "data-path section at a development size (3 planes × 30 proxies, 10 s paces) unless --data-path-planes/--data-path-proxies say otherwise")
	flag.StringVar(&o.dataPathTimings, "data-path-timings", "", "Lease timings of the data-path replicas: fast (the scenarios' 3 s Lease) or default (client-go's 15 s); unset: default at the full size, fast with --data-path-small")
	flag.IntVar(&o.dataPathPlanes, "data-path-planes", 0, "project planes of the data-path section (default 20; 3 with --data-path-small)")
	flag.DurationVar(&o.dataPathPace, "data-path-pace", 0, "how long each plane takes to create its proxies, and again to delete them (default 60s; 10s with --data-path-small)")
	flag.IntVar(&o.dataPathProxies, "data-path-proxies", 0, "HTTPProxies in total in the data-path section (default 1000; 30 with --data-path-small)")
	flag.DurationVar(&o.failoverCallTimeout, "failover-call-timeout", 0, "diagnostic: the failover run's replicas use this call timeout instead of the fast timings' (must stay below lease duration - renew deadline)")
	flag.StringVar(&o.failoverTimings, "failover-timings", "fast,default", "Lease timings of the failover runs, one run each: fast (the scenarios' 3 s Lease, 500 ms call timeout) and default (client-go's 15 s Lease, the product's defaults)")
	flag.Parse()
	// The harness's own controller-runtime calls (envtest installing CRDs) log nothing
	// the report needs; without a logger they print a warning and a stack.
	ctrllog.SetLogger(logr.Discard())
	code, err := run(o)
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		os.Exit(2)
	}
	os.Exit(code)
}

func logf(format string, args ...any) {
	fmt.Printf("%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

func run(o options) (int, error) {
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	coords := list(o.coordinators, "anchorage,mcr-sharded", "anchorage", o.smoke)
	scenarios := list(o.scenarios, "kill,pause,scale,rolling,skew,hub-faults", "kill,pause,hub-faults", o.smoke)
	bins := bench.Binaries{bench.Anchorage: o.manager, bench.Sharded: o.baseline, bench.AnchorageNoGate: o.nogate,
		bench.AnchorageSuspectExpires: o.suspectExpires, bench.SkewBuild(bench.Anchorage): o.skewManager}
	for _, c := range coords {
		if _, err := os.Stat(bins[bench.Coordinator(c)]); err != nil {
			return 0, fmt.Errorf("binary for %s: %w", c, err)
		}
		if slices.Contains(scenarios, string(bench.ScenarioSkew)) && bench.SkewUnsupported(bench.Coordinator(c)) == "" {
			if _, err := os.Stat(bins[bench.SkewBuild(bench.Coordinator(c))]); err != nil {
				return 0, fmt.Errorf("skew binary for %s (make bench-binaries builds bin/manager-skew): %w", c, err)
			}
		}
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return 0, err
	}
	work, err := os.MkdirTemp("", "anchorage-bench-")
	if err != nil {
		return 0, err
	}
	rep := &bench.Report{Started: time.Now(), Smoke: o.smoke, LeaseDuration: harness.FastTimings.LeaseDuration, Machine: machine()}
	rep.Notes = notes()
	sched := bench.FullSchedule
	if o.smoke {
		sched = bench.SmokeSchedule
	}
	sched.HubFaultSeed = o.hubFaultSeed
	if sched.HubFaultSeed == 0 {
		sched.HubFaultSeed = uint64(time.Now().UnixNano())
	}
	var failed error
	switch o.only {
	case "":
		if err := mainSections(ctx, o, coords, scenarios, bins, sched, work, rep); err != nil {
			return 0, err
		}
		if o.dataPath && !o.smoke {
			// A data path that cannot run (its 21 control planes did not start) does not
			// throw away the scenarios' and the light runs' results: the report says so,
			// and the run still fails.
			if err := dataPathSection(ctx, o, coords, bins, work, rep); err != nil {
				rep.Notes = append(rep.Notes, "data path not measured: "+err.Error())
				failed = err
			}
		}
	case "data-path":
		if err := dataPathSection(ctx, o, coords, bins, work, rep); err != nil {
			return 0, err
		}
	case "failover":
		if err := failoverSection(ctx, o, coords, bins, work, rep); err != nil {
			return 0, err
		}
	case "fair-share":
		size := bench.FullFairShare
		if o.fairShareSmall {
			size = bench.SmallFairShare
		}
		logf("fair share: %d normal projects and one hostile of %d proxies (logs in %s)", size.Normal, size.Hostile, work)
		res, err := bench.RunFairShare(ctx, bins, size, work, logf)
		if err != nil {
			return 0, err
		}
		rep.FairShare = &res
	default:
		return 0, fmt.Errorf("--only %q: want data-path, failover or fair-share", o.only)
	}
	rep.Finished = time.Now()
	if err := bench.WriteReport(o.out, rep); err != nil {
		return 0, err
	}
	logf("report: %s", o.out+"/report.md")
	if failed != nil {
		return 0, failed
	}
	code := 0
	for _, c := range coords {
		v := bench.Violations(rep, bench.Coordinator(c))
		if bench.Coordinator(c) == bench.Sharded {
			// The baseline's violations are measured and reported, not gated.
			logf("%s (baseline, not gated): %d correctness violations", c, len(v))
			continue
		}
		for _, line := range v {
			fmt.Printf("VIOLATION %s: %s\n", c, line)
			if o.smoke {
				code = 1 // the full run reports; only the smoke run gates
			}
		}
		if len(v) == 0 {
			logf("%s: no correctness violation", c)
		}
	}
	return code, nil
}

// mainSections runs the scenarios and the lightweight runs on their own control
// planes, stopped before it returns.
func mainSections(ctx context.Context, o options, coords, scenarios []string, bins bench.Binaries, sched bench.Schedule, work string, rep *bench.Report) error {
	logf("starting a hub and %d project planes (logs and records in %s)", o.planes, work)
	env, err := bench.StartEnv(o.planes, o.scale && !o.smoke, work)
	if err != nil {
		return err
	}
	defer env.Stop()
	if o.scenarios == "none" {
		scenarios = nil
	}
	for _, s := range scenarios {
		for _, c := range coords {
			if why := bench.SkewUnsupported(bench.Coordinator(c)); s == string(bench.ScenarioSkew) && why != "" {
				logf("scenario %s, coordinator %s: not run: %s", s, c, why)
				rep.Notes = append(rep.Notes, fmt.Sprintf("The skew scenario did not run for %s: %s.", c, why))
				continue
			}
			logf("scenario %s, coordinator %s", s, c)
			res, err := env.RunScenario(ctx, bench.Coordinator(c), bench.Scenario(s), bins, sched, logf)
			if err != nil {
				return fmt.Errorf("%s/%s: %w", c, s, err)
			}
			rep.Scenarios = append(rep.Scenarios, res)
		}
	}
	if o.scale && !o.smoke {
		return scaleRuns(ctx, env, bins, coords, o, rep)
	}
	return nil
}

// dataPathOptions sizes the data-path section from the flags.
func dataPathOptions(o options) bench.DataPathOptions {
	d := bench.FullDataPath
	if o.dataPathSmall {
		d = bench.SmallDataPath
	}
	if o.dataPathPlanes > 0 {
		d.Planes = o.dataPathPlanes
	}
	if o.dataPathProxies > 0 {
		d.Proxies = o.dataPathProxies
	}
	if o.dataPathPace > 0 {
		d.CreateOver, d.DeleteOver = o.dataPathPace, o.dataPathPace
	}
	if o.dataPathTimings == "default" || (o.dataPathTimings == "" && !o.dataPathSmall) {
		t := shard.DefaultTimings()
		d.Timings = &t
	}
	return d
}

// dataPathSection starts the data-path section's hub and planes once and runs every
// coordinator on them in turn (each run cleans up after itself).
func dataPathSection(ctx context.Context, o options, coords []string, bins bench.Binaries, work string, rep *bench.Report) error {
	d := dataPathOptions(o)
	logf("data path: starting a hub and %d project planes", d.Planes)
	env, err := bench.StartDataPathEnv(d.Planes, work)
	if err != nil {
		return err
	}
	defer env.Stop()
	for _, c := range coords {
		logf("data path, coordinator %s: %d planes × %d proxies, %d replicas", c, d.Planes, d.Proxies, d.Replicas)
		res, err := env.RunDataPath(ctx, bench.Coordinator(c), bins, d, logf)
		if err != nil {
			return fmt.Errorf("data path %s: %w", c, err)
		}
		rep.DataPath = append(rep.DataPath, res)
	}
	return nil
}

// memoryProjects is the project count of the memory runs.
const memoryProjects = 100

// scaleRuns measures Lease writes at each project count (R=2) and memory at 100
// projects for each replica count, plus a replica holding no project; with --failover,
// the failover runs follow on the same light plane.
// The light runs' pace: each measures Lease writes over lightWindow (7 to 100 writes a
// second here: 70 to 1,000 in the window) once every project has an owner, waiting at
// most lightOwnedWithin for that (anchorage owns 1,000 projects in about 20 s; a
// coordinator that has not converged by then gives no rate, only its owned count).
const (
	lightWindow      = 10 * time.Second
	lightOwnedWithin = time.Minute
)

func scaleRuns(ctx context.Context, env *bench.Env, bins bench.Binaries, coords []string, o options, rep *bench.Report) error {
	projects, err := ints(o.projects)
	if err != nil {
		return err
	}
	replicas, err := ints(o.replicas)
	if err != nil {
		return err
	}
	for _, cs := range coords {
		c := bench.Coordinator(cs)
		_, zero, err := env.RunLight(ctx, bins, bench.LightOptions{Coordinator: c, Projects: 0, Replicas: 1, Window: lightWindow}, logf)
		if err != nil {
			return err
		}
		zeroRSS := zero.PeakRSS[0]
		// The Lease-write run at memoryProjects on 2 replicas is the memory run's
		// setup too: its peak RSS stands for R=2 instead of a run of its own.
		var leaseRunMemory *bench.Memory
		for _, p := range projects {
			ll, mem, err := env.RunLight(ctx, bins, bench.LightOptions{Coordinator: c, Projects: p, Replicas: 2, Window: lightWindow, OwnedWithin: lightOwnedWithin}, logf)
			if err != nil {
				rep.Notes = append(rep.Notes, err.Error())
			} else if p == memoryProjects {
				leaseRunMemory = &mem
			}
			rep.LeaseLoad = append(rep.LeaseLoad, ll)
		}
		for _, r := range replicas {
			var mem bench.Memory
			if r == 2 && leaseRunMemory != nil {
				mem = *leaseRunMemory
			} else if _, mem, err = env.RunLight(ctx, bins, bench.LightOptions{Coordinator: c, Projects: memoryProjects, Replicas: r, Window: lightWindow, OwnedWithin: lightOwnedWithin}, logf); err != nil {
				rep.Notes = append(rep.Notes, err.Error())
			}
			mem.ZeroProjectRSS = zeroRSS
			var sum float64
			for _, v := range mem.PeakRSS {
				sum += float64(v) - float64(zeroRSS)
			}
			if len(mem.PeakRSS) > 0 {
				mem.ProjectBytes = sum / float64(len(mem.PeakRSS))
			}
			rep.Memory = append(rep.Memory, mem)
		}
	}
	if o.failover {
		failovers(ctx, o, env, bins, coords, rep)
	}
	return nil
}

// failoverSection starts a hub and the light plane only and runs failovers on them.
func failoverSection(ctx context.Context, o options, coords []string, bins bench.Binaries, work string, rep *bench.Report) error {
	logf("failover: starting a hub and the light plane (logs and records in %s)", work)
	env, err := bench.StartEnv(0, true, work)
	if err != nil {
		return err
	}
	defer env.Stop()
	failovers(ctx, o, env, bins, coords, rep)
	return nil
}

// failovers runs bench.Failover1000 for each coordinator; a run that fails is reported
// with its error, not fatal.
func failovers(ctx context.Context, opts options, env *bench.Env, bins bench.Binaries, coords []string, rep *bench.Report) {
	for _, cs := range coords {
		for _, timings := range strings.Split(opts.failoverTimings, ",") {
			o := bench.Failover1000
			o.Coordinator = bench.Coordinator(cs)
			if timings == "default" {
				t := shard.DefaultTimings()
				o.Timings = &t
			}
			if opts.failoverCallTimeout > 0 {
				t := harness.FastTimings
				t.CallTimeout = opts.failoverCallTimeout
				o.Timings = &t
			}
			logf("failover, coordinator %s: %d light projects, %d replicas, hub answers +%s", cs, o.Projects, o.Replicas, o.HubDelay)
			f, err := env.RunFailover(ctx, bins, o, logf)
			if err != nil {
				f.Error = err.Error()
				rep.Notes = append(rep.Notes, err.Error())
				logf("  %v", err)
			}
			rep.Failover = append(rep.Failover, f)
		}
	}
}

func list(v, full, smoke string, isSmoke bool) []string {
	if v == "" {
		v = full
		if isSmoke {
			v = smoke
		}
	}
	return strings.Split(v, ",")
}

func ints(v string) ([]int, error) {
	var out []int
	for _, s := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			return nil, errors.New("want comma-separated integers, got " + v)
		}
		out = append(out, n)
	}
	return out, nil
}

func machine() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s, %d CPUs, %s/%s, %s", host, runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version())
}

func notes() []string {
	return []string{
		fmt.Sprintf("Lease durations: anchorage member Lease %s (renew deadline %s, retry %s, claim deadline %s); coordinator/sharded fence Lease %s (renew 1s, probe 1s), peer Lease TTL 30s (fixed in v0.23.3).",
			harness.FastTimings.LeaseDuration, harness.FastTimings.RenewDeadline, harness.FastTimings.RetryPeriod, harness.FastTimings.ClaimDeadline, harness.FastTimings.LeaseDuration),
		"Replicas are separate processes, each with its own hub user; project planes are reached through one shared kubeconfig user per plane, so writes there are attributed by the user agent every replica sets (anchorage/<replica>).",
		"coordinator/sharded's Lease client has no client-side rate limit (its fences alone need P/renew writes a second); the reconcilers of both coordinators use 50 QPS / 100 burst on the hub.",
		"A write is late when the API server committed it (audit stageTimestamp) after the last successful renew of the writer's Lease (requestReceivedTimestamp) plus the Lease duration: the member Lease for anchorage, the project's fence Lease for coordinator/sharded; or committed by work admitted (per the writer's records) before its current unbroken chain of renews began. Lease and Event writes are not counted.",
		"Paused replicas stay stopped 3 x the member Lease for anchorage (9 s) and 1.5 x the peer TTL + 3 x the fence Lease for coordinator/sharded (54 s): past each one's membership, so the others take over.",
		"Lightweight projects: P kubeconfig Secrets naming one shared project plane (no HTTPProxy on it), resync off; they exercise ownership only.",
		"Absolute times are indicative: a shared 2-core machine running every API server, etcd and replica at once.",
	}
}
