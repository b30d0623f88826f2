package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"k8s.io/klog/v2"
)

// TestKlogLinesAreJSON: client-go logs through klog (leader election, throttling); with
// the manager's logging set up, those lines come out as JSON in the same stream as the
// manager's own, not as klog text among them.
func TestKlogLinesAreJSON(t *testing.T) {
	var buf bytes.Buffer
	var l logFlags
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	l.register(fs)
	log := setupLogging(&l, &buf, "replica-a")
	t.Cleanup(klog.ClearLogger)

	log.Info("from the manager")
	klog.Infof("successfully acquired lease %s", "anchorage-system/anchorage-coordinator")
	klog.InfoS("structured from client-go", "lease", "x")
	klog.Flush()

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("want 3 lines in the logger's stream, got %d:\n%s", len(lines), buf.String())
	}
	want := []string{"from the manager", "successfully acquired lease anchorage-system/anchorage-coordinator", "structured from client-go"}
	for i, line := range lines {
		var entry map[string]any
		if err := json.Unmarshal([]byte(line), &entry); err != nil {
			t.Fatalf("line %d is not JSON (%v): %s", i, err, line)
		}
		if entry["msg"] != want[i] || entry["replica"] != "replica-a" || entry["level"] != "info" {
			t.Errorf("line %d = %v, want msg %q, replica replica-a, level info", i, entry, want[i])
		}
	}
}

// TestLogLevelFiltersLines: --log-level=warn drops info lines and keeps warnings.
func TestLogLevelFiltersLines(t *testing.T) {
	var buf bytes.Buffer
	var l logFlags
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	l.register(fs)
	if err := fs.Parse([]string{"--log-level=warn"}); err != nil {
		t.Fatal(err)
	}
	zl := newZapLogger(l.options(), &buf)
	zl.Info("dropped")
	zl.Warn("kept")
	if got := buf.String(); strings.Contains(got, "dropped") || !strings.Contains(got, `"msg":"kept"`) {
		t.Errorf("at warn: got %q, want the warning only", got)
	}
}
