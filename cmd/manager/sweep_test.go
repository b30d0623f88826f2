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
		{"a replica's resync flag", []string{"--once", "--resync-period=1m"}, "unknown flag: --resync-period"},
		{"a resync setting is the file's", []string{"--once", "--min-age=1m"}, "unknown flag: --min-age"},
		// A zero safety limit in the file is refused, naming the way to delete nothing.
		{"a zero cap", []string{"--once", writeConfig(t, ourConfig+"resync: {maxDeletionsPerPass: 0}\n")}, "resync.maxDeletionsPerPass: Invalid value: 0: must be at least 1; to delete nothing set resync.dryRun"},
	}
	for _, tc := range cases {
		_, err := parseSweep(tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error containing %q", tc.reason, err, tc.want)
		}
	}
}

// TestSweepRunsTheFilesResync: the sweep's pass runs the file's resync settings, but
// its period is long enough for the confirmation delay and it is on.
func TestSweepRunsTheFilesResync(t *testing.T) {
	c, err := parseSweep("--once", writeConfig(t, ourConfig+"resync: {enabled: false, minAge: 10m, confirmAfter: 9m, period: 10m, haltAbove: 7, maxDeletionsPerPass: 7}\n"))
	if err != nil {
		t.Fatal(err)
	}
	o := c.opts
	if o.Disabled || o.MinAge != 10*time.Minute || o.ConfirmAfter != 9*time.Minute || o.Period != 18*time.Minute || o.HaltAbove != 7 {
		t.Errorf("resync options %+v: want on, minimum age 10m, confirmation 9m, period 18m, ceiling 7", o)
	}
}

// TestSweepIsADryRunUnlessAskedToDelete: an operator running the sweep to look at a
// backlog deletes nothing unless the command line says --delete, whatever the file says.
func TestSweepIsADryRunUnlessAskedToDelete(t *testing.T) {
	notDry := writeConfig(t, ourConfig+"resync: {dryRun: false}\n")
	dry := writeConfig(t, ourConfig+"resync: {dryRun: true}\n")
	cases := []struct {
		reason  string
		args    []string
		wantDry bool
		wantErr string
	}{
		{"no flag: a dry run", []string{"--once", notDry}, true, ""},
		{"--dry-run, as before: a dry run", []string{"--once", "--dry-run"}, true, ""},
		{"--delete deletes", []string{"--once", "--delete", dry}, false, ""},
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
