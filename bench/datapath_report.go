// The data-path section of report.md: latencies, hub requests per proxy against the
// design minimum, peak RSS, its targets, and the latency plot.

package bench

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
)

// DataPathPlot is the latency distributions' plot.
const DataPathPlot = "datapath-latency.png"

// deleteCostLimit is the target on hub requests per deleted proxy, as a multiple of
// the design minimum.
const deleteCostLimit = 1.5

// dataPathOf returns c's data-path result in r.
func dataPathOf(r *Report, c Coordinator) (DataPathResult, bool) {
	for _, d := range r.DataPath {
		if d.Coordinator == c {
			return d, true
		}
	}
	return DataPathResult{}, false
}

// CreateCostPerProxy is the create phase's hub requests per programmed proxy.
func (d DataPathResult) CreateCostPerProxy() (float64, bool) {
	n := len(d.ToProgrammed)
	return float64(d.CreateRequests.Total()) / float64(max(n, 1)), n > 0
}

// DeleteCostPerProxy is the delete phase's hub requests per deleted proxy.
func (d DataPathResult) DeleteCostPerProxy() (float64, bool) {
	return float64(d.DeleteRequests.Total()) / float64(max(d.Deleted, 1)), d.Deleted > 0
}

// FinalizerLists counts the LISTs a finalizer may have sent: the delete phase's
// ConfigMap lists other than informers', and the Certificate lists sent for a proxy
// after its deletion was requested (no replica watches Certificates, so each is a
// reconcile's; those of proxies still live, deleted later in the phase, are the live
// path's).
func (d DataPathResult) FinalizerLists() int {
	return d.DeleteRequests.ConfigMapLists[ListByName] + d.DeleteRequests.ConfigMapLists[ListOther] + d.CertificateListsOfDeleted
}

// DataPathTargets judges anchorage's data path: its cost per deleted proxy against
// the design minimum, its finalizers' lists, and its p99 latencies against the
// baseline's in the same run.
func DataPathTargets(r *Report) []Target {
	a, okA := dataPathOf(r, Anchorage)
	s, okS := dataPathOf(r, Sharded)
	deleteCost := Target{Name: fmt.Sprintf("hub requests per deleted proxy ≤ %.1f × the design minimum", deleteCostLimit), Measured: notAvailable}
	lists := Target{Name: "no LIST in the deletion phase other than informer (re)lists", Measured: notAvailable}
	if okA {
		if per, ok := a.DeleteCostPerProxy(); ok && a.NotClean > 0 {
			// Requests for proxies still being deleted fall outside the phase: no verdict.
			deleteCost.Measured = fmt.Sprintf("%.2f per proxy vs %.0f, but %d of %d proxies not clean", per, a.MinimumDelete.Total(), a.NotClean, a.Deleted)
		} else if ok {
			ratio := per / a.MinimumDelete.Total()
			deleteCost.Measured = fmt.Sprintf("%.2f per proxy vs %.0f (%.2f ×)", per, a.MinimumDelete.Total(), ratio)
			deleteCost.Met = verdictOf(ratio <= deleteCostLimit+limitSlack)
		}
		cm := a.DeleteRequests.ConfigMapLists
		lists.Measured = fmt.Sprintf("ConfigMaps: %d by name, %d other (%d informer); Certificates: %d of proxies being deleted (%d in the phase, the others of proxies still live)",
			cm[ListByName], cm[ListOther], cm[ListInformer], a.CertificateListsOfDeleted, a.DeleteRequests.ByVerbResource["list certificates"])
		lists.Met = verdictOf(a.FinalizerLists() == 0)
	}
	orders := Target{Name: "Certificate (ACME) orders per hostname over a proxy's life ≤ 1, none after its deletion", Measured: notAvailable}
	if okA && a.CertificateOrders.Hostnames > 0 {
		o := a.CertificateOrders
		orders.Measured = fmt.Sprintf("%.2f per hostname (%d orders, %d hostnames), %d after a deletion", o.PerHostname(), o.Created, o.Hostnames, o.AfterDelete)
		orders.Met = verdictOf(o.PerHostname() <= 1 && o.AfterDelete == 0)
	}
	programmed := p99Target("time to Programmed p99 ≤ the baseline's", a.ToProgrammed, s.ToProgrammed, okA && okS)
	clean := p99Target("delete-to-clean p99 ≤ the baseline's", a.ToClean, s.ToClean, okA && okS)
	return []Target{deleteCost, lists, orders, programmed, clean}
}

