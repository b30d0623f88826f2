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
	tm := Timings{LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 400 * time.Millisecond, CallTimeout: 200 * time.Millisecond}
	hub := &slowHub{LeaseInterface: cs.CoordinationV1().Leases("ns"), delay: 120 * time.Millisecond}
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
		if outcome := m.renew(ctx, holder, until); outcome == renewTaken {
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
	for i := 0; i < 6; i++ {
		renew()
		if _, until := m.current(); !until.Equal(clk.Now().Add(tm.RenewDeadline)) {
			t.Fatalf("renew %d after the conflict: validity runs to %s, want %s", i+1, until.Sub(now), clk.Now().Add(tm.RenewDeadline).Sub(now))
		}
	}
}
