// WriteReport and report.md: the files a run writes and the markdown report's sections and tables.

package bench

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"anchorage/internal/harness"
)

// Files WriteReport writes besides the per-scenario timelines (see TimelineFile).
const (
	ResultsFile     = "results.json"
	ReportFile      = "report.md"
	HandOverPlot    = "handover.png"
	LeaseWritesPlot = "lease-writes.png"
	MemoryPlot      = "memory.png"
)

// bytesPerMB converts byte counts to the MB the report prints.
const bytesPerMB = 1e6

// notAvailable is what the report prints for a number it has no data for.
const notAvailable = "n/a"

// TimelineFile names the timeline plot of one scenario result.
func TimelineFile(s *ScenarioResult) string {
	return fmt.Sprintf("timeline-%s-%s.png", s.Coordinator, s.Scenario)
}

// WriteReport creates dir and writes r into it: results.json, report.md, one
// timeline plot per scenario result and the hand-over, Lease-write and memory
// plots. A plot without data is skipped.
func WriteReport(dir string, r *Report) error {
	if r == nil {
		return errors.New("bench: nil report")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := writeJSON(filepath.Join(dir, ResultsFile), r); err != nil {
		return err
	}
	plots, err := writePlots(dir, r)
	if err != nil {
		return err
	}
	md := renderMarkdown(r, plots)
	return os.WriteFile(filepath.Join(dir, ReportFile), []byte(md), 0o644)
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

func renderMarkdown(r *Report, plots map[string]bool) string {
	var b strings.Builder
	writeTitle(&b, r)
	writeHeadline(&b, r, plots)
	writeTargets(&b, r)
	writeScenarios(&b, r, plots)
	writeLeaseLoad(&b, r, plots)
	writeMemory(&b, r, plots)
	writeFailover(&b, r)
	writeFairShare(&b, r)
	writeDataPath(&b, r, plots)
	return b.String()
}

func writeTitle(b *strings.Builder, r *Report) {
	b.WriteString("# anchorage vs multicluster-runtime coordinator/sharded\n\n")
	kind := "full run"
	if r.Smoke {
		kind = "smoke run"
	}
	machine := r.Machine
	if machine == "" {
		machine = "an unnamed machine"
	}
	fmt.Fprintf(b, "%s started %s on %s", capitalize(kind), formatRunTime(r.Started), machine)
	if !r.Finished.IsZero() {
		fmt.Fprintf(b, ", finished %s", formatRunTime(r.Finished))
	}
	fmt.Fprintf(b, "; lease duration %s.\n\n", formatSeconds(r.LeaseDuration.Seconds()))
	for _, n := range r.Notes {
		fmt.Fprintf(b, "- %s\n", n)
	}
	if len(r.Notes) > 0 {
		b.WriteString("\n")
	}
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

func formatRunTime(t time.Time) string {
	if t.IsZero() {
		return "at an unrecorded time"
	}
	return t.UTC().Format(time.RFC3339)
}

func writeHeadline(b *strings.Builder, r *Report, plots map[string]bool) {
	b.WriteString("## Headline\n\n")
	rows := HeadlineRows(ComputeHeadline(r, Anchorage), ComputeHeadline(r, Sharded))
	cells := make([][]string, len(rows))
	for i, row := range rows {
		cells[i] = []string{row.Metric, row.Anchorage, row.Sharded, row.Ratio}
	}
	writeTable(b, []string{"metric", string(Anchorage), string(Sharded), "ratio (anchorage ÷ sharded)"}, cells)
	writeImage(b, plots, HandOverPlot, "hand-over median")
}

func writeTargets(b *strings.Builder, r *Report) {
	b.WriteString("## Acceptance targets (anchorage)\n\n")
	targets := AcceptanceTargets(ComputeHeadline(r, Anchorage))
	cells := make([][]string, len(targets))
	for i, t := range targets {
		cells[i] = []string{t.Name, t.Measured, t.Verdict()}
	}
	writeTable(b, []string{"target", "measured", "met"}, cells)
}

// writeTable writes a markdown table followed by a blank line.
func writeTable(b *strings.Builder, header []string, rows [][]string) {
	writeRow(b, header)
	sep := make([]string, len(header))
	for i := range sep {
		sep[i] = "---"
	}
	writeRow(b, sep)
	for _, row := range rows {
		writeRow(b, row)
	}
	b.WriteString("\n")
}

func writeRow(b *strings.Builder, cells []string) {
	escaped := make([]string, len(cells))
	for i, c := range cells {
		escaped[i] = strings.ReplaceAll(c, "|", `\|`)
	}
	fmt.Fprintf(b, "| %s |\n", strings.Join(escaped, " | "))
}

// maxListed caps the overlaps and late writes listed per scenario.
const maxListed = 10

func writeScenarios(b *strings.Builder, r *Report, plots map[string]bool) {
	b.WriteString("## Scenarios\n\n")
	for i := range r.Scenarios {
		writeScenario(b, r, &r.Scenarios[i], plots)
	}
}

func writeScenario(b *strings.Builder, r *Report, s *ScenarioResult, plots map[string]bool) {
	fmt.Fprintf(b, "### %s — %s\n\n", s.Coordinator, s.Scenario)
	fmt.Fprintf(b, "- projects: %d, replicas: %d, records: %d, writes: %d\n",
		s.Projects, s.Replicas, s.Records, s.Writes)
	writeFaults(b, s)
	if s.Scenario == ScenarioHubFaults {
		fmt.Fprintf(b, "- schedule seed: %d (replay: `bin/bench --scenarios hub-faults --coordinators %s --hub-faults-seed %d`)\n", s.HubFaultSeed, s.Coordinator, s.HubFaultSeed)
		recovered := fmt.Sprintf("%.2f s", s.Recovery.Seconds())
		if s.NotRecovered {
			recovered = "not within " + recovered
		}
		fmt.Fprintf(b, "- every project owned again after the faults were lifted: %s (failure bound %.1f s)\n", recovered, FailureBound(harness.FastTimings).Seconds())
	}
	writeOverlaps(b, s)
	writeLateWrites(b, s)
	fmt.Fprintf(b, "- hand-overs: %d, missing: %d\n", len(s.HandOvers), s.HandOversMissing)
	writeSkew(b, s)
	fmt.Fprintf(b, "- proxies deleted: %d, anchors left: %d, wrongful deletions: %d\n",
		s.ProxiesDeleted, s.AnchorsLeft, s.WrongfulDeletions)
	writeCreatesAfterDeletion(b, s)
	writeList(b, "errors", s.Errors)
	b.WriteString("\n")
	writeHandOvers(b, s, leaseOf(r, s))
	if file := TimelineFile(s); plots[file] {
		fmt.Fprintf(b, "![%s — %s](%s)\n\n", s.Coordinator, s.Scenario, file)
	} else {
		b.WriteString("No timeline samples.\n\n")
	}
}

// offsetFrom is t as "+12.30 s" after start.
func offsetFrom(start, t time.Time) string {
	return fmt.Sprintf("+%.2f s", t.Sub(start).Seconds())
}

func writeFaults(b *strings.Builder, s *ScenarioResult) {
	faults := make([]string, len(s.Faults))
	for i, f := range s.Faults {
		faults[i] = offsetFrom(s.Start, f.At) + " " + faultLabel(f)
	}
	writeList(b, "faults", faults)
}

// writeList writes "- name: none", or "- name:" and then one indented line per item.
func writeList(b *strings.Builder, name string, items []string) {
	if len(items) == 0 {
		fmt.Fprintf(b, "- %s: none\n", name)
		return
	}
	fmt.Fprintf(b, "- %s:\n", name)
	for _, item := range items {
		fmt.Fprintf(b, "  - %s\n", item)
	}
}

// countFrozen counts the overlaps in which a reconcile was frozen by a stop.
func countFrozen(ovs []Overlap) int {
	n := 0
	for _, o := range ovs {
		if o.Frozen {
			n++
		}
	}
	return n
}

func writeOverlaps(b *strings.Builder, s *ScenarioResult) {
	fmt.Fprintf(b, "- overlapping reconciles: %d, total %s\n",
		len(s.Overlaps), formatSeconds(overlapTime(s.Overlaps).Seconds()))
	if frozen := countFrozen(s.Overlaps); frozen > 0 {
		fmt.Fprintf(b, "  - of which %d with a reconcile frozen by the stop\n", frozen)
	}
	byProject := map[string][]Overlap{}
	for _, o := range s.Overlaps {
		byProject[o.Project] = append(byProject[o.Project], o)
	}
	projects := make([]string, 0, len(byProject))
	for p := range byProject {
		projects = append(projects, p)
	}
	sort.Strings(projects)
	for _, p := range projects {
		fmt.Fprintf(b, "  - per project %s: %d, total %s\n", p, len(byProject[p]), formatSeconds(overlapTime(byProject[p]).Seconds()))
	}
	ovs := sortedOverlaps(s.Overlaps)
	for _, o := range ovs[:min(len(ovs), maxListed)] {
		frozen := ""
		if o.Frozen {
			frozen = " (frozen)"
		}
		fmt.Fprintf(b, "  - project %s: %s and %s at %s for %s%s\n",
			o.Project, o.A, o.B, offsetFrom(s.Start, o.Start), formatSeconds(o.Length.Seconds()), frozen)
	}
	writeMore(b, len(ovs))
}

func writeLateWrites(b *strings.Builder, s *ScenarioResult) {
	fmt.Fprintf(b, "- writes after validity: %d\n", len(s.LateWrites))
	ws := sortedLateWrites(s.LateWrites)
	for _, w := range ws[:min(len(ws), maxListed)] {
		fmt.Fprintf(b, "  - %s: %s\n", offsetFrom(s.Start, w.At), describeLateWrite(w))
	}
	writeMore(b, len(ws))
}

func writeCreatesAfterDeletion(b *strings.Builder, s *ScenarioResult) {
	fmt.Fprintf(b, "- hub creates after the proxy's deletion was requested (+%s): %d of %d",
		DeletionTolerance, len(s.CreatesAfterDeletion), s.HubCreatesChecked)
	if s.CreatesInGuardWindow > 0 {
		fmt.Fprintf(b, " (and %d later, each within %s of the live guard's read of its proxy begun before the delete committed)",
			s.CreatesInGuardWindow, GuardWindow)
	}
	b.WriteString("\n")
	cs := sortedLateCreates(s.CreatesAfterDeletion)
	for _, c := range cs[:min(len(cs), maxListed)] {
		fmt.Fprintf(b, "  - %s: %s\n", offsetFrom(s.Start, c.At), describeLateCreate(c))
	}
	writeMore(b, len(cs))
}

func writeMore(b *strings.Builder, n int) {
	if n > maxListed {
		fmt.Fprintf(b, "  - … and %d more\n", n-maxListed)
	}
}

func writeHandOvers(b *strings.Builder, s *ScenarioResult, lease time.Duration) {
	if len(s.HandOvers) == 0 {
		return
	}
	rows := make([][]string, len(s.HandOvers))
	for i, ho := range s.HandOvers {
		multiple := notAvailable
		if lease > 0 {
			multiple = format2(ho.Duration.Seconds() / lease.Seconds())
		}
		rows[i] = []string{ho.Project, ho.From, ho.To, yesNoCell(ho.Planned), yesNoCell(ho.OfCoord),
			format2(ho.Duration.Seconds()), multiple}
	}
	writeTable(b, []string{"project", "from", "to", "planned", "of coordinator", "seconds", "× lease"}, rows)
}

func yesNoCell(v bool) string {
	if v {
		return "yes"
	}
	return "no"
}

func writeLeaseLoad(b *strings.Builder, r *Report, plots map[string]bool) {
	b.WriteString("## Lease writes at steady state\n\n")
	rows := make([][]string, len(r.LeaseLoad))
	for i, l := range r.LeaseLoad {
		rate := format2(l.PerSecond)
		if l.Unowned > 0 {
			rate += " (not steady: no rate)"
		}
		rows[i] = []string{string(l.Coordinator), fmt.Sprint(l.Projects), fmt.Sprint(l.Replicas), fmt.Sprint(l.Projects - l.Unowned),
			format2(l.Window.Seconds()), fmt.Sprint(l.Writes), rate}
	}
	writeTable(b, []string{"coordinator", "projects", "replicas", "owned", "window s", "writes", "writes/s"}, rows)
	writeImage(b, plots, LeaseWritesPlot, "Lease writes/s")
}

func writeMemory(b *strings.Builder, r *Report, plots map[string]bool) {
	b.WriteString("## Memory\n\n")
	rows := make([][]string, len(r.Memory))
	for i, m := range r.Memory {
		rows[i] = []string{string(m.Coordinator), fmt.Sprint(m.Projects), fmt.Sprint(m.Replicas),
			formatMBList(m.PeakRSS), formatMB(float64(m.ZeroProjectRSS)), formatMB(m.ProjectBytes)}
	}
	writeTable(b, []string{"coordinator", "projects", "replicas", "peak RSS per replica MB",
		"zero-project RSS MB", "per-replica project MB"}, rows)
	writeImage(b, plots, MemoryPlot, "per-replica project memory")
}

// writeFailover writes the failure hand-over of many light projects on a delayed hub.
func writeFailover(b *strings.Builder, r *Report) {
	if len(r.Failover) == 0 {
		return
	}
	b.WriteString("## Failure hand-over of light projects on a slow hub\n\n")
	b.WriteString("Every hub answer to every replica delayed by the fault proxy from the replicas' start; " +
		"a replica owning projects (not anchorage's coordinator) is SIGKILLed; each of its projects is timed " +
		"until a live replica owns it (its project Lease claimed; the baseline: its fence Lease held, unexpired). " +
		"Times overstate by up to one sampling period.\n\n")
	rows := make([][]string, len(r.Failover))
	for i, f := range r.Failover {
		met := "no"
		if f.MetBound() {
			met = "yes"
		}
		max, median := format2(f.Max.Seconds()), format2(f.Median.Seconds())
		if f.Error != "" {
			max, median, met = notAvailable, notAvailable, f.Error
		}
		who := string(f.Coordinator)
		if f.CallTimeout > 0 {
			who += fmt.Sprintf(" (call timeout %s)", f.CallTimeout)
		}
		rows[i] = []string{who, f.LeaseDuration.String(), fmt.Sprint(f.Projects), fmt.Sprint(f.Replicas), f.HubDelay.String(),
			format2(f.OwnedAfter.Seconds()), fmt.Sprint(f.MovedBeforeKill), fmt.Sprint(f.VictimProjects), fmt.Sprint(f.Missing), max, median,
			format2(f.Bound.Seconds()), f.Sample.String(), met}
	}
	writeTable(b, []string{"coordinator", "Lease", "projects", "replicas", "hub delay", "all owned after s", "moved before kill", "victim's projects",
		"not taken over", "max s", "median s", "bound s", "sampling", "within bound"}, rows)
}

// writeFairShare writes the normal projects' time to Programmed alone and beside a
// hostile project, side by side, with their ratio.
func writeFairShare(b *strings.Builder, r *Report) {
	f := r.FairShare
	if f == nil {
		return
	}
	o := f.Options
	b.WriteString("## Fair share: one hostile project beside normal ones\n\n")
	fmt.Fprintf(b, "One anchorage replica holds %d normal projects, each on its own plane, which create %d proxies each over %s "+
		"after a warm-up proxy; measured alone, then beside a hostile project whose plane answers every request %s late and "+
		"holds %d proxies before the replica starts. Time to Programmed is from the create request to the first "+
		"Programmed=True a watch saw. Target: beside within %.1f× of alone.\n\n",
		o.Normal, o.PerNormal, o.CreateOver, o.HostileDelay, o.Hostile, o.Target)
	rows := [][]string{}
	for _, run := range []FairShareRun{f.Alone, f.Beside} {
		l := run.Programmed()
		hostile := "none"
		if run.Hostile > 0 {
			hostile = fmt.Sprintf("%d (%d Programmed, %d ProxyLimitReached at the end)", run.Hostile, run.HostileProgrammed, run.HostileLimited)
		}
		rows = append(rows, []string{run.Label, hostile, fmt.Sprintf("%d/%d", l.N, l.N+run.NotProgrammed), format2(l.P50.Seconds()), format2(l.P99.Seconds()), format2(l.Max.Seconds())})
	}
	p50, p99 := f.Ratios()
	met := "no"
	if f.WithinTarget() {
		met = "yes"
	}
	rows = append(rows, []string{"ratio beside / alone", "", "", format2(p50) + "×", format2(p99) + "×", "within target: " + met})
	writeTable(b, []string{"run", "hostile proxies", "normal Programmed", "p50 s", "p99 s", "max s"}, rows)
}

func writeImage(b *strings.Builder, plots map[string]bool, file, alt string) {
	if plots[file] {
		fmt.Fprintf(b, "![%s](%s)\n\n", alt, file)
	}
}

func formatMB(bytes float64) string { return fmt.Sprintf("%.1f", bytes/bytesPerMB) }

func formatMBList(bs []uint64) string {
	parts := make([]string, len(bs))
	for i, v := range bs {
		parts[i] = formatMB(float64(v))
	}
	return strings.Join(parts, ", ")
}

// writeSkew writes the replicas' clock offsets, when any is set, and for anchorage the
// failure hand-overs of replicas that had not failed.
func writeSkew(b *strings.Builder, s *ScenarioResult) {
	if len(s.ClockOffsets) > 0 {
		names := make([]string, 0, len(s.ClockOffsets))
		for n := range s.ClockOffsets {
			names = append(names, n)
		}
		sort.Strings(names)
		offsets := make([]string, len(names))
		for i, n := range names {
			offsets[i] = fmt.Sprintf("%s %+.0f s", n, s.ClockOffsets[n].Seconds())
		}
		fmt.Fprintf(b, "- clock offsets: %s (others on time)\n", strings.Join(offsets, ", "))
	}
	if s.Coordinator == Sharded {
		return
	}
	items := make([]string, 0, min(len(s.PrematureHandOvers), maxListed))
	for i, p := range s.PrematureHandOvers {
		if i == maxListed {
			break
		}
		items = append(items, offsetFrom(s.Start, p.At)+" "+describePremature(p))
	}
	fmt.Fprintf(b, "- premature failure hand-overs: %d\n", len(s.PrematureHandOvers))
	if s.Scenario == ScenarioHubFaults {
		fmt.Fprintf(b, "- of them during a Lease watch stall and explained by no other fault (gated): %d\n",
			len(StalledViewHandOvers(s.PrematureHandOvers, s.Faults, s.LeaseDuration)))
	}
	for _, item := range items {
		fmt.Fprintf(b, "  - %s\n", item)
	}
}
