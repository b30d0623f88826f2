package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"anchorage/api/v1alpha"
	"anchorage/internal/app"
	"anchorage/pkg/gateway"
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

func ownersByPod(g Gomega, e *Env, projects []string) map[string]string {
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
	rec := &shard.MemoryRecorder{}
	managers := map[string]*Manager{}
	start := func(name string) {
		m, err := e.StartManager(ctx, name, ManagerOptions{Adjust: func(o *app.Options) { WithTimings(FastTimings)(o); o.Recorder = rec }})
		g.Expect(err).NotTo(HaveOccurred())
		t.Cleanup(func() { _ = m.Stop(30 * time.Second) })
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
	g.Expect(overlaps(rec.Records())).To(BeEmpty())
}

// TestShardScaleUnderChurn: three real project planes with HTTPProxies created and
// deleted while the Deployment scales 3 -> 4 -> 2: no overlapping reconciles, every proxy
// ends programmed or fully cleaned, no anchor left for a deleted proxy.
func TestShardScaleUnderChurn(t *testing.T) {
	needEnvtest(t)
	g := NewWithT(t)
	ctx := context.Background()
	e := newEnv(t)
	class := "anchorage-" + rand.String(6)
	rec := &shard.MemoryRecorder{}
	type project struct {
		name  string
		plane *ControlPlane
		ns    string
	}
	var projects []project
	for i, plane := range []*ControlPlane{planeA, planeB, planeC} {
		p := project{name: fmt.Sprintf("sc-%s-%d", rand.String(4), i), plane: plane, ns: "sc-" + rand.String(6)}
		_, err := e.AddProject(ctx, p.name, plane)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(plane.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: p.ns}})).To(Succeed())
		projects = append(projects, p)
		t.Cleanup(func() { stripAndDelete(p.plane.Client, p.ns) })
	}
	managers := map[string]*Manager{}
	start := func(name string) {
		m, err := e.StartManager(ctx, name, ManagerOptions{Adjust: func(o *app.Options) {
			WithTimings(FastTimings)(o)
			o.Gateway = gateway.Config{GatewayClassName: class}
			o.Recorder = rec
		}})
		g.Expect(err).NotTo(HaveOccurred())
		t.Cleanup(func() { _ = m.Stop(30 * time.Second) })
		managers[name] = m
	}
	deleted := map[types.UID]string{}
	create := func(p project, name string) {
		g.Expect(p.plane.Client.Create(ctx, &v1alpha.HTTPProxy{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: p.ns},
			Spec: v1alpha.HTTPProxySpec{
				Hostnames: []gatewayv1.Hostname{gatewayv1.Hostname(name + ".example.com")},
				Rules:     []v1alpha.HTTPProxyRule{{Backends: []v1alpha.HTTPProxyBackend{{Endpoint: "https://backend.example.com"}}}},
			},
		})).To(Succeed())
	}
	remove := func(p project, name string) {
		g.Eventually(func(g Gomega) {
			gw, rt := &gatewayv1.Gateway{}, &gatewayv1.HTTPRoute{}
			key := client.ObjectKey{Namespace: p.ns, Name: name}
			g.Expect(p.plane.Client.Get(ctx, key, gw)).To(Succeed())
			g.Expect(p.plane.Client.Get(ctx, key, rt)).To(Succeed())
			deleted[gw.UID], deleted[rt.UID] = p.name+"/"+name, p.name+"/"+name
		}, gwProgrammedWithin, gwPoll).Should(Succeed())
		g.Expect(p.plane.Client.Delete(ctx, &v1alpha.HTTPProxy{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: p.ns}})).To(Succeed())
	}

	for _, n := range []string{"sc0", "sc1", "sc2"} {
		start(n)
	}
	for _, p := range projects {
		create(p, "a0")
		create(p, "a1")
	}
	start("sc3")
	for _, p := range projects {
		remove(p, "a0")
		create(p, "a2")
	}
	for _, n := range []string{"sc1", "sc3"} {
		g.Expect(managers[n].Stop(30 * time.Second)).To(Succeed())
		delete(managers, n)
	}
	for _, p := range projects {
		remove(p, "a1")
		create(p, "a3")
	}

	for _, p := range projects {
		for _, n := range []string{"a2", "a3"} {
			waitProxyProgrammed(g, p.plane.Client, p.ns, n)
		}
		for _, n := range []string{"a0", "a1"} {
			g.Eventually(func() bool {
				return apierrors.IsNotFound(p.plane.Client.Get(ctx, client.ObjectKey{Namespace: p.ns, Name: n}, &v1alpha.HTTPProxy{}))
			}, gwProgrammedWithin, gwPoll).Should(BeTrue(), "proxy %s/%s fully deleted", p.name, n)
		}
	}
	for uid, what := range deleted {
		g.Eventually(func(g Gomega) []corev1.ConfigMap { return anchorsNamed(ctx, g, string(uid)) }, gwCleanWithin, gwPoll).
			Should(BeEmpty(), "anchor of deleted %s", what)
	}
	records := rec.Records()
	t.Logf("recorded %d admitted reconciles across 3 -> 4 -> 2 replicas", len(records))
	g.Expect(overlaps(records)).To(BeEmpty(), "overlapping reconciles")
}
