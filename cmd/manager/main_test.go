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
		{"bad lease timings", []string{"--identity=a", "--lease-duration=5s"}, "--lease-duration (5s) must be greater than --renew-deadline (10s)"},
		{"bad log level", []string{"--identity=a", "--log-level=loud"}, `invalid argument "loud" for "--log-level"`},
		{"bad duration", []string{"--identity=a", "--lease-duration=15"}, "such as 15s"},
		{"sweep after a common flag, bad flag", []string{"--kubeconfig=" + kubeconfig, "sweep", "--once", "--output=yaml"}, `--output "yaml"`},
		{"unreachable hub", []string{"--identity=a", "--kubeconfig=" + kubeconfig, "--hub-timeout=2s", "--metrics-bind-address=0", "--health-probe-bind-address=0"}, "hub http://" + deadAddr + " unreachable"},
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

// TestTimingFlagsSetTheManagersTimings: the flags the demo and bench give manager
// processes (harness.TimingFlags) set exactly the timings an in-process test manager
// runs with, so the three run one protocol.
func TestTimingFlagsSetTheManagersTimings(t *testing.T) {
	f, err := parseReplica(append([]string{"--identity=a"}, harness.TimingFlags(harness.FastTimings)...)...)
	if err != nil {
		t.Fatalf("the manager refuses harness.TimingFlags: %v", err)
	}
	if got := f.timings(); got != harness.FastTimings {
		t.Fatalf("timings from the flags = %+v, want harness.FastTimings %+v", got, harness.FastTimings)
	}
}
