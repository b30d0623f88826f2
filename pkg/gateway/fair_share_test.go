package gateway

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"anchorage/api/v1alpha"
)

func TestHubWriteLimitsGiveEachProjectItsOwnShare(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	l := newHubWriteLimits(5, clk, nil) // burst 10
	ctx := context.Background()
	for i := range 10 {
		if err := l.wait(ctx, "hostile"); err != nil {
			t.Fatalf("write %d within the burst: %v", i, err)
		}
	}
	// The eleventh write of the same project waits a fifth of a second on the clock.
	done := make(chan error, 1)
	go func() { done <- l.wait(ctx, "hostile") }()
	waitFor(t, clk.HasWaiters)
	select {
	case err := <-done:
		t.Fatalf("a write past the burst went at once (%v)", err)
	default:
	}
	// Another project's writes do not wait behind it.
	if err := l.wait(ctx, "other"); err != nil {
		t.Fatal(err)
	}
	clk.Step(200 * time.Millisecond)
	if err := <-done; err != nil {
		t.Fatalf("after its token came: %v", err)
	}
	// A write whose wait would outlast the reconcile's deadline fails at once, naming why.
	short, cancel := context.WithDeadline(ctx, clk.Now().Add(time.Millisecond))
	defer cancel()
	if err := l.wait(short, "hostile"); err == nil || !strings.Contains(err.Error(), "over its share of hub writes") {
		t.Fatalf("a wait past the deadline: %v, want a refusal naming the share", err)
	}
}

func TestSlotRefusal(t *testing.T) {
	for _, tc := range []struct {
		rank, total, limit int
		refused            bool
	}{
		{rank: 0, total: 1, limit: 1},
		{rank: 2, total: 3, limit: 3},
		{rank: 3, total: 4, limit: 3, refused: true},
		{rank: 9999, total: 10000, limit: 1000, refused: true},
	} {
		why := slotRefusal(tc.rank, tc.total, tc.limit)
		if (why != "") != tc.refused {
			t.Errorf("rank %d of %d, cap %d: %q", tc.rank, tc.total, tc.limit, why)
		}
	}
}

func TestRankProxiesOldestFirstThenByName(t *testing.T) {
	at := func(sec int64, ns, name string) v1alpha.HTTPProxy {
		return v1alpha.HTTPProxy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, CreationTimestamp: metav1.Unix(sec, 0)}}
	}
	r := rankProxies([]v1alpha.HTTPProxy{at(30, "a", "late"), at(10, "b", "x"), at(10, "a", "y"), at(20, "a", "mid")}, time.Now())
	want := []types.NamespacedName{{Namespace: "a", Name: "y"}, {Namespace: "b", Name: "x"}, {Namespace: "a", Name: "mid"}, {Namespace: "a", Name: "late"}}
	for i, k := range want {
		if r.order[i] != k || r.rank[k] != i {
			t.Fatalf("order %v, want %v", r.order, want)
		}
	}
}
