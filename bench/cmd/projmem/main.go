// Command projmem measures what an idle held project costs one replica: it starts a
// hub and the lightweight projects' plane (bench.StartEnv), runs one replica in this
// process (the integration harness's manager, resync off, fast timings), and for each
// project count P in --projects adds lightweight projects until there are P, waits until
// the replica holds all of them, lets it settle, forces a GC and reports heap in use and
// RSS; the heap and goroutine profiles of each step are written to --out/heap-P.pb.gz
// and --out/goroutine-P.pb.gz. Per project is the step's heap in use minus the first
// step's (P=0), divided by P.
//
// It starts two API servers: run it under the shared heavy lock.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"anchorage/bench"
	"anchorage/internal/app"
	"anchorage/internal/harness"
)

type options struct {
	out      string
	projects []int
	settle   time.Duration
	holdBy   time.Duration
}

func main() {
	var o options
	var projects string
	flag.StringVar(&o.out, "out", "bench/out/projmem", "directory for the heap profiles")
	flag.StringVar(&projects, "projects", "0,100,500", "comma-separated project counts, ascending; the first is the baseline")
	flag.DurationVar(&o.settle, "settle", 10*time.Second, "idle time after the replica holds every project, before measuring")
	flag.DurationVar(&o.holdBy, "hold-within", 5*time.Minute, "bound on the wait for the replica to hold every project")
	flag.Parse()
	var err error
	if o.projects, err = parseCounts(projects); err != nil {
		fail(err)
	}
	if err := run(context.Background(), o); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "projmem:", err)
	os.Exit(1)
}

// parseCounts reads an ascending list of project counts.
func parseCounts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 0 || (len(out) > 0 && n < out[len(out)-1]) {
			return nil, fmt.Errorf("--projects: %q is not an ascending list of counts", s)
		}
		out = append(out, n)
	}
	return out, nil
}

// sample is one step's measurement.
type sample struct {
	projects, held, goroutines int
	heapInuse, rss, hwm        uint64
}

func run(ctx context.Context, o options) error {
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	env, err := bench.StartEnv(0, true, o.out)
	if err != nil {
		return err
	}
	defer env.Stop()
	r, err := env.NewRun(ctx, "projmem")
	if err != nil {
		return err
	}
	henv, err := harness.NewEnv(ctx, env.Hub)
	if err != nil {
		return err
	}
	henv.ProviderNamespace = r.Namespace
	m, err := henv.StartManager(ctx, "projmem", harness.ManagerOptions{Adjust: func(ao *app.Options) {
		ao.Timings = harness.FastTimings
		ao.Resync.Disabled = true
	}})
	if err != nil {
		return err
	}
	defer func() { _ = m.Stop(30 * time.Second) }()
	time.Sleep(harness.FastTimings.LeaseDuration)

	var names []string
	var samples []sample
	for _, p := range o.projects {
		for len(names) < p {
			name := fmt.Sprintf("pm-%d", len(names))
			if err := r.AddLightweightProject(ctx, name); err != nil {
				return err
			}
			names = append(names, name)
		}
		held, err := waitHeld(ctx, m, names, o.holdBy)
		if err != nil {
			return err
		}
		time.Sleep(o.settle)
		s, err := measure(filepath.Join(o.out, fmt.Sprintf("heap-%d.pb.gz", p)))
		if err != nil {
			return err
		}
		s.projects, s.held = p, held
		samples = append(samples, s)
		fmt.Printf("P=%d held=%d heap-inuse=%.1fMB rss=%.1fMB goroutines=%d\n", p, held, mib(s.heapInuse), mib(s.rss), s.goroutines)
	}
	report(samples)
	return nil
}

// waitHeld waits until m holds every project in names.
func waitHeld(ctx context.Context, m *harness.Manager, names []string, within time.Duration) (int, error) {
	deadline := time.Now().Add(within)
	for {
		held := len(m.Held(names))
		if held == len(names) {
			return held, nil
		}
		if time.Now().After(deadline) {
			return held, fmt.Errorf("the replica holds %d of %d projects after %s", held, len(names), within)
		}
		select {
		case <-ctx.Done():
			return held, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// measure forces a GC, returns the heap in use and RSS and writes the heap profile.
func measure(profile string) (sample, error) {
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	s := sample{heapInuse: ms.HeapInuse, goroutines: runtime.NumGoroutine()}
	var err error
	if s.rss, s.hwm, err = processRSS(); err != nil {
		return s, err
	}
	f, err := os.Create(profile)
	if err != nil {
		return s, err
	}
	defer f.Close()
	if err := pprof.WriteHeapProfile(f); err != nil {
		return s, err
	}
	return s, writeGoroutines(strings.Replace(profile, "heap-", "goroutine-", 1))
}

// writeGoroutines writes the goroutine profile, whose stacks are most of what RSS
// holds beyond the heap.
func writeGoroutines(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return pprof.Lookup("goroutine").WriteTo(f, 0)
}

// processRSS reads this process's resident set and its peak from /proc.
func processRSS() (rss, hwm uint64, err error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseUint(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			rss = kb << 10
		case "VmHWM:":
			hwm = kb << 10
		}
	}
	return rss, hwm, nil
}

// report prints every step against the first (the baseline).
func report(samples []sample) {
	if len(samples) == 0 {
		return
	}
	base := samples[0]
	fmt.Printf("\n%6s %6s %12s %10s %10s %14s %13s %11s\n", "P", "held", "heap-inuse", "rss", "peak-rss", "heap/project", "rss/project", "goroutines")
	for _, s := range samples {
		perHeap, perRSS := "-", "-"
		if s.projects > base.projects {
			n := float64(s.projects - base.projects)
			perHeap = fmt.Sprintf("%.0f KB", (float64(s.heapInuse)-float64(base.heapInuse))/n/1024)
			perRSS = fmt.Sprintf("%.0f KB", (float64(s.rss)-float64(base.rss))/n/1024)
		}
		fmt.Printf("%6d %6d %9.1f MB %7.1f MB %7.1f MB %14s %13s %11d\n", s.projects, s.held, mib(s.heapInuse), mib(s.rss), mib(s.hwm), perHeap, perRSS, s.goroutines)
	}
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }
