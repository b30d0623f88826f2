package main

import (
	"bytes"
	"encoding/json"
	"sort"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"anchorage/pkg/anchor"
	"anchorage/pkg/anchor/resync"
)

// TestSweepRowsStream: a project's row is written as soon as the sweep reports it; at
// the end only the projects not streamed are written, then the unowned anchors.
func TestSweepRowsStream(t *testing.T) {
	g := NewWithT(t)
	var out bytes.Buffer
	p := newSweepPrinter(&out, outputJSON, nil)
	p.report(resync.PassReport{Project: "b"})
	g.Expect(kinds(t, out.String())).To(Equal([]string{"project b"}), "the row is written when reported")

	reports := []resync.PassReport{{Project: "c"}, {Project: "b"}, {Project: "a"}}
	unowned := []resync.AnchorReport{{Namespace: "ns", Name: "anchor-1"}}
	g.Expect(p.finish(reports, unowned)).To(Succeed())
	g.Expect(kinds(t, out.String())).To(Equal([]string{"project b", "project a", "project c", "unowned-anchor anchor-1"}))
}

// TestSweepRowsOfTheAskedProjectsOnly: with --project, rows of other projects are not
// written even if the sweep returns them.
func TestSweepRowsOfTheAskedProjectsOnly(t *testing.T) {
	g := NewWithT(t)
	var out bytes.Buffer
	p := newSweepPrinter(&out, outputJSON, []string{"a", "c"})
	p.report(resync.PassReport{Project: "b"})
	g.Expect(p.finish([]resync.PassReport{{Project: "a"}, {Project: "b"}, {Project: "c"}}, nil)).To(Succeed())
	g.Expect(kinds(t, out.String())).To(Equal([]string{"project a", "project c"}))
}

// TestSweepTableIsTheOperatorsTable: the table output is resync's table, row by row.
func TestSweepTableIsTheOperatorsTable(t *testing.T) {
	g := NewWithT(t)
	reports := []resync.PassReport{{Project: "b"}, {Project: "a"}}
	unowned := []resync.AnchorReport{{Namespace: "ns", Name: "anchor-1"}}
	var want bytes.Buffer
	g.Expect(resync.WriteProjectTable(&want, reports[1])).To(Succeed())
	g.Expect(resync.WriteProjectTable(&want, reports[0])).To(Succeed())
	g.Expect(resync.WriteUnownedTable(&want, unowned)).To(Succeed())

	var out bytes.Buffer
	p := newSweepPrinter(&out, outputTable, nil)
	p.report(reports[1])
	g.Expect(out.String()).To(HavePrefix("PROJECT a\n"))
	g.Expect(p.finish(reports, unowned)).To(Succeed())
	g.Expect(out.String()).To(Equal(want.String()))
}

// kinds reads JSON Lines and names each line by its kind and project or anchor name.
func kinds(t *testing.T, jsonLines string) []string {
	t.Helper()
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(jsonLines), "\n") {
		var v struct{ Kind, Project, Name string }
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatalf("not a JSON line (%v): %s", err, line)
		}
		got = append(got, strings.TrimSpace(v.Kind+" "+v.Project+v.Name))
	}
	return got
}

// decodeLines splits JSON Lines into one map per line, failing on anything else.
func decodeLines(g *WithT, out string) []map[string]any {
	g.Expect(out).To(HaveSuffix("\n"))
	var lines []map[string]any
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		var m map[string]any
		g.Expect(json.Unmarshal([]byte(line), &m)).To(Succeed(), "line %q", line)
		lines = append(lines, m)
	}
	return lines
}

