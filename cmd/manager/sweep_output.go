package main

import (
	"cmp"
	"encoding/json"
	"io"
	"slices"
	"sync"
	"time"

	"anchorage/pkg/anchor"
	"anchorage/pkg/anchor/resync"
)

// sweepPrinter writes each project's row as soon as the sweep reports it final, the rest
// at the end (sorted), then the anchors without a project Secret.
type sweepPrinter struct {
	mu           sync.Mutex
	w            io.Writer
	writeProject func(io.Writer, resync.PassReport) error
	writeUnowned func(io.Writer, []resync.AnchorReport) error
	only         []string // empty: every project
	printed      map[string]bool
	err          error
}

func newSweepPrinter(w io.Writer, format string, projects []string) *sweepPrinter {
	p := &sweepPrinter{w: w, writeProject: resync.WriteProjectTable, writeUnowned: resync.WriteUnownedTable, only: projects, printed: map[string]bool{}}
	if format == outputJSON {
		p.writeProject, p.writeUnowned = writeProjectJSON, writeUnownedJSON
	}
	return p
}

// report writes one project's row unless it was written already or is not asked for.
// It is resync.SweepOptions.OnReport: safe for concurrent use.
func (p *sweepPrinter) report(r resync.PassReport) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.printed[r.Project] || (len(p.only) > 0 && !slices.Contains(p.only, r.Project)) || p.err != nil {
		return
	}
	p.printed[r.Project] = true
	p.err = p.writeProject(p.w, r)
}

// finish writes the reports not streamed yet, then the unowned anchors.
func (p *sweepPrinter) finish(reports []resync.PassReport, unowned []resync.AnchorReport) error {
	sorted := slices.SortedFunc(slices.Values(reports), func(a, b resync.PassReport) int { return cmp.Compare(a.Project, b.Project) })
	for _, r := range sorted {
		p.report(r)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		return p.err
	}
	return p.writeUnowned(p.w, unowned)
}

// projectJSON is a project line of the sweep's JSON Lines (`manager sweep -o json`),
// one resync.PassReport: every key present, "" or [] when empty.
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

// writeProjectJSON prints one project's report as one JSON line (projectJSON).
func writeProjectJSON(w io.Writer, r resync.PassReport) error {
	out := projectJSON{
		Kind: "project", Project: r.Project, Plane: r.Plane.String(), PlaneDetail: r.PlaneDetail,
		DryRun: r.DryRun, Excluded: r.Excluded, SwitchedOff: r.SwitchedOff, Retired: r.Retired,
		Aborted: r.Aborted, Halt: r.Halt,
		Counts: countsJSON{
			Keep: r.Count(resync.Keep), Suspect: r.Count(resync.Suspect), Collect: r.Count(resync.Collect),
			Deleted: r.CountAction(resync.ActionDeleted), Unknown: r.Count(resync.Unknown),
		},
		APICalls: r.APICalls, DurationSeconds: r.Duration.Seconds(), Anchors: make([]anchorJSON, 0, len(r.Anchors)),
	}
	for _, a := range r.Anchors {
		out.Anchors = append(out.Anchors, anchorJSONOf(a))
	}
	return json.NewEncoder(w).Encode(out)
}

func anchorJSONOf(a resync.AnchorReport) anchorJSON {
	out := anchorJSON{
		Namespace: a.Namespace, Name: a.Name, UID: string(a.UID), Decision: a.Decision.String(), Reason: string(a.Reason),
		Action: cmp.Or(string(a.Action), "none"), AgeSeconds: int64(a.Age / time.Second), Dependents: a.Dependents, Detail: a.Detail,
	}
	if a.Owner.Kind != "" {
		out.Owner = &ownerJSON{Group: a.Owner.Group, Kind: a.Owner.Kind, Namespace: a.Owner.Namespace, Name: a.Owner.Name}
	}
	return out
}

// writeUnownedJSON prints each unowned anchor as one JSON line (unownedJSON).
func writeUnownedJSON(w io.Writer, unowned []resync.AnchorReport) error {
	enc := json.NewEncoder(w)
	for _, a := range unowned {
		project, _ := anchor.ProjectFromClusterName(a.Labels[anchor.LabelClusterName]) // "" when they name none
		line := unownedJSON{Kind: "unowned-anchor", Project: cmp.Or(project, a.Owner.Project), anchorJSON: anchorJSONOf(a)}
		if err := enc.Encode(line); err != nil {
			return err
		}
	}
	return nil
}
