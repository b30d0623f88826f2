package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

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
	g.Expect(resync.WriteTable(&want, append([]resync.PassReport(nil), reports...), unowned)).To(Succeed())

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
