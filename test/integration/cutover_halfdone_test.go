package integration

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"anchorage/api/v1alpha"
	"anchorage/internal/harness"
	"anchorage/internal/testenv"
	"anchorage/pkg/anchor"
)

// cutOverPlanes are the planes a cut-over is tried on: one that runs no garbage
// collector (the shared planeA), and one that does (planeWithGC).
var cutOverPlanes = []struct {
	name  string
	plane func(t *testing.T) *harness.ControlPlane
}{
	{"without-gc", func(*testing.T) *harness.ControlPlane { return planeA }},
	{"with-gc", planeWithGC},
}

// gcPlane is planeWithGC's plane, started once.
var gcPlane struct {
	once  sync.Once
	plane *harness.ControlPlane
	err   error
}

// planeWithGC is a project plane running kube-controller-manager's garbage collector,
// started the first time a test asks for it (few tests need one) and stopped with the
// suite (stopPlaneWithGC).
func planeWithGC(t *testing.T) *harness.ControlPlane {
	t.Helper()
	needEnvtest(t)
	gcPlane.once.Do(func() {
		crds, err := testenv.ProjectCRDs()
		if err == nil {
			gcPlane.plane, err = harness.StartControlPlane("project-gc", harness.PlaneOptions{CRDs: crds, AuditGuardReads: true, GarbageCollector: true})
		}
		gcPlane.err = err
	})
	if gcPlane.err != nil {
		t.Fatal(gcPlane.err)
	}
	return gcPlane.plane
}

// stopPlaneWithGC stops planeWithGC's plane if a test started it.
func stopPlaneWithGC() {
	if gcPlane.plane != nil {
		_ = gcPlane.plane.Stop()
	}
}

// TestCutOverFinishesHalfDoneDeletions: for every deletion the previous manager may
// leave half done (harness.PreviousHalfDone: each non-empty subset of each kind's
// finalizers on an object of that kind being deleted, every child at once as a
// garbage collector leaves them, and a connector proxy), on a plane without a garbage
// collector and on one with it, this manager finishes the deletion with nothing left:
// the proxy and every upstream object of it (its backend EndpointSlices included) gone
// from the plane, every anchor and hub object of it gone from the hub. Meanwhile
// nothing of another proxy changes: the project's live proxies keep their hub objects
// (the connector and instance proxies, left alone, also their resourceVersions), a
// second project's hub objects keep their UID and resourceVersion, and the audit logs
// show the manager deleting nothing of a live proxy on either side and writing nothing
// of a proxy it leaves alone on the hub.
func TestCutOverFinishesHalfDoneDeletions(t *testing.T) {
	for _, pc := range cutOverPlanes {
		t.Run(pc.name, func(t *testing.T) { finishesHalfDoneDeletions(t, pc.plane(t)) })
	}
}

func finishesHalfDoneDeletions(t *testing.T, plane *harness.ControlPlane) {
	gt := newGatewayTest(t, plane)
	bystander := gt.another(planeB)
	g, ctx := gt.g, gt.ctx
	state, err := harness.LayDownPrevious(ctx, harness.PreviousInput{
		Hub: hub.Client, Plane: gt.plane.Client, Project: gt.project, Namespace: gt.ns, Suffix: rand.String(6),
		GatewayClass: gt.class, ControllerName: cutOverControllerName, DownstreamClass: cutOverDownstreamClass,
		Issuer: cutOverIssuer, ClaimsNamespace: gt.env.ClaimsNamespace(),
	})
	g.Expect(err).NotTo(HaveOccurred())
	for _, w := range state.Webhooks {
		g.Expect(gt.plane.Client.Delete(ctx, w)).To(Succeed())
	}
	live, left := []string{"plain", "secure"}, []string{"tunnel", "vm"}
	uids := hubUIDs(state, append(slices.Clone(live), left...))
	leftHub := hubVersions(ctx, state, left)
	leftUpstream := upstreamSpecs(ctx, g, gt, left)

	m := gt.startManager("halfdone", previousNames)
	bystander.createProxy(bystander.newProxy("web", gatewayv1.Hostname("web-"+bystander.project+".example.com")))
	bystander.waitProgrammed("web")
	bystanderHub := hubState(ctx, g, bystander.hubNS())

	expectHalfDoneFinished(t, gt, state)

	for _, name := range live {
		waitAcceptedByUs(gt, name)
	}
	g.Expect(hubUIDs(state, append(slices.Clone(live), left...))).To(Equal(uids), "every live proxy's hub objects keep their UIDs")
	g.Expect(hubVersions(ctx, state, left)).To(Equal(leftHub), "the connector and instance proxies' hub objects are untouched (UID/resourceVersion)")
	g.Expect(upstreamSpecs(ctx, g, gt, left)).To(Equal(leftUpstream), "the connector and instance proxies' upstream objects are untouched")
	g.Expect(hubState(ctx, g, bystander.hubNS())).To(Equal(bystanderHub), "the second project's hub objects (UID/resourceVersion)")
	expectNoDeleteOfLive(g, m, gt, state, append(live, left...))
	for _, ev := range hubWritesBy(g, m.User, []string{"create", "update", "patch", "delete", "deletecollection"}, cutOverHubResources, "") {
		g.Expect(slices.ContainsFunc(left, func(name string) bool {
			return slices.ContainsFunc(state.HubObjectsOf(name), func(o client.Object) bool {
				return o.GetNamespace() == ev.ObjectRef.Namespace && o.GetName() == ev.ObjectRef.Name
			})
		})).To(BeFalse(), "the manager wrote a hub object of a proxy it leaves alone: %s %+v", ev.Verb, ev.ObjectRef)
	}
}

