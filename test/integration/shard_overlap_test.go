package integration

import (
	"context"
	"fmt"
	"sort"
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

// overlaps returns, per project, pairs of admitted work by different incarnations whose
// intervals intersect.
func overlaps(records []shard.Record) []string {
	byProject := map[string][]shard.Record{}
	for _, r := range records {
		byProject[r.Project] = append(byProject[r.Project], r)
	}
	var out []string
	for p, rs := range byProject {
		sort.Slice(rs, func(i, j int) bool { return rs[i].Start.Before(rs[j].Start) })
		for i := range rs {
			for j := i + 1; j < len(rs) && rs[j].Start.Before(rs[i].End); j++ {
				if rs[i].Holder != rs[j].Holder {
					out = append(out, fmt.Sprintf("%s: %s [%s, %s] and %s [%s, %s]", p,
						rs[i].Holder, rs[i].Start.Format(time.StampMicro), rs[i].End.Format(time.StampMicro),
						rs[j].Holder, rs[j].Start.Format(time.StampMicro), rs[j].End.Format(time.StampMicro)))
				}
			}
		}
	}
	return out
}

// TestShardNoOverlappingReconcilesUnderChurnAndKill: three managers, three real project
// planes, HTTPProxies created and deleted in each while a holder is abruptly stopped.
// No two incarnations ever work on one project at once; every proxy ends programmed or
// fully cleaned; no anchor is left for a deleted proxy.
func TestShardNoOverlappingReconcilesUnderChurnAndKill(t *testing.T) {
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
		p := project{name: fmt.Sprintf("ov-%s-%d", rand.String(4), i), plane: plane, ns: "ov-" + rand.String(6)}
		_, err := e.AddProject(ctx, p.name, plane)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(plane.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: p.ns}})).To(Succeed())
		projects = append(projects, p)
		t.Cleanup(func() { stripAndDelete(p.plane.Client, p.ns) })
	}
	var ms []*Manager
	for i := range 3 {
		m, err := e.StartManager(ctx, fmt.Sprintf("ov%d", i), ManagerOptions{Adjust: func(o *app.Options) {
			WithTimings(FastTimings)(o)
			o.Gateway = gateway.Config{GatewayClassName: class}
			o.Recorder = rec
		}})
		g.Expect(err).NotTo(HaveOccurred())
		t.Cleanup(func() { _ = m.Stop(30 * time.Second) })
		ms = append(ms, m)
	}

	create := func(p project, name string) {
		px := &v1alpha.HTTPProxy{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: p.ns},
			Spec: v1alpha.HTTPProxySpec{
				Hostnames: []gatewayv1.Hostname{gatewayv1.Hostname(name + ".example.com")},
				Rules:     []v1alpha.HTTPProxyRule{{Backends: []v1alpha.HTTPProxyBackend{{Endpoint: "https://backend.example.com"}}}},
			},
		}
		g.Expect(p.plane.Client.Create(ctx, px)).To(Succeed())
	}
	// upstreamUIDs returns the UIDs of a proxy's upstream Gateway and HTTPRoute (the
	// anchors' names), waiting until both exist.
	upstreamUIDs := func(p project, name string) []types.UID {
		var uids []types.UID
		g.Eventually(func(g Gomega) {
			gw, rt := &gatewayv1.Gateway{}, &gatewayv1.HTTPRoute{}
			key := client.ObjectKey{Namespace: p.ns, Name: name}
			g.Expect(p.plane.Client.Get(ctx, key, gw)).To(Succeed())
			g.Expect(p.plane.Client.Get(ctx, key, rt)).To(Succeed())
			uids = []types.UID{gw.UID, rt.UID}
		}, gwProgrammedWithin, gwPoll).Should(Succeed())
		return uids
	}
	deleted := map[types.UID]string{}
	remove := func(p project, name string) {
		for _, uid := range upstreamUIDs(p, name) {
			deleted[uid] = p.name + "/" + name
		}
		g.Expect(p.plane.Client.Delete(ctx, &v1alpha.HTTPProxy{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: p.ns}})).To(Succeed())
	}

	for _, p := range projects {
		for _, n := range []string{"px0", "px1", "px2"} {
			create(p, n)
		}
	}
	for _, p := range projects {
		waitProxyProgrammed(g, p.plane.Client, p.ns, "px0")
	}
	for _, p := range projects {
		remove(p, "px0")
		create(p, "px3")
	}
	// Kill a replica that holds one of the projects mid-churn.
	names := []string{projects[0].name, projects[1].name, projects[2].name}
	var victim *Manager
	g.Eventually(func() *Manager {
		victim, _ = nonCoordinatorHolder(ctx, e, ms, names)
		return victim
	}, 30*time.Second, gwPoll).ShouldNot(BeNil())
	victim.Kill()
	for _, p := range projects {
		remove(p, "px1")
		create(p, "px4")
	}

	for _, p := range projects {
		for _, n := range []string{"px2", "px3", "px4"} {
			waitProxyProgrammed(g, p.plane.Client, p.ns, n)
		}
		for _, n := range []string{"px0", "px1"} {
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
	perProject := map[string]int{}
	for _, r := range records {
		perProject[r.Project]++
	}
	t.Logf("recorded %d admitted reconciles: %v (killed %s)", len(records), perProject, victim.Name)
	for _, p := range projects {
		g.Expect(perProject[p.name]).To(BeNumerically(">", 0), "reconciles recorded for %s", p.name)
	}
	g.Expect(overlaps(records)).To(BeEmpty(), "overlapping reconciles")
}

func waitProxyProgrammed(g Gomega, c client.Client, ns, name string) {
	g.Eventually(func(g Gomega) {
		p := &v1alpha.HTTPProxy{}
		g.Expect(c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, p)).To(Succeed())
		var programmed bool
		for _, cond := range p.Status.Conditions {
			if cond.Type == v1alpha.ConditionProgrammed && cond.Status == metav1.ConditionTrue && cond.ObservedGeneration == p.Generation {
				programmed = true
			}
		}
		g.Expect(programmed).To(BeTrue(), "%s/%s programmed", ns, name)
	}, gwProgrammedWithin, gwPoll).Should(Succeed())
}

