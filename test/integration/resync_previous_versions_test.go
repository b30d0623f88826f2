package integration

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"anchorage/api/v1alpha"
	"anchorage/internal/app"
	"anchorage/internal/harness"
	"anchorage/internal/testenv"
	"anchorage/pkg/anchor"
	"anchorage/pkg/anchor/resync"
)

// TestResyncAgreesWithSweepAfterPreviousCRDs: a cut-over replaces the proxies' CRDs
// under a running replica with the previous manager's: HTTPProxy stays in v1alpha, and
// its Connector CRD adds v1alpha1 to networking.datumapis.com, which the API server then
// prefers. The replica had already mapped HTTPProxy (its passes read a stranded proxy's
// anchor live before the cut-over). After it, stranded HTTPProxy anchors (three owners
// gone in one upstream namespace, read by one list; one alone in another, read by a GET)
// are decided collect / not-found by the replica's passes, pass after pass, as `manager
// sweep --once --dry-run` decides them; the anchor of a live HTTPProxy is kept by both;
// no anchor is ever kind-not-served. The plane is the test's own: v1alpha1 in the group
// would change the preferred version for every test sharing a plane.
func TestResyncAgreesWithSweepAfterPreviousCRDs(t *testing.T) {
	needEnvtest(t)
	crds, err := testenv.ProjectCRDs()
	if err != nil {
		t.Fatal(err)
	}
	plane, err := harness.StartControlPlane("previous-versions", harness.PlaneOptions{CRDs: crds})
	if err != nil {
		t.Fatal(err)
	}
	// Registered first, so it runs last, after the replica and the upstream clean-up.
	t.Cleanup(func() { _ = plane.Stop() })
	rt := newResyncTest(t, plane)
	g, ctx := rt.g, rt.ctx
	proxyOwner := func(ns *corev1.Namespace, name string, uid types.UID) anchor.Owner {
		return anchor.Owner{Project: rt.project, Group: v1alpha.GroupVersion.Group, Kind: "HTTPProxy", Namespace: ns.Name, Name: name, UID: uid}
	}

	// Before the cut-over: the replica maps HTTPProxy (its group's only version) and
	// proves a stranded proxy's absence with a GET.
	early := plant(ctx, g, proxyOwner(rt.ns, "gone-0", uuid.NewUUID()), rt.hubNS(), false)
	m := rt.startResync("versions", func(o *app.Options) { o.Resync.DryRun = true })
	rt.passesUntil(m, rt.project, resyncPassesWithin, func(g Gomega, rep resync.PassReport) {
		g.Expect(decisionsOf(rep)).To(HaveKeyWithValue(early.anchor.Name, "collect/not-found"))
	})

	// The cut-over, under the running replica: the previous manager's Connector CRD in
	// v1alpha1, and its HTTPProxy CRD in place of ours (no short names, no categories).
	crdClient := previousCRDClient(g, plane)
	g.Expect(crdClient.Create(ctx, testenv.PreviousConnectorCRD())).To(Succeed())
	g.Eventually(func() error {
		hp := &apiextensionsv1.CustomResourceDefinition{}
		if err := crdClient.Get(ctx, client.ObjectKey{Name: "httpproxies." + v1alpha.GroupVersion.Group}, hp); err != nil {
			return err
		}
		hp.Spec.Names.ShortNames, hp.Spec.Names.Categories = nil, nil
		return crdClient.Update(ctx, hp)
	}, 10*time.Second, resyncPoll).Should(Succeed())
	dc, err := discovery.NewDiscoveryClientForConfig(plane.Config)
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func(g Gomega) {
		for _, name := range []string{"connectors", "httpproxies"} {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			g.Expect(crdClient.Get(ctx, client.ObjectKey{Name: name + "." + v1alpha.GroupVersion.Group}, crd)).To(Succeed())
			g.Expect(crdEstablished(crd)).To(BeTrue(), "%s established", crd.Name)
			if name == "httpproxies" {
				g.Expect(crd.Status.AcceptedNames.ShortNames).To(BeEmpty(), "the previous manager's names accepted")
			}
		}
		groups, err := dc.ServerGroups()
		g.Expect(err).NotTo(HaveOccurred())
		i := slices.IndexFunc(groups.Groups, func(gr metav1.APIGroup) bool { return gr.Name == v1alpha.GroupVersion.Group })
		g.Expect(i).To(BeNumerically(">=", 0))
		g.Expect(groups.Groups[i].PreferredVersion.Version).To(Equal("v1alpha1"), "the server prefers the kube-like version")
		res, err := dc.ServerResourcesForGroupVersion(v1alpha.GroupVersion.String())
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(slices.ContainsFunc(res.APIResources, func(r metav1.APIResource) bool { return r.Kind == "HTTPProxy" })).To(BeTrue(), "HTTPProxy still served in v1alpha")
	}, 30*time.Second, resyncPoll).Should(Succeed())
	mark := len(m.ResyncLog.Reports(rt.project))

	// Stranded proxies: three in the test's namespace (with the early one, a batched
	// list) and one alone in a second namespace (a GET); a live proxy with its anchor.
	other := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "gw-" + rand.String(6)}}
	g.Expect(plane.Client.Create(ctx, other)).To(Succeed())
	_, err = anchor.EnsureMappedNamespace(ctx, hub.Client, rt.project, other)
	g.Expect(err).NotTo(HaveOccurred())
	stranded := []planted{early}
	for i := 1; i <= 3; i++ {
		stranded = append(stranded, plant(ctx, g, proxyOwner(rt.ns, fmt.Sprintf("gone-%d", i), uuid.NewUUID()), rt.hubNS(), false))
	}
	stranded = append(stranded, plant(ctx, g, proxyOwner(other, "gone-alone", uuid.NewUUID()), anchor.MappedNamespace(other.UID), false))
	live := rt.createProxy(rt.newProxy("live", gatewayv1.Hostname("live.example.com")))
	control := plant(ctx, g, proxyOwner(rt.ns, live.Name, live.UID), rt.hubNS(), false)
	rt.waitProgrammed(live.Name)

	start := time.Now()
	rep := rt.passesUntilReported(m, rt.project, resyncPassesWithin, func(g Gomega, rep resync.PassReport) {
		d := decisionsOf(rep)
		for name, v := range d {
			if strings.HasSuffix(v, "/"+string(resync.ReasonKindNotServed)) {
				// The replica will not recover on its own: fail now, beside the sweep's view.
				reports, _ := sweepDryRun(ctx, g, rt.env)
				StopTrying(fmt.Sprintf("the replica decided anchor %s %s after the cut-over", name, v)).
					Attach("replica", d).Attach("sweep", decisionsOf(projectReport(g, reports, rt.project))).Now()
			}
		}
		for _, s := range stranded {
			g.Expect(d).To(HaveKeyWithValue(s.anchor.Name, "collect/not-found"), "stranded %s/%s", s.owner.Namespace, s.owner.Name)
		}
		g.Expect(d).To(HaveKeyWithValue(control.anchor.Name, HavePrefix("keep/")))
	})
	t.Logf("replica's passes agree after the cut-over in %s", time.Since(start).Round(time.Millisecond))

	reports, table := sweepDryRun(ctx, g, rt.env)
	t.Logf("sweep after the cut-over:\n%s", strings.SplitN(table, "NO PROJECT SECRET", 2)[0])
	swept := projectReport(g, reports, rt.project)
	g.Expect(swept.Plane).To(Equal(resync.PlaneVerified), swept.PlaneDetail)
	replicaDecisions, sweptDecisions := map[string]string{}, map[string]string{}
	for _, a := range rep.Anchors {
		replicaDecisions[a.Name] = a.Decision.String()
	}
	for _, a := range swept.Anchors {
		sweptDecisions[a.Name] = a.Decision.String()
	}
	g.Expect(sweptDecisions).To(Equal(replicaDecisions), "the replica and the sweep decide every anchor of the project alike")
	for _, s := range stranded {
		r, _ := rep.Find(s.anchor.Name)
		w, ok := swept.Find(s.anchor.Name)
		g.Expect(ok).To(BeTrue())
		g.Expect([]resync.Reason{r.Reason, w.Reason}).To(HaveEach(resync.ReasonNotFound), "stranded %s/%s", s.owner.Namespace, s.owner.Name)
		g.Expect([]resync.Decision{r.Decision, w.Decision}).To(HaveEach(resync.Collect))
		g.Expect(r.Action).To(Equal(resync.ActionDryRun))
		g.Expect(exists(ctx, g, s.anchor)).To(BeTrue(), "dry-run deletes nothing")
	}
	r, _ := rep.Find(control.anchor.Name)
	w, _ := swept.Find(control.anchor.Name)
	g.Expect([]resync.Decision{r.Decision, w.Decision}).To(HaveEach(resync.Keep), "the live proxy's anchor")
	for _, a := range swept.Anchors {
		g.Expect(a.Reason).NotTo(Equal(resync.ReasonKindNotServed), "sweep: anchor %s", a.Name)
	}
	after := m.ResyncLog.Reports(rt.project)[mark:]
	for _, pr := range after {
		for _, a := range pr.Anchors {
			g.Expect(a.Reason).NotTo(Equal(resync.ReasonKindNotServed), "replica: anchor %s in the pass at %s", a.Name, pr.Start.Format(time.TimeOnly))
		}
	}
	t.Logf("%d passes after the cut-over, none kind-not-served; replica %v", len(after), decisionsOf(rep))
}

// previousCRDClient is an admin client of plane that reads and writes CRDs.
func previousCRDClient(g Gomega, plane *harness.ControlPlane) client.Client {
	s := runtime.NewScheme()
	g.Expect(apiextensionsv1.AddToScheme(s)).To(Succeed())
	c, err := client.New(plane.Config, client.Options{Scheme: s})
	g.Expect(err).NotTo(HaveOccurred())
	return c
}

// crdEstablished reports whether crd's Established condition is True.
func crdEstablished(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established {
			return c.Status == apiextensionsv1.ConditionTrue
		}
	}
	return false
}

// projectReport is the sweep's report of project.
func projectReport(g Gomega, reports []resync.PassReport, project string) resync.PassReport {
	i := slices.IndexFunc(reports, func(r resync.PassReport) bool { return r.Project == project })
	g.Expect(i).To(BeNumerically(">=", 0), "the sweep reports project %s", project)
	return reports[i]
}
