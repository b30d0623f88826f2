package shard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

// scriptedHub answers an observer's Lease lists and watches as a hub API server would,
// or refuses the connection while it is down (a restart). Its watches deliver nothing;
// going down closes them.
type scriptedHub struct {
	mu   sync.Mutex
	down bool
	// watchesFail: lists are answered, watches fail with a 500.
	watchesFail bool
	lists       int
	leases      []coordinationv1.Lease
	rv          int
	refused     int
	watchers    []*watch.FakeWatcher
}

func (h *scriptedHub) refusal() error {
	return &url.Error{Op: "Get", URL: "https://hub/apis/coordination.k8s.io/v1/leases",
		Err: &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}}
}

func (h *scriptedHub) ListWithContext(context.Context, metav1.ListOptions) (runtime.Object, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.down {
		h.refused++
		return nil, h.refusal()
	}
	h.lists++
	list := &coordinationv1.LeaseList{ListMeta: metav1.ListMeta{ResourceVersion: strconv.Itoa(h.rv)}}
	list.Items = append(list.Items, h.leases...)
	return list, nil
}

func (h *scriptedHub) WatchWithContext(context.Context, metav1.ListOptions) (watch.Interface, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.down {
		h.refused++
		return nil, h.refusal()
	}
	if h.watchesFail {
		return nil, apierrors.NewInternalError(errors.New("watch cache not ready"))
	}
	w := watch.NewFake()
	h.watchers = append(h.watchers, w)
	return w, nil
}

// IsWatchListSemanticsUnSupported: the observer lists, then watches (the scripted watch
// sends no initial events).
func (h *scriptedHub) IsWatchListSemanticsUnSupported() bool { return true }

// goDown refuses connections from now on and ends every open watch.
func (h *scriptedHub) goDown() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.down = true
	h.endWatchesLocked()
}

// endWatchesLocked closes every open watch, as a hub that drops its connections does.
func (h *scriptedHub) endWatchesLocked() {
	for _, w := range h.watchers {
		w.Stop()
	}
	h.watchers = nil
}

// comeBack answers again, now holding only the Leases given: what was created and
// deleted while it was down.
func (h *scriptedHub) comeBack(leases ...coordinationv1.Lease) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.leases = nil
	for _, l := range leases {
		h.rv++
		l.ResourceVersion = strconv.Itoa(h.rv)
		h.leases = append(h.leases, l)
	}
	h.down = false
}

// failWatches answers lists from now on but fails every watch, and ends the open ones.
func (h *scriptedHub) failWatches() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.watchesFail = true
	h.endWatchesLocked()
}

func (h *scriptedHub) listed() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lists
}

func (h *scriptedHub) refusals() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.refused
}

func memberLeaseOf(pod string) coordinationv1.Lease {
	return coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: MemberLeaseName(pod), Labels: map[string]string{LabelRole: RoleMember}},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To(pod + "/1")},
	}
}

// stepUntil advances clk in small steps until done holds, and returns how much fake
// time that took; it fails the test when done does not hold within a few seconds of
// real time (nothing the observer does waits on real time then).
func stepUntil(t *testing.T, clk *clocktesting.FakeClock, what string, done func() bool) time.Duration {
	t.Helper()
	const step = 25 * time.Millisecond
	var stepped time.Duration
	deadline := time.Now().Add(5 * time.Second)
	for !done() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 5 s of real time (%s of the observer's clock)", what, stepped)
		}
		clk.Step(step)
		stepped += step
		time.Sleep(2 * time.Millisecond)
	}
	return stepped
}

// TestObserverListsAgainWithinARetryPeriodOfTheHubsReturn (found by hub-faults: a
// replica blind for 30 s after a hub restart, its assignments unclaimed): while the hub
// refuses connections, the Lease observer tries again at least once per retry period,
// however many attempts failed; once the hub answers, it has listed and watches again
// within a retry period. client-go's reflector backs off from 0.8 s doubling to 30 s
// (60 s with jitter) and keeps that for two minutes: a replica would not see its
// assignments (they wait out the claim deadline and move) and, blind to its own renews,
// pause its admission (the stale-view rule).
func TestObserverListsAgainWithinARetryPeriodOfTheHubsReturn(t *testing.T) {
	const retry = 400 * time.Millisecond
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC))
	o := newLeaseObserver(clk, 3*time.Second, retry)
	hub := &scriptedHub{rv: 10, leases: []coordinationv1.Lease{memberLeaseOf("a")}}
	hub.leases[0].ResourceVersion = "10"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { defer close(done); o.follow(ctx, hub) }()
	defer func() { cancel(); <-done }()

	sees := func(pod string) func() bool {
		return func() bool {
			members, _, synced := o.snapshot()
			_, ok := members[MemberLeaseName(pod)]
			return synced && ok
		}
	}
	stepUntil(t, clk, "the first list", sees("a"))

	hub.goDown()
	const attempts = 6
	took := stepUntil(t, clk, fmt.Sprintf("%d attempts on a hub that refuses them", attempts), func() bool { return hub.refusals() >= attempts })
	if limit := attempts * retry; took > limit {
		t.Errorf("%d refused attempts took %s of the observer's clock, want at most one retry period (%s) each: %s", attempts, took, retry, limit)
	}

	hub.comeBack(memberLeaseOf("b")) // a's Lease deleted, b's created while the hub was down
	took = stepUntil(t, clk, "the Lease created while the hub was down", sees("b"))
	if took > retry {
		t.Errorf("the observer listed again %s after the hub came back, want within the retry period %s", took, retry)
	}
	if sees("a")() {
		t.Errorf("the member Lease deleted while the hub was down is still observed after the list")
	}
	if _, ok := o.vanishedMembers()["a/1"]; !ok {
		t.Errorf("the member whose Lease was deleted while the hub was down is not noted as vanished: %v", o.vanishedMembers())
	}

	// A hub that answers lists but fails every watch is listed about once a retry
	// period, not in a loop.
	hub.failWatches()
	before := hub.listed()
	stepUntil(t, clk, "ten retry periods", func() func() bool {
		var stepped time.Duration
		return func() bool { stepped += 25 * time.Millisecond; return stepped > 10*retry }
	}())
	if n := hub.listed() - before; n < 5 || n > 12 {
		t.Errorf("a hub that fails every watch was listed %d times in ten retry periods, want about ten (5 to 12)", n)
	}
}

// TestListAgainAfter: the observer's wait before it lists and watches again.
func TestListAgainAfter(t *testing.T) {
	const retry = 2 * time.Second
	cases := []struct {
		failed int
		want   time.Duration
	}{
		{0, 250 * time.Millisecond}, // a watch ended after a list: soon
		{1, 500 * time.Millisecond},
		{2, time.Second},
		{3, retry},
		{4, retry}, // never longer than the retry period
		{40, retry},
	}
	for _, tc := range cases {
		if got := listAgainAfter(tc.failed, retry); got != tc.want {
			t.Errorf("listAgainAfter(%d, %s) = %s, want %s", tc.failed, retry, got, tc.want)
		}
	}
}