func p99Target(name string, a, s []time.Duration, both bool) Target {
	t := Target{Name: name, Measured: notAvailable}
	pa, okA := Percentile(a, 99)
	ps, okS := Percentile(s, 99)
	if both && okA && okS {
		t.Measured = fmt.Sprintf("%s vs %s", formatSeconds(pa.Seconds()), formatSeconds(ps.Seconds()))
		t.Met = verdictOf(pa <= ps)
	}
	return t
}

// dataPathMinimumNote says what the design minimum counts.
const dataPathMinimumNote = "The design minimum (`DesignMinimum`, docs/design.md \"Gateway path\") counts, per programmed proxy with H hostnames " +
	"in a fresh upstream namespace: the mapped namespace's create (once per upstream namespace, amortized over its proxies), " +
	"the two anchors (upstream Gateway and HTTPRoute), the downstream Gateway and HTTPRoute, H Certificates and its https backend's " +
	"Service, EndpointSlice and BackendTLSPolicy — creates only; " +
	"per deleted proxy: the two anchor deletes, each a GET in the mapped namespace and a DELETE with its UID and resourceVersion " +
	"as preconditions, and one DELETE of each downstream object (Gateway, HTTPRoute, H Certificates, the three backend objects), which the finalizers delete themselves. Measured: every hub request of the run's replicas " +
	"(their own users; the harness's requests are not counted) except watches and Lease and Event requests, from the hub's audit log, " +
	"the create phase running from the first create to the first delete and the delete phase from the first delete until the hub held " +
	"nothing of the run. Both coordinators run the same reconcilers (pkg/gateway, the same finalizers), so the ratio between them " +
	"compares the coordinators, not two data paths. Resync period: longer than the run (no resync pass is counted)."

func writeDataPath(b *strings.Builder, r *Report, plots map[string]bool) {
	if len(r.DataPath) == 0 {
		return
	}
	b.WriteString("## Data path\n\n")
	b.WriteString(dataPathMinimumNote + "\n\n")
	header := []string{"metric"}
	for _, d := range r.DataPath {
		header = append(header, string(d.Coordinator))
	}
	writeTable(b, header, dataPathRows(r.DataPath))
	b.WriteString("Targets (anchorage, in this run):\n\n")
	targets := DataPathTargets(r)
	cells := make([][]string, len(targets))
	for i, t := range targets {
		cells[i] = []string{t.Name, t.Measured, t.Verdict()}
	}
	writeTable(b, []string{"target", "measured", "met"}, cells)
	for _, d := range r.DataPath {
		fmt.Fprintf(b, "- %s, delete phase by verb and resource: %s\n", d.Coordinator, formatCounts(d.DeleteRequests.ByVerbResource))
		fmt.Fprintf(b, "- %s, create phase by verb and resource: %s\n", d.Coordinator, formatCounts(d.CreateRequests.ByVerbResource))
		writeList(b, string(d.Coordinator)+" errors", d.Errors)
	}
	b.WriteString("\n")
	writeImage(b, plots, DataPathPlot, "time to Programmed and delete-to-clean")
}