// keysOf lists a JSON object's keys, sorted.
func keysOf(m any) []string {
	var out []string
	for k := range m.(map[string]any) {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// A project line has the documented keys, lowercase, with decisions, plane and actions
// as words and durations in seconds.
func TestWriteProjectJSONShape(t *testing.T) {
	g := NewWithT(t)
	gw := anchor.Owner{Project: "p", Group: "gateway.networking.k8s.io", Kind: "Gateway", Namespace: "default", Name: "web", UID: "u-1"}
	r := resync.PassReport{
		Project: "p", Plane: resync.PlaneUnverified, PlaneDetail: "plane unreachable", DryRun: true, Halt: resync.HaltCeiling,
		Aborted: "", APICalls: 7, Duration: 1500 * time.Millisecond, SwitchedOff: true,
		Anchors: []resync.AnchorReport{
			{Namespace: "ns-1", Name: "anchor-u-1", UID: "a-1", Owner: gw, Age: 90*time.Second + 400*time.Millisecond,
				Verdict: resync.Verdict{Decision: resync.Collect, Reason: resync.ReasonNotFound}, Action: resync.ActionDeleted, Dependents: []string{"Gateway ns-1/web"}, Detail: "gone"},
			{Namespace: "ns-1", Name: "anchor-u-2", UID: "a-2", Age: time.Hour,
				Verdict: resync.Verdict{Decision: resync.Unknown, Reason: resync.ReasonMalformed}},
			{Namespace: "ns-1", Name: "anchor-u-3", UID: "a-3", Owner: anchor.Owner{Project: "p", Kind: "ConfigMap", Namespace: "default", Name: "c"},
				Verdict: resync.Verdict{Decision: resync.Keep, Reason: resync.ReasonLive}, Dependents: []string{}},
		},
	}
	var out strings.Builder
	g.Expect(writeProjectJSON(&out, r)).To(Succeed())
	lines := decodeLines(g, out.String())
	g.Expect(lines).To(HaveLen(1))
	m := lines[0]
	g.Expect(keysOf(m)).To(Equal([]string{"aborted", "anchors", "apiCalls", "counts", "dryRun", "durationSeconds", "excluded", "halt",
		"kind", "plane", "planeDetail", "project", "retired", "switchedOff"}))
	g.Expect(m).To(HaveKeyWithValue("kind", "project"))
	g.Expect(m).To(HaveKeyWithValue("project", "p"))
	g.Expect(m).To(HaveKeyWithValue("plane", "unverified"))
	g.Expect(m).To(HaveKeyWithValue("planeDetail", "plane unreachable"))
	g.Expect(m).To(HaveKeyWithValue("dryRun", true))
	g.Expect(m).To(HaveKeyWithValue("switchedOff", true))
	g.Expect(m).To(HaveKeyWithValue("excluded", false))
	g.Expect(m).To(HaveKeyWithValue("aborted", ""))
	g.Expect(m).To(HaveKeyWithValue("halt", resync.HaltCeiling))
	g.Expect(m).To(HaveKeyWithValue("apiCalls", 7.0))
	g.Expect(m).To(HaveKeyWithValue("durationSeconds", 1.5))
	g.Expect(m["counts"]).To(Equal(map[string]any{"keep": 1.0, "suspect": 0.0, "collect": 1.0, "deleted": 1.0, "unknown": 1.0}))

	anchors := m["anchors"].([]any)
	g.Expect(anchors).To(HaveLen(3))
	first := anchors[0].(map[string]any)
	g.Expect(keysOf(first)).To(Equal([]string{"action", "ageSeconds", "decision", "dependents", "detail", "name", "namespace", "owner", "reason", "uid"}))
	g.Expect(first).To(HaveKeyWithValue("namespace", "ns-1"))
	g.Expect(first).To(HaveKeyWithValue("name", "anchor-u-1"))
	g.Expect(first).To(HaveKeyWithValue("uid", "a-1"))
	g.Expect(first).To(HaveKeyWithValue("decision", "collect"))
	g.Expect(first).To(HaveKeyWithValue("reason", "not-found"))
	g.Expect(first).To(HaveKeyWithValue("action", "deleted"))
	g.Expect(first).To(HaveKeyWithValue("ageSeconds", 90.0))
	g.Expect(first).To(HaveKeyWithValue("dependents", []any{"Gateway ns-1/web"}))
	g.Expect(first).To(HaveKeyWithValue("detail", "gone"))
	g.Expect(first["owner"]).To(Equal(map[string]any{"group": "gateway.networking.k8s.io", "kind": "Gateway", "namespace": "default", "name": "web"}))

	malformed := anchors[1].(map[string]any)
	g.Expect(malformed).To(HaveKeyWithValue("owner", BeNil()), "a malformed anchor has no owner")
	g.Expect(malformed).To(HaveKeyWithValue("dependents", BeNil()), "dependents not read")
	g.Expect(malformed).To(HaveKeyWithValue("action", "none"))
	g.Expect(malformed).To(HaveKeyWithValue("decision", "unknown"))

	core := anchors[2].(map[string]any)
	g.Expect(core["owner"]).To(Equal(map[string]any{"kind": "ConfigMap", "namespace": "default", "name": "c"}), "no group for the core group")
	g.Expect(core).To(HaveKeyWithValue("dependents", []any{}), "read, and none")

	out.Reset()
	g.Expect(writeProjectJSON(&out, resync.PassReport{Project: "empty"})).To(Succeed())
	g.Expect(decodeLines(g, out.String())[0]).To(HaveKeyWithValue("anchors", []any{}), "no anchors is an empty list, not null")
}

// Each unowned anchor is a line of its own, with its project as its labels name it.
func TestWriteUnownedJSONShape(t *testing.T) {
	g := NewWithT(t)
	owner := anchor.Owner{Project: "ghost", Kind: "ConfigMap", Namespace: "up", Name: "c", UID: "u-9"}
	unowned := []resync.AnchorReport{
		{Namespace: "ns-9", Name: anchor.Name(owner.UID), UID: "a-9", Owner: owner, Labels: owner.Labels(), Age: 3 * time.Minute,
			Verdict: resync.Verdict{Decision: resync.Unknown, Reason: resync.ReasonNoProjectSecret}, Detail: `project "ghost"`},
		{Namespace: "ns-9", Name: "anchor-u-10", UID: "a-10", Labels: map[string]string{anchor.LabelClusterName: "cluster-ghost"},
			Verdict: resync.Verdict{Decision: resync.Unknown, Reason: resync.ReasonNoProjectSecret}},
	}
	var out strings.Builder
	g.Expect(writeUnownedJSON(&out, unowned)).To(Succeed())
	lines := decodeLines(g, out.String())
	g.Expect(lines).To(HaveLen(2))
	g.Expect(keysOf(lines[0])).To(Equal([]string{"action", "ageSeconds", "decision", "dependents", "detail", "kind", "name", "namespace", "owner", "project", "reason", "uid"}))
	for _, m := range lines {
		g.Expect(m).To(HaveKeyWithValue("kind", "unowned-anchor"))
		g.Expect(m).To(HaveKeyWithValue("project", "ghost"))
		g.Expect(m).To(HaveKeyWithValue("decision", "unknown"))
		g.Expect(m).To(HaveKeyWithValue("reason", "no-project-secret"))
		g.Expect(m).To(HaveKeyWithValue("action", "none"))
	}
	g.Expect(lines[0]).To(HaveKeyWithValue("ageSeconds", 180.0))
	g.Expect(lines[0]["owner"]).To(Equal(map[string]any{"kind": "ConfigMap", "namespace": "up", "name": "c"}))
	g.Expect(lines[1]).To(HaveKeyWithValue("owner", BeNil()))

	out.Reset()
	g.Expect(writeUnownedJSON(&out, nil)).To(Succeed())
	g.Expect(out.String()).To(BeEmpty())
}
