package resync

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/duration"

	"anchorage/pkg/anchor"
)

// Action is what a pass did about an anchor beyond deciding.
type Action string

const (
	ActionNone               Action = ""                    // nothing beyond deciding
	ActionDeleted            Action = "deleted"             // deleted; the garbage collector takes its dependents
	ActionDryRun             Action = "dry-run"             // would have been deleted; dry-run
	ActionSwitchedOff        Action = "switched-off"        // would have been deleted; the runtime switch is off
	ActionExcluded           Action = "excluded"            // would have been deleted; the Secret excludes the project
	ActionDeferred           Action = "deferred"            // over this pass's cap; a later pass deletes it
	ActionHalted             Action = "halted"              // deletions halted this pass (ceiling)
	ActionFailed             Action = "failed"              // the delete failed (a conflict: the anchor changed)
	ActionOwnerEnqueued      Action = "owner-enqueued"      // a claiming live owner was asked to re-attach
	ActionAlreadyTerminating Action = "already-terminating" // already being deleted; skipped
)

var collectActions = []Action{ActionDeleted, ActionDryRun, ActionSwitchedOff, ActionExcluded, ActionDeferred, ActionHalted, ActionFailed, ActionAlreadyTerminating}

// AnchorReport is one anchor's line in a pass report.
type AnchorReport struct {
	Namespace string
	Name      string
	UID       types.UID
	// Owner is the decoded owner; zero for a malformed anchor.
	Owner  anchor.Owner
	Labels map[string]string
	Age    time.Duration
	Verdict
	Action Action
	// Dependents names the anchor's dependents, when they were read.
	Dependents []string
	// Detail adds what an operator needs to act (an error, the enqueued owner).
	Detail string
}

// PassReport is what one pass over one project found and did.
type PassReport struct {
	Project string
	Holder  string
	Start   time.Time
	// Duration is measured on the real clock.
	Duration time.Duration
	Plane    PlaneState
	// PlaneDetail explains Plane.
	PlaneDetail string
	// Halt is "" or the reason deletions halted (HaltCeiling, HaltPlaneChanged).
	Halt string
	// DryRun, Excluded and SwitchedOff say why Collect decisions were not acted on.
	DryRun, Excluded, SwitchedOff bool
	// Aborted is set when the pass ended early (project lost, not admitted).
	Aborted string
	Anchors []AnchorReport
	// APICalls counts the requests the pass made, hub and project.
	APICalls int
	// PendingConfirmation is when a proof of this pass can first be confirmed (or zero).
	PendingConfirmation time.Time
	// Retired: no kubeconfig Secret, and a tombstone retires the project.
	Retired bool
	// ClaimsReleased names the hostname claims released (dry-run or off: to release).
	ClaimsReleased []string
}

// Count returns how many anchors got decision d.
func (r PassReport) Count(d Decision) int {
	n := 0
	for _, a := range r.Anchors {
		if a.Decision == d {
			n++
		}
	}
	return n
}

// CountAction returns how many anchors got action a.
func (r PassReport) CountAction(a Action) int {
	n := 0
	for _, x := range r.Anchors {
		if x.Action == a {
			n++
		}
	}
	return n
}

// Find returns the report line of the anchor named name, if any.
func (r PassReport) Find(name string) (AnchorReport, bool) {
	for _, a := range r.Anchors {
		if a.Name == name {
			return a, true
		}
	}
	return AnchorReport{}, false
}

