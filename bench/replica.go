package bench

import (
	"bufio"
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"anchorage/internal/benchclock"
	"anchorage/internal/harness"
	"anchorage/internal/proc"
	"anchorage/pkg/config"
	"anchorage/pkg/shard"
)

// The sharded coordinator's timings. Anchorage replicas run harness.FastTimings, and the
// sharded coordinator's fence Lease gets the same duration as anchorage's member Lease;
// its peer Lease (its membership) has a fixed 30 s TTL in v0.23.3.
const (
	fenceRenew     = time.Second
	shardedProbe   = time.Second
	shardedPeerTTL = 30 * time.Second
)

// Binaries are the replica programs of each coordinator.
type Binaries map[Coordinator]string

// Replica is one manager process.
type Replica struct {
	Name, User  string
	Coordinator Coordinator
	// ClockOffset is how far the replica's clock is set off the local one (the skew
	// scenario); its records are on that clock.
	ClockOffset time.Duration
	RecordPath  string
	LogPath     string
	// Proxy is the replica's way to the hub when started with HubFaults.
	Proxy   *harness.FaultProxy
	proc    *proc.Process
	peakRSS uint64
}

// ReplicaOptions adjust a replica's flags and, for anchorage, its configuration file.
type ReplicaOptions struct {
	// NoResync turns the anchor resync off (ownership-only runs).
	NoResync bool
	// ResyncPeriod replaces the scenarios' 5 s resync period when set.
	ResyncPeriod time.Duration
	// Timings replaces harness.FastTimings when set: anchorage's four timings (the
	// sharding keys of its configuration file); the baseline's fence Lease gets its
	// LeaseDuration and renews and probes every RetryPeriod.
	Timings *shard.Timings
	// HubFaults puts a harness.FaultProxy (Replica.Proxy) between the replica and the hub.
	HubFaults bool
	// Binary replaces the coordinator's binary when set (the skew scenario's build).
	Binary string
	// ClockOffset sets the replica's clock off by this much, through
	// ANCHORAGE_BENCH_CLOCK_OFFSET, which only the manager with
	// bench/mutants/skew.patch reads.
	ClockOffset time.Duration
}

// StartReplica starts the coordinator's binary as replica name in run r.
func (r *Run) StartReplica(bins Binaries, c Coordinator, name string, o ReplicaOptions) (*Replica, error) {
	kc, user, proxy, err := r.ReplicaKubeconfig(name, o.HubFaults)
	if err != nil {
		return nil, err
	}
	rep := &Replica{
		Name: name, User: user, Coordinator: c, ClockOffset: o.ClockOffset, Proxy: proxy,
		RecordPath: filepath.Join(r.Dir, name+".records.jsonl"),
		LogPath:    filepath.Join(r.Dir, name+".log"),
	}
	args := []string{"--kubeconfig=" + kc, "--identity=" + name, "--record-file=" + rep.RecordPath}
	resyncPeriod := cmp.Or(o.ResyncPeriod, 5*time.Second)
	timings, renew, probe := harness.FastTimings, fenceRenew, shardedProbe
	if o.Timings != nil {
		timings, renew, probe = *o.Timings, o.Timings.RetryPeriod, o.Timings.RetryPeriod
	}
	switch c {
	case Sharded:
		args = append(args, "--provider-namespace="+r.Namespace, "--lease-namespace="+r.Namespace,
			"--resync-period="+resyncPeriod.String(), "--resync-initial-jitter=1s", "--resync-confirm-after=2s", "--resync-min-age=5s",
			"--lease-duration="+timings.LeaseDuration.String(), "--renew="+renew.String(), "--probe="+probe.String())
		if o.NoResync {
			args = append(args, "--resync=false")
		}
	default:
		// The manager takes what the replicas share from a configuration file: one per
		// replica, beside its log, since the options are the replica's.
		configPath := filepath.Join(r.Dir, name+".config.yaml")
		err := harness.WriteConfig(configPath, func(mc *config.ManagerConfiguration) {
			mc.ProviderNamespace, mc.LeaseNamespace = r.Namespace, ptr.To(r.Namespace)
			mc.Resync.Enabled = !o.NoResync
			mc.Resync.Period = metav1.Duration{Duration: resyncPeriod}
			mc.Resync.InitialJitter = metav1.Duration{Duration: time.Second}
			mc.Resync.ConfirmAfter = metav1.Duration{Duration: 2 * time.Second}
			mc.Resync.MinAge = metav1.Duration{Duration: 5 * time.Second}
			// The bench's hubs run no edge controller to report status.
			mc.Gateway.AssumeWrittenIsProgrammed = true
			harness.SetTimings(mc, timings)
		})
		if err != nil {
			return nil, err
		}
		// Verbosity 1 adds what the shard says about failed Lease calls (a renew that
		// failed, and why, and how long it took): what a lapsed membership is read from.
		args = append(args, "--config="+configPath, "--metrics-bind-address=0", "--health-probe-bind-address=0", "--log-level=1")
	}
	bin, ok := bins[c]
	if o.Binary != "" {
		bin, ok = o.Binary, true
	}
	if !ok {
		return nil, fmt.Errorf("no binary for coordinator %s", c)
	}
	var env []string
	if o.ClockOffset != 0 {
		env = append(env, benchclock.EnvOffset+"="+o.ClockOffset.String())
	}
	if rep.proc, err = proc.StartEnv(name, bin, rep.LogPath, env, args...); err != nil {
		return nil, err
	}
	return rep, nil
}

// CloseProxy stops the replica's fault proxy, if it has one; call it once the process
// has exited.
func (rep *Replica) CloseProxy() {
	if rep.Proxy != nil {
		_ = rep.Proxy.Close()
	}
}

// Running reports whether the process has not exited.
func (rep *Replica) Running() bool { return rep.proc.Running() }

// Kill sends SIGKILL and waits for the exit.
func (rep *Replica) Kill() error {
	rep.samplePeak()
	return rep.proc.Kill()
}

// Pause sends SIGSTOP: the process keeps its sockets and believes, when continued,
// that no time has passed.
func (rep *Replica) Pause() error { return rep.proc.Signal(syscall.SIGSTOP) }

// Continue sends SIGCONT.
func (rep *Replica) Continue() error { return rep.proc.Signal(syscall.SIGCONT) }

// Terminate sends SIGTERM (a graceful stop) and waits up to grace, then kills.
func (rep *Replica) Terminate(grace time.Duration) {
	rep.samplePeak()
	rep.proc.Terminate(grace)
}

// PeakRSS returns the process's VmHWM in bytes (the last value read if it exited).
func (rep *Replica) PeakRSS() uint64 {
	rep.samplePeak()
	return rep.peakRSS
}

func (rep *Replica) samplePeak() {
	if !rep.Running() {
		return
	}
	if v, err := vmHWM(rep.proc.Pid()); err == nil && v > rep.peakRSS {
		rep.peakRSS = v
	}
}

// vmHWM reads a process's peak resident set size from /proc.
func vmHWM(pid int) (uint64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb * 1024, err
		}
	}
	return 0, fmt.Errorf("no VmHWM for pid %d", pid)
}
