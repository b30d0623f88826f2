package harness

import (
	"testing"
	"time"

	"anchorage/pkg/shard"
)

func TestOverlapsDetectsIntersectingWork(t *testing.T) {
	t0 := time.Unix(100, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	work := func(holder, project string, from, to float64) shard.Record {
		return shard.Record{Holder: holder, Project: project, Start: at(from), End: at(to)}
	}
	cases := []struct {
		reason  string
		records []shard.Record
		want    []Overlap
	}{
		{"sequential work by two holders",
			[]shard.Record{work("a/1", "p", 0, 1), work("b/1", "p", 1, 2)}, nil},
		{"concurrent work by one holder",
			[]shard.Record{work("a/1", "p", 0, 2), work("a/1", "p", 1, 3)}, nil},
		{"two holders on two projects",
			[]shard.Record{work("a/1", "p", 0, 2), work("b/1", "q", 1, 3)}, nil},
		{"two holders on one project at once: from the later start to the earlier end",
			[]shard.Record{work("a/1", "p", 0, 2), work("b/1", "p", 1.5, 3)},
			[]Overlap{{Project: "p", Earlier: "a/1", Later: "b/1", EarlierRecord: 0, LaterRecord: 1, Start: at(1.5), Length: 500 * time.Millisecond}}},
		{"a new incarnation of the same pod overlapping the old",
			[]shard.Record{work("a/2", "p", 4, 6), work("a/1", "p", 0, 5)},
			[]Overlap{{Project: "p", Earlier: "a/1", Later: "a/2", EarlierRecord: 1, LaterRecord: 0, Start: at(4), Length: time.Second}}},
		{"contained work, and a long one overlapping each later holder's",
			[]shard.Record{work("a/1", "p", 0, 10), work("b/1", "p", 2, 3), work("b/1", "p", 4, 5), work("c/1", "p", 12, 13)},
			[]Overlap{
				{Project: "p", Earlier: "a/1", Later: "b/1", EarlierRecord: 0, LaterRecord: 1, Start: at(2), Length: time.Second},
				{Project: "p", Earlier: "a/1", Later: "b/1", EarlierRecord: 0, LaterRecord: 2, Start: at(4), Length: time.Second},
			}},
	}
	for _, tc := range cases {
		got := Overlaps(tc.records)
		if len(got) != len(tc.want) {
			t.Errorf("%s: want %d overlaps %+v, got %+v", tc.reason, len(tc.want), tc.want, got)
			continue
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("%s: overlap %d = %+v, want %+v", tc.reason, i, got[i], tc.want[i])
			}
		}
	}
}
