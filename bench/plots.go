// Plots: the report's PNGs (per-scenario timelines, hand-over, Lease writes, memory), drawn with gonum.

package bench

import (
	"fmt"
	"image/color"
	"math"
	"path/filepath"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// plotJob is one plot to build and save; build returns nil without data.
type plotJob struct {
	file  string
	w, h  vg.Length
	build func() (*plot.Plot, error)
}

// writePlots saves every plot that has data and returns the names of those written.
func writePlots(dir string, r *Report) (map[string]bool, error) {
	written := map[string]bool{}
	for _, job := range plotJobs(r) {
		p, err := job.build()
		if err != nil {
			return nil, fmt.Errorf("bench: plot %s: %w", job.file, err)
		}
		if p == nil {
			continue
		}
		if err := p.Save(job.w, job.h, filepath.Join(dir, job.file)); err != nil {
			return nil, fmt.Errorf("bench: save %s: %w", job.file, err)
		}
		written[job.file] = true
	}
	return written, nil
}

func plotJobs(r *Report) []plotJob {
	cs := coordinators(r)
	var jobs []plotJob
	for i := range r.Scenarios {
		s := &r.Scenarios[i]
		jobs = append(jobs, plotJob{TimelineFile(s), 10 * vg.Inch, 5 * vg.Inch,
			func() (*plot.Plot, error) { return timelinePlot(s) }})
	}
	return append(jobs,
		plotJob{HandOverPlot, 7 * vg.Inch, 4 * vg.Inch, func() (*plot.Plot, error) { return handOverPlot(r, cs) }},
		plotJob{LeaseWritesPlot, 7 * vg.Inch, 4 * vg.Inch, func() (*plot.Plot, error) { return leaseWritesPlot(r, cs) }},
		plotJob{MemoryPlot, 7 * vg.Inch, 4 * vg.Inch, func() (*plot.Plot, error) { return memoryPlot(r, cs) }},
		plotJob{DataPathPlot, 7 * vg.Inch, 4 * vg.Inch, func() (*plot.Plot, error) { return dataPathPlot(r) }},
	)
}

// coordinators lists the coordinators in r: the known ones first, then others in
// order of appearance.
func coordinators(r *Report) []Coordinator {
	seen := map[Coordinator]bool{}
	for _, s := range r.Scenarios {
		seen[s.Coordinator] = true
	}
	for _, l := range r.LeaseLoad {
		seen[l.Coordinator] = true
	}
	for _, m := range r.Memory {
		seen[m.Coordinator] = true
	}
	var out []Coordinator
	take := func(c Coordinator) {
		if seen[c] {
			out = append(out, c)
			delete(seen, c)
		}
	}
	for _, c := range []Coordinator{Anchorage, Sharded, AnchorageNoGate, AnchorageSuspectExpires} {
		take(c)
	}
	for _, s := range r.Scenarios {
		take(s.Coordinator)
	}
	for _, l := range r.LeaseLoad {
		take(l.Coordinator)
	}
	for _, m := range r.Memory {
		take(m.Coordinator)
	}
	return out
}

// timelineReplicas lists every replica that appears in the samples, sorted.
func timelineReplicas(samples []Sample) []string {
	set := map[string]bool{}
	for _, s := range samples {
		for name := range s.Owned {
			set[name] = true
		}
	}
	names := make([]string, 0, len(set))
	for name := range set {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// ownedSeries is replica's owned-project count over the scenario; a replica absent
// from a sample owns 0 at that instant. The last sample's count is held until the
// scenario's end so the step plot shows it.
func ownedSeries(s *ScenarioResult, replica string) plotter.XYs {
	xys := make(plotter.XYs, 0, len(s.Timeline)+1)
	for _, sample := range s.Timeline {
		xys = append(xys, plotter.XY{X: sample.At.Sub(s.Start).Seconds(), Y: float64(sample.Owned[replica])})
	}
	last := xys[len(xys)-1]
	if end := s.End.Sub(s.Start).Seconds(); end > last.X {
		xys = append(xys, plotter.XY{X: end, Y: last.Y})
	}
	return xys
}

func timelinePlot(s *ScenarioResult) (*plot.Plot, error) {
	if len(s.Timeline) == 0 {
		return nil, nil
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s — %s", s.Coordinator, s.Scenario)
	p.X.Label.Text = "seconds since start"
	p.Y.Label.Text = "projects owned"
	top := 1.0
	for i, name := range timelineReplicas(s.Timeline) {
		xys := ownedSeries(s, name)
		l, err := plotter.NewLine(xys)
		if err != nil {
			return nil, err
		}
		l.StepStyle = plotter.PostStep
		l.Color = plotutil.Color(i)
		l.Dashes = plotutil.Dashes(i / len(plotutil.DefaultColors))
		l.Width = vg.Points(1.5)
		p.Add(l)
		p.Legend.Add(name, l)
		for _, xy := range xys {
			top = math.Max(top, xy.Y)
		}
	}
	if err := addFaultMarkers(p, s, top); err != nil {
		return nil, err
	}
	// Headroom above the data for the fault labels and, at the top left, the legend.
	p.Y.Min, p.Y.Max = 0, top*1.5
	p.Legend.Top = true
	p.Legend.Left = true
	return p, nil
}

// faultColors colours fault markers by kind.
var faultColors = map[string]color.Color{
	"kill":  color.RGBA{R: 200, A: 255},
	"stop":  color.RGBA{R: 230, G: 120, A: 255},
	"cont":  color.RGBA{G: 150, A: 255},
	"term":  color.RGBA{R: 120, B: 160, A: 255},
	"start": color.RGBA{B: 200, A: 255},
}

func faultColor(kind string) color.Color {
	if c, ok := faultColors[kind]; ok {
		return c
	}
	return color.Gray{Y: 100}
}

// faultLabel is e.g. "kill r-1" or "kill r-0 (coordinator)".
func faultLabel(f Fault) string {
	l := f.Kind + " " + f.Replica
	if f.Coordinator {
		l += " (coordinator)"
	}
	if f.Detail != "" {
		l = f.Kind + " (" + f.Detail + ")"
	}
	return l
}

// addFaultMarkers draws a dashed vertical line per fault, coloured by kind, from 0
// to just above top, and labels it with "kind replica" above the data (staggered
// so close faults stay readable).
func addFaultMarkers(p *plot.Plot, s *ScenarioResult, top float64) error {
	if len(s.Faults) == 0 {
		return nil
	}
	labels := plotter.XYLabels{}
	for i, f := range s.Faults {
		x := f.At.Sub(s.Start).Seconds()
		l, err := plotter.NewLine(plotter.XYs{{X: x, Y: 0}, {X: x, Y: top * 1.05}})
		if err != nil {
			return err
		}
		l.Color = faultColor(f.Kind)
		l.Dashes = []vg.Length{vg.Points(3), vg.Points(3)}
		p.Add(l)
		labels.XYs = append(labels.XYs, plotter.XY{X: x, Y: top * (1.07 + 0.06*float64(i%3))})
		labels.Labels = append(labels.Labels, faultLabel(f))
	}
	lb, err := plotter.NewLabels(labels)
	if err != nil {
		return err
	}
	for i, f := range s.Faults {
		lb.TextStyle[i].Color = faultColor(f.Kind)
	}
	p.Add(lb)
	return nil
}

// handOverSeries is one group member of the hand-over bar chart.
type handOverSeries struct {
	name  string
	value func(Headline) *float64
	color color.Color
}

var handOverBars = []handOverSeries{
	{"failure (median)", func(h Headline) *float64 { return h.FailureHandOverMedian }, plotutil.Color(0)},
	{"planned (median)", func(h Headline) *float64 { return h.PlannedHandOverMedian }, plotutil.Color(2)},
}

// handOverPlot draws, per coordinator, the median failure and planned hand-over as
// bars side by side, with a reference line at one lease duration.
func handOverPlot(r *Report, cs []Coordinator) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "Hand-over median"
	p.Y.Label.Text = "× lease duration"
	width := vg.Points(24)
	inLegend := make([]bool, len(handOverBars))
	bars := 0
	names := make([]string, len(cs))
	for i, c := range cs {
		names[i] = string(c)
		h := ComputeHeadline(r, c)
		for k, series := range handOverBars {
			v := series.value(h)
			if v == nil {
				continue
			}
			b, err := plotter.NewBarChart(plotter.Values{*v}, width)
			if err != nil {
				return nil, err
			}
			b.XMin = float64(i)
			b.Offset = (vg.Length(k) - vg.Length(len(handOverBars)-1)/2) * width
			b.Color = series.color
			b.LineStyle.Width = 0
			p.Add(b)
			if !inLegend[k] {
				inLegend[k] = true
				p.Legend.Add(series.name, b)
			}
			bars++
		}
	}
	if bars == 0 {
		return nil, nil
	}
	ref, err := plotter.NewLine(plotter.XYs{{X: -0.5, Y: 1}, {X: float64(len(cs)) - 0.5, Y: 1}})
	if err != nil {
		return nil, err
	}
	ref.Dashes = []vg.Length{vg.Points(4), vg.Points(2)}
	p.Add(ref)
	p.Legend.Add("1 × lease", ref)
	p.NominalX(names...)
	p.Legend.Top = true
	p.Y.Min, p.Y.Max = 0, p.Y.Max*1.3 // headroom for the legend
	return p, nil
}

// sortedXYs turns a by-key map into points ordered by key, dividing values by div.
func sortedXYs(m map[int]float64, div float64) plotter.XYs {
	keys := make([]int, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	xys := make(plotter.XYs, len(keys))
	for i, k := range keys {
		xys[i] = plotter.XY{X: float64(k), Y: m[k] / div}
	}
	return xys
}

// addSeries adds one line-with-points per coordinator from series(c); it returns
// how many coordinators had data.
func addSeries(p *plot.Plot, cs []Coordinator, series func(Coordinator) plotter.XYs) (int, error) {
	n := 0
	for i, c := range cs {
		xys := series(c)
		if len(xys) == 0 {
			continue
		}
		l, pts, err := plotter.NewLinePoints(xys)
		if err != nil {
			return 0, err
		}
		l.Color = plotutil.Color(i)
		pts.Color = plotutil.Color(i)
		pts.Shape = plotutil.Shape(i)
		p.Add(l, pts)
		p.Legend.Add(string(c), l, pts)
		n++
	}
	return n, nil
}

// leaseWritesPlot draws Lease writes/s against projects on a log axis.
func leaseWritesPlot(r *Report, cs []Coordinator) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "Lease writes at steady state"
	p.X.Label.Text = "projects"
	p.Y.Label.Text = "Lease writes/s"
	n, err := addSeries(p, cs, func(c Coordinator) plotter.XYs {
		return positiveX(sortedXYs(leaseRates(r, c), 1))
	})
	if err != nil || n == 0 {
		return nil, err
	}
	// Pad the log axis by a factor of two each side; this also keeps a single
	// project count from collapsing the range to a non-positive minimum.
	p.X.Min, p.X.Max = p.X.Min/2, p.X.Max*2
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Y.Min = 0
	p.Legend.Top = true
	p.Legend.Left = true
	return p, nil
}

// positiveX drops points a log x axis cannot show.
func positiveX(xys plotter.XYs) plotter.XYs {
	out := xys[:0]
	for _, xy := range xys {
		if xy.X > 0 {
			out = append(out, xy)
		}
	}
	return out
}

// memoryPlot draws per-replica project memory against replicas.
func memoryPlot(r *Report, cs []Coordinator) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "Per-replica project memory"
	p.X.Label.Text = "replicas"
	p.Y.Label.Text = "MB per replica (peak RSS − zero-project RSS)"
	n, err := addSeries(p, cs, func(c Coordinator) plotter.XYs {
		return sortedXYs(projectBytes(r, c), bytesPerMB)
	})
	if err != nil || n == 0 {
		return nil, err
	}
	p.X.Min = 0
	p.Y.Min = 0
	p.Legend.Top = true
	return p, nil
}
