package gateway

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

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
		why := slotRefusal("proxy", tc.rank, tc.total, tc.limit)
		if (why != "") != tc.refused {
			t.Errorf("rank %d of %d, cap %d: %q", tc.rank, tc.total, tc.limit, why)
		}
	}
}

func TestRankSlotHoldersOldestFirstThenByName(t *testing.T) {
	at := func(sec int64, ns, name string) v1alpha.HTTPProxy {
		return v1alpha.HTTPProxy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, CreationTimestamp: metav1.Unix(sec, 0)}}
	}
	gw := func(sec int64, ns, name, class, controller string) gatewayv1.Gateway {
		g := gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, CreationTimestamp: metav1.Unix(sec, 0)}, Spec: gatewayv1.GatewaySpec{GatewayClassName: gatewayv1.ObjectName(class)}}
		if controller != "" {
			g.OwnerReferences = []metav1.OwnerReference{{APIVersion: v1alpha.GroupVersion.String(), Kind: kindHTTPProxy, Name: controller, UID: "u", Controller: ptr.To(true)}}
		}
		return g
	}
	r := rankSlotHolders([]v1alpha.HTTPProxy{at(30, "a", "late"), at(10, "b", "x"), at(10, "a", "y"), at(20, "a", "mid")}, []gatewayv1.Gateway{
		gw(10, "a", "y", "anchorage", ""),       // direct, same age and name as a proxy: after it
		gw(25, "a", "direct", "anchorage", ""),  // direct
		gw(5, "a", "mid", "anchorage", "mid"),   // the proxy's own: the proxy counts for it
		gw(1, "a", "other", "elsewhere", ""),    // another class: not counted
		gw(40, "a", "forged", "anchorage", "x"), // controlled by a proxy of another name: counted
	}, "anchorage", time.Now())
	p := func(ns, name string) slotKey {
		return slotKey{kindHTTPProxy, types.NamespacedName{Namespace: ns, Name: name}}
	}
	g := func(ns, name string) slotKey {
		return slotKey{kindGateway, types.NamespacedName{Namespace: ns, Name: name}}
	}
	want := []slotKey{p("a", "y"), g("a", "y"), p("b", "x"), p("a", "mid"), g("a", "direct"), p("a", "late"), g("a", "forged")}
	if !slices.Equal(r.order, want) {
		t.Fatalf("order %v, want %v", r.order, want)
	}
	for i, k := range want {
		if r.rank[k] != i {
			t.Fatalf("rank of %v is %d, want %d", k, r.rank[k], i)
		}
	}
}
