package integration

import (
	"context"
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

// TestResyncAgreesWithSweepAfterPreviousCRDs: the previous manager's CRDs are laid
// under a running replica: HTTPProxy stays in v1alpha, and its Connector CRD adds
// v1alpha1 to networking.datumapis.com, which the API server then prefers. The
// replica had already mapped HTTPProxy (its passes read the stranded proxies' anchors
// live before). After it, the replica decides as the sweep does (resyncAcrossCRDs).
func TestResyncAgreesWithSweepAfterPreviousCRDs(t *testing.T) {
	crds, err := testenv.ProjectCRDs()
	if err != nil {
		t.Fatal(err)
	}
	resyncAcrossCRDs(t, "previous-versions", crds, func(ctx context.Context, g Gomega, crdClient client.Client) {
		g.Expect(crdClient.Create(ctx, testenv.PreviousConnectorCRD())).To(Succeed())
		updateProxyCRD(ctx, g, crdClient, func(spec *apiextensionsv1.CustomResourceDefinitionSpec) {
			spec.Names.ShortNames, spec.Names.Categories = nil, nil // the previous manager's names
		})
	})
}

// TestResyncAgreesWithSweepWhenOurCRDReplacesThePrevious follows the runbook's CRD step
// (docs/operations.md, Cut-over, step 5) under a running replica: the plane starts
// with the previous manager's CRDs (its HTTPProxy CRD without this one's short name and
// category, its Connector CRD in v1alpha1, which the API server prefers over v1alpha),
// the replica engages the project and decides its anchors, then this repository's
// HTTPProxy CRD replaces the previous one in place, as `kubectl apply -k config/crd`
// does. Before and after, the replica decides as the sweep does (resyncAcrossCRDs).
func TestResyncAgreesWithSweepWhenOurCRDReplacesThePrevious(t *testing.T) {
	previous, err := testenv.PreviousProjectCRDs()
	if err != nil {
		t.Fatal(err)
	}
	ours, err := testenv.ProjectCRDs()
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(ours, func(c *apiextensionsv1.CustomResourceDefinition) bool { return c.Spec.Names.Kind == "HTTPProxy" })
	resyncAcrossCRDs(t, "previous-crds", previous, func(ctx context.Context, g Gomega, crdClient client.Client) {
		updateProxyCRD(ctx, g, crdClient, func(spec *apiextensionsv1.CustomResourceDefinitionSpec) { *spec = ours[i].Spec })
	})
}

// resyncAcrossCRDs starts a plane of its own with crds (changing a CRD would disturb
// every test sharing a plane), plants the anchors of stranded HTTPProxies (three owners
// gone in one upstream namespace, read by one list; one alone in another, read by a
// GET) and of a live one, and starts a replica in dry-run. Before cutOver changes the
// CRDs under it and after (the group then serves Connector in v1alpha1, preferred, and
// HTTPProxy in v1alpha), the replica's passes decide the stranded anchors collect /
// not-found and the live one's keep, pass after pass, as `manager sweep --once
// --dry-run` decides every anchor of the project, and no pass decides an anchor
// kind-not-served.
func resyncAcrossCRDs(t *testing.T, name string, crds []*apiextensionsv1.CustomResourceDefinition, cutOver func(context.Context, Gomega, client.Client)) {
	needEnvtest(t)
	plane, err := harness.StartControlPlane(name, harness.PlaneOptions{CRDs: crds})
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
	other := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "gw-" + rand.String(6)}}
	g.Expect(plane.Client.Create(ctx, other)).To(Succeed())
	_, err = anchor.EnsureMappedNamespace(ctx, hub.Client, rt.project, other)
	g.Expect(err).NotTo(HaveOccurred())
	var stranded []planted
	for i := range 3 {
		stranded = append(stranded, plant(ctx, g, proxyOwner(rt.ns, fmt.Sprintf("gone-%d", i), uuid.NewUUID()), rt.hubNS(), true))
	}
	stranded = append(stranded, plant(ctx, g, proxyOwner(other, "gone-alone", uuid.NewUUID()), anchor.MappedNamespace(other.UID), true))
	live := rt.createProxy(rt.newProxy("live", gatewayv1.Hostname("live.example.com")))
	control := plant(ctx, g, proxyOwner(rt.ns, live.Name, live.UID), rt.hubNS(), true)
	m := rt.startResync(name, func(o *app.Options) { o.Resync.DryRun = true })
	rt.waitProgrammed(live.Name)

	agree := func(when string) {
		t.Helper()
		mark := len(m.ResyncLog.Reports(rt.project))
		start := time.Now()
		rep := rt.passesUntilReported(m, rt.project, resyncPassesWithin, func(g Gomega, rep resync.PassReport) {
			d := decisionsOf(rep)
			for name, v := range d {
				if strings.HasSuffix(v, "/"+string(resync.ReasonKindNotServed)) {
					// The replica will not recover on its own: fail now, beside the sweep's view.
					reports, _ := sweepDryRun(ctx, g, rt.env)
					StopTrying(fmt.Sprintf("%s: the replica decided anchor %s %s", when, name, v)).
						Attach("replica", d).Attach("sweep", decisionsOf(projectReport(g, reports, rt.project))).Now()
				}
			}
			for _, s := range stranded {
				g.Expect(d).To(HaveKeyWithValue(s.anchor.Name, "collect/not-found"), "%s: stranded %s/%s", when, s.owner.Namespace, s.owner.Name)
			}
			g.Expect(d).To(HaveKeyWithValue(control.anchor.Name, HavePrefix("keep/")), when)
		})
		t.Logf("%s: the replica's passes agree in %s", when, time.Since(start).Round(time.Millisecond))
		reports, table := sweepDryRun(ctx, g, rt.env)
		t.Logf("%s: the sweep:\n%s", when, strings.SplitN(table, "NO PROJECT SECRET", 2)[0])
		swept := projectReport(g, reports, rt.project)
		g.Expect(swept.Plane).To(Equal(resync.PlaneVerified), swept.PlaneDetail)
		replica, sweep := map[string]string{}, map[string]string{}
		for _, a := range rep.Anchors {
			replica[a.Name] = a.Decision.String()
		}
		for _, a := range swept.Anchors {
			sweep[a.Name] = a.Decision.String()
			g.Expect(a.Reason).NotTo(Equal(resync.ReasonKindNotServed), "%s: sweep: anchor %s", when, a.Name)
		}
		g.Expect(replica).To(Equal(sweep), "%s: the replica and the sweep decide every anchor of the project alike", when)
		for _, s := range stranded {
			r, _ := rep.Find(s.anchor.Name)
			w, _ := swept.Find(s.anchor.Name)
			g.Expect([]resync.Reason{r.Reason, w.Reason}).To(HaveEach(resync.ReasonNotFound), "%s: stranded %s/%s", when, s.owner.Namespace, s.owner.Name)
			g.Expect(r.Action).To(Equal(resync.ActionDryRun))
			g.Expect(exists(ctx, g, s.anchor)).To(BeTrue(), "dry-run deletes nothing")
		}
		for _, pr := range m.ResyncLog.Reports(rt.project)[mark:] {
			for _, a := range pr.Anchors {
				g.Expect(a.Reason).NotTo(Equal(resync.ReasonKindNotServed), "%s: replica: anchor %s in the pass at %s", when, a.Name, pr.Start.Format(time.TimeOnly))
			}
		}
	}

	agree("before the cut-over")
	crdClient := previousCRDClient(g, plane)
	cutOver(ctx, g, crdClient)
	dc, err := discovery.NewDiscoveryClientForConfig(plane.Config)
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func(g Gomega) {
		for _, name := range []string{"connectors", "httpproxies"} {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			g.Expect(crdClient.Get(ctx, client.ObjectKey{Name: name + "." + v1alpha.GroupVersion.Group}, crd)).To(Succeed())
			g.Expect(crdEstablished(crd)).To(BeTrue(), "%s established", crd.Name)
			g.Expect(crd.Status.AcceptedNames.ShortNames).To(Equal(crd.Spec.Names.ShortNames), "%s: its names accepted", crd.Name)
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
	agree("after the cut-over")
}

// updateProxyCRD changes the plane's HTTPProxy CRD in place, as `kubectl apply` does.
func updateProxyCRD(ctx context.Context, g Gomega, crdClient client.Client, change func(*apiextensionsv1.CustomResourceDefinitionSpec)) {
	g.Eventually(func() error {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := crdClient.Get(ctx, client.ObjectKey{Name: "httpproxies." + v1alpha.GroupVersion.Group}, crd); err != nil {
			return err
		}
		change(&crd.Spec)
		return crdClient.Update(ctx, crd)
	}, 10*time.Second, resyncPoll).Should(Succeed())
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
