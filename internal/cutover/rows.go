// Package cutover is `manager sweep --cut-over-check`: a read-only pass over the hub
// and every project plane, before anchorage's replicas start, that says what the cut-over
// from the previous manager (network-services-operator) will find there. Each finding is
// one Row:
//
//   - blocked: something that must be fixed before anchorage starts (a webhook that
//     fails closed on what anchorage writes, an object terminating on a finalizer no one
//     will remove, a plane or a kind that cannot be read);
//   - changed: what anchorage rewrites when it takes an object over (a class, an issuer,
//     listeners, backendRefs);
//   - adopted: what the previous manager left that anchorage honours as its own;
//   - left: what anchorage cannot program and leaves exactly as it is.
//
// The decisions are pure functions over objects already read (findings.go, webhooks.go);
// Check lists them with the clients it is given (check.go), and Write prints them.
package cutover

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
)

// Verdict is what a finding means for the cut-over.
type Verdict string

// The verdicts, in the order rows are sorted.
const (
	Blocked Verdict = "blocked"
	Changed Verdict = "changed"
	Adopted Verdict = "adopted"
	Left    Verdict = "left"
)

// rank orders verdicts: blocked first.
func (v Verdict) rank() int {
	switch v {
	case Blocked:
		return 0
	case Changed:
		return 1
	case Adopted:
		return 2
	case Left:
		return 3
	}
	return 4
}

// Row is one finding about one object. Project is the project whose plane holds the
// object, "" for an object on the hub (the detail of a hub object names the upstream
// project and object it was written for).
type Row struct {
	Verdict   Verdict `json:"verdict"`
	Project   string  `json:"project"`
	Kind      string  `json:"kind"`
	Namespace string  `json:"namespace"`
	Name      string  `json:"name"`
	Detail    string  `json:"detail"`
}

// Sort orders rows by verdict (blocked, changed, adopted, left), then project, kind,
// namespace, name, and detail (one object may have several findings).
func Sort(rows []Row) {
	sort.SliceStable(rows, func(i, j int) bool {
		a, b := rows[i], rows[j]
		if a.Verdict.rank() != b.Verdict.rank() {
			return a.Verdict.rank() < b.Verdict.rank()
		}
		for _, p := range [][2]string{{a.Project, b.Project}, {a.Kind, b.Kind}, {a.Namespace, b.Namespace}, {a.Name, b.Name}, {a.Detail, b.Detail}} {
			if p[0] != p[1] {
				return p[0] < p[1]
			}
		}
		return false
	})
}

// CountBlocked returns how many rows are blocked.
func CountBlocked(rows []Row) int {
	n := 0
	for _, r := range rows {
		if r.Verdict == Blocked {
			n++
		}
	}
	return n
}

// Output formats Write knows, the sweep's own.
const (
	FormatTable = "table"
	FormatJSON  = "json"
)

// Write prints rows in the given order: as a table (FormatTable, or ""), columns
// VERDICT PROJECT KIND NAMESPACE NAME DETAIL with "-" for an empty cell, a header even
// when there is no row; or as JSON Lines (FormatJSON), one object per row with the keys
// verdict, project, kind, namespace, name and detail (empty strings kept).
func Write(w io.Writer, rows []Row, format string) error {
	switch format {
	case FormatJSON:
		enc := json.NewEncoder(w)
		for _, r := range rows {
			if err := enc.Encode(r); err != nil {
				return err
			}
		}
		return nil
	case FormatTable, "":
		var b strings.Builder
		tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "VERDICT\tPROJECT\tKIND\tNAMESPACE\tNAME\tDETAIL")
		for _, r := range rows {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", dash(string(r.Verdict)), dash(r.Project), dash(r.Kind), dash(r.Namespace), dash(r.Name), dash(oneLine(r.Detail)))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		_, err := io.WriteString(w, b.String())
		return err
	}
	return fmt.Errorf("output format %q: want %s or %s", format, FormatTable, FormatJSON)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// oneLine keeps a table row on one line whatever an error message holds.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
