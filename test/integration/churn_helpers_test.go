package integration

import (
	"context"
	"fmt"
	"testing"

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
	"anchorage/internal/harness"
	"anchorage/pkg/shard"
)

// churn is a data-path test over three real project planes: proxies created and
// deleted while managers come and go, every admitted reconcile recorded.
type churn struct {
	t        *testing.T
	g        *WithT
	e        *harness.Env
	class    string
	rec      *harness.MemoryRecorder
	projects []churnProject
	// deleted maps the UIDs of deleted proxies' upstream Gateways and HTTPRoutes (the
	// names of their anchors) to what they were.
	deleted map[types.UID]string
}

type churnProject struct {
	name  string
	plane *harness.ControlPlane
	ns    string
}

func newChurn(t *testing.T, prefix string) *churn {
	t.Helper()
	needEnvtest(t)
	c := &churn{t: t, g: NewWithT(t), e: newEnv(t), class: "anchorage-" + rand.String(6), rec: &harness.MemoryRecorder{}, deleted: map[types.UID]string{}}
	for i, plane := range []*harness.ControlPlane{planeA, planeB, planeC} {
		p := churnProject{name: fmt.Sprintf("%s-%s-%d", prefix, rand.String(4), i), plane: plane, ns: prefix + "-" + rand.String(6)}
		_, err := c.e.AddProject(context.Background(), p.name, plane)
		c.g.Expect(err).NotTo(HaveOccurred())
		c.g.Expect(plane.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: p.ns}})).To(Succeed())
		c.projects = append(c.projects, p)
		t.Cleanup(func() { stripAndDelete(p.plane.Client, p.ns) })
	}
	return c
}

// startManager starts a replica serving this test's gateway class and recording work.
func (c *churn) startManager(name string) *harness.Manager {
	return c.e.StartManagerT(c.t, name, harness.ManagerOptions{Adjust: func(o *app.Options) {
		harness.WithTimings(harness.FastTimings)(o)
		o.Gateway.GatewayClassName = c.class
		o.Recorder = c.rec
	}})
}

func (c *churn) projectNames() []string {
	var out []string
	for _, p := range c.projects {
		out = append(out, p.name)
	}
	return out
}

// create creates proxy name in every project.
func (c *churn) create(name string) {
	for _, p := range c.projects {
		c.g.Expect(p.plane.Client.Create(context.Background(), &v1alpha.HTTPProxy{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: p.ns},
			Spec: v1alpha.HTTPProxySpec{
				// One hostname per project: a hostname is programmed for one project at a time.
				Hostnames: []gatewayv1.Hostname{gatewayv1.Hostname(name + "." + p.name + ".example.com")},
				Rules:     []v1alpha.HTTPProxyRule{{Backends: []v1alpha.HTTPProxyBackend{{Endpoint: "https://backend.example.com"}}}},
			},
		})).To(Succeed())
	}
}

// remove deletes proxy name in every project once its upstream objects exist, noting
// their UIDs.
func (c *churn) remove(name string) {
	ctx := context.Background()
	for _, p := range c.projects {
		c.g.Eventually(func(g Gomega) {
			gw, rt := &gatewayv1.Gateway{}, &gatewayv1.HTTPRoute{}
			key := client.ObjectKey{Namespace: p.ns, Name: name}
			g.Expect(p.plane.Client.Get(ctx, key, gw)).To(Succeed())
			g.Expect(p.plane.Client.Get(ctx, key, rt)).To(Succeed())
			c.deleted[gw.UID], c.deleted[rt.UID] = p.name+"/"+name, p.name+"/"+name
		}, gwProgrammedWithin, gwPoll).Should(Succeed())
		c.g.Expect(p.plane.Client.Delete(ctx, &v1alpha.HTTPProxy{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: p.ns}})).To(Succeed())
	}
}

// settle waits for every live proxy to be programmed, every removed one to be gone
// with no anchor left, and checks that no two incarnations ever worked on one project
// at once. It returns the recorded work.
func (c *churn) settle(live, removed []string) []shard.Record {
	ctx := context.Background()
	for _, p := range c.projects {
		for _, n := range live {
			waitProxyProgrammed(c.g, p.plane.Client, p.ns, n)
		}
		for _, n := range removed {
			c.g.Eventually(func() bool {
				return apierrors.IsNotFound(p.plane.Client.Get(ctx, client.ObjectKey{Namespace: p.ns, Name: n}, &v1alpha.HTTPProxy{}))
			}, gwProgrammedWithin, gwPoll).Should(BeTrue(), "proxy %s/%s fully deleted", p.name, n)
		}
	}
	for uid, what := range c.deleted {
		c.g.Eventually(func(g Gomega) []corev1.ConfigMap { return anchorsNamed(ctx, g, string(uid)) }, gwCleanWithin, gwPoll).
			Should(BeEmpty(), "anchor of deleted %s", what)
	}
	records := c.rec.Records()
	c.g.Expect(harness.Overlaps(records)).To(BeEmpty(), "overlapping reconciles")
	return records
}
