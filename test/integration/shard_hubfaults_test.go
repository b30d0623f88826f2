package integration

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"

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
