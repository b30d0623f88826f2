package main

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"anchorage/internal/harness"
	"anchorage/pkg/config"
)

// TestBinaryFailsWithOneClearLine runs the real binary: a bad flag or an unreachable hub
// must end with a non-zero exit and a single line saying what is wrong.
func TestBinaryFailsWithOneClearLine(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the manager binary")
	}
	g := NewWithT(t)
	bin := filepath.Join(t.TempDir(), "manager")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Stderr = os.Stderr
	g.Expect(build.Run()).To(Succeed())

	// A port nothing listens on: reserve it, then release it.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	deadAddr := l.Addr().String()
	g.Expect(l.Close()).To(Succeed())
	kubeconfig := filepath.Join(t.TempDir(), "hub.kubeconfig")
	g.Expect(os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: hub, cluster: {server: "http://`+deadAddr+`"}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: hub, context: {cluster: hub, user: u}}]
current-context: hub
`), 0o600)).To(Succeed())

	cases := []struct {
		reason string
		args   []string
		want   string
	}{
		{"unknown flag", []string{"--identity=a", "--no-such-flag"}, "unknown flag: --no-such-flag"},
		{"bad lease timings", []string{"--identity=a", writeConfig(t, ourConfig+"sharding: {leaseDuration: 5s}\n")}, "sharding.leaseDuration (5s) must be greater than sharding.renewDeadline (10s)"},
		{"two problems, both named", []string{"--identity=a", writeConfig(t, ourConfig+"gateway: {workers: 0}\nresync: {deletionsPerSecond: 0}\n")}, "resync.deletionsPerSecond: Invalid value: 0: must be positive and finite; to delete nothing set resync.dryRun; gateway.workers: Invalid value: 0: must be at least 1"},
		{"bad log level", []string{"--identity=a", "--log-level=loud"}, `invalid argument "loud" for "--log-level"`},
		{"bad duration", []string{"--identity=a", writeConfig(t, ourConfig+"hubTimeout: 15\n")}, "hubTimeout: want a string (a duration such as 15s"},
		{"sweep after a common flag, bad flag", []string{"--kubeconfig=" + kubeconfig, "sweep", "--once", "--output=yaml"}, `--output "yaml"`},
		{"unreachable hub", []string{"--identity=a", "--kubeconfig=" + kubeconfig, writeConfig(t, ourConfig+"hubTimeout: 2s\n"), "--metrics-bind-address=0", "--health-probe-bind-address=0"}, "hub http://" + deadAddr + " unreachable"},
	}
	for _, tc := range cases {
		cmd := exec.Command(bin, tc.args...)
		cmd.Env = append(os.Environ(), "POD_NAME=")
		out, err := cmd.CombinedOutput()
		g.Expect(err).To(HaveOccurred(), tc.reason)
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		g.Expect(lines[0]).To(MatchRegexp(`^manager( sweep)?: `), tc.reason)
		g.Expect(lines[0]).To(ContainSubstring(tc.want), tc.reason)
		g.Expect(lines).To(HaveLen(1), "%s: want one line, got:\n%s", tc.reason, out)
	}
}

// TestHarnessConfigSetsTheManagersTimings: the file the demo and bench give manager
// processes (harness.WriteConfig, SetTimings) sets exactly the timings an in-process test
// manager runs with, so the three run one protocol.
func TestHarnessConfigSetsTheManagersTimings(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := harness.WriteConfig(path, func(c *config.ManagerConfiguration) { harness.SetTimings(c, harness.FastTimings) }); err != nil {
		t.Fatal(err)
	}
	got, err := parseReplica("--identity=a", "--config="+path)
	if err != nil {
		t.Fatalf("the manager refuses harness.WriteConfig's file: %v", err)
	}
	if timings := got.loaded.Timings(); timings != harness.FastTimings {
		t.Fatalf("timings from the file = %+v, want harness.FastTimings %+v", timings, harness.FastTimings)
	}
}