// expectHalfDoneFinished waits, one subtest per half-done deletion of state, until
// nothing of it is left (halfDoneLeft).
func expectHalfDoneFinished(t *testing.T, gt *gatewayTest, state *harness.PreviousState) {
	t.Helper()
	for _, h := range state.HalfDone {
		t.Run(h.Proxy, func(t *testing.T) {
			t.Log(h)
			NewWithT(t).Eventually(func(g Gomega) []string {
				return halfDoneLeft(gt.ctx, g, gt, state.Proxies[h.Proxy])
			}, gwProgrammedWithin, gwPoll).Should(BeEmpty(), "%s: %s", h.Proxy, h)
		})
	}
}

// halfDoneLeft lists what is left of p, read live: on the plane, every object of the
// kinds either manager writes named after the proxy (its Gateway and HTTPRoute, its
// backend slices <proxy>-<rule>-<backend>, this manager's Services and slices
// <proxy>-backend-<rule>); on the hub, every object laid down for it and every anchor
// labelled for one of its upstream objects (one this manager might have made anew).
func halfDoneLeft(ctx context.Context, g Gomega, gt *gatewayTest, p *harness.PreviousProxy) []string {
	var out []string
	mine := func(name string) bool { return name == p.Name || strings.HasPrefix(name, p.Name+"-") }
	for _, list := range []client.ObjectList{&v1alpha.HTTPProxyList{}, &gatewayv1.GatewayList{}, &gatewayv1.HTTPRouteList{},
		&corev1.ServiceList{}, &discoveryv1.EndpointSliceList{}} {
		g.Expect(gt.plane.Client.List(ctx, list, client.InNamespace(gt.ns.Name))).To(Succeed())
		g.Expect(meta.EachListItem(list, func(o runtime.Object) error {
			if obj := o.(client.Object); mine(obj.GetName()) {
				out = append(out, fmt.Sprintf("plane %T %s (finalizers %v, deleting %v)", obj, obj.GetName(), obj.GetFinalizers(), obj.GetDeletionTimestamp() != nil))
			}
			return nil
		})).To(Succeed())
	}
	for _, obj := range p.Hub {
		if !gone(ctx, hub.Client, obj.DeepCopyObject().(client.Object)) {
			out = append(out, fmt.Sprintf("hub %T %s/%s", obj, obj.GetNamespace(), obj.GetName()))
		}
	}
	anchors := &corev1.ConfigMapList{}
	g.Expect(hub.Client.List(ctx, anchors, client.InNamespace(gt.hubNS()), client.HasLabels{anchor.LabelName})).To(Succeed())
	for _, a := range anchors.Items {
		if mine(a.Labels[anchor.LabelName]) && a.Labels[anchor.LabelNamespace] == gt.ns.Name {
			out = append(out, fmt.Sprintf("hub anchor %s of %s %s", a.Name, a.Labels[anchor.LabelKind], a.Labels[anchor.LabelName]))
		}
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// hubVersions maps every hub object laid down for the named proxies to its UID and
// resourceVersion now ("" for one that is gone); for the Certificates and their Secrets
// only the UID, as cert-manager, running against the hub, writes them when it will.
func hubVersions(ctx context.Context, state *harness.PreviousState, names []string) map[string]string {
	out := map[string]string{}
	for _, name := range names {
		for _, obj := range state.HubObjectsOf(name) {
			got := obj.DeepCopyObject().(client.Object)
			key := fmt.Sprintf("%T %s/%s", obj, obj.GetNamespace(), obj.GetName())
			switch {
			case gone(ctx, hub.Client, got):
				out[key] = ""
			case isCertManagers(got):
				out[key] = string(got.GetUID())
			default:
				out[key] = string(got.GetUID()) + "/" + got.GetResourceVersion()
			}
		}
	}
	return out
}

// isCertManagers reports whether obj is a Certificate or a Secret, which cert-manager writes.
func isCertManagers(obj client.Object) bool {
	if _, ok := obj.(*corev1.Secret); ok {
		return true
	}
	return obj.GetObjectKind().GroupVersionKind().Kind == "Certificate"
}

// expectNoDeleteOfLive checks the audit logs: m deleted no hub object laid down for the
// named (live) proxies, and on the plane deleted only what belongs to a proxy being
// deleted (a half-done deletion, or leaving).
func expectNoDeleteOfLive(g Gomega, m *harness.Manager, gt *gatewayTest, state *harness.PreviousState, live []string) {
	liveHub := map[string]bool{}
	for _, name := range live {
		for _, obj := range state.HubObjectsOf(name) {
			liveHub[obj.GetNamespace()+"/"+obj.GetName()] = true
		}
	}
	for _, ev := range hubWritesBy(g, m.User, []string{"delete", "deletecollection"}, cutOverHubResources, "") {
		g.Expect(liveHub[ev.ObjectRef.Namespace+"/"+ev.ObjectRef.Name]).To(BeFalse(), "the manager deleted a live hub object: %+v", ev.ObjectRef)
	}
	leaving := []string{"leaving"}
	for _, h := range state.HalfDone {
		leaving = append(leaving, h.Proxy)
	}
	events, err := gt.plane.AuditEvents()
	g.Expect(err).NotTo(HaveOccurred())
	for _, ev := range events {
		if ev.User.Username != m.User || ev.ObjectRef.Namespace != gt.ns.Name || (ev.Verb != "delete" && ev.Verb != "deletecollection") {
			continue
		}
		g.Expect(slices.ContainsFunc(leaving, func(p string) bool {
			return ev.ObjectRef.Name == p || strings.HasPrefix(ev.ObjectRef.Name, p+"-")
		})).To(BeTrue(), "the manager deleted an upstream object of no proxy being deleted: %+v", ev.ObjectRef)
	}
}
