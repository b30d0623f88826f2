package resync

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Pass results (label values of anchorage_resync_passes_total).
const (
	passSuccess = "success"
	passAborted = "aborted"
	passFailed  = "failed"
)

// Halt reasons (label values).
const (
	HaltCeiling      = "ceiling"       // more anchors qualified for collection in one pass than the ceiling
	HaltPlaneChanged = "plane-changed" // the plane identity changed
)

var haltReasons = []string{HaltCeiling, HaltPlaneChanged}

// resyncMetrics are the resync's metrics. Only the held-since and last-success gauges
// carry a project, and only for projects this replica holds.
type resyncMetrics struct {
	passes      *prometheus.CounterVec
	seen        prometheus.Counter
	decisions   *prometheus.CounterVec
	actions     *prometheus.CounterVec
	duration    prometheus.Histogram
	apiCalls    prometheus.Histogram
	halts       *prometheus.CounterVec
	halted      *prometheus.GaugeVec
	lastSuccess *prometheus.GaugeVec
	heldSince   *prometheus.GaugeVec
	unowned     prometheus.Gauge
	deletionOff prometheus.Gauge
}

func newResyncMetrics(reg prometheus.Registerer) (*resyncMetrics, error) {
	m := &resyncMetrics{
		passes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "anchorage_resync_passes_total",
			Help: "Resync passes by result: success, aborted (project lost or not admitted), failed."}, []string{"result"}),
		seen: prometheus.NewCounter(prometheus.CounterOpts{Name: "anchorage_resync_anchors_seen_total",
			Help: "Anchors examined by resync passes."}),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "anchorage_resync_decisions_total",
			Help: "Final per-pass decisions about anchors, by decision (keep, suspect, collect, unknown) and reason."}, []string{"decision", "reason"}),
		actions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "anchorage_resync_collections_total",
			Help: "What became of anchors decided collect: deleted, or why not (dry-run, switched-off, excluded, deferred, halted, failed)."}, []string{"action"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "anchorage_resync_pass_duration_seconds",
			Help: "Duration of resync passes.", Buckets: prometheus.ExponentialBuckets(0.01, 2, 14)}),
		apiCalls: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "anchorage_resync_api_calls_per_pass",
			Help: "API requests made by one resync pass (hub and project).", Buckets: prometheus.ExponentialBuckets(1, 2, 14)}),
		halts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "anchorage_resync_halts_total",
			Help: "Passes whose deletions halted, by reason (ceiling, plane-changed)."}, []string{"reason"}),
		halted: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "anchorage_resync_projects_halted",
			Help: "Held projects whose last pass halted deletions, by reason. Alert on any non-zero value."}, []string{"reason"}),
		lastSuccess: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "anchorage_resync_last_success_timestamp_seconds",
			Help: "Time of the last successful pass of each project this replica holds (removed when the project is lost)."}, []string{"project"}),
		heldSince: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "anchorage_resync_held_since_timestamp_seconds",
			Help: "Time this replica's resync took on each project it holds (removed when the project is lost); with the last-success gauge, a project never passed successfully is still visible."}, []string{"project"}),
		unowned: prometheus.NewGauge(prometheus.GaugeOpts{Name: "anchorage_resync_unowned_anchors",
			Help: "Cached anchors whose project matches no kubeconfig Secret: reported, never deleted by a shard."}),
		deletionOff: prometheus.NewGauge(prometheus.GaugeOpts{Name: "anchorage_resync_deletion_switched_off",
			Help: "1 when the last read of the runtime switch found deletion off (or could not read it)."}),
	}
	for _, c := range []prometheus.Collector{m.passes, m.seen, m.decisions, m.actions, m.duration, m.apiCalls, m.halts, m.halted, m.lastSuccess, m.heldSince, m.unowned, m.deletionOff} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	for _, r := range []string{passSuccess, passAborted, passFailed} {
		m.passes.WithLabelValues(r)
	}
	for _, d := range Decisions {
		for _, r := range reasonsByDecision[d] {
			m.decisions.WithLabelValues(d.String(), string(r))
		}
	}
	for _, a := range collectActions {
		m.actions.WithLabelValues(string(a))
	}
	for _, r := range haltReasons {
		m.halts.WithLabelValues(r)
		m.halted.WithLabelValues(r)
	}
	return m, nil
}
