package shard

import (
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are exported by every replica, coordinator or not.
type metrics struct {
	held, unowned, unclaimed, noCoordinator, unengageable, valid prometheus.Gauge
	coordinator                                                  prometheus.Gauge
	rejections                                                   *prometheus.CounterVec
	leaseWrites                                                  *prometheus.CounterVec
	assignments                                                  *prometheus.CounterVec
	handOversInProgress, oldestHandOver                          prometheus.Gauge
	handovers, rebalanceMoves                                    *prometheus.CounterVec
	handoverSeconds                                              prometheus.Histogram
}

// Rejection reasons (admission and the validity gate).
const (
	rejectNotHeld      = "not_held"
	rejectClaimPending = "claim_pending"
	rejectInvalid      = "validity_ended"
	rejectViewStale    = "view_stale"
)

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		held:          prometheus.NewGauge(prometheus.GaugeOpts{Name: "anchorage_shard_projects_held", Help: "Projects this replica holds and has claimed."}),
		unowned:       prometheus.NewGauge(prometheus.GaugeOpts{Name: "anchorage_shard_projects_unowned", Help: "Projects with no valid holder, as this replica observes the Leases."}),
		unclaimed:     prometheus.NewGauge(prometheus.GaugeOpts{Name: "anchorage_shard_projects_unclaimed", Help: "Projects assigned to a live holder that has not claimed them."}),
		noCoordinator: prometheus.NewGauge(prometheus.GaugeOpts{Name: "anchorage_shard_no_coordinator", Help: "1 when no live coordinator is observed."}),
		unengageable:  prometheus.NewGauge(prometheus.GaugeOpts{Name: "anchorage_shard_secrets_unengageable", Help: "Project Secrets that cannot be engaged (two Secrets naming one project)."}),
		valid:         prometheus.NewGauge(prometheus.GaugeOpts{Name: "anchorage_shard_member_valid", Help: "1 while this replica's member validity has not ended."}),
		coordinator:   prometheus.NewGauge(prometheus.GaugeOpts{Name: "anchorage_shard_coordinator", Help: "1 while this replica leads as coordinator, 0 otherwise."}),
		rejections: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "anchorage_shard_gate_rejections_total",
			Help: "Reconciles and resync steps refused by the ownership gate."}, []string{"reason"}),
		leaseWrites: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "anchorage_shard_lease_writes_total",
			Help: "Lease writes sent, by Lease kind and result."}, []string{"kind", "result"}),
		assignments: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "anchorage_shard_assignments_total",
			Help: "Project holder writes by the coordinator, by reason."}, []string{"reason"}),
	}
	m.handOversInProgress = prometheus.NewGauge(prometheus.GaugeOpts{Name: "anchorage_shard_drains_in_progress", Help: "Planned hand-overs of this replica's projects waiting for in-flight work or their write."})
	m.oldestHandOver = prometheus.NewGauge(prometheus.GaugeOpts{Name: "anchorage_shard_oldest_drain_seconds", Help: "Age of the oldest planned hand-over of this replica's projects in progress (0 when none)."})
	m.handovers = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "anchorage_shard_handovers_total", Help: "Planned hand-overs this replica performed as the old owner, by result."}, []string{"result"})
	m.rebalanceMoves = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "anchorage_shard_rebalance_moves_total", Help: "Planned hand-overs requested by the coordinator, by reason."}, []string{"reason"})
	m.handoverSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "anchorage_shard_handover_duration_seconds", Help: "From closing admission to the next holder written.",
		Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30}})
	reg.MustRegister(m.held, m.unowned, m.unclaimed, m.noCoordinator, m.unengageable, m.valid, m.coordinator, m.rejections, m.leaseWrites, m.assignments,
		m.handOversInProgress, m.oldestHandOver, m.handovers, m.rebalanceMoves, m.handoverSeconds)
	for v, values := range map[*prometheus.CounterVec][]string{
		m.handovers: {"success", "lost", "invalid", "drain_timeout"}, m.rebalanceMoves: {"rebalance", "draining"},
		m.rejections: {rejectNotHeld, rejectClaimPending, rejectInvalid, rejectViewStale}, m.assignments: {"new", "orphaned", "claim_overdue", "draining"},
	} {
		for _, r := range values {
			v.WithLabelValues(r)
		}
	}
	for _, k := range []string{"member", "project"} {
		for _, r := range []string{"success", "conflict", "error"} {
			m.leaseWrites.WithLabelValues(k, r)
		}
	}
	m.noCoordinator.Set(1)
	return m
}

// leaseWrite counts a Lease write that was sent, by its result.
func (m *metrics) leaseWrite(kind string, err error) {
	result := "success"
	switch {
	case apierrors.IsConflict(err):
		result = "conflict"
	case err != nil:
		result = "error"
	}
	m.leaseWrites.WithLabelValues(kind, result).Inc()
}
