package resync

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
)

// heldSinceExposition is the held-since gauge as /metrics shows it for one project.
func heldSinceExposition(project string, at time.Time) string {
	return `
# HELP anchorage_resync_held_since_timestamp_seconds Time this replica's resync took on each project it holds (removed when the project is lost); with the last-success gauge, a project never passed successfully is still visible.
# TYPE anchorage_resync_held_since_timestamp_seconds gauge
anchorage_resync_held_since_timestamp_seconds{project="` + project + `"} ` + fmt.Sprint(at.Unix()) + "\n"
}

// otherCluster is a cluster value distinct from any other, for a re-engagement.
type otherCluster struct{ cluster.Cluster }

// TestHeldSinceMarksAProjectFromItsEngagementUntilItIsLost: a project that has never
// passed is still visible to the ResyncStale alert through the time it was taken on,
// which a re-engagement keeps and the loss of the project removes.
func TestHeldSinceMarksAProjectFromItsEngagementUntilItIsLost(t *testing.T) {
	taken := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(taken)
	reg := prometheus.NewRegistry()
	m, err := newResyncMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	// Never started: the loops wait for Start, so no pass runs.
	r := &Resync{passDeps: passDeps{opts: Options{Clock: clk}}, m: m, started: make(chan struct{}), loops: map[string]*projectLoop{}, halted: map[string]string{}}
	ctx, lose := context.WithCancel(context.Background())
	defer lose()

	if err := r.Engage(ctx, "p1", nil); err != nil {
		t.Fatal(err)
	}
	want := heldSinceExposition("p1", taken)
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "anchorage_resync_held_since_timestamp_seconds"); err != nil {
		t.Fatalf("after engaging: %v", err)
	}

	clk.Step(time.Hour)
	if err := r.Engage(ctx, "p1", &otherCluster{}); err != nil {
		t.Fatal(err)
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "anchorage_resync_held_since_timestamp_seconds"); err != nil {
		t.Fatalf("a re-engagement moved the time the project was taken on: %v", err)
	}

	lose()
	r.wg.Wait()
	if n := testutil.CollectAndCount(m.heldSince); n != 0 {
		t.Fatalf("%d held-since series left after the project was lost", n)
	}
}
