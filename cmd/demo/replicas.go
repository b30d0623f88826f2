package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"anchorage/internal/harness"
	"anchorage/internal/proc"
	managerconfig "anchorage/pkg/config"
)

// Resync timings the replicas run with: short, so the story fits in a couple of
// minutes, like the protocol timings (harness.FastTimings). Production defaults are in
// docs/operations.md.
const (
	resyncPeriod       = 5 * time.Second
	resyncJitter       = time.Second
	resyncConfirmAfter = 2 * time.Second
	resyncMinAge       = 5 * time.Second
)

// configFile is the configuration file (--config) every replica reads, in the demo's
// directory: what the replicas share is in it, as in a deployment; what differs per
// process (kubeconfig, identity, addresses, log level) stays on the command line.
const configFile = "config.yaml"

// writeConfig writes the replicas' configuration file to path: the demo's namespace for
// the kubeconfig Secrets and the Leases, the short resync and protocol timings, and the
// Domain verification through the demo's nameserver, checking a pending Domain every
// domainCheckEvery.
func writeConfig(path, nameserver string) error {
	return harness.WriteConfig(path, func(c *managerconfig.ManagerConfiguration) {
		c.ProviderNamespace = providerNamespace
		c.LeaseNamespace = ptr.To(providerNamespace)
		c.Resync.Period = metav1.Duration{Duration: resyncPeriod}
		c.Resync.InitialJitter = metav1.Duration{Duration: resyncJitter}
		c.Resync.ConfirmAfter = metav1.Duration{Duration: resyncConfirmAfter}
		c.Resync.MinAge = metav1.Duration{Duration: resyncMinAge}
		harness.SetTimings(c, harness.FastTimings)
		// Verification stays on (the default); the TXT records are looked up at the
		// demo's nameserver only (dns.go), and a pending Domain is checked every second
		// for its first two minutes, then less and less often, as by default. Every step
		// but the last names its maxElapsed: the manager reads a list of steps onto the
		// default list, step by step, and would otherwise keep a default's maxElapsed.
		c.DomainVerification.Nameservers = []string{nameserver}
		// The demo's edge has an IPv4 address only.
		c.Platform.IPFamilies = []string{"IPv4"}
		c.DomainVerification.RetryIntervals = []managerconfig.RetryInterval{
			{Interval: metav1.Duration{Duration: domainCheckEvery}, MaxElapsed: &metav1.Duration{Duration: 2 * time.Minute}},
			{Interval: metav1.Duration{Duration: 5 * time.Second}, MaxElapsed: &metav1.Duration{Duration: 10 * time.Minute}},
			{Interval: metav1.Duration{Duration: 30 * time.Second}},
		}
	})
}

// replica is one manager process.
type replica struct {
	name       string
	kubeconfig string
	logPath    string
	metrics    string
	health     string
	proc       *proc.Process
	killed     bool
}

// startReplica starts the manager binary as replica name with the configuration file
// configPath, logging to a file in dir.
func startReplica(bin, dir, configPath, name, kubeconfig, logLevel string) (*replica, error) {
	r := &replica{name: name, kubeconfig: kubeconfig, logPath: filepath.Join(dir, name+".log")}
	var err error
	if r.metrics, err = freeAddr(); err != nil {
		return nil, err
	}
	if r.health, err = freeAddr(); err != nil {
		return nil, err
	}
	args := []string{
		"--config=" + configPath,
		"--kubeconfig=" + kubeconfig,
		"--identity=" + name,
		"--metrics-bind-address=" + r.metrics,
		// A local run on loopback: the demo reads counters without a token. Deployed
		// replicas serve /metrics over HTTPS to authorized scrapers only.
		"--metrics-secure=false",
		"--health-probe-bind-address=" + r.health,
		"--log-level=" + logLevel,
	}
	if r.proc, err = proc.Start(name, bin, r.logPath, args...); err != nil {
		return nil, err
	}
	return r, nil
}

// running reports whether the process has not exited.
func (r *replica) running() bool { return r.proc.Running() }

// ready reports whether the replica's readiness endpoint (its member validity) says so.
func (r *replica) ready(ctx context.Context) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+r.health+"/readyz", nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// kill sends SIGKILL: no graceful hand-over, no release of anything.
func (r *replica) kill() error {
	r.killed = true
	return r.proc.Kill()
}

// stop asks the replica to stop (SIGTERM) and kills it if it has not within grace.
func (r *replica) stop(grace time.Duration) { r.proc.Terminate(grace) }

// counter reads one series of a counter from the replica's /metrics, e.g.
// `anchorage_resync_collections_total{action="deleted"}`.
func (r *replica) counter(ctx context.Context, series string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+r.metrics+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	s := bufio.NewScanner(resp.Body)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), series+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	if err := s.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("%s: no series %s", r.name, series)
}

// logLine is the part of a replica's JSON log line the narration reads.
type logLine struct {
	Msg     string `json:"msg"`
	Replica string `json:"replica"`
	Proof   string `json:"proof"`
	Anchor  struct {
		Name string `json:"name"`
	} `json:"anchor"`
}

// anchorDeletions returns, by anchor name, the replica that logged "Deleting anchor"
// for it and the proof it gave (empty for a finalizer's deletion).
func anchorDeletions(replicas []*replica) map[string]logLine {
	out := map[string]logLine{}
	for _, r := range replicas {
		f, err := os.Open(r.logPath)
		if err != nil {
			continue
		}
		s := bufio.NewScanner(f)
		s.Buffer(make([]byte, 1<<20), 4<<20)
		for s.Scan() {
			if !strings.Contains(s.Text(), `"Deleting anchor"`) {
				continue
			}
			var l logLine
			if json.Unmarshal(s.Bytes(), &l) == nil && l.Msg == "Deleting anchor" && l.Anchor.Name != "" {
				if l.Replica == "" {
					l.Replica = r.name
				}
				out[l.Anchor.Name] = l
			}
		}
		f.Close()
	}
	return out
}

// freeAddr returns a loopback address with a port nothing listens on right now.
func freeAddr() (string, error) {
	low := ephemeralLow()
	for range 100 {
		// Below the ephemeral range: a port the kernel hands to no outgoing connection
		// and no :0 listener between this check and the replica's bind (a replica once
		// lost its metrics port to a client connection's source port).
		port := 20000 + rand.IntN(max(low-20000, 1000))
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue
		}
		addr := l.Addr().String()
		return addr, l.Close()
	}
	return "", errors.New("no free port below the ephemeral range after 100 tries")
}

// ephemeralLow is the first port of the kernel's ephemeral range (32768 when it cannot
// be read).
func ephemeralLow() int {
	raw, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	fields := strings.Fields(string(raw))
	if len(fields) == 0 {
		return 32768
	}
	low, err := strconv.Atoi(fields[0])
	if err != nil || low <= 21000 {
		return 32768
	}
	return low
}
