package shard

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	clocktesting "k8s.io/utils/clock/testing"
)

// TestCoordinatorGaugeFollowsTheLeadingTerm: anchorage_shard_coordinator is 0 until
// this replica leads, 1 while a term runs, stays 1 when an older term ends under a
// newer one, and is 0 again when the current term ends. The NoCoordinator alert fires
// when no replica reports 1.
func TestCoordinatorGaugeFollowsTheLeadingTerm(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(now)
	s := &Shard{clock: clk, m: newMetrics(prometheus.NewRegistry())}
	expect := func(when string, want float64) {
		t.Helper()
		if got := testutil.ToFloat64(s.m.coordinator); got != want {
			t.Fatalf("%s: anchorage_shard_coordinator = %v, want %v", when, got, want)
		}
	}
	expect("before any term", 0)
	endOld := s.lead(context.Background(), "pod/1")
	expect("while leading", 1)
	endNew := s.lead(context.Background(), "pod/2")
	endOld()
	expect("after an older term ended under a newer one", 1)
	endNew()
	expect("after the term ended", 0)
}
