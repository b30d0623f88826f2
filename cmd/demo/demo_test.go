package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"anchorage/internal/harness"
	"anchorage/internal/testenv"
)

// summaryLine is the demo's last line.
var summaryLine = regexp.MustCompile(`^summary: projects=(\d+) replicas=(\d+) stranded_left=(\d+) live_lost=(\d+) handover_s=([0-9]+\.[0-9]+)$`)

// TestDemo runs the demo as `make demo` does, with freshly built manager and demo
// binaries, and checks its summary: every stranded anchor collected, no live anchor or
// hub object lost, and a project handed over after its owner was killed.
func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three control planes and three manager processes")
	}
	g := NewWithT(t)
	if _, err := testenv.BinaryDir(); err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	root := testenv.RepoRoot()
	for _, pkg := range []string{"manager", "demo"} {
		build := exec.Command("go", "build", "-o", filepath.Join(bin, pkg), "./cmd/"+pkg)
		build.Dir = root
		out, err := build.CombinedOutput()
		g.Expect(err).NotTo(HaveOccurred(), "building cmd/%s:\n%s", pkg, out)
	}

	// The demo promises under 5 minutes after the binaries are built; a loaded CI
	// machine gets some slack.
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	work := filepath.Join(t.TempDir(), "demo")
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "demo"), "--manager="+filepath.Join(bin, "manager"), "--dir="+work)
	cmd.Env = append(os.Environ(), "DEMO_KEEP=")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	began := time.Now()
	err := cmd.Run()
	took := time.Since(began)
	t.Logf("demo took %s", took.Round(time.Second))
	if err != nil || t.Failed() {
		t.Logf("demo output:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
		logReplicaTails(t, work)
	}
	g.Expect(err).NotTo(HaveOccurred(), "the demo must exit 0")

	lines := strings.Split(strings.TrimRight(stdout.String(), "\n"), "\n")
	last := lines[len(lines)-1]
	m := summaryLine.FindStringSubmatch(last)
	g.Expect(m).NotTo(BeNil(), "last line %q is not the summary", last)
	g.Expect(m[1]).To(Equal("2"), "projects")
	g.Expect(m[2]).To(Equal("3"), "replicas")
	g.Expect(m[3]).To(Equal("0"), "stranded anchors left")
	g.Expect(m[4]).To(Equal("0"), "live anchors lost")
	handover, err := strconv.ParseFloat(m[5], 64)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(handover).To(BeNumerically(">", 0), "a hand-over after the kill")
	g.Expect(took).To(BeNumerically("<", 5*time.Minute), "the demo's promise")

	// Verified domains: acme's hostname programmed once its TXT record was published in
	// the demo's nameserver, initech's hostname under acme's domain refused.
	g.Expect(stdout.String()).To(ContainSubstring("HostnamesVerified=False (UnverifiedHostnamesPresent)"), "an unverified hostname reported to its tenant")
	g.Expect(stdout.String()).To(MatchRegexp(`domains    acme\.example \(project acme\) verified by its TXT record`), "a domain verified through the demo's nameserver")
	g.Expect(stdout.String()).To(ContainSubstring("login.acme.example (project initech) refused"), "a hostname under another project's domain refused")

	// Least privilege, from the hub's own record of the whole run: the replicas read
	// Secrets in the provider namespace (the projects' kubeconfig Secrets) and nowhere
	// else. The reads seen there show that the log records reads at all.
	events, err := harness.ReadAuditLog(filepath.Join(work, hubAuditLog), 0)
	g.Expect(err).NotTo(HaveOccurred(), "the hub's audit log is kept in the demo's folder")
	var inProvider int
	var elsewhere []string
	for _, ev := range events {
		if ev.ObjectRef.Resource != "secrets" || !strings.HasPrefix(ev.UserAgent, "anchorage/") {
			continue
		}
		if ev.ObjectRef.Namespace == providerNamespace {
			inProvider++
			continue
		}
		elsewhere = append(elsewhere, ev.Verb+" "+ev.ObjectRef.Namespace+"/"+ev.ObjectRef.Name+" by "+ev.User.Username)
	}
	t.Logf("Secret requests by the replicas: %d in %s, %d elsewhere", inProvider, providerNamespace, len(elsewhere))
	g.Expect(inProvider).To(BeNumerically(">", 0), "the replicas' Secret reads in the provider namespace are in the audit log")
	g.Expect(elsewhere).To(BeEmpty(), "no Secret request by a replica outside the provider namespace")

	// The replica processes it started are gone.
	pids := replicaPID.FindAllStringSubmatch(stdout.String(), -1)
	g.Expect(pids).To(HaveLen(3), "three replica processes started")
	for _, p := range pids {
		pid, err := strconv.Atoi(p[1])
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(syscall.Kill(pid, 0)).To(MatchError(syscall.ESRCH), "replica process %d still exists", pid)
	}
}

// replicaPID finds the pids the demo prints as it starts the replicas.
var replicaPID = regexp.MustCompile(`replica-[a-c]  pid (\d+),`)

// logReplicaTails logs the end of each replica's log.
func logReplicaTails(t *testing.T, dir string) {
	logs, _ := filepath.Glob(filepath.Join(dir, "replica-*.log"))
	for _, path := range logs {
		data, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		if len(lines) > 40 {
			lines = lines[len(lines)-40:]
		}
		t.Logf("%s (last %d lines):\n%s", filepath.Base(path), len(lines), strings.Join(lines, "\n"))
	}
}
