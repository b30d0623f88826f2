package bench

import (
	"testing"
	"time"

	"anchorage/pkg/shard"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

// rec is a record of the replica's first incarnation.
func rec(replica, project string, from, to int) Record {
	return recOf(replica+"/1", project, from, to)
}

// recOf is a record of a holder ("<replica>/<incarnation>"), as a record file has it.
func recOf(holder, project string, from, to int) Record {
	return Record{Replica: shard.PodOf(holder), Holder: holder, Project: project, Start: at(from), End: at(to)}
}

func TestOverlapsCountsOnlyDifferentHoldersOnOneProject(t *testing.T) {
	cases := []struct {
		name    string
		records []Record
		want    []Overlap
	}{
		{"one replica working concurrently is not an overlap",
			[]Record{rec("a", "p", 0, 100), rec("a", "p", 50, 150)}, nil},
		{"two replicas on different projects",
			[]Record{rec("a", "p", 0, 100), rec("b", "q", 50, 150)}, nil},
		{"back to back is not an overlap",
			[]Record{rec("a", "p", 0, 100), rec("b", "p", 100, 150)}, nil},
		{"intersection is the shorter end minus the later start",
			[]Record{rec("a", "p", 0, 100), rec("b", "p", 40, 150)},
			[]Overlap{{Project: "p", A: "a", B: "b", Start: at(40), Length: 60 * time.Millisecond}}},
		{"contained interval",
			[]Record{rec("a", "p", 0, 1000), rec("b", "p", 200, 300)},
			[]Overlap{{Project: "p", A: "a", B: "b", Start: at(200), Length: 100 * time.Millisecond}}},
		{"a long frozen reconcile overlaps every later one of another replica",
			[]Record{rec("a", "p", 0, 1000), rec("b", "p", 200, 300), rec("b", "p", 400, 500), rec("c", "p", 1200, 1300)},
			[]Overlap{
				{Project: "p", A: "a", B: "b", Start: at(200), Length: 100 * time.Millisecond},
				{Project: "p", A: "a", B: "b", Start: at(400), Length: 100 * time.Millisecond},
			}},
		{"a new incarnation of a replica overlapping its old incarnation, named by holder",
			[]Record{recOf("a/1", "p", 0, 1000), recOf("a/2", "p", 600, 1500)},
			[]Overlap{{Project: "p", A: "a/1", B: "a/2", Start: at(600), Length: 400 * time.Millisecond}}},
		{"one incarnation's work after another's is not an overlap",
			[]Record{recOf("a/1", "p", 0, 1000), recOf("a/2", "p", 1000, 1500)}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { expectOverlaps(t, Overlaps(c.records, nil), c.want) })
	}
}

func expectOverlaps(t *testing.T, got, want []Overlap) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d overlaps %+v, want %d", len(got), got, len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("overlap %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestOverlapsMarkWorkFrozenByAStop(t *testing.T) {
	// Replica a is stopped at 1000 ms and continued at 10000 ms; b owns p meanwhile.
	faults := []Fault{{At: at(1000), Kind: "stop", Replica: "a"}, {At: at(10000), Kind: "cont", Replica: "a"}}
	frozen := InFlightAtStop(faults)
	ov := func(a, b string, startMs, lengthMs int, frozen bool) Overlap {
		return Overlap{Project: "p", A: a, B: b, Start: at(startMs), Length: time.Duration(lengthMs) * time.Millisecond, Frozen: frozen}
	}
	cases := []struct {
		name    string
		records []Record
		want    []Overlap
	}{
		{"a reconcile in flight at the stop, ending after the wake, is frozen",
			[]Record{rec("a", "p", 900, 10050), rec("b", "p", 4000, 4100)}, []Overlap{ov("a", "b", 4000, 100, true)}},
		{"a reconcile begun just as the signal was sent is frozen",
			[]Record{rec("a", "p", 1050, 10050), rec("b", "p", 4000, 4100)}, []Overlap{ov("a", "b", 4000, 100, true)}},
		{"work admitted after the wake on a project b holds is not",
			[]Record{rec("b", "p", 10000, 10400), rec("a", "p", 10100, 10200)}, []Overlap{ov("b", "a", 10100, 100, false)}},
		{"a reconcile that ended before the stop is not",
			[]Record{rec("a", "p", 500, 990), rec("b", "p", 600, 700)}, []Overlap{ov("a", "b", 600, 100, false)}},
		{"another replica's stop freezes nothing of b's or c's",
			[]Record{rec("b", "p", 900, 1500), rec("c", "p", 950, 1200)}, []Overlap{ov("b", "c", 950, 250, false)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { expectOverlaps(t, Overlaps(c.records, frozen), c.want) })
	}
}

func TestLateWritesUseTheLastRenewBeforeTheWrite(t *testing.T) {
	v := NewValidity(3 * time.Second)
	v.Renewed("a", "", at(0))
	v.Renewed("a", "", at(1000))
	v.Renewed("b", "p", at(0))
	writes := []Write{
		{Replica: "a", At: at(3900)},               // valid until 4000
		{Replica: "a", At: at(4000)},               // exactly at the end: late by 0
		{Replica: "a", At: at(9000)},               // late by 5 s
		{Replica: "b", Project: "p", At: at(2000)}, // valid
		{Replica: "b", Project: "q", At: at(2000)}, // never held q
		{Replica: "c", At: at(500)},                // never renewed at all
	}
	scope := func(w Write) string {
		if w.Replica == "b" {
			return w.Project
		}
		return ""
	}
	got := LateWrites(writes, v, scope, nil)
	want := []struct {
		replica string
		late    time.Duration
		never   bool
	}{{"a", 0, false}, {"a", 5 * time.Second, false}, {"b", 0, true}, {"c", 0, true}}
	if len(got) != len(want) {
		t.Fatalf("got %d late writes %+v, want %d", len(got), got, len(want))
	}
	for i, w := range want {
		if got[i].Replica != w.replica || got[i].Late != w.late || got[i].ValidUntil.IsZero() != w.never {
			t.Errorf("late write %d = %+v, want replica %s late %s never-valid %v", i, got[i], w.replica, w.late, w.never)
		}
	}
}

func TestValidityIgnoresRenewsAfterTheWrite(t *testing.T) {
	v := NewValidity(time.Second)
	v.Renewed("a", "", at(5000))
	if until := v.ValidUntil("a", "", at(4000)); !until.IsZero() {
		t.Fatalf("a renew after the write made it valid until %s", until)
	}
}

func TestHandOversAfterMeasureFirstReconcileByAnotherReplica(t *testing.T) {
	f := Fault{At: at(1000), Kind: "kill", Replica: "a", Coordinator: true}
	records := []Record{
		rec("a", "p", 1100, 1200), // the failed replica itself (a frozen record) does not count
		rec("b", "p", 900, 950),   // before the fault
		rec("c", "p", 4500, 4600),
		rec("b", "p", 4300, 4400), // the first after the fault
		rec("b", "q", 2000, 2100),
	}
	got, missing := HandOversAfter(f, []string{"p", "q", "r"}, records, false)
	if len(got) != 2 || len(missing) != 1 || missing[0] != "r" {
		t.Fatalf("got %+v, missing %v", got, missing)
	}
	if got[0].Project != "p" || got[0].To != "b" || got[0].Duration != 3300*time.Millisecond || !got[0].OfCoord || got[0].Planned {
		t.Errorf("hand-over of p = %+v", got[0])
	}
	if got[1].Project != "q" || got[1].Duration != time.Second {
		t.Errorf("hand-over of q = %+v", got[1])
	}
}

func TestWriterOfAttributesByUserThenUserAgent(t *testing.T) {
	byUser := map[string]string{"bench:r1-0": "r1-0"}
	names := map[string]bool{"r1-0": true, "r1-1": true}
	mk := func(user, ua string) auditEvent {
		var e auditEvent
		e.User.Username, e.UserAgent = user, ua
		return e
	}
	cases := []struct {
		e    auditEvent
		want string
	}{
		{mk("bench:r1-0", "anything"), "r1-0"},
		{mk("anchorage-project", "anchorage/r1-1"), "r1-1"},
		{mk("anchorage-project", "anchorage/r1-1 (linux/amd64)"), "r1-1"},
		{mk("anchorage-project", "anchorage/r9-0"), ""}, // another run's replica
		{mk("admin", "bench/v0"), ""},
	}
	for _, c := range cases {
		if got := writerOf(c.e, byUser, names); got != c.want {
			t.Errorf("writerOf(%q, %q) = %q, want %q", c.e.User.Username, c.e.UserAgent, got, c.want)
		}
	}
}

func TestEpochStartsAfterTheLastBreak(t *testing.T) {
	v := NewValidity(3 * time.Second)
	for _, ms := range []int{0, 1000, 2000, 9000, 10000} { // a 7 s gap after 2000
		v.Renewed("a", "", at(ms))
	}
	cases := []struct {
		t          int
		start, end int
	}{
		{1500, 0, 4000},
		{4500, 0, 5000},     // past validity, still the first epoch
		{9500, 9000, 12000}, // a new epoch after the break
	}
	for _, c := range cases {
		start, until := v.Epoch("a", "", at(c.t))
		if !start.Equal(at(c.start)) || !until.Equal(at(c.end)) {
			t.Errorf("Epoch at %d ms = [%s, %s], want [%d, %d] ms", c.t, start.Sub(t0), until.Sub(t0), c.start, c.end)
		}
	}
}

// A process frozen mid-reconcile that wakes, renews and writes what it read before the
// freeze writes under a validity that ended, though its Lease is fresh again.
func TestLateWritesCatchWorkAdmittedBeforeTheCurrentValidity(t *testing.T) {
	v := NewValidity(3 * time.Second)
	v.Renewed("a", "p", at(0))
	v.Renewed("a", "p", at(60000)) // re-acquired after waking
	records := []Record{
		rec("a", "p", 500, 60500),   // frozen from 0.5 s to 60 s
		rec("a", "p", 60100, 60300), // admitted after the re-acquisition
	}
	writes := []Write{
		{Replica: "a", Project: "p", At: at(60200)}, // open records: both; the latest started at 60.1 s
		{Replica: "a", Project: "p", At: at(60400)}, // only the frozen one was open
		{Replica: "a", Project: "p", At: at(1000)},  // before the freeze
	}
	got := LateWrites(writes, v, func(w Write) string { return w.Project }, AdmittedAt(records))
	if len(got) != 1 || !got[0].At.Equal(at(60400)) || !got[0].ValidUntil.Equal(at(3000)) || got[0].Late != 57400*time.Millisecond {
		t.Fatalf("got %+v, want only the write at 60.4 s, late by 57.4 s after the validity it was admitted under", got)
	}
}
