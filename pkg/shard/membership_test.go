package shard

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	coordclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
)

// versionedLeases makes the fake clientset's Lease writes behave like the API server's:
// every write gets a new resourceVersion, and an update conditional on an older one
// conflicts. (The fake's own tracker neither sets nor checks resourceVersions.)
func versionedLeases(cs *fake.Clientset) {
	gvr := coordinationv1.SchemeGroupVersion.WithResource("leases")
	var mu sync.Mutex
	version := 0
	next := func() string { version++; return strconv.Itoa(version) }
	cs.PrependReactor("create", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		l := a.(k8stesting.CreateAction).GetObject().(*coordinationv1.Lease).DeepCopy()
		l.Namespace, l.ResourceVersion = a.GetNamespace(), next()
		if err := cs.Tracker().Create(gvr, l, l.Namespace); err != nil {
			return true, nil, err
		}
		return true, l.DeepCopy(), nil
	})
	cs.PrependReactor("update", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		l := a.(k8stesting.UpdateAction).GetObject().(*coordinationv1.Lease).DeepCopy()
		l.Namespace = a.GetNamespace()
		cur, err := cs.Tracker().Get(gvr, l.Namespace, l.Name)
		if err != nil {
			return true, nil, err
		}
		if cur.(*coordinationv1.Lease).ResourceVersion != l.ResourceVersion {
			return true, nil, apierrors.NewConflict(gvr.GroupResource(), l.Name, errors.New("the object has been modified"))
		}
		l.ResourceVersion = next()
		if err := cs.Tracker().Update(gvr, l, l.Namespace); err != nil {
			return true, nil, err
		}
		return true, l.DeepCopy(), nil
	})
}

// slowHub answers every Lease read and update after delay of real time, honouring the
// caller's context as the real client does. An update marked unseen commits but its
// answer never arrives: the caller's context runs out first.
type slowHub struct {
	coordclient.LeaseInterface
	delay time.Duration

	mu     sync.Mutex
	unseen int
}

func (h *slowHub) answer(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(h.delay):
		return nil
	}
}

func (h *slowHub) takeUnseen() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.unseen == 0 {
		return false
	}
	h.unseen--
	return true
}

func (h *slowHub) Get(ctx context.Context, name string, opts metav1.GetOptions) (*coordinationv1.Lease, error) {
	if err := h.answer(ctx); err != nil {
		return nil, err
	}
	return h.LeaseInterface.Get(ctx, name, opts)
}

