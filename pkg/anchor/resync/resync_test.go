package resync

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	clocktesting "k8s.io/utils/clock/testing"
)

// TestPassCutShortIsRecordedAsAborted: a pass whose project context ends during it (the
// project lost, the replica stopping) may have deleted anchors; it reaches the observer
// and the deletion counter as an aborted pass, and sets no gauge of a project no longer
// held.
func TestPassCutShortIsRecordedAsAborted(t *testing.T) {
	for _, tc := range []struct {
		reason      string
		lost        bool
		err         error
		wantResult  string
		wantSuccess bool // the project's last-success gauge is set
	}{
		{reason: "a pass that ends while its project is held is a success", wantResult: passSuccess, wantSuccess: true},
		{reason: "a pass that ends with an error while its project is held failed", err: errors.New("timeout"), wantResult: passFailed},
		{reason: "a pass whose project was lost by its end is aborted", lost: true, wantResult: passAborted},
		{reason: "a pass whose calls failed because its project was lost is aborted, not failed", lost: true, err: context.Canceled, wantResult: passAborted},
	} {
		t.Run(tc.reason, func(t *testing.T) {
			m, err := newResyncMetrics(prometheus.NewRegistry())
			if err != nil {
				t.Fatal(err)
			}
			observed := &passLog{}
			r := &Resync{passDeps: passDeps{opts: Options{Clock: clocktesting.NewFakeClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))}},
				m: m, halted: map[string]string{}, cfg: Config{Observer: observed}}
			rep := PassReport{Project: "p1", Anchors: []AnchorReport{
				{Name: "anchor-1", Verdict: Verdict{Decision: Collect}, Action: ActionDeleted},
				{Name: "anchor-2", Verdict: Verdict{Decision: Collect}, Action: ActionDeferred},
			}}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.lost {
				cancel()
			}

			err = cutShort(ctx, tc.err)
			r.record(rep, err, logr.Discard())

			if got := testutil.ToFloat64(m.passes.WithLabelValues(tc.wantResult)); got != 1 {
				t.Errorf("%s passes counted: %v, want 1 (error %v)", tc.wantResult, got, err)
			}
			if tc.lost != errors.Is(err, errAborted) {
				t.Errorf("error %v: wraps errAborted %t, want %t", err, errors.Is(err, errAborted), tc.lost)
			}
			if got := len(observed.Reports("p1")); got != 1 {
				t.Errorf("the observer heard %d passes, want 1", got)
			}
			if got := testutil.ToFloat64(m.actions.WithLabelValues(string(ActionDeleted))); got != 1 {
				t.Errorf("deleted anchors counted: %v, want 1", got)
			}
			if got := testutil.CollectAndCount(m.lastSuccess) == 1; got != tc.wantSuccess {
				t.Errorf("last-success gauge of p1 set: %t, want %t", got, tc.wantSuccess)
			}
		})
	}
}
