package harness

import (
	"sort"
	"sync"
	"time"

	"anchorage/pkg/shard"
)

// MemoryRecorder keeps shard.Records in memory (a replica's Options.Recorder).
type MemoryRecorder struct {
	mu      sync.Mutex
	records []shard.Record
}

// Record implements shard.Recorder.
func (r *MemoryRecorder) Record(rec shard.Record) {
	r.mu.Lock()
	r.records = append(r.records, rec)
	r.mu.Unlock()
}

// Records returns a copy of what was recorded.
func (r *MemoryRecorder) Records() []shard.Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]shard.Record(nil), r.records...)
}

// Overlap is admitted work on one project by two different holders whose intervals
// intersect: what the shard's validity gate exists to prevent.
type Overlap struct {
	Project string
	// Earlier and Later are the two holder identities ("<pod>/<incarnation>"), Earlier's
	// work having begun first.
	Earlier, Later string
	// EarlierRecord and LaterRecord index the two records in the slice given to
	// Overlaps, so a caller can look up what else it knows about them.
	EarlierRecord, LaterRecord int
	// Start is when the later work began; Length is how long both ran.
	Start  time.Time
	Length time.Duration
}

// Overlaps returns every pair of records of one project by different holders whose
// intervals intersect, by start. Holders are compared, not pods: a restarted pod is a
// new incarnation that must not begin work while its old incarnation's work is still
// running, so that is as much an overlap as two pods' work. Concurrent work by one
// holder is not an overlap (it runs under one validity), nor is work that ends as the
// other begins.
func Overlaps(records []shard.Record) []Overlap {
	byProject := map[string][]int{}
	for i, r := range records {
		byProject[r.Project] = append(byProject[r.Project], i)
	}
	var out []Overlap
	for project, idx := range byProject {
		sort.SliceStable(idx, func(i, j int) bool { return records[idx[i]].Start.Before(records[idx[j]].Start) })
		// running holds the work, begun earlier, that may still intersect the next.
		var running []int
		for _, later := range idx {
			l := records[later]
			stillRunning := running[:0]
			for _, earlier := range running {
				if records[earlier].End.After(l.Start) {
					stillRunning = append(stillRunning, earlier)
				}
			}
			running = stillRunning
			for _, earlier := range running {
				e := records[earlier]
				if e.Holder == l.Holder {
					continue
				}
				end := e.End
				if l.End.Before(end) {
					end = l.End
				}
				out = append(out, Overlap{
					Project: project, Earlier: e.Holder, Later: l.Holder, EarlierRecord: earlier, LaterRecord: later,
					Start: l.Start, Length: end.Sub(l.Start),
				})
			}
			running = append(running, later)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if !a.Start.Equal(b.Start) {
			return a.Start.Before(b.Start)
		}
		if a.Project != b.Project {
			return a.Project < b.Project
		}
		if a.EarlierRecord != b.EarlierRecord {
			return a.EarlierRecord < b.EarlierRecord
		}
		return a.LaterRecord < b.LaterRecord
	})
	return out
}