// stripAndDelete removes finalizers from, and deletes, what a test left in an upstream
// namespace, then the namespace, so no later test's manager meets it.
func stripAndDelete(c client.Client, ns string) {
	ctx := context.Background()
	for _, list := range []client.ObjectList{&v1alpha.HTTPProxyList{}, &gatewayv1.GatewayList{}, &gatewayv1.HTTPRouteList{}} {
		if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
			continue
		}
		var objs []client.Object
		switch l := list.(type) {
		case *v1alpha.HTTPProxyList:
			for i := range l.Items {
				objs = append(objs, &l.Items[i])
			}
		case *gatewayv1.GatewayList:
			for i := range l.Items {
				objs = append(objs, &l.Items[i])
			}
		case *gatewayv1.HTTPRouteList:
			for i := range l.Items {
				objs = append(objs, &l.Items[i])
			}
		}
		for _, o := range objs {
			if len(o.GetFinalizers()) > 0 {
				patch := client.MergeFrom(o.DeepCopyObject().(client.Object))
				o.SetFinalizers(nil)
				_ = c.Patch(ctx, o, patch)
			}
			_ = c.Delete(ctx, o)
		}
	}
	_ = c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
}

func TestOverlapsDetectsIntersectingWork(t *testing.T) {
	t0 := time.Unix(100, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	cases := []struct {
		reason  string
		records []shard.Record
		want    int
	}{
		{"sequential work by two holders", []shard.Record{{Holder: "a/1", Project: "p", Start: at(0), End: at(1)}, {Holder: "b/1", Project: "p", Start: at(1), End: at(2)}}, 0},
		{"concurrent work by one holder", []shard.Record{{Holder: "a/1", Project: "p", Start: at(0), End: at(2)}, {Holder: "a/1", Project: "p", Start: at(1), End: at(3)}}, 0},
		{"two holders on two projects", []shard.Record{{Holder: "a/1", Project: "p", Start: at(0), End: at(2)}, {Holder: "b/1", Project: "q", Start: at(1), End: at(3)}}, 0},
		{"two holders on one project at once", []shard.Record{{Holder: "a/1", Project: "p", Start: at(0), End: at(2)}, {Holder: "b/1", Project: "p", Start: at(1.5), End: at(3)}}, 1},
		{"a new incarnation of the same pod overlapping the old", []shard.Record{{Holder: "a/1", Project: "p", Start: at(0), End: at(5)}, {Holder: "a/2", Project: "p", Start: at(4), End: at(6)}}, 1},
	}
	for _, tc := range cases {
		if got := overlaps(tc.records); len(got) != tc.want {
			t.Errorf("%s: want %d overlaps, got %v", tc.reason, tc.want, got)
		}
	}
}
