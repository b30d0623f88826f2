// The skew scenario: replicas whose clocks are a minute off, through a pause and two
// kills, and the measure it adds: failure hand-overs of replicas that had not failed.

package bench

import (
	"fmt"
	"sort"
	"time"

	"anchorage/pkg/shard"
)

// SkewOffsets are the clock offsets of the skew scenario's replicas, by start order:
// the first a minute ahead, the second a minute behind, the third on time. Later
// replicas (none in the scenario) run on time.
var SkewOffsets = []time.Duration{60 * time.Second, -60 * time.Second, 0}

// skewOffset is the clock offset of the i-th replica started in the skew scenario.
func skewOffset(i int) time.Duration {
	if i < len(SkewOffsets) {
		return SkewOffsets[i]
	}
	return 0
}

// SkewBuild is the Binaries key of coordinator c with bench/mutants/skew.patch applied
// (only that build reads ANCHORAGE_BENCH_CLOCK_OFFSET), which the skew scenario's
// replicas run.
func SkewBuild(c Coordinator) Coordinator { return c + "+skew" }

// SkewUnsupported says why coordinator c cannot run the skew scenario, or "" when it
// can (anchorage only). The baseline cannot be given the offset honestly: multicluster-runtime's
// coordinator/sharded v0.23.3 reads time.Now() directly where it writes and judges its
// peer and fence Leases (peers/registry.go, coordinator.go), with no clock to inject,
// and libfaketime does not reach a Go binary, which reads the time through the vDSO.
func SkewUnsupported(c Coordinator) string {
	switch c {
	case Anchorage:
		return ""
	case Sharded:
		return "mcr-sharded reads time.Now() directly in its peer registry and fence Leases (no clock to offset short of patching multicluster-runtime)"
	}
	return "no build of " + string(c) + " with bench/mutants/skew.patch"
}

// Unskew moves the times of records a replica wrote on a clock offset by offset back
// to the local clock, the one the faults, the audit logs and the other replicas'
// records are on.
func Unskew(records []Record, offset time.Duration) []Record {
	if offset == 0 {
		return records
	}
	out := make([]Record, len(records))
	for i, r := range records {
		r.Start, r.End = r.Start.Add(-offset), r.End.Add(-offset)
		if !r.ValidUntil.IsZero() {
			r.ValidUntil = r.ValidUntil.Add(-offset)
		}
		out[i] = r
	}
	return out
}

// FailedAt returns whether a replica had failed at t, per the faults: from a kill or
// a termination on, and from a stop until grace after the replica was continued (the
// others need that long to see it renew again). A hand-over away from a replica that
// had not failed is premature.
func FailedAt(faults []Fault, grace time.Duration) func(replica string, t time.Time) bool {
	type window struct{ from, to time.Time } // to zero: for ever
	windows := map[string][]window{}
	sorted := append([]Fault(nil), faults...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].At.Before(sorted[j].At) })
	for _, f := range sorted {
		ws := windows[f.Replica]
		switch f.Kind {
		case "kill", "term", "stop":
			windows[f.Replica] = append(ws, window{from: f.At})
		case "cont":
			if n := len(ws); n > 0 && ws[n-1].to.IsZero() {
				ws[n-1].to = f.At.Add(grace)
			}
		}
	}
	return func(replica string, t time.Time) bool {
		for _, w := range windows[replica] {
			if !t.Before(w.from) && (w.to.IsZero() || !t.After(w.to)) {
				return true
			}
		}
		return false
	}
}

// OwnerChange is a project whose owner (the claimed holder of its Lease) was From in
// one sample, at Before, and no longer in the next, at At (To is "" while the next
// holder has not claimed).
type OwnerChange struct {
	Project, From, To string
	Before, At        time.Time
}

// ownerChanges lists, in sample order, every project whose owner left between two
// consecutive samples.
func ownerChanges(samples []ownerSample) []OwnerChange {
	var out []OwnerChange
	for i := 1; i < len(samples); i++ {
		prev, cur := samples[i-1], samples[i]
		projects := make([]string, 0, len(prev.owners))
		for p := range prev.owners {
			projects = append(projects, p)
		}
		sort.Strings(projects)
		for _, p := range projects {
			if from := prev.owners[p]; from != "" && cur.owners[p] != from {
				out = append(out, OwnerChange{Project: p, From: from, To: cur.owners[p], Before: prev.at, At: cur.at})
			}
		}
	}
	return out
}

// LeaseWrite is a successful write of a hub Lease, from the audit log.
type LeaseWrite struct {
	Writer, Name string
	At           time.Time
}

// PrematureHandOver is a failure hand-over of a replica that had not failed (see
// FailedAt): Kind "expiry", another replica (the coordinator) declared its member
// Lease expired; Kind "move", a project left it without its own write to the
// project's Lease (a planned hand-over is written by the holder that hands over).
type PrematureHandOver struct {
	Kind    string    `json:"kind"`
	Replica string    `json:"replica"`
	Project string    `json:"project,omitempty"`
	To      string    `json:"to,omitempty"` // the owner in the next sample ("" unclaimed)
	By      string    `json:"by,omitempty"` // who declared the member Lease expired
	At      time.Time `json:"at"`
}

// leaseWriteSlack widens an owner change's interval when looking for the old holder's
// own write: the sample times and the audit log's request times are taken apart.
const leaseWriteSlack = time.Second

// PrematureHandOvers lists the failure hand-overs of replicas that had not failed:
// declarations of expiry of a member Lease (its name to its replica in members) by
// another writer, and owner changes the old owner did not write, while failed says
// the replica had not failed.
func PrematureHandOvers(changes []OwnerChange, writes []LeaseWrite, members map[string]string, failed func(string, time.Time) bool) []PrematureHandOver {
	var out []PrematureHandOver
	for _, w := range writes {
		if m, ok := members[w.Name]; ok && w.Writer != m && !failed(m, w.At) {
			out = append(out, PrematureHandOver{Kind: "expiry", Replica: m, By: w.Writer, At: w.At})
		}
	}
	for _, c := range changes {
		if failed(c.From, c.At) || wroteBetween(writes, c.From, shard.ProjectLeaseName(c.Project), c.Before.Add(-leaseWriteSlack), c.At.Add(leaseWriteSlack)) {
			continue
		}
		out = append(out, PrematureHandOver{Kind: "move", Replica: c.From, Project: c.Project, To: c.To, At: c.At})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].At.Before(out[j].At) })
	return out
}

// wroteBetween reports whether writer wrote the Lease name within [from, to].
func wroteBetween(writes []LeaseWrite, writer, name string, from, to time.Time) bool {
	for _, w := range writes {
		if w.Writer == writer && w.Name == name && !w.At.Before(from) && !w.At.After(to) {
			return true
		}
	}
	return false
}

// describePremature is e.g. "r1 declared expired by r0" or "project p1 moved from r1
// to r2 without r1's write".
func describePremature(p PrematureHandOver) string {
	if p.Kind == "expiry" {
		return fmt.Sprintf("member %s declared expired by %s", p.Replica, p.By)
	}
	to := p.To
	if to == "" {
		to = "(unclaimed)"
	}
	return fmt.Sprintf("project %s moved from %s to %s without %s's write", p.Project, p.Replica, to, p.Replica)
}
