package shard

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestFileRecorderWritesOneJSONLinePerRecord: the record file's wire format, which the
// bench and audits read: one object per line, the replica taken from the holder, a
// zero validity and an empty claim left out.
func TestFileRecorderWritesOneJSONLinePerRecord(t *testing.T) {
	path := filepath.Join(t.TempDir(), "records.jsonl")
	r, err := NewFileRecorder(path)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 12, 6, 1, 2, 3, 0, time.UTC)
	holder := HolderIdentity("replica-0", "inc-1")
	r.Record(Record{Holder: holder, Project: "p", Start: start, End: start.Add(time.Second), ValidUntil: start.Add(10 * time.Second), Claim: "c1"})
	r.Record(Record{Holder: holder, Project: "q", Start: start, End: start})
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if r.Failed() != 0 {
		t.Fatalf("failed writes: %d", r.Failed())
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"replica":"replica-0","holder":"` + holder + `","project":"p","start":"2026-12-06T01:02:03Z","end":"2026-12-06T01:02:04Z","validUntil":"2026-12-06T01:02:13Z","claim":"c1"}
{"replica":"replica-0","holder":"` + holder + `","project":"q","start":"2026-12-06T01:02:03Z","end":"2026-12-06T01:02:03Z"}
`
	if string(got) != want {
		t.Fatalf("record file:\n%s\nwant:\n%s", got, want)
	}
	if strings.Count(string(got), "\n") != 2 {
		t.Fatalf("want two lines, got %q", got)
	}
}
