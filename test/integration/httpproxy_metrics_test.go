package integration

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"anchorage/internal/harness"
)

// proxiesGauge reads anchorage_httpproxies{project,condition,status} from a replica.
func proxiesGauge(m *harness.Manager, project, condition, status string) (float64, error) {
	return harness.MetricValue(m.Registry, "anchorage_httpproxies", "project", project, "condition", condition, "status", status)
}

// TestHTTPProxyGaugeFollowsTheHolder: the replica holding a project counts its
// HTTPProxies by condition once the reconciler programs them; a deleted proxy leaves the
// count; a replica that stopped (handing its projects over) reports the project no more.
func TestHTTPProxyGaugeFollowsTheHolder(t *testing.T) {
	gt := newGatewayTest(t, planeA)
	g := gt.g
	m := gt.startManager("gauge")
	p := gt.createProxy(gt.newProxy("web", "a.example.com"))
	gt.waitProgrammed("web")
	g.Eventually(func(g Gomega) {
		for cond, want := range map[string]float64{"Programmed": 1, "Accepted": 1} {
			v, err := proxiesGauge(m, gt.project, cond, "True")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(v).To(Equal(want), "%s=True", cond)
		}
		v, err := proxiesGauge(m, gt.project, "Programmed", "False")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(v).To(BeZero(), "Programmed=False")
	}, gwProgrammedWithin, gwPoll).Should(Succeed())

	g.Expect(gt.plane.Client.Delete(gt.ctx, p)).To(Succeed())
	g.Eventually(func(g Gomega) {
		v, err := proxiesGauge(m, gt.project, "Programmed", "True")
		g.Expect(err).NotTo(HaveOccurred(), "the project is still held: its series stay, at zero")
		g.Expect(v).To(BeZero(), "the deleted proxy left the count")
	}, gwCleanWithin, gwPoll).Should(Succeed())

	gt.stopManager(m)
	g.Eventually(func() error {
		_, err := proxiesGauge(m, gt.project, "Programmed", "True")
		return err
	}, 10*time.Second, gwPoll).Should(HaveOccurred(), "a replica that no longer holds the project does not report it")
}