func (h *slowHub) Update(ctx context.Context, l *coordinationv1.Lease, opts metav1.UpdateOptions) (*coordinationv1.Lease, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	wrote, err := h.LeaseInterface.Update(ctx, l, opts)
	if err == nil && h.takeUnseen() {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if aerr := h.answer(ctx); aerr != nil {
		return nil, aerr
	}
	return wrote, err
}

// TestRenewThatCommittedUnseenIsCredited: a renew commits on the hub but its answer
// arrives after the call timeout, so the next renew (conditional on the old version)
// conflicts. The hub answers each call in more than half a call timeout, so the Lease
// read after the conflict needs a call context of its own. The read shows the Lease
// carrying the unseen renew's own renewTime: validity runs from that renew's sent time,
// the version is adopted, and the membership never lapses although nobody else wrote.
func TestRenewThatCommittedUnseenIsCredited(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(now)
	cs := fake.NewSimpleClientset()
	versionedLeases(cs)
	tm := Timings{LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 400 * time.Millisecond, CallTimeout: 400 * time.Millisecond}
	hub := &slowHub{LeaseInterface: cs.CoordinationV1().Leases("ns"), delay: 240 * time.Millisecond}
	m := &membership{pod: "pod", weight: 1, t: tm, clock: clk, leases: hub, log: logr.Discard(),
		m: newMetrics(prometheus.NewRegistry()), kick: make(chan struct{}, 1)}
	ctx := context.Background()
	holder := HolderIdentity("pod", "1")
	if !m.join(ctx, holder) {
		t.Fatal("join failed")
	}
	renew := func() {
		t.Helper()
		clk.Step(tm.RetryPeriod)
		_, until := m.current()
		if !clk.Now().Before(until) {
			t.Fatalf("validity ended at %s (now %s)", until.Sub(now), clk.Now().Sub(now))
		}
		if outcome, _ := m.renew(ctx, holder, until, tm.CallTimeout); outcome == renewTaken {
			t.Fatal("renew reported the Lease taken; nobody took it")
		}
	}

	hub.unseen = 1
	renew()
	unseenSent := clk.Now()
	if _, until := m.current(); !until.Equal(now.Add(tm.RenewDeadline)) {
		t.Fatalf("after the unseen renew validity runs to %s, want the join's %s", until.Sub(now), tm.RenewDeadline)
	}
	renew() // conflicts: it is conditional on the version before the unseen renew
	if _, until := m.current(); !until.Equal(unseenSent.Add(tm.RenewDeadline)) {
		t.Fatalf("after the conflict validity runs to %s, want the unseen renew's sent time + RenewDeadline = %s",
			until.Sub(now), unseenSent.Add(tm.RenewDeadline).Sub(now))
	}
	for i := 0; i < 4; i++ { // past the join's validity (2 s)
		renew()
		if _, until := m.current(); !until.Equal(clk.Now().Add(tm.RenewDeadline)) {
			t.Fatalf("renew %d after the conflict: validity runs to %s, want %s", i+1, until.Sub(now), clk.Now().Add(tm.RenewDeadline).Sub(now))
		}
	}
}

// TestJudgeConflict: after a conflicting renew, a Lease naming another holder (or none)
// was taken; one naming this holder with the renewTime of one of its own renews carries
// that renew (compared at the microsecond precision the wire keeps); any other renewTime
// under this holder was written by someone else who kept the holder.
func TestJudgeConflict(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	s1 := t0.Add(400*time.Millisecond + 123456789) // sub-microsecond part, as time.Now has
	s2 := t0.Add(800*time.Millisecond + 987654321)
	lease := func(holder *string, renew *time.Time) *coordinationv1.Lease {
		l := &coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{HolderIdentity: holder}}
		if renew != nil {
			l.Spec.RenewTime = &metav1.MicroTime{Time: *renew}
		}
		return l
	}
	ptrTo := func(t time.Time) *time.Time { return &t }
	ours, other := "pod/1", "pod/2"
	cases := []struct {
		name      string
		lease     *coordinationv1.Lease
		sent      []time.Time
		want      conflictVerdict
		committed time.Time
	}{
		{"holder cleared (declared expired)", lease(nil, ptrTo(s1)), []time.Time{s1}, conflictTaken, time.Time{}},
		{"another incarnation holds it", lease(&other, ptrTo(s1)), []time.Time{s1}, conflictTaken, time.Time{}},
		{"our renew, exact", lease(&ours, ptrTo(s1)), []time.Time{s1, s2}, conflictOwnRenew, s1},
		{"our later renew", lease(&ours, ptrTo(s2)), []time.Time{s1, s2}, conflictOwnRenew, s2},
		{"our renew, read back at microseconds", lease(&ours, ptrTo(s2.Truncate(time.Microsecond))), []time.Time{s1, s2}, conflictOwnRenew, s2},
		{"renewTime not one of ours", lease(&ours, ptrTo(s2.Add(time.Microsecond))), []time.Time{s1, s2}, conflictOtherWriter, time.Time{}},
		{"renewTime of a renew no longer remembered", lease(&ours, ptrTo(s1)), []time.Time{s2}, conflictOtherWriter, time.Time{}},
		{"no renewTime", lease(&ours, nil), []time.Time{s1}, conflictOtherWriter, time.Time{}},
		{"nothing remembered", lease(&ours, ptrTo(s1)), nil, conflictOtherWriter, time.Time{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, committed := judgeConflict(c.lease, ours, c.sent)
			if got != c.want || !committed.Equal(c.committed) {
				t.Fatalf("judgeConflict = %v, %v; want %v, %v", got, committed, c.want, c.committed)
			}
		})
	}
}

// failingUpdates fails its next failures updates without sending them.
type failingUpdates struct {
	coordclient.LeaseInterface
	mu       sync.Mutex
	failures int
	updates  int
}

func (f *failingUpdates) Update(ctx context.Context, l *coordinationv1.Lease, opts metav1.UpdateOptions) (*coordinationv1.Lease, error) {
	f.mu.Lock()
	f.updates++
	fail := f.failures > 0
	if fail {
		f.failures--
	}
	f.mu.Unlock()
	if fail {
		return nil, errors.New("connection refused")
	}
	return f.LeaseInterface.Update(ctx, l, opts)
}

func (f *failingUpdates) sent() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.updates
}