// WriteTable prints reports as the operator's table: one block per project, then the
// unowned anchors.
func WriteTable(w io.Writer, reports []PassReport, unowned []AnchorReport) error {
	sort.Slice(reports, func(i, j int) bool { return reports[i].Project < reports[j].Project })
	for _, r := range reports {
		if err := WriteProjectTable(w, r); err != nil {
			return err
		}
	}
	return WriteUnownedTable(w, unowned)
}

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
	sorted := append([]AnchorReport(nil), rows...)
	sort.SliceStable(sorted, func(i, j int) bool {
		if sorted[i].Decision != sorted[j].Decision {
			return sorted[i].Decision > sorted[j].Decision
		}
		if sorted[i].Namespace != sorted[j].Namespace {
			return sorted[i].Namespace < sorted[j].Namespace
		}
		return sorted[i].Name < sorted[j].Name
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

// ownerRef names an owner in tables, logs and details: "Kind namespace/name".
func ownerRef(o anchor.Owner) string { return fmt.Sprintf("%s %s/%s", o.Kind, o.Namespace, o.Name) }

// collectionNote is an Event's note about a collected anchor: enough to recreate it by
// re-reconciling the owner.
func collectionNote(it *item) string {
	labels := make([]string, 0, len(it.obj.Labels))
	for k, v := range it.obj.Labels {
		labels = append(labels, k+"="+v)
	}
	sort.Strings(labels)
	deps := "none"
	if len(it.deps) > 0 {
		deps = strings.Join(it.deps, ", ")
	}
	return fmt.Sprintf("Collected anchor %s/%s (uid %s) of %s: %s. Labels: %s. Dependents: %s.",
		it.obj.Namespace, it.obj.Name, it.obj.UID, it.owner, it.verdict.Reason, strings.Join(labels, ","), deps)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}

// warn raises a Warning Event on the project's Secret.
func (p *pass) warn(reason, format string, args ...any) {
	p.secretEvent(corev1.EventTypeWarning, reason, "Halt", format, args...)
}

// notice raises a Normal Event on the project's Secret.
func (p *pass) notice(reason, action, format string, args ...any) {
	p.secretEvent(corev1.EventTypeNormal, reason, action, format, args...)
}

func (p *pass) secretEvent(eventtype, reason, action, format string, args ...any) {
	if p.events == nil || p.secret == nil {
		return
	}
	ref := &corev1.ObjectReference{APIVersion: "v1", Kind: "Secret", Namespace: p.secret.Namespace, Name: p.secret.Name, UID: p.secret.UID}
	p.events.Eventf(ref, nil, eventtype, reason, action, format, args...)
}

// reportOf turns an item into its report line.
func (p *pass) reportOf(it *item) AnchorReport {
	age := p.now().Sub(it.obj.CreationTimestamp.Time)
	if age < 0 {
		age = 0
	}
	return AnchorReport{
		Namespace: it.obj.Namespace, Name: it.obj.Name, UID: it.obj.UID, Owner: it.owner, Labels: it.obj.Labels,
		Age: age, Verdict: it.verdict, Action: it.action, Dependents: it.deps, Detail: it.detail,
	}
}

// projectJSON is a project line of the sweep's JSON Lines (`manager sweep -o json`),
// one PassReport: every key present, "" or [] when empty.
type projectJSON struct {
	Kind            string       `json:"kind"`
	Project         string       `json:"project"`
	Plane           string       `json:"plane"`
	PlaneDetail     string       `json:"planeDetail"`
	DryRun          bool         `json:"dryRun"`
	Excluded        bool         `json:"excluded"`
	SwitchedOff     bool         `json:"switchedOff"`
	Retired         bool         `json:"retired"`
	Aborted         string       `json:"aborted"`
	Halt            string       `json:"halt"`
	Counts          countsJSON   `json:"counts"`
	APICalls        int          `json:"apiCalls"`
	DurationSeconds float64      `json:"durationSeconds"`
	Anchors         []anchorJSON `json:"anchors"`
}

// countsJSON counts a project's anchors per decision; Deleted, the collected ones
// deleted.
type countsJSON struct {
	Keep    int `json:"keep"`
	Suspect int `json:"suspect"`
	Collect int `json:"collect"`
	Deleted int `json:"deleted"`
	Unknown int `json:"unknown"`
}

// anchorJSON is one anchor of a line. Owner is null for a malformed anchor, Action
// "none" for ActionNone, Dependents null when not read, AgeSeconds whole seconds.
type anchorJSON struct {
	Namespace  string     `json:"namespace"`
	Name       string     `json:"name"`
	UID        string     `json:"uid"`
	Owner      *ownerJSON `json:"owner"`
	Decision   string     `json:"decision"`
	Reason     string     `json:"reason"`
	Action     string     `json:"action"`
	AgeSeconds int64      `json:"ageSeconds"`
	Dependents []string   `json:"dependents"`
	Detail     string     `json:"detail"`
}

// ownerJSON is an anchor's upstream owner; Group is left out for the core group.
type ownerJSON struct {
	Group     string `json:"group,omitempty"`
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// unownedJSON is an unowned-anchor line; Project is the one the anchor's labels name.
type unownedJSON struct {
	Kind    string `json:"kind"`
	Project string `json:"project"`
	anchorJSON
}

func projectJSONOf(r PassReport) projectJSON {
	out := projectJSON{
		Kind: "project", Project: r.Project, Plane: r.Plane.String(), PlaneDetail: r.PlaneDetail,
		DryRun: r.DryRun, Excluded: r.Excluded, SwitchedOff: r.SwitchedOff, Retired: r.Retired,
		Aborted: r.Aborted, Halt: r.Halt,
		Counts: countsJSON{
			Keep: r.Count(Keep), Suspect: r.Count(Suspect), Collect: r.Count(Collect),
			Deleted: r.CountAction(ActionDeleted), Unknown: r.Count(Unknown),
		},
		APICalls: r.APICalls, DurationSeconds: r.Duration.Seconds(), Anchors: make([]anchorJSON, 0, len(r.Anchors)),
	}
	for _, a := range r.Anchors {
		out.Anchors = append(out.Anchors, anchorJSONOf(a))
	}
	return out
}

func anchorJSONOf(a AnchorReport) anchorJSON {
	out := anchorJSON{
		Namespace: a.Namespace, Name: a.Name, UID: string(a.UID), Decision: a.Decision.String(), Reason: string(a.Reason),
		Action: string(a.Action), AgeSeconds: int64(a.Age / time.Second), Dependents: a.Dependents, Detail: a.Detail,
	}
	if out.Action == "" {
		out.Action = "none"
	}
	if a.Owner.Kind != "" {
		out.Owner = &ownerJSON{Group: a.Owner.Group, Kind: a.Owner.Kind, Namespace: a.Owner.Namespace, Name: a.Owner.Name}
	}
	return out
}

// projectOfLabels is the project an anchor's labels name, "" when they name none.
func projectOfLabels(labels map[string]string) string {
	p, err := anchor.ProjectFromClusterName(labels[anchor.LabelClusterName])
	if err != nil {
		return ""
	}
	return p
}

// WriteProjectJSON prints one project's report as one JSON line (projectJSON).
func WriteProjectJSON(w io.Writer, r PassReport) error {
	return json.NewEncoder(w).Encode(projectJSONOf(r))
}

// WriteUnownedJSON prints each unowned anchor as one JSON line (unownedJSON).
func WriteUnownedJSON(w io.Writer, unowned []AnchorReport) error {
	enc := json.NewEncoder(w)
	for _, a := range unowned {
		line := unownedJSON{Kind: "unowned-anchor", Project: projectOfLabels(a.Labels), anchorJSON: anchorJSONOf(a)}
		if line.Project == "" {
			line.Project = a.Owner.Project
		}
		if err := enc.Encode(line); err != nil {
			return err
		}
	}
	return nil
}
