package integration

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"anchorage/api/v1alpha"
	"anchorage/internal/app"
	"anchorage/internal/harness"
	"anchorage/internal/testenv"
)

// TestLeastPrivilegeHubAuditShowsNoSecretReadOutsideProvider runs a short demo-like
// flow on a hub of its own that audits every request on Secrets: a manager under the
// generated roles (hub and plane, the harness's default) serves a proxy to its
// downstream objects, runs resync passes over the project, and finalizes the proxy when
// it is deleted. The hub's audit log must then show the manager's Secret requests in
// the provider namespace (the kubeconfig Secrets) and nowhere else, none refused.
func TestLeastPrivilegeHubAuditShowsNoSecretReadOutsideProvider(t *testing.T) {
	needEnvtest(t)
	g := NewWithT(t)
	ctx := context.Background()
	crds, err := testenv.HubCRDs()
	g.Expect(err).NotTo(HaveOccurred())
	auditedHub, err := harness.StartControlPlane("hub-secret-audit", harness.PlaneOptions{CRDs: crds, AuditSecretReads: true})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = auditedHub.Stop() })
	env, err := harness.NewEnv(ctx, auditedHub)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(env.Close)
	// Secrets elsewhere on the hub that a wildcard would have let it read.
	for _, ns := range []string{"tenant-other", "kube-system"} {
		_ = auditedHub.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		g.Expect(auditedHub.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "credentials", Namespace: ns}})).To(Succeed())
	}

	gt := &gatewayTest{t: t, g: g, ctx: ctx, env: env, plane: planeB, project: "lp-" + rand.String(6), class: "anchorage-" + rand.String(6)}
	_, err = env.AddProject(ctx, gt.project, planeB)
	g.Expect(err).NotTo(HaveOccurred())
	gt.ns = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "lp-" + rand.String(6)}}
	g.Expect(planeB.Client.Create(ctx, gt.ns)).To(Succeed())
	t.Cleanup(gt.cleanUpstream)

	m := env.StartManagerT(t, "lp-audit-"+rand.String(4), harness.ManagerOptions{Adjust: func(o *app.Options) {
		harness.WithTimings(harness.FastTimings)(o)
		o.Gateway.GatewayClassName = gt.class
		o.Resync.Period, o.Resync.InitialJitter, o.Resync.ConfirmAfter = 2*time.Second, time.Millisecond, time.Second
	}})
	p := gt.createProxy(gt.newProxy("web", "lp.example.com"))
	// The downstream Gateway on the hub: the gateway path's hub writes happened.
	g.Eventually(func() int {
		list := &gatewayv1.GatewayList{}
		g.Expect(auditedHub.Client.List(ctx, list, client.HasLabels{"meta.datumapis.com/upstream-cluster-name"})).To(Succeed())
		return len(list.Items)
	}, gwProgrammedWithin, gwPoll).Should(BeNumerically(">=", 1), "the downstream Gateway")
	g.Eventually(func() int { return m.ResyncLog.Passes(gt.project) }, time.Minute, gwPoll).Should(BeNumerically(">=", 2), "resync passes")
	g.Expect(planeB.Client.Delete(ctx, p)).To(Succeed())
	g.Eventually(func() bool {
		err := planeB.Client.Get(ctx, client.ObjectKeyFromObject(p), &v1alpha.HTTPProxy{})
		return err != nil
	}, gwCleanWithin*3, gwPoll).Should(BeTrue(), "the proxy finalized and gone")
	g.Expect(m.Stop(30 * time.Second)).To(Succeed())

	events, err := auditedHub.AuditEvents()
	g.Expect(err).NotTo(HaveOccurred())
	inProvider := 0
	for _, ev := range events {
		if ev.User.Username != m.User || ev.ObjectRef.Resource != "secrets" || ev.ObjectRef.APIGroup != "" {
			continue
		}
		if ev.ObjectRef.Namespace != env.ProviderNamespace {
			t.Errorf("the manager asked for Secrets outside the provider namespace: %s %s/%s (code %d)",
				ev.Verb, ev.ObjectRef.Namespace, ev.ObjectRef.Name, ev.ResponseStatus.Code)
			continue
		}
		g.Expect(ev.ResponseStatus.Code).To(BeNumerically("<", 400), "%s of Secrets in the provider namespace refused", ev.Verb)
		inProvider++
	}
	g.Expect(inProvider).To(BeNumerically(">", 0), "the audit log records the manager's reads of the kubeconfig Secrets (else it proves nothing)")
}