// TestRenewGoesPromptlyAfterAConflictNearTheEndOfValidity: two renews fail, then another
// writer keeps the holder and the third renew conflicts with validity 800 ms from its
// end. The version is adopted and the next renew goes at once, without waiting a
// RetryPeriod that would leave less than a call timeout of validity.
func TestRenewGoesPromptlyAfterAConflictNearTheEndOfValidity(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(now)
	cs := fake.NewSimpleClientset()
	versionedLeases(cs)
	tm := Timings{LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 400 * time.Millisecond, CallTimeout: 500 * time.Millisecond}
	leases := cs.CoordinationV1().Leases("ns")
	hub := &failingUpdates{LeaseInterface: leases}
	m := &membership{pod: "pod", weight: 1, t: tm, clock: clk, leases: hub, log: logr.Discard(),
		m: newMetrics(prometheus.NewRegistry()), kick: make(chan struct{}, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	holder := HolderIdentity("pod", "1")
	if !m.join(ctx, holder) {
		t.Fatal("join failed")
	}
	done := make(chan struct{})
	go func() { defer close(done); m.renewUntilLapse(ctx, holder) }()
	defer func() { cancel(); <-done }()
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for end := time.Now().Add(5 * time.Second); !cond(); time.Sleep(time.Millisecond) {
			if time.Now().After(end) {
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}
	hub.mu.Lock()
	hub.failures = 2
	hub.mu.Unlock()
	for i := 1; i <= 2; i++ {
		waitFor("the renew loop to wait", clk.HasWaiters)
		clk.Step(tm.RetryPeriod)
		waitFor("a failed renew", func() bool { return hub.sent() == i })
	}
	// Another writer keeps the holder (a weight change).
	cur, err := leases.Get(ctx, MemberLeaseName("pod"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Annotations[AnnotationWeight] = "2"
	if _, err := leases.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("the renew loop to wait", clk.HasWaiters)
	clk.Step(tm.RetryPeriod)
	conflictAt := clk.Now()
	// The conflicting renew and, without any further step of the clock, the next one.
	waitFor("a prompt renew after the conflict", func() bool {
		_, until := m.current()
		return until.Equal(conflictAt.Add(tm.RenewDeadline))
	})
	if got := hub.sent(); got != 4 {
		t.Fatalf("%d updates sent, want 4 (two failed, one conflicting, one prompt)", got)
	}
}

// TestRenewOfADeletedMemberLeaseLapsesAtOnce (the holder's side, as the hub answers
// it): the API server creates Leases on update, so a renew conditional on a version of a
// member Lease deleted by hand is answered with a conflict, not with NotFound; the read
// that follows finds no Lease. The incarnation lapses then, as when the renew itself
// finds none, rather than run on until its validity ends.
func TestRenewOfADeletedMemberLeaseLapsesAtOnce(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC))
	cs := fake.NewSimpleClientset()
	tm := Timings{LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 400 * time.Millisecond, CallTimeout: 400 * time.Millisecond}
	m := &membership{pod: "pod", weight: 1, t: tm, clock: clk, leases: cs.CoordinationV1().Leases("ns"), log: logr.Discard(),
		m: newMetrics(prometheus.NewRegistry()), kick: make(chan struct{}, 1)}
	ctx := context.Background()
	holder := HolderIdentity("pod", "1")
	if !m.join(ctx, holder) {
		t.Fatal("join failed")
	}
	if err := cs.CoordinationV1().Leases("ns").Delete(ctx, MemberLeaseName("pod"), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	cs.PrependReactor("update", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewConflict(coordinationv1.Resource("leases"), MemberLeaseName("pod"), errors.New("the object has been modified"))
	})
	clk.Step(tm.RetryPeriod)
	_, until := m.current()
	if outcome, _ := m.renew(ctx, holder, until, tm.CallTimeout); outcome != renewTaken {
		t.Errorf("a renew of a deleted member Lease came back %v, want renewTaken (lapse now)", outcome)
	}
}

// TestJoinCountsWritesNotFailedReads: a join whose read of its member Lease fails
// retries without counting a Lease write; the create that follows is counted once.
func TestJoinCountsWritesNotFailedReads(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC))
	cs := fake.NewSimpleClientset()
	reads := 0
	cs.PrependReactor("get", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		if reads++; reads == 1 {
			return true, nil, apierrors.NewServiceUnavailable("hub unavailable")
		}
		return false, nil, nil
	})
	tm := Timings{LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 400 * time.Millisecond, CallTimeout: 400 * time.Millisecond}
	m := &membership{pod: "pod", weight: 1, t: tm, clock: clk, leases: cs.CoordinationV1().Leases("ns"), log: logr.Discard(),
		m: newMetrics(prometheus.NewRegistry()), kick: make(chan struct{}, 1)}
	joined := make(chan bool)
	go func() { joined <- m.join(context.Background(), HolderIdentity("pod", "1")) }()
	for !clk.HasWaiters() { // the retry after the failed read
		time.Sleep(time.Millisecond)
	}
	clk.Step(tm.RetryPeriod)
	if !<-joined {
		t.Fatal("join failed")
	}
	for result, want := range map[string]float64{"error": 0, "success": 1} {
		if got := testutil.ToFloat64(m.m.leaseWrites.WithLabelValues("member", result)); got != want {
			t.Errorf("member Lease writes counted %q: %v, want %v", result, got, want)
		}
	}
}
