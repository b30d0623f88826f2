package integration

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sort"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	"anchorage/internal/harness"
	"anchorage/internal/testenv"
	"anchorage/pkg/gateway"
)

// One hub (with its garbage collector) and two project planes, shared by the tests in
// this package; each test works in its own namespaces and project names.
var (
	hub                    *harness.ControlPlane
	planeA, planeB, planeC *harness.ControlPlane
	// issuerCA signs every Certificate ordered from the default issuer
	// (gateway.DefaultConfig().CertificateIssuer), through cert-manager.
	issuerCA *harness.CA
)

func TestMain(m *testing.M) {
	os.Exit(runSuite(m))
}

func runSuite(m *testing.M) int {
	flag.Parse()
	// Managers log through their own loggers (ANCHORAGE_TEST_LOG); keep the global
	// controller-runtime logger quiet instead of printing its "never set" stack.
	ctrllog.SetLogger(harness.LoggerFromEnv())
	klog.SetLogger(harness.LoggerFromEnv())
	if testing.Short() {
		return m.Run()
	}
	hubCRDs, err := testenv.HubCRDs()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	projectCRDs, err := testenv.ProjectCRDs()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if hub, err = harness.StartControlPlane("hub", harness.PlaneOptions{CRDs: hubCRDs, GarbageCollector: true}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer hub.Stop()
	stopCertManager, err := startCertManager()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var code int
	defer func() { stopCertManager(code != 0) }()
	if planeA, err = harness.StartControlPlane("project-a", harness.PlaneOptions{CRDs: projectCRDs, AuditGuardReads: true}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer planeA.Stop()
	if planeB, err = harness.StartControlPlane("project-b", harness.PlaneOptions{CRDs: projectCRDs, AuditGuardReads: true}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer planeB.Stop()
	if planeC, err = harness.StartControlPlane("project-c", harness.PlaneOptions{CRDs: projectCRDs, AuditGuardReads: true}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer planeC.Stop()
	defer stopPlaneWithGC()
	code = m.Run()
	return code
}

// startCertManager runs cert-manager's controller against the hub for the whole suite,
// with a CA ClusterIssuer of every name the tests' managers order from: it writes the
// TLS Secrets the edge serves (no stand-in writes them). The returned func stops it,
// printing its log's end when the suite failed.
func startCertManager() (func(failed bool), error) {
	session, err := harness.NewSession("integration", nil)
	if err != nil {
		return nil, err
	}
	err = session.Run(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cm := harness.StartCertManager(ctx, session, hub.Config, harness.CertManagerOptions{})
		for _, issuer := range []string{gateway.DefaultConfig().CertificateIssuer.Name, cutOverIssuer} {
			ca, err := harness.CreateCAClusterIssuer(ctx, hub.Client, issuer, cm.ClusterResourceNamespace)
			if err != nil {
				session.Fatal(err)
			}
			if issuer == gateway.DefaultConfig().CertificateIssuer.Name {
				issuerCA = ca
			}
		}
	})
	if err != nil {
		session.Close(true)
		return nil, fmt.Errorf("starting cert-manager: %w", err)
	}
	return session.Close, nil
}

func needEnvtest(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs API servers")
	}
}

// newEnv gives a test its own provider namespace on the shared hub.
func newEnv(t *testing.T) *harness.Env {
	t.Helper()
	ctx := context.Background()
	e, err := harness.NewEnv(ctx, hub)
	if err != nil {
		t.Fatal(err)
	}
	e.ProviderNamespace = "t-" + rand.String(6)
	if err := hub.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.ProviderNamespace}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e
}

func discovered(m *harness.Manager) []string {
	var out []string
	for _, n := range m.Replica.Provider.ListClusters() {
		out = append(out, string(n))
	}
	sort.Strings(out)
	return out
}

func TestManagersDiscoverAndForgetProjects(t *testing.T) {
	needEnvtest(t)
	g := NewWithT(t)
	ctx := context.Background()
	e := newEnv(t)
	_, err := e.AddProject(ctx, "alpha", planeA)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = e.AddProject(ctx, "beta", planeB)
	g.Expect(err).NotTo(HaveOccurred())

	var managers []*harness.Manager
	for i := range 3 {
		m := e.StartManagerT(t, fmt.Sprintf("m%d", i), harness.ManagerOptions{})
		managers = append(managers, m)
	}
	for _, m := range managers {
		g.Eventually(func() []string { return discovered(m) }, 30*time.Second, 100*time.Millisecond).
			Should(Equal([]string{"alpha", "beta"}), "manager %s", m.Name)
	}

	g.Expect(e.RemoveProject(ctx, "beta")).To(Succeed())
	for _, m := range managers {
		g.Eventually(func() []string { return discovered(m) }, 30*time.Second, 100*time.Millisecond).
			Should(Equal([]string{"alpha"}), "manager %s", m.Name)
		_, err := m.Replica.Provider.Get(ctx, multicluster.ClusterName("beta"))
		g.Expect(err).To(MatchError(multicluster.ErrClusterNotFound))
	}
}

func TestTCPProxyCutsAndRestoresAProject(t *testing.T) {
	needEnvtest(t)
	g := NewWithT(t)
	ctx := context.Background()
	e := newEnv(t)
	p, err := e.AddProject(ctx, "cut-"+rand.String(4), planeA)
	g.Expect(err).NotTo(HaveOccurred())

	cfg, _, err := planeA.User("proxy-reader", "system:masters")
	g.Expect(err).NotTo(HaveOccurred())
	kc, err := harness.KubeconfigVia(cfg, p.Proxy.Addr())
	g.Expect(err).NotTo(HaveOccurred())
	viaProxy, err := harness.ClientFromKubeconfig(kc, 2*time.Second)
	g.Expect(err).NotTo(HaveOccurred())

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cut-" + rand.String(5), Namespace: "default"}, Data: map[string]string{"k": "v"}}
	g.Expect(viaProxy.Create(ctx, cm)).To(Succeed())

	for _, mode := range []harness.CutMode{harness.Refuse, harness.BlackHole} {
		p.Proxy.Cut(mode)
		err := viaProxy.Get(ctx, client.ObjectKeyFromObject(cm), &corev1.ConfigMap{})
		g.Expect(err).To(HaveOccurred(), "mode %d: the API must be unreachable while cut", mode)
		g.Expect(apierrors.IsNotFound(err)).To(BeFalse())

		p.Proxy.Restore()
		var got corev1.ConfigMap
		g.Eventually(func() error { return viaProxy.Get(ctx, client.ObjectKeyFromObject(cm), &got) }, 10*time.Second, 100*time.Millisecond).Should(Succeed())
		g.Expect(got.UID).To(Equal(cm.UID), "the same object, not a new server")
	}
}

func TestHubGarbageCollectorCascades(t *testing.T) {
	needEnvtest(t)
	g := NewWithT(t)
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "gc-" + rand.String(6)}}
	g.Expect(hub.Client.Create(ctx, ns)).To(Succeed())

	owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner", Namespace: ns.Name}}
	g.Expect(hub.Client.Create(ctx, owner)).To(Succeed())
	dependent := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name: "dependent", Namespace: ns.Name,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID}},
	}}
	g.Expect(hub.Client.Create(ctx, dependent)).To(Succeed())
	bystander := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "bystander", Namespace: ns.Name}}
	g.Expect(hub.Client.Create(ctx, bystander)).To(Succeed())

	g.Expect(hub.Client.Delete(ctx, owner, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(hub.Client.Get(ctx, client.ObjectKeyFromObject(dependent), &corev1.ConfigMap{}))
	}, 30*time.Second, 100*time.Millisecond).Should(BeTrue(), "the garbage collector removes the dependent")
	g.Expect(hub.Client.Get(ctx, client.ObjectKeyFromObject(bystander), &corev1.ConfigMap{})).To(Succeed())
}

