package bench

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestTakeOverTimes(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	secs := func(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
	alive := map[string]bool{"b": true, "c": true}
	samples := []ownerSample{
		{at: at(-1), owners: map[string]string{"p1": "b", "p2": "a", "p3": "a"}}, // before the kill: ignored
		{at: at(1), owners: map[string]string{"p1": "a", "p2": "a", "p3": "a"}},
		{at: at(2), owners: map[string]string{"p1": "b", "p2": "a"}},
		{at: at(4), owners: map[string]string{"p1": "b", "p2": "c", "p3": "x"}}, // x is not alive
	}
	for _, tc := range []struct {
		name        string
		held        []string
		wantTimes   []time.Duration
		wantMissing int
	}{
		{"first live owner after the kill", []string{"p1", "p2"}, []time.Duration{secs(2), secs(4)}, 0},
		{"an owner not alive does not count", []string{"p3"}, nil, 1},
		{"never sampled", []string{"p9", "p1"}, []time.Duration{secs(2)}, 1},
		{"nothing held", nil, nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			times, missing := TakeOverTimes(samples, tc.held, alive, t0)
			if !reflect.DeepEqual(times, tc.wantTimes) || missing != tc.wantMissing {
				t.Errorf("got %v, %d missing; want %v, %d missing", times, missing, tc.wantTimes, tc.wantMissing)
			}
		})
	}
}

func TestMaxMedian(t *testing.T) {
	for _, tc := range []struct {
		in          []time.Duration
		max, median time.Duration
	}{
		{nil, 0, 0},
		{[]time.Duration{5}, 5, 5},
		{[]time.Duration{9, 1, 4}, 9, 4},
		{[]time.Duration{3, 1, 4, 2}, 4, 2},
	} {
		if max, median := maxMedian(tc.in); max != tc.max || median != tc.median {
			t.Errorf("maxMedian(%v) = %v, %v; want %v, %v", tc.in, max, median, tc.max, tc.median)
		}
	}
}

func TestFailoverTarget(t *testing.T) {
	bound := 4300 * time.Millisecond
	for _, tc := range []struct {
		name string
		fs   []Failover
		want string
	}{
		{"not run", nil, "n/a"},
		{"failed run", []Failover{{Error: "only 10 of 1000 projects owned", Bound: bound}}, "n/a"},
		{"within", []Failover{{VictimProjects: 333, Max: 4 * time.Second, Median: 3 * time.Second, Bound: bound}}, "yes"},
		{"on the bound", []Failover{{VictimProjects: 333, Max: bound, Bound: bound}}, "yes"},
		{"over", []Failover{{VictimProjects: 333, Max: 5 * time.Second, Bound: bound}}, "no"},
		{"some never taken over", []Failover{{VictimProjects: 333, Missing: 1, Max: time.Second, Bound: bound}}, "no"},
		{"one set of timings within, one over", []Failover{
			{VictimProjects: 333, Max: 20 * time.Second, Bound: 21500 * time.Millisecond},
			{VictimProjects: 333, Max: 5 * time.Second, Bound: bound}}, "no"},
		{"both within", []Failover{
			{VictimProjects: 333, Max: 20 * time.Second, Bound: 21500 * time.Millisecond},
			{VictimProjects: 333, Max: 4 * time.Second, Bound: bound}}, "yes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := failoverTarget(tc.fs)
			if got.Verdict() != tc.want {
				t.Errorf("verdict %s (measured %s), want %s", got.Verdict(), got.Measured, tc.want)
			}
		})
	}
}

func TestReportFailoverSection(t *testing.T) {
	r := &Report{Failover: []Failover{
		{Coordinator: Anchorage, LeaseDuration: 3 * time.Second, Projects: 1000, Replicas: 3, HubDelay: 200 * time.Millisecond, VictimProjects: 334,
			Max: 4100 * time.Millisecond, Median: 3200 * time.Millisecond, Bound: 4300 * time.Millisecond},
		{Coordinator: Sharded, LeaseDuration: 3 * time.Second, Projects: 1000, Replicas: 3, Error: "only 12 of 1000 projects owned"},
	}}
	md := renderMarkdown(r, nil)
	for _, want := range []string{
		"## Failure hand-over of light projects on a slow hub",
		"| anchorage | 3s | 1000 | 3 | 200ms |",
		"| 334 | 0 | 4.10 |",
		"| 4.10 | 3.20 | 4.30 |",
		"| mcr-sharded | 3s | 1000 | 3 |",
		"only 12 of 1000 projects owned",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q", want)
		}
	}
}

func TestMovedOwners(t *testing.T) {
	for _, tc := range []struct {
		name          string
		before, after map[string]string
		want          int
	}{
		{"steady", map[string]string{"p1": "a", "p2": "b"}, map[string]string{"p1": "a", "p2": "b"}, 0},
		{"one moved", map[string]string{"p1": "a", "p2": "b"}, map[string]string{"p1": "c", "p2": "b"}, 1},
		{"owner gone", map[string]string{"p1": "a"}, map[string]string{}, 1},
		{"newly owned is no move", map[string]string{}, map[string]string{"p1": "a"}, 0},
		{"no sample yet", nil, map[string]string{"p1": "a"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := movedOwners(tc.before, tc.after); got != tc.want {
				t.Errorf("movedOwners = %d, want %d", got, tc.want)
			}
		})
	}
}
