package resync

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/util/duration"
)

// WriteProjectTable prints one project's block of the operator's table.
func WriteProjectTable(w io.Writer, r PassReport) error {
	var b strings.Builder
	fmt.Fprintf(&b, "PROJECT %s\n", r.Project)
	fmt.Fprintf(&b, "  plane %s", r.Plane)
	if r.PlaneDetail != "" {
		fmt.Fprintf(&b, " (%s)", r.PlaneDetail)
	}
	fmt.Fprintf(&b, "; %d anchors; %d API calls; %s\n", len(r.Anchors), r.APICalls, r.Duration.Round(time.Millisecond))
	var notes []string
	for _, n := range []struct {
		on   bool
		text string
	}{
		{r.Aborted != "", "aborted: " + r.Aborted}, {r.Halt != "", "HALTED: " + r.Halt}, {r.DryRun, "dry-run"},
		{r.SwitchedOff, "deletion switched off"}, {r.Excluded, "project excluded"}, {r.Retired, "retired (tombstone; no kubeconfig Secret)"},
	} {
		if n.on {
			notes = append(notes, n.text)
		}
	}
	if len(notes) > 0 {
		fmt.Fprintf(&b, "  %s\n", strings.Join(notes, "; "))
	}
	collected := r.CountAction(ActionDeleted)
	fmt.Fprintf(&b, "  kept %d, suspect %d, collect %d (deleted %d, would delete %d), unknown %d\n",
		r.Count(Keep), r.Count(Suspect), r.Count(Collect), collected, r.Count(Collect)-collected, r.Count(Unknown))
	writeAnchorRows(&b, r.Anchors)
	b.WriteString("\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteUnownedTable prints the unowned anchors' block; nothing when there are none.
func WriteUnownedTable(w io.Writer, unowned []AnchorReport) error {
	var b strings.Builder
	if len(unowned) > 0 {
		fmt.Fprintf(&b, "NO PROJECT SECRET (reported, never touched)\n")
		writeAnchorRows(&b, unowned)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func writeAnchorRows(b *strings.Builder, rows []AnchorReport) {
	sorted := slices.Clone(rows)
	slices.SortStableFunc(sorted, func(a, b AnchorReport) int {
		return cmp.Or(cmp.Compare(b.Decision, a.Decision), strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	tw := tabwriter.NewWriter(b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  DECISION\tREASON\tACTION\tAGE\tNAMESPACE\tANCHOR\tOWNER\tDEPENDENTS\tDETAIL")
	for _, a := range sorted {
		owner, deps := "", ""
		if a.Owner.Kind != "" {
			owner = ownerRef(a.Owner)
		}
		if a.Dependents != nil {
			deps = fmt.Sprint(len(a.Dependents))
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", a.Decision, a.Reason, orDash(string(a.Action)), duration.HumanDuration(a.Age), a.Namespace, a.Name, orDash(owner), orDash(deps), orDash(a.Detail))
	}
	_ = tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
