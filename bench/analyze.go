package bench

import (
	"sort"
	"strings"
	"time"

	"anchorage/internal/harness"
)

// Overlaps returns every pair of reconciles of one project by two different holder
// incarnations whose intervals intersect (harness.Overlaps, the judgement the
// integration tests make); frozen marks the reconciles a stopped process held.
func Overlaps(records []Record, frozen func(Record) bool) []Overlap {
	var out []Overlap
	for _, o := range harness.Overlaps(records) {
		a, b := records[o.EarlierRecord], records[o.LaterRecord]
		sideA, sideB := a.Replica, b.Replica
		if sideA == sideB {
			// Two incarnations of one replica: only their holders tell them apart.
			sideA, sideB = a.Holder, b.Holder
		}
		out = append(out, Overlap{Project: o.Project, A: sideA, B: sideB, Start: o.Start, Length: o.Length,
			Frozen: frozen != nil && (frozen(a) || frozen(b))})
	}
	return out
}

// stopSlack is how long after a stop fault's time a record may still have begun before
// the process actually stopped: the time is taken just before the signal is sent. A
// stopped process begins nothing, and its wake comes seconds later.
const stopSlack = 100 * time.Millisecond

// InFlightAtStop returns whether a record was in flight when its replica was stopped
// (a "stop" fault inside the record's interval): work frozen mid-reconcile.
func InFlightAtStop(faults []Fault) func(Record) bool {
	stops := map[string][]time.Time{}
	for _, f := range faults {
		if f.Kind == "stop" {
			stops[f.Replica] = append(stops[f.Replica], f.At)
		}
	}
	return func(r Record) bool {
		for _, t := range stops[r.Replica] {
			if !r.Start.After(t.Add(stopSlack)) && r.End.After(t) {
				return true
			}
		}
		return false
	}
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
	_, until := v.Epoch(writer, scope, t)
	return until
}

// Epoch returns the validity period writer is in at t: from the first renew of the
// unbroken chain (each renew before the previous one's validity ended) that reaches t,
// to the end of validity of the last renew at or before t. A write admitted before that
// start was admitted under a validity that has since ended, whatever came after.
func (v *Validity) Epoch(writer, scope string, t time.Time) (start, until time.Time) {
	renews := v.renews[validityKey{writer, scope}]
	sort.Slice(renews, func(i, j int) bool { return renews[i].Before(renews[j]) })
	for _, r := range renews {
		if r.After(t) {
			break
		}
		if start.IsZero() || !r.Before(until) {
			start = r
		}
		until = r.Add(v.duration)
	}
	return start, until
}

// Write is one committed write from an audit log, attributed to a replica and project.
type Write struct {
	Replica, Project, Plane         string
	Verb, Resource, Namespace, Name string
	At                              time.Time
}

// LateWrites returns the writes committed after their writer's validity ended: either
// past the end of the validity the writer was in, or, when admittedAt tells when the
// work that made the write was admitted, by work admitted before the writer's current
// validity began (a process frozen mid-reconcile that wakes up, renews and carries on
// with what it read before). scopeOf maps a write to its validity scope (see Validity).
func LateWrites(writes []Write, v *Validity, scopeOf func(Write) string, admittedAt func(Write) (time.Time, bool)) []LateWrite {
	var out []LateWrite
	for _, w := range writes {
		start, until := v.Epoch(w.Replica, scopeOf(w), w.At)
		valid := !until.IsZero() && w.At.Before(until)
		if valid && admittedAt != nil {
			if admitted, ok := admittedAt(w); ok && admitted.Before(start) {
				// Late with respect to the validity the work was admitted under.
				_, until = v.Epoch(w.Replica, scopeOf(w), admitted)
				valid = false
			}
		}
		if valid {
			continue
		}
		late := time.Duration(0)
		if !until.IsZero() && !w.At.Before(until) {
			late = w.At.Sub(until)
		}
		out = append(out, LateWrite{
			Replica: w.Replica, Project: w.Project, Plane: w.Plane, Verb: w.Verb, Resource: w.Resource,
			Namespace: w.Namespace, Name: w.Name, At: w.At, ValidUntil: until, Late: late,
		})
	}
	return out
}

// AdmittedAt returns, for a write, the latest start among the writer's records of the
// write's project that were open when it was committed: the most recent admission
// that could have made it (the benefit of the doubt goes to the writer).
func AdmittedAt(records []Record) func(Write) (time.Time, bool) {
	type key struct{ replica, project string }
	by := map[key][]Record{}
	for _, r := range records {
		by[key{r.Replica, r.Project}] = append(by[key{r.Replica, r.Project}], r)
	}
	return func(w Write) (time.Time, bool) {
		var latest time.Time
		found := false
		for _, r := range by[key{w.Replica, w.Project}] {
			if !r.Start.After(w.At) && !r.End.Before(w.At) && (!found || r.Start.After(latest)) {
				latest, found = r.Start, true
			}
		}
		return latest, found
	}
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
