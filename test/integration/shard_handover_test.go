package integration

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"anchorage/api/v1alpha"
	"anchorage/internal/app"
	"anchorage/internal/harness"
	"anchorage/pkg/shard"
)

// claimWatcher polls project Leases and records, per project, the longest stretch
// during which it had no claimed holder.
type claimWatcher struct {
	mu       sync.Mutex
	since    map[string]time.Time
	longest  map[string]time.Duration
	stop     chan struct{}
	stopped  chan struct{}
	projects []string
}

func watchClaims(e *harness.Env, projects []string) *claimWatcher {
	w := &claimWatcher{since: map[string]time.Time{}, longest: map[string]time.Duration{}, stop: make(chan struct{}), stopped: make(chan struct{}), projects: projects}
	go func() {
		defer close(w.stopped)
		for {
			claimed, err := e.ClaimedHolders(context.Background())
			now := time.Now()
			if err == nil {
				w.mu.Lock()
				for _, p := range w.projects {
					if claimed[p] == "" {
						if _, open := w.since[p]; !open {
							w.since[p] = now
						}
						continue
					}
					if start, open := w.since[p]; open {
						if d := now.Sub(start); d > w.longest[p] {
							w.longest[p] = d
						}
						delete(w.since, p)
					}
				}
				w.mu.Unlock()
			}
			select {
			case <-w.stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	return w
}

// gaps stops the watcher and returns the longest unclaimed stretch of each project.
func (w *claimWatcher) gaps() map[string]time.Duration {
	close(w.stop)
	<-w.stopped
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]time.Duration{}
	for _, p := range w.projects {
		out[p] = w.longest[p]
		if start, open := w.since[p]; open {
			out[p] = time.Since(start)
		}
	}
	return out
}

// TestShardGracefulStopHandsEveryProjectOver: a replica holding about ten projects is
// stopped gracefully; before it returns every one of them is claimed elsewhere (how long
// each went unclaimed is logged; bench/ measures it), and the replica writes no project Lease
// after handing it over.
//
// The stopping replica's controllers keep serving while it hands its projects over: they
// stop only after its last hand-over write (issue 19, finding 6).
func TestShardGracefulStopHandsEveryProjectOver(t *testing.T) {
	needEnvtest(t)
	g := NewWithT(t)
	ctx := context.Background()
	e := newEnv(t)
	projects := projectNames("gs", 30)
	g.Expect(e.AddLightweightProjects(ctx, planeA, projects...)).To(Succeed())
	rec := &harness.MemoryRecorder{}
	var ms []*harness.Manager
	for i := range 3 {
		m := e.StartManagerT(t, fmt.Sprintf("gs%d", i), harness.ManagerOptions{Adjust: func(o *app.Options) { harness.WithTimings(harness.FastTimings)(o); o.Recorder = rec }})
		ms = append(ms, m)
	}
	waitAllServed(g, e, ms, projects)
	victim := ms[0]
	for _, m := range ms {
		if len(m.Held(projects)) > len(victim.Held(projects)) {
			victim = m
		}
	}
	held := victim.Held(projects)
	g.Expect(len(held)).To(BeNumerically(">=", 8))

	w := watchClaims(e, held)
	stopped := time.Now()
	g.Expect(victim.Stop(30 * time.Second)).To(Succeed())
	took := time.Since(stopped)
	claimed, err := e.ClaimedHolders(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	for _, p := range held {
		g.Expect(claimed[p]).NotTo(BeEmpty(), "project %s claimed elsewhere before the stop returned", p)
		g.Expect(shard.PodOf(claimed[p])).NotTo(Equal(victim.Name))
	}
	gaps := w.gaps()
	var ds []time.Duration
	for _, p := range held {
		ds = append(ds, gaps[p])
	}
	t.Logf("graceful stop of %s holding %d projects took %s; longest time a project went unclaimed: %s", victim.Name, len(held), took, slices.Max(ds))
	// The gap is bench/'s measurement (planned hand-over, × lease); the property asserted
	// here is that every project was claimed elsewhere before the stop returned (above)
	// and, below, that the victim never wrote a handed-over Lease again.

	// From the hub's own record: after the victim's hand-over write to a project Lease,
	// the victim never writes that Lease again, and the new holder claims after it.
	events, err := hub.AuditEvents()
	g.Expect(err).NotTo(HaveOccurred())
	// A stopping provider ends every discovery; that is no removal, so the stopping
	// replica (which coordinates here) deletes no project Lease.
	for _, ev := range events {
		if ev.ObjectRef.Resource == "leases" && ev.ObjectRef.Namespace == e.ProviderNamespace && ev.Verb == "delete" {
			g.Expect(ev.User.Username).NotTo(Equal(victim.User), "the stopping replica deleted Lease %s", ev.ObjectRef.Name)
		}
	}
	var lastHandOver time.Time
	for _, p := range held {
		name := shard.ProjectLeaseName(p)
		var last time.Time
		var victimWrites int
		for _, ev := range events {
			if ev.ObjectRef.Resource == "leases" && ev.ObjectRef.Namespace == e.ProviderNamespace && ev.ObjectRef.Name == name &&
				ev.Verb == "update" && ev.User.Username == victim.User && ev.ResponseStatus.Code < 300 {
				victimWrites++
				last = ev.RequestReceivedTimestamp
			}
		}
		g.Expect(victimWrites).To(BeNumerically(">=", 2), "claim and hand-over writes of %s", p)
		if last.After(lastHandOver) {
			lastHandOver = last
		}
		newUser := "anchorage-" + shard.PodOf(claimed[p])
		// The claim read above is on the Lease; its audit record is written as the API
		// server finishes that write, which may be a moment later: wait for the record.
		g.Eventually(func(g Gomega) {
			events, err := hub.AuditEvents()
			g.Expect(err).NotTo(HaveOccurred())
			var claimAt time.Time
			for _, ev := range events {
				if ev.ObjectRef.Name == name && ev.User.Username == newUser && ev.Verb == "update" && ev.RequestReceivedTimestamp.After(last) {
					claimAt = ev.RequestReceivedTimestamp
					break
				}
			}
			g.Expect(claimAt.IsZero()).To(BeFalse(), "the new holder of %s claims after the victim's last write", p)
		}, 10*time.Second, 100*time.Millisecond).Should(Succeed())
	}
	// Issue 19, finding 6: the controllers served until the last hand-over was written,
	// not only until the stop began.
	g.Expect(victim.StoppedServing()).To(BeTemporally(">=", lastHandOver), "the controllers stopped before the last hand-over was written")
	g.Expect(harness.Overlaps(rec.Records())).To(BeEmpty())
}

// TestShardCoordinatorGracefulStopElectsSuccessorAtOnce: the coordinator releases its
// election Lease on a graceful stop, so a successor does not wait out the lease.
func TestShardCoordinatorGracefulStopElectsSuccessorAtOnce(t *testing.T) {
	needEnvtest(t)
	g := NewWithT(t)
	ctx := context.Background()
	e := newEnv(t)
	projects := projectNames("cs", 6)
	g.Expect(e.AddLightweightProjects(ctx, planeA, projects...)).To(Succeed())
	ms := startManagers(t, e, 3, "cs")
	waitAllClaimed(g, e, projects)
	coordinator := coordinatorOf(ctx, e, ms)
	g.Expect(coordinator).NotTo(BeNil())
	old := coordinator.Replica.Shard.Holder()
	stopped := time.Now()
	g.Expect(coordinator.Stop(30 * time.Second)).To(Succeed())
	g.Eventually(func() string {
		h, _ := coordinatorHolder(ctx, e)
		return h
	}, harness.FastTimings.LeaseDuration, 20*time.Millisecond).Should(And(Not(BeEmpty()), Not(Equal(old))))
	took := time.Since(stopped)
	t.Logf("successor coordinator elected %s after the stop began (lease duration %s)", took, harness.FastTimings.LeaseDuration)
	waitAllClaimed(g, e, projects)
}

// TestShardDrainBlockedByHangingReconcileExits: a planned hand-over whose drain cannot
// finish (a reconcile hangs) exits the process at the drain deadline, and the project
// goes through failure hand-over to the other replica.
func TestShardDrainBlockedByHangingReconcileExits(t *testing.T) {
	needEnvtest(t)
	g := NewWithT(t)
	ctx := context.Background()
	e := newEnv(t)
	class := "anchorage-" + rand.String(6)
	p, err := e.AddProject(ctx, "hang-"+rand.String(4), planeC)
	g.Expect(err).NotTo(HaveOccurred())
	ns := "hang-" + rand.String(5)
	g.Expect(planeC.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	t.Cleanup(func() { stripAndDelete(planeC.Client, ns) })
	timings := harness.FastTimings
	timings.DrainDeadline = 2 * time.Second
	var ms []*harness.Manager
	for i := range 2 {
		ms = append(ms, e.StartManagerT(t, fmt.Sprintf("hg%d", i), harness.ManagerOptions{Adjust: func(o *app.Options) {
			harness.WithTimings(timings)(o)
			o.Gateway.GatewayClassName = class
		}}))
	}
	claimed := waitAllClaimed(g, e, []string{p.Name})
	var owner, other *harness.Manager
	for _, m := range ms {
		if m.Replica.Shard.Holder() == claimed[p.Name] {
			owner = m
		} else {
			other = m
		}
	}
	g.Expect(owner).NotTo(BeNil())
	// Every write the owner sends to the project from now on hangs, deaf to its context.
	var hanging atomic.Bool
	owner.SetFault(func(tr harness.Traffic, r *http.Request) (time.Duration, error) {
		// Writes a reconcile makes (to the proxy, Gateways, routes, Services), not Events.
		if tr == harness.ProjectTraffic && r.Method != http.MethodGet && !strings.Contains(r.URL.Path, "/events") {
			hanging.Store(true)
			return 20 * time.Second, harness.ErrStuck
		}
		return 0, nil
	})
	g.Expect(planeC.Client.Create(ctx, &v1alpha.HTTPProxy{
		ObjectMeta: metav1.ObjectMeta{Name: "hangs", Namespace: ns},
		Spec: v1alpha.HTTPProxySpec{
			Hostnames: []gatewayv1.Hostname{"hangs.example.com"},
			Rules:     []v1alpha.HTTPProxyRule{{Backends: []v1alpha.HTTPProxyBackend{{Endpoint: "https://backend.example.com"}}}},
		},
	})).To(Succeed())
	// Once the owner is stuck inside a reconcile, ask it to stop gracefully.
	g.Eventually(hanging.Load, 10*time.Second, 20*time.Millisecond).Should(BeTrue())
	go func() { _ = owner.Stop(30 * time.Second) }()

	g.Eventually(owner.Killed, timings.DrainDeadline+harness.FastTimings.LeaseDuration+5*time.Second, 50*time.Millisecond).Should(BeTrue(), "the owner exits at the drain deadline")
	drainTimeouts, err := owner.Gauge("anchorage_shard_handovers_total", "result", "drain_timeout")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(drainTimeouts).To(BeEquivalentTo(1))
	g.Eventually(func() string {
		c, _ := e.ClaimedHolders(ctx)
		return c[p.Name]
	}, 3*harness.FastTimings.LeaseDuration+5*time.Second, 50*time.Millisecond).Should(Equal(other.Replica.Shard.Holder()), "failure hand-over to the other replica")
	waitProxyProgrammed(g, planeC.Client, ns, "hangs")
}

// TestShardHandOverWriteTimesOutThenCommits: the owner's hand-over write times out on
// its side but commits on the server; the retry with the original precondition
// conflicts, the re-read shows the hand-over done, and the old owner never works on the
// project again.
func TestShardHandOverWriteTimesOutThenCommits(t *testing.T) {
	needEnvtest(t)
	g := NewWithT(t)
	ctx := context.Background()
	e := newEnv(t)
	projects := projectNames("to", 12)
	g.Expect(e.AddLightweightProjects(ctx, planeA, projects...)).To(Succeed())
	rec := &harness.MemoryRecorder{}
	adjust := func(o *app.Options) { harness.WithTimings(harness.FastTimings)(o); o.Recorder = rec }
	m0 := e.StartManagerT(t, "to0", harness.ManagerOptions{Adjust: adjust})
	waitAllServed(g, e, []*harness.Manager{m0}, projects)

	// From now on m0's first hand-over write to each project Lease (the write naming a
	// holder other than m0) answers late, after m0's call timeout; it commits at once.
	var mu sync.Mutex
	delayed := map[string]bool{}
	m0.SetFault(func(tr harness.Traffic, r *http.Request) (time.Duration, error) {
		if tr != harness.HubTraffic || r.Method != http.MethodPut || !strings.Contains(r.URL.Path, "/leases/"+shard.ProjectLeasePrefix) || r.Body == nil {
			return 0, nil
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return 0, err
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		mu.Lock()
		defer mu.Unlock()
		// The hand-over write names to1 and carries no claim ("<holder>#<engagement>");
		// the coordinator's request and claims carry one (protobuf or JSON alike keep
		// the strings as they are).
		if bytes.Contains(body, []byte("to1/")) && !bytes.Contains(body, []byte("#")) && !delayed[r.URL.Path] {
			delayed[r.URL.Path] = true
			return 3 * harness.FastTimings.CallTimeout, nil
		}
		return 0, nil
	})
	handOverStart := time.Now()
	m1 := e.StartManagerT(t, "to1", harness.ManagerOptions{Adjust: adjust})

	var moved []string
	for _, p := range projects {
		if shard.Rank(p, []shard.Member{{Pod: "to0"}, {Pod: "to1"}})[0].Pod == "to1" {
			moved = append(moved, p)
		}
	}
	g.Expect(moved).NotTo(BeEmpty())
	g.Eventually(func() []string { return m1.Held(projects) }, 30*time.Second, 100*time.Millisecond).Should(ConsistOf(moved))
	g.Consistently(func() []string { return m0.Held(moved) }, 2*time.Second, 100*time.Millisecond).Should(BeEmpty())
	// m0 counts a hand-over once its retry has conflicted and its re-read has found the
	// write committed, which can come after m1 holds the project: wait for the count.
	var success float64
	g.Eventually(func() (float64, error) {
		var err error
		success, err = m0.Gauge("anchorage_shard_handovers_total", "result", "success")
		return success, err
	}, 10*time.Second, 100*time.Millisecond).Should(BeEquivalentTo(len(moved)), "every timed-out hand-over write was found committed")
	lost, _ := m0.Gauge("anchorage_shard_handovers_total", "result", "lost")
	invalid, _ := m0.Gauge("anchorage_shard_handovers_total", "result", "invalid")
	t.Logf("hand-overs by the old owner: success=%v lost=%v invalid=%v, moved=%d", success, lost, invalid, len(moved))
	conflicts, err := m0.Gauge("anchorage_shard_lease_writes_total", "kind", "project", "result", "conflict")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(conflicts).To(BeNumerically(">=", 1), "the retry with the original precondition conflicted")
	movedSet := map[string]bool{}
	for _, p := range moved {
		movedSet[p] = true
	}
	// The old owner's work on a moved project all starts before the new owner's first.
	oldHolder, newHolder := m0.Replica.Shard.Holder(), m1.Replica.Shard.Holder()
	records := rec.Records()
	firstNew := map[string]time.Time{}
	for _, r := range records {
		if movedSet[r.Project] && r.Holder == newHolder && (firstNew[r.Project].IsZero() || r.Start.Before(firstNew[r.Project])) {
			firstNew[r.Project] = r.Start
		}
	}
	for _, r := range records {
		if movedSet[r.Project] && r.Holder == oldHolder && !firstNew[r.Project].IsZero() {
			g.Expect(r.End.Before(firstNew[r.Project])).To(BeTrue(), "old owner worked on %s after the new owner began", r.Project)
		}
	}
	g.Expect(harness.Overlaps(records)).To(BeEmpty())
	t.Logf("%d projects moved to the new replica through timed-out-then-committed hand-over writes (started %s)", len(moved), handOverStart.Format(time.StampMilli))
}
