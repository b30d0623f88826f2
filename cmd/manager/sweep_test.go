package main

import (
	"strings"
	"testing"
	"time"
)

func TestSweepFlags(t *testing.T) {
	cases := []struct {
		reason string
		args   []string
		want   string
	}{
		{"the sweep runs one pass", []string{"--dry-run"}, "--once is required"},
		{"an unknown flag", []string{"--once", "--resync-period=1m"}, "unknown flag: --resync-period"},
		{"a cap above the ceiling", []string{"--once", "--max-deletions-per-pass=10", "--halt-above=5"}, "ceiling (5) must not be below the per-pass cap (10)"},
		// A zero safety limit would become its default (50, 500, 10/s): an operator who
		// writes 0 to mean "delete nothing" must be told, not obeyed otherwise.
		{"a zero cap", []string{"--once", "--max-deletions-per-pass=0"}, "--max-deletions-per-pass=0"},
		{"a zero ceiling", []string{"--once", "--halt-above=0"}, "--halt-above=0"},
		{"a zero deletion rate", []string{"--once", "--deletion-qps=0"}, "--deletion-qps=0"},
	}
	for _, tc := range cases {
		_, err := parseSweep(tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error containing %q", tc.reason, err, tc.want)
		}
	}
}

func TestReplicaResyncFlags(t *testing.T) {
	f, err := parseReplica("--identity=a", "--resync-min-age=10m", "--resync-dry-run", "--resync-period=20m")
	if err != nil {
		t.Fatal(err)
	}
	o := f.resync.options()
	if o.Disabled || !o.DryRun || o.MinAge != 10*time.Minute || o.Period != 20*time.Minute {
		t.Errorf("resync options %+v: want on, dry-run, minimum age 10m, period 20m", o)
	}
	if _, err := parseReplica("--identity=a", "--resync-max-deletions-per-pass=0"); err == nil || !strings.Contains(err.Error(), "--resync-max-deletions-per-pass=0") || !strings.Contains(err.Error(), "--resync-dry-run") {
		t.Errorf("a zero deletion cap on a replica: got %v, want a refusal naming the flag and the way to delete nothing", err)
	}
	if _, err := parseReplica("--identity=a", "--resync-confirm-after=20m"); err == nil || !strings.Contains(err.Error(), "confirmation delay") {
		t.Errorf("a confirmation delay beyond the period: got %v", err)
	}
	f, err = parseReplica("--identity=a", "--resync=false")
	if err != nil || !f.resync.options().Disabled {
		t.Errorf("--resync=false: got %v, disabled %t", err, f.resync.options().Disabled)
	}
}

// TestSweepIsADryRunUnlessAskedToDelete: an operator running the sweep to look at a
// backlog deletes nothing unless the command line says --delete.
func TestSweepIsADryRunUnlessAskedToDelete(t *testing.T) {
	cases := []struct {
		reason  string
		args    []string
		wantDry bool
		wantErr string
	}{
		{"no flag: a dry run", []string{"--once"}, true, ""},
		{"--dry-run, as before: a dry run", []string{"--once", "--dry-run"}, true, ""},
		{"--delete deletes", []string{"--once", "--delete"}, false, ""},
		{"both contradict each other", []string{"--once", "--delete", "--dry-run"}, false, "--delete and --dry-run"},
	}
	for _, tc := range cases {
		c, err := parseSweep(tc.args...)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: got %v, want an error containing %q", tc.reason, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.reason, err)
			continue
		}
		if c.opts.DryRun != tc.wantDry {
			t.Errorf("%s: dry run %t, want %t", tc.reason, c.opts.DryRun, tc.wantDry)
		}
	}
}
