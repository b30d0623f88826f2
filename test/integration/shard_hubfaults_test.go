package integration

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"anchorage/internal/harness"
	"anchorage/pkg/shard"
)

// Tests of the shard against a struggling hub: each manager reaches the hub through its
// own harness.FaultProxy, which stalls watch streams and answers requests as an
// overloaded or restarting API server would (issue 19).

// startManagersBehindProxies starts n managers, each reaching the hub through its own
// fault proxy (Manager.HubProxy).
func startManagersBehindProxies(t *testing.T, e *harness.Env, n int, prefix string) []*harness.Manager {
	t.Helper()
	var ms []*harness.Manager
	for i := range n {
		ms = append(ms, e.StartManagerT(t, fmt.Sprintf("%s%d", prefix, i), harness.ManagerOptions{HubFaults: true, Adjust: harness.WithTimings(harness.FastTimings)}))
	}
	return ms
}

// moveWatch records, per project, the first time its Lease named a holder other than
// the one it started with (or was gone), polling the hub every 20 ms.
type moveWatch struct {
	stop  context.CancelFunc
	done  chan struct{}
	mu    sync.Mutex
	moved map[string]time.Time
}

func watchMoves(ctx context.Context, e *harness.Env, holders map[string]string) *moveWatch {
	ctx, cancel := context.WithCancel(ctx)
	w := &moveWatch{stop: cancel, done: make(chan struct{}), moved: map[string]time.Time{}}
	go func() {
		defer close(w.done)
		for ctx.Err() == nil {
			leases, err := e.ProjectLeases(ctx)
			now := time.Now()
			if err == nil {
				w.mu.Lock()
				for p, holder := range holders {
					l, ok := leases[p]
					if _, seen := w.moved[p]; !seen && (!ok || ptrValue(l.Spec.HolderIdentity) != holder) {
						w.moved[p] = now
					}
				}
				w.mu.Unlock()
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	return w
}

// Stop ends the watch and returns the first move time of each project that moved.
func (w *moveWatch) Stop() map[string]time.Time {
	w.stop()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.moved
}

// TestShardStalledCoordinatorWatchMovesNothing (issue 19, finding 1): the coordinator's
// Lease watch stalls — the connection stays open, nothing comes — and its reads of the
// other members' Leases fail with 503, as during a hub API server restart. Every other
// member looks suspect to it for three Lease durations while each of them renews
// through its own connection and serves its projects. No project moves: a suspect
// member holds on until the conditional clear of its member Lease succeeds, which it
// cannot here. Built with the anchorage_bench_suspectexpires tag (the old rule: a
// suspect member's projects are orphaned) this test fails.
func TestShardStalledCoordinatorWatchMovesNothing(t *testing.T) {
	needEnvtest(t)
	g := NewWithT(t)
	ctx := context.Background()
	e := newEnv(t)
	projects := projectNames("stall", 9)
	g.Expect(e.AddLightweightProjects(ctx, planeA, projects...)).To(Succeed())
	ms := startManagersBehindProxies(t, e, 3, "stall")
	claimed := waitAllServed(g, e, ms, projects)
	coordinator := coordinatorOf(ctx, e, ms)
	g.Expect(coordinator).NotTo(BeNil())
	var others []string
	for _, m := range except(ms, coordinator) {
		others = append(others, shard.MemberLeaseName(m.Name))
	}

	moves := watchMoves(ctx, e, claimed)
	coordinator.HubProxy.StallWatches("leases")
	coordinator.HubProxy.SetRules(harness.FaultRule{Verbs: []string{"get"}, Resources: []string{"leases"}, Names: others, Rate: 1, Status: http.StatusServiceUnavailable})
	stalledFor := 3 * harness.FastTimings.LeaseDuration
	deadline := time.Now().Add(stalledFor)
	for time.Now().Before(deadline) {
		// The others keep serving what they hold: they renew over their own proxies.
		for _, m := range except(ms, coordinator) {
			g.Expect(m.Replica.Shard.Holder()).NotTo(BeEmpty(), "%s stays a member", m.Name)
		}
		time.Sleep(100 * time.Millisecond)
	}
	applied, _ := coordinator.HubProxy.Applied()
	coordinator.HubProxy.Clear()
	moved := moves.Stop()
	t.Logf("faults applied to the coordinator's hub traffic over %s: %v", stalledFor, applied)
	g.Expect(applied["stalled-watch"]).To(BeNumerically(">=", 1), "the coordinator's Lease watch was stalled")
	g.Expect(applied["status-503"]).To(BeNumerically(">=", 1), "the coordinator tried to confirm a suspect member, and failed")
	g.Expect(moved).To(BeEmpty(), "projects moved off members that were renewing all along")
	g.Expect(waitAllServed(g, e, ms, projects)).To(Equal(claimed), "once the watch resumes nothing moves either")
}

// TestShardMemberLeaseDeletedWhileItsHolderCannotReachTheHub (issue 19, finding 3): an
// operator deletes a serving replica's member Lease while every request of that replica
// for its member Lease is answered 503 by its proxy, so it cannot learn of the deletion
// from a NotFound and rejoin at once: it goes on serving until its validity ends. The
// coordinator, which saw the Lease vanish, moves none of its projects before the old
// incarnation's validity has ended (a vanished member holds on for a Lease duration);
// after that they move, and once the faults are lifted the replica rejoins and every
// project is served by exactly one replica again. Without the planner's hold-on for a
// vanished member the projects move at the coordinator's next pass, while their holder
// still admits work for them.
func TestShardMemberLeaseDeletedWhileItsHolderCannotReachTheHub(t *testing.T) {
	needEnvtest(t)
	g := NewWithT(t)
	ctx := context.Background()
	e := newEnv(t)
	projects := projectNames("vanish", 9)
	g.Expect(e.AddLightweightProjects(ctx, planeA, projects...)).To(Succeed())
	ms := startManagersBehindProxies(t, e, 3, "vanish")
	waitAllServed(g, e, ms, projects)
	victim, held := nonCoordinatorHolder(ctx, e, ms, projects)
	g.Expect(victim).NotTo(BeNil())
	oldHolder := victim.Replica.Shard.Holder()
	start := map[string]string{}
	for _, p := range held {
		start[p] = oldHolder
	}
	moves := watchMoves(ctx, e, start)

	memberLease := shard.MemberLeaseName(victim.Name)
	victim.HubProxy.SetRules(harness.FaultRule{Resources: []string{"leases"}, Names: []string{memberLease}, Rate: 1, Status: http.StatusServiceUnavailable})
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: e.ProviderNamespace, Name: memberLease}}
	g.Expect(e.Hub.Client.Delete(ctx, lease)).To(Succeed())
	deleted := time.Now()

	// Long enough for the old incarnation to lapse and for the coordinator to give its
	// projects to the others.
	time.Sleep(3 * harness.FastTimings.LeaseDuration)
	applied, _ := victim.HubProxy.Applied()
	g.Expect(victim.Replica.Shard.Holder()).To(BeEmpty(), "the victim's validity ended and it could not rejoin")
	victim.HubProxy.Clear()
	moved := moves.Stop()

	var old shard.Incarnation
	for _, inc := range victim.Replica.Shard.Incarnations() {
		if inc.Holder == oldHolder {
			old = inc
		}
	}
	g.Expect(old.Ended).To(BeTrue(), "the old incarnation is in the history, ended")
	t.Logf("member Lease deleted at %s; old incarnation valid until %s; faults applied: %v", deleted.Format(time.StampMilli), old.ValidUntil.Format(time.StampMilli), applied)
	g.Expect(applied["status-503"]).To(BeNumerically(">=", 1), "the victim's renews were refused")
	for p, at := range moved {
		t.Logf("project %s moved at %s", p, at.Format(time.StampMilli))
	}
	g.Expect(moved).NotTo(BeEmpty(), "the projects of a replica that cannot renew move once its validity has ended")
	for p, at := range moved {
		g.Expect(at.After(old.ValidUntil)).To(BeTrue(), "project %s moved off %s at %s, before its validity ended at %s", p, oldHolder, at.Format(time.StampMilli), old.ValidUntil.Format(time.StampMilli))
	}

	g.Eventually(func() string { return victim.Replica.Shard.Holder() }, 20*time.Second, 50*time.Millisecond).
		Should(And(Not(BeEmpty()), Not(Equal(oldHolder))), "rejoins under a new incarnation once it reaches the hub")
	waitAllServed(g, e, ms, projects)
}
