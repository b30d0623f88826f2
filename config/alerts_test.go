package config_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"anchorage/internal/app"
	"anchorage/internal/testenv"
)

// promtoolMissing is what a test says when promtool is not installed.
const promtoolMissing = "promtool not found on PATH: install Debian's `prometheus` package " +
	"(apt-get install -y --no-install-recommends prometheus), as .ci/run does"

// promtool returns the path of promtool, failing (not skipping) the test without it:
// rules nobody evaluated are rules nobody knows will fire.
func promtool(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal(promtoolMissing)
	}
	return path
}

// rulesFileName is the plain rules file the PrometheusRule's spec is written to; the
// rule tests (config/prometheus/alerts_test.yaml) name it in rule_files.
const rulesFileName = "alerts.rules.yaml"

// writeRulesFile renders the alert component and writes its PrometheusRule's spec (the
// rule groups, which is what promtool reads) into dir.
func writeRulesFile(t *testing.T, dir string) string {
	t.Helper()
	_, obj := renderAlerts(t)
	spec, ok := obj.Object["spec"]
	if !ok {
		t.Fatal("the PrometheusRule has no spec")
	}
	out, err := yaml.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, rulesFileName)
	if err := os.WriteFile(path, out, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// runPromtool runs promtool with args in dir and fails the test with its output when
// it fails.
func runPromtool(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command(promtool(t), args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// TestRulesCheckWithPromtool: the rendered rules parse as Prometheus rules (`promtool
// check rules`: PromQL syntax, durations, templates).
func TestRulesCheckWithPromtool(t *testing.T) {
	dir := t.TempDir()
	writeRulesFile(t, dir)
	runPromtool(t, dir, "check", "rules", rulesFileName)
}

// TestRulesUnitTestsWithPromtool runs config/prometheus/alerts_test.yaml (`promtool
// test rules`) against the rendered rules: each alert fires on the series given, at the
// times given, and not otherwise.
func TestRulesUnitTestsWithPromtool(t *testing.T) {
	dir := t.TempDir()
	writeRulesFile(t, dir)
	tests, err := os.ReadFile(configDir("prometheus", "alerts_test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "alerts_test.yaml"), tests, 0o600); err != nil {
		t.Fatal(err)
	}
	runPromtool(t, dir, "test", "rules", "alerts_test.yaml")
}

// runbookBase is the placeholder every runbook_url starts with (alerts.yaml says to set
// it to where the docs are served), followed by the guide's path in the repository.
const runbookBase = "https://anchorage.invalid/docs/operations.md"

// TestAlertsComponent renders the alert component and reads its rules: each is an alert
// defined once, with an expression, a severity, a summary and a runbook_url into
// docs/operations.md; durations parse; the alerts issue 18 asks for are there.
func TestAlertsComponent(t *testing.T) {
	g := NewWithT(t)
	rules, obj := renderAlerts(t)
	g.Expect(obj.GetNamespace()).To(Equal(deployNamespace))
	g.Expect(rules).NotTo(BeEmpty())
	names := map[string]bool{}
	for _, r := range rules {
		g.Expect(r.Alert).NotTo(BeEmpty(), "every rule is an alert: %+v", r)
		g.Expect(names[r.Alert]).To(BeFalse(), "alert %s defined twice", r.Alert)
		names[r.Alert] = true
		g.Expect(strings.TrimSpace(r.Expr)).NotTo(BeEmpty(), r.Alert)
		g.Expect([]string{"critical", "warning"}).To(ContainElement(r.Labels["severity"]), "%s: severity", r.Alert)
		g.Expect(r.Annotations["summary"]).NotTo(BeEmpty(), r.Alert)
		g.Expect(r.Annotations["runbook_url"]).To(HavePrefix(runbookBase+"#"), "%s: runbook_url", r.Alert)
		if r.For != "" {
			_, err := time.ParseDuration(r.For)
			g.Expect(err).NotTo(HaveOccurred(), "%s: for %q", r.Alert, r.For)
		}
	}
	for _, want := range []string{
		"AnchorageNoReplica", "AnchorageReplicaDown", "AnchorageNoCoordinator", "AnchorageResyncStale",
		"AnchorageResyncPassesFailing", "AnchorageReconcileErrors", "AnchorageHTTPProxyNotProgrammed",
		"AnchorageProjectsUnowned", "AnchorageProjectsUnclaimed", "AnchorageProjectHeldTwice", "AnchorageDrainStuck",
		"AnchorageResyncHalted", "AnchorageAnchorsUnknownTooLong",
	} {
		g.Expect(names).To(HaveKey(want))
	}
}

// TestRunbookAnchorsExist: every alert's runbook_url names a heading of
// docs/operations.md (GitHub's anchor for it), under the Alerts section, and that
// heading is the alert's name.
func TestRunbookAnchorsExist(t *testing.T) {
	rules, _ := renderAlerts(t)
	doc, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	anchors := headingAnchors(doc)
	alertsSection := anchors["alerts-configprometheus"]
	if alertsSection == nil {
		t.Fatalf("docs/operations.md has no \"## Alerts (`config/prometheus`)\" section; headings: %v", keys(anchors))
	}
	for _, r := range rules {
		u, err := url.Parse(r.Annotations["runbook_url"])
		if err != nil || u.Fragment == "" {
			t.Errorf("%s: runbook_url %q has no anchor", r.Alert, r.Annotations["runbook_url"])
			continue
		}
		h := anchors[u.Fragment]
		switch {
		case h == nil:
			t.Errorf("%s: runbook_url anchor #%s is no heading of docs/operations.md", r.Alert, u.Fragment)
		case h.text != r.Alert:
			t.Errorf("%s: runbook_url anchor #%s is the heading %q, not the alert's", r.Alert, u.Fragment, h.text)
		case h.line < alertsSection.line || h.level <= alertsSection.level || h.section != alertsSection.text:
			t.Errorf("%s: its runbook heading (line %d) is not a subsection of %q", r.Alert, h.line, alertsSection.text)
		}
	}
}

// heading is one Markdown heading.
type heading struct {
	text    string // without the #s and backticks
	level   int
	line    int
	section string // the level-2 heading it is under
}

// headingAnchors returns the headings of a Markdown document by their GitHub anchor.
// Fenced code blocks are skipped; a repeated anchor gets GitHub's -1, -2 suffixes.
func headingAnchors(doc []byte) map[string]*heading {
	out := map[string]*heading{}
	seen := map[string]int{}
	fenced := false
	section := ""
	sc := bufio.NewScanner(bytes.NewReader(doc))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
		}
		level := len(line) - len(strings.TrimLeft(line, "#"))
		if fenced || level == 0 || level > 6 || !strings.HasPrefix(line[level:], " ") {
			continue
		}
		text := strings.ReplaceAll(strings.TrimSpace(line[level:]), "`", "")
		if level == 2 {
			section = text
		}
		anchor := githubAnchor(text)
		if k := seen[anchor]; k > 0 {
			seen[anchor]++
			anchor = fmt.Sprintf("%s-%d", anchor, k)
		} else {
			seen[anchor] = 1
		}
		out[anchor] = &heading{text: text, level: level, line: n, section: section}
	}
	return out
}

// githubAnchor is GitHub's anchor of a heading: lower case, punctuation dropped
// (except hyphens and underscores), spaces as hyphens.
func githubAnchor(text string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func keys(m map[string]*heading) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestGithubAnchor pins the anchor rule the runbook test relies on against anchors
// GitHub gives.
func TestGithubAnchor(t *testing.T) {
	for text, want := range map[string]string{
		"Alerts (config/prometheus)":        "alerts-configprometheus",
		"AnchorageResyncStale":              "anchorageresyncstale",
		"Who owns what: kubectl get leases": "who-owns-what-kubectl-get-leases",
	} {
		if got := githubAnchor(text); got != want {
			t.Errorf("githubAnchor(%q) = %q, want %q", text, got, want)
		}
	}
}

// jobMatcher finds the job label matchers in PromQL.
var jobMatcher = regexp.MustCompile(`job="([^"]*)"`)

// TestAlertsScrapeJobIsTheServiceMonitors: the job the alerts select on `up` and the
// controller-runtime metrics is the one the ServiceMonitor produces: with no jobLabel,
// prometheus-operator names the job after the scraped Service, which must be the
// rendered metrics Service the ServiceMonitor selects.
func TestAlertsScrapeJobIsTheServiceMonitors(t *testing.T) {
	g := NewWithT(t)
	rules, _, objs := renderWithPrometheus(t)
	sm := byKind(t, objs, "ServiceMonitor")
	_, hasJobLabel, _ := unstructured.NestedString(sm.Object, "spec", "jobLabel")
	g.Expect(hasJobLabel).To(BeFalse(), "a jobLabel changes the job name the alerts select")
	selector, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
	g.Expect(selector).NotTo(BeEmpty())
	var services []string
	for _, o := range objs {
		if o.GetKind() == "Service" && o.GetNamespace() == sm.GetNamespace() && matchesAll(o.GetLabels(), selector) {
			services = append(services, o.GetName())
		}
	}
	g.Expect(services).To(HaveLen(1), "the ServiceMonitor selects one Service")
	jobs := 0
	for _, r := range rules {
		for _, m := range jobMatcher.FindAllStringSubmatch(r.Expr, -1) {
			jobs++
			g.Expect(m[1]).To(Equal(services[0]), "%s selects job %q", r.Alert, m[1])
		}
	}
	g.Expect(jobs).NotTo(BeZero(), "the replica alerts select the scrape job")
}

func matchesAll(labels, selector map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// documentedMetric finds the metric names in the first column of docs/operations.md's
// Metrics table.
var documentedMetric = regexp.MustCompile("(?m)^\\| `(anchorage_[a-z0-9_]+)` \\|")

// TestMetricsAreDocumented assembles a replica (without starting it) against the test
// API server and checks that every anchorage_ metric it registers has a row in the
// Metrics table of docs/operations.md, and that every row is a registered metric.
func TestMetricsAreDocumented(t *testing.T) {
	needAPIServer(t)
	g := NewWithT(t)
	reg := &recordingRegisterer{Registry: prometheus.NewRegistry(), names: map[string]bool{}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err := app.New(ctx, defaultReplica("config-test-docs", "0", reg))
	g.Expect(err).NotTo(HaveOccurred())
	doc, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "docs", "operations.md"))
	g.Expect(err).NotTo(HaveOccurred())
	documented := map[string]bool{}
	for _, m := range documentedMetric.FindAllStringSubmatch(string(doc), -1) {
		documented[m[1]] = true
	}
	for name := range reg.names {
		if strings.HasPrefix(name, "anchorage_") {
			g.Expect(documented).To(HaveKey(name), "docs/operations.md's Metrics table lists every metric a replica registers")
		}
	}
	for name := range documented {
		g.Expect(reg.names).To(HaveKey(name), "docs/operations.md lists %s, which no replica registers", name)
	}
}