// dataPathRows are the data-path table's rows, one column per result.
func dataPathRows(ds []DataPathResult) [][]string {
	row := func(name string, cell func(DataPathResult) string) []string {
		out := []string{name}
		for _, d := range ds {
			out = append(out, cell(d))
		}
		return out
	}
	latency := func(l Latency) string {
		if l.N == 0 {
			return notAvailable
		}
		return fmt.Sprintf("%s / %s / %s", formatSeconds(l.P50.Seconds()), formatSeconds(l.P99.Seconds()), formatSeconds(l.Max.Seconds()))
	}
	return [][]string{
		row("planes × proxies, replicas", func(d DataPathResult) string {
			return fmt.Sprintf("%d × %d, %d", d.Planes, d.Created, d.Replicas)
		}),
		row("Programmed (not)", func(d DataPathResult) string { return fmt.Sprintf("%d (%d)", len(d.ToProgrammed), d.NotProgrammed) }),
		row("create → Programmed p50 / p99 / max", func(d DataPathResult) string { return latency(d.Programmed()) }),
		row("clean on the hub (not)", func(d DataPathResult) string { return fmt.Sprintf("%d (%d)", len(d.ToClean), d.NotClean) }),
		row("delete → nothing on the hub p50 / p99 / max", func(d DataPathResult) string { return latency(d.Clean()) }),
		row("hub requests per programmed proxy", func(d DataPathResult) string {
			per, ok := d.CreateCostPerProxy()
			return costCell(per, ok, d.MinimumCreate.Total())
		}),
		row("  by verb", func(d DataPathResult) string { return formatPerVerb(d.CreateRequests.PerProxy(len(d.ToProgrammed))) }),
		row("hub requests per deleted proxy", func(d DataPathResult) string {
			per, ok := d.DeleteCostPerProxy()
			return costCell(per, ok, d.MinimumDelete.Total())
		}),
		row("  by verb", func(d DataPathResult) string { return formatPerVerb(d.DeleteRequests.PerProxy(d.Deleted)) }),
		row("design minimum create / delete", func(d DataPathResult) string {
			return fmt.Sprintf("%s / %s", formatPerVerb(d.MinimumCreate), formatPerVerb(d.MinimumDelete))
		}),
		row("ConfigMap LISTs in the delete phase", func(d DataPathResult) string {
			cm := d.DeleteRequests.ConfigMapLists
			return fmt.Sprintf("%d informer, %d by name, %d other", cm[ListInformer], cm[ListByName], cm[ListOther])
		}),
		row("peak RSS per replica MB", func(d DataPathResult) string { return formatMBList(d.PeakRSS) }),
	}
}

func costCell(per float64, ok bool, minimum float64) string {
	if !ok {
		return notAvailable
	}
	return fmt.Sprintf("%.2f (%.2f × minimum %.2f)", per, per/minimum, minimum)
}

// formatPerVerb is "create 5.03, get 2.00" in verb order.
func formatPerVerb(m map[string]float64) string {
	if len(m) == 0 {
		return notAvailable
	}
	verbs := make([]string, 0, len(m))
	for v := range m {
		verbs = append(verbs, v)
	}
	sort.Strings(verbs)
	parts := make([]string, len(verbs))
	for i, v := range verbs {
		parts[i] = fmt.Sprintf("%s %.2f", v, m[v])
	}
	return strings.Join(parts, ", ")
}

// formatCounts is "get configmaps 2000, …", largest first.
func formatCounts(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if m[keys[i]] != m[keys[j]] {
			return m[keys[i]] > m[keys[j]]
		}
		return keys[i] < keys[j]
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

// cdf is the empirical distribution of ds in seconds: (value, fraction at or below).
func cdf(ds []time.Duration) plotter.XYs {
	s := slices.Clone(ds)
	slices.Sort(s)
	xys := make(plotter.XYs, len(s))
	for i, d := range s {
		xys[i] = plotter.XY{X: d.Seconds(), Y: float64(i+1) / float64(len(s))}
	}
	return xys
}

// dataPathPlot draws, per coordinator, the distribution (CDF) of the time to
// Programmed (solid) and of delete-to-clean (dashed).
func dataPathPlot(r *Report) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "Data path: time to Programmed and delete-to-clean"
	p.X.Label.Text = "seconds"
	p.Y.Label.Text = "fraction of proxies"
	lines := 0
	for i, d := range r.DataPath {
		for _, series := range []struct {
			what   string
			ds     []time.Duration
			dashed bool
		}{{"create → Programmed", d.ToProgrammed, false}, {"delete → clean", d.ToClean, true}} {
			if len(series.ds) == 0 {
				continue
			}
			l, err := plotter.NewLine(cdf(series.ds))
			if err != nil {
				return nil, err
			}
			l.Color = plotutil.Color(i)
			if series.dashed {
				l.Dashes = plotutil.Dashes(1)
			}
			p.Add(l)
			p.Legend.Add(fmt.Sprintf("%s %s", d.Coordinator, series.what), l)
			lines++
		}
	}
	if lines == 0 {
		return nil, nil
	}
	p.X.Min, p.Y.Min, p.Y.Max = 0, 0, 1
	p.Legend.Top = false
	p.Legend.Left = false
	return p, nil
}