func TestAuditLogAttributesWritesToTheManager(t *testing.T) {
	needEnvtest(t)
	g := NewWithT(t)
	e := newEnv(t)
	m1 := e.StartManagerT(t, "audit-1", harness.ManagerOptions{})
	m2 := e.StartManagerT(t, "audit-2", harness.ManagerOptions{})

	// Each replica's first write is its member Lease; the hub's own record must name the
	// replica's user, and no other.
	writersOf := func(lease string) []string {
		events, err := hub.AuditEvents()
		g.Expect(err).NotTo(HaveOccurred())
		var writers []string
		for _, ev := range events {
			if ev.ObjectRef.Resource == "leases" && ev.ObjectRef.Namespace == e.ProviderNamespace && ev.ObjectRef.Name == lease &&
				(ev.Verb == "create" || ev.Verb == "update") {
				writers = append(writers, ev.User.Username)
			}
		}
		return writers
	}
	for _, m := range []*harness.Manager{m1, m2} {
		g.Eventually(func() []string { return writersOf("anchorage-member-" + m.Name) }, 20*time.Second, 100*time.Millisecond).
			Should(And(Not(BeEmpty()), HaveEach(m.User)), "writes to %s's member Lease", m.Name)
	}
}

func TestKilledManagerReachesNoAPI(t *testing.T) {
	needEnvtest(t)
	g := NewWithT(t)
	ctx := context.Background()
	e := newEnv(t)
	m, err := e.StartManager(ctx, "killed", harness.ManagerOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	c := m.Replica.Manager.GetLocalManager().GetClient()
	m.Kill()
	err = c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "after-kill", Namespace: e.ProviderNamespace}})
	g.Expect(err).To(MatchError(ContainSubstring(harness.ErrKilled.Error())))
	err = hub.Client.Get(ctx, client.ObjectKey{Name: "after-kill", Namespace: e.ProviderNamespace}, &corev1.ConfigMap{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
}

func TestLeastPrivilegeManagerDiscoversProjects(t *testing.T) {
	needEnvtest(t)
	g := NewWithT(t)
	ctx := context.Background()
	e := newEnv(t)
	project := "lp-" + rand.String(4)
	_, err := e.AddProject(ctx, project, planeB)
	g.Expect(err).NotTo(HaveOccurred())
	m := e.StartManagerT(t, "least-"+rand.String(4), harness.ManagerOptions{Adjust: harness.WithTimings(harness.FastTimings)})
	g.Eventually(func() []string { return discovered(m) }, 30*time.Second, 100*time.Millisecond).Should(HaveLen(1))
	// With only the generated roles it still joins, coordinates, and claims the project.
	g.Eventually(func() map[string]string {
		claimed, _ := e.ClaimedHolders(ctx)
		return claimed
	}, 30*time.Second, 100*time.Millisecond).Should(HaveKeyWithValue(project, m.Replica.Shard.Holder()))

	// The same user may not do what the role does not grant.
	err = m.Replica.Manager.GetLocalManager().GetClient().Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.ProviderNamespace}})
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "got %v", err)
}
