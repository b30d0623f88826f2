package integration

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"anchorage/internal/app"
	"anchorage/internal/harness"
	"anchorage/pkg/shard"
)

// expectedOwners is what weighted rendezvous hashing gives each project over pods.
func expectedOwners(projects, pods []string) map[string]string {
	var members []shard.Member
	for _, p := range pods {
		members = append(members, shard.Member{Holder: p, Pod: p})
	}
	out := map[string]string{}
	for _, p := range projects {
		out[p] = shard.Rank(p, members)[0].Pod
	}
	return out
}

func ownersByPod(g Gomega, e *harness.Env, projects []string) map[string]string {
	claimed := waitAllClaimed(g, e, projects)
	out := map[string]string{}
	for _, p := range projects {
		out[p] = shard.PodOf(claimed[p])
	}
	return out
}

// TestShardRebalanceMovesOnlyWhatTheHashMoves: scaling 3 -> 4 -> 2 replicas ends, each
// time, with every project at its rendezvous owner, and a project whose owner the hash
// did not change keeps its holder (no transition).
func TestShardRebalanceMovesOnlyWhatTheHashMoves(t *testing.T) {
	needEnvtest(t)
	g := NewWithT(t)
	ctx := context.Background()
	e := newEnv(t)
	projects := projectNames("rb", 30)
	g.Expect(e.AddLightweightProjects(ctx, planeA, projects...)).To(Succeed())
	rec := &harness.MemoryRecorder{}
	managers := map[string]*harness.Manager{}
	start := func(name string) {
		m := e.StartManagerT(t, name, harness.ManagerOptions{Adjust: func(o *app.Options) { harness.WithTimings(harness.FastTimings)(o); o.Recorder = rec }})
		managers[name] = m
	}
	pods := func() []string {
		var out []string
		for n := range managers {
			out = append(out, n)
		}
		return out
	}
	settle := func(step string) map[string]string {
		want := expectedOwners(projects, pods())
		var got map[string]string
		g.Eventually(func(g Gomega) {
			got = ownersByPod(g, e, projects)
			g.Expect(got).To(Equal(want))
		}, 60*time.Second, 100*time.Millisecond).Should(Succeed(), step)
		return got
	}
	transitions := func() map[string]int32 {
		leases, err := e.ProjectLeases(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		out := map[string]int32{}
		for p, l := range leases {
			if l.Spec.LeaseTransitions != nil {
				out[p] = *l.Spec.LeaseTransitions
			}
		}
		return out
	}
	for _, n := range []string{"rb0", "rb1", "rb2"} {
		start(n)
	}
	before := settle("three replicas")
	beforeT := transitions()

	start("rb3")
	after := settle("scaled to four")
	afterT := transitions()
	moved := 0
	for _, p := range projects {
		if before[p] == after[p] {
			g.Expect(afterT[p]).To(Equal(beforeT[p]), "project %s kept its owner and must not have changed hands", p)
		} else {
			moved++
			g.Expect(after[p]).To(Equal("rb3"), "only projects the new member wins move")
		}
	}
	t.Logf("3 -> 4 replicas: %d of %d projects moved, all to the new replica", moved, len(projects))

	for _, n := range []string{"rb0", "rb3"} {
		g.Expect(managers[n].Stop(30 * time.Second)).To(Succeed())
		delete(managers, n)
	}
	final := settle("scaled to two")
	movedDown := 0
	for _, p := range projects {
		if after[p] != final[p] {
			movedDown++
			g.Expect(after[p]).To(BeElementOf("rb0", "rb3"), "only projects of the removed replicas move")
		}
	}
	t.Logf("4 -> 2 replicas: %d of %d projects moved, all from the removed replicas", movedDown, len(projects))
	g.Expect(harness.Overlaps(rec.Records())).To(BeEmpty())
}

// TestShardScaleUnderChurn: three real project planes with HTTPProxies created and
// deleted while the Deployment scales 3 -> 4 -> 2: no overlapping reconciles, every proxy
// ends programmed or fully cleaned, no anchor left for a deleted proxy.
func TestShardScaleUnderChurn(t *testing.T) {
	c := newChurn(t, "sc")
	managers := map[string]*harness.Manager{}
	for _, n := range []string{"sc0", "sc1", "sc2"} {
		managers[n] = c.startManager(n)
	}
	c.create("a0")
	c.create("a1")
	managers["sc3"] = c.startManager("sc3")
	c.remove("a0")
	c.create("a2")
	for _, n := range []string{"sc1", "sc3"} {
		c.g.Expect(managers[n].Stop(30 * time.Second)).To(Succeed())
	}
	c.remove("a1")
	c.create("a3")
	records := c.settle([]string{"a2", "a3"}, []string{"a0", "a1"})
	t.Logf("recorded %d admitted reconciles across 3 -> 4 -> 2 replicas", len(records))
}
