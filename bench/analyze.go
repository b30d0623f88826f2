package bench

import (
	"sort"
	"strings"
	"time"
)

// Overlaps returns every pair of reconciles of one project by two different replicas
// whose intervals intersect.
func Overlaps(records []Record) []Overlap {
	byProject := map[string][]Record{}
	for _, r := range records {
		byProject[r.Project] = append(byProject[r.Project], r)
	}
	var out []Overlap
	for project, rs := range byProject {
		sort.Slice(rs, func(i, j int) bool { return rs[i].Start.Before(rs[j].Start) })
		// active holds the records that may still intersect the next one.
		var active []Record
		for _, r := range rs {
			kept := active[:0]
			for _, a := range active {
				if a.End.After(r.Start) {
					kept = append(kept, a)
				}
			}
			active = kept
			for _, a := range active {
				if a.Replica == r.Replica {
					continue
				}
				end := a.End
				if r.End.Before(end) {
					end = r.End
				}
				out = append(out, Overlap{Project: project, A: a.Replica, B: r.Replica, Start: r.Start, Length: end.Sub(r.Start)})
			}
			active = append(active, r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Start.Before(out[j].Start) })
	return out
}

// Validity is the windows during which each writer may write: a successful renew of
// its Lease received at t makes it valid until t + the Lease duration (nobody may take
// over before). Keyed by writer and scope: the replica for anchorage's member Lease
// (scope ""), the replica and project for the sharded coordinator's fences.
type Validity struct {
	duration time.Duration
	renews   map[validityKey][]time.Time
}

type validityKey struct{ writer, scope string }

// NewValidity returns an empty Validity for Leases of duration d.
func NewValidity(d time.Duration) *Validity {
	return &Validity{duration: d, renews: map[validityKey][]time.Time{}}
}

// Renewed records a successful Lease write by writer for scope at t.
func (v *Validity) Renewed(writer, scope string, t time.Time) {
	k := validityKey{writer, scope}
	v.renews[k] = append(v.renews[k], t)
}

// ValidUntil returns the end of writer's validity for scope as of t: the last renew at
// or before t plus the duration. Zero when writer never renewed before t.
func (v *Validity) ValidUntil(writer, scope string, t time.Time) time.Time {
	var last time.Time
	for _, r := range v.renews[validityKey{writer, scope}] {
		if !r.After(t) && r.After(last) {
			last = r
		}
	}
	if last.IsZero() {
		return time.Time{}
	}
	return last.Add(v.duration)
}

// Write is one committed write from an audit log, attributed to a replica and project.
type Write struct {
	Replica, Project, Plane         string
	Verb, Resource, Namespace, Name string
	At                              time.Time
}

// LateWrites returns the writes committed after their writer's validity ended.
// scopeOf maps a write to its validity scope (see Validity).
func LateWrites(writes []Write, v *Validity, scopeOf func(Write) string) []LateWrite {
	var out []LateWrite
	for _, w := range writes {
		until := v.ValidUntil(w.Replica, scopeOf(w), w.At)
		if !until.IsZero() && w.At.Before(until) {
			continue
		}
		late := time.Duration(0)
		if !until.IsZero() {
			late = w.At.Sub(until)
		}
		out = append(out, LateWrite{
			Replica: w.Replica, Project: w.Project, Plane: w.Plane, Verb: w.Verb, Resource: w.Resource,
			Namespace: w.Namespace, Name: w.Name, At: w.At, ValidUntil: until, Late: late,
		})
	}
	return out
}

// HandOversAfter measures, for each project owned by the failed replica when the fault
// happened, the time from the fault to the first reconcile by another replica. Projects
// nobody else reconciled before end are returned as missing.
func HandOversAfter(f Fault, owned []string, records []Record, planned bool) (got []HandOver, missing []string) {
	for _, p := range owned {
		var first *Record
		for i := range records {
			r := &records[i]
			if r.Project != p || r.Replica == f.Replica || r.Start.Before(f.At) {
				continue
			}
			if first == nil || r.Start.Before(first.Start) {
				first = r
			}
		}
		if first == nil {
			missing = append(missing, p)
			continue
		}
		got = append(got, HandOver{
			Project: p, From: f.Replica, To: first.Replica, Planned: planned, OfCoord: f.Coordinator,
			At: f.At, Duration: first.Start.Sub(f.At),
		})
	}
	return got, missing
}

// isLeaseOrEvent reports whether a resource is excluded from the write checks: Lease
// writes are the protocol itself, Events are informational.
func isLeaseOrEvent(resource string) bool {
	return resource == "leases" || resource == "events" || strings.HasPrefix(resource, "events.")
}
