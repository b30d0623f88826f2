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
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"anchorage/api/v1alpha"
	"anchorage/internal/app"
	"anchorage/internal/cutover"
	"anchorage/internal/harness"
)

// The previous manager's names the cut-over keeps, as the runbook passes them to this
// manager's flags (docs/operations.md, Cut-over from the previous manager).
const (
	cutOverControllerName  = "gateway.networking.datumapis.com/external-global-proxy-controller"
	cutOverDownstreamClass = "previous-edge"
	cutOverIssuer          = "previous-issuer"
)

// TestCutOverFromThePreviousManager lays down what the previous manager leaves for five
// proxies (harness.LayDownPrevious: an endpoint, an https endpoint, a connector, an
// instance, one being deleted; one more in each deletion it may leave half done; a
// stranded EndpointSlice anchor; its Fail-policy webhooks, whose pods are gone), then
// follows the runbook: remove the webhooks, start this manager with the previous
// class, controller name and issuer. Then: the endpoint proxies are Programmed and
// served by the edge (Envoy Gateway's translator) on their hostnames and canonical
// hostname; none of their hub objects is deleted or recreated; the connector and
// instance proxies are Accepted=False/UnsupportedBackend and nothing programmed for
// them is touched; the proxy being deleted and every half-done deletion are finished
// with nothing left on either side, and the stranded anchor collected; the audit logs
// show no delete of a live proxy's object; and every proxy deleted afterwards leaves
// nothing on either side and nothing Terminating. On a plane without a garbage
// collector and on one with it.
func TestCutOverFromThePreviousManager(t *testing.T) {
	for _, pc := range cutOverPlanes {
		t.Run(pc.name, func(t *testing.T) { cutOverFromThePreviousManager(t, pc.plane(t)) })
	}
}

func cutOverFromThePreviousManager(t *testing.T, plane *harness.ControlPlane) {
	gt := newGatewayTest(t, plane)
	g, ctx := gt.g, gt.ctx
	suffix := rand.String(6)
	state, err := harness.LayDownPrevious(ctx, harness.PreviousInput{
		Hub: hub.Client, Plane: gt.plane.Client, Project: gt.project, Namespace: gt.ns, Suffix: suffix,
		GatewayClass: gt.class, ControllerName: cutOverControllerName, DownstreamClass: cutOverDownstreamClass,
		Issuer: cutOverIssuer, ClaimsNamespace: gt.env.ClaimsNamespace(),
	})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		for _, w := range state.Webhooks {
			_ = gt.plane.Client.Delete(context.Background(), w)
		}
	})
	hubNS := state.HubNamespace
	g.Expect(hubNS).To(Equal(gt.hubNS()))
	live := []string{"plain", "secure"}
	left := []string{"tunnel", "vm"}
	before := hubUIDs(state, append(slices.Clone(live), left...))
	leftSpecs := upstreamSpecs(ctx, g, gt, left)
	for key, uid := range before {
		g.Expect(uid).NotTo(BeEmpty(), "laid down: %s", key)
	}
	g.Expect(len(before)).To(BeNumerically(">=", 30), "every hub object of the live proxies is watched")

	// Runbook step 3: the check, read only, blocks on the previous manager's webhooks
	// and lists what will be changed, adopted and left.
	checkOpts := cutover.Options{GatewayClass: gt.class, IssuerName: cutOverIssuer, DownstreamGatewayClass: cutOverDownstreamClass}
	planes := map[string]client.Client{gt.project: gt.plane.Client}
	rows, err := cutover.Check(ctx, hub.Client, planes, checkOpts)
	g.Expect(err).NotTo(HaveOccurred())
	mine := rowsOf(rows, gt.ns.Name, hubNS, suffix)
	for _, w := range state.Webhooks {
		g.Expect(mine).To(ContainElement(And(HaveField("Verdict", cutover.Blocked), HaveField("Name", w.GetName()))), "the check blocks on webhook configuration %s", w.GetName())
	}
	for _, name := range left {
		g.Expect(mine).To(ContainElement(And(HaveField("Verdict", cutover.Left), HaveField("Name", name))), "the check leaves %s", name)
	}
	g.Expect(mine).To(ContainElement(And(HaveField("Verdict", cutover.Adopted), HaveField("Name", "plain-0-0"))), "the check adopts plain's EndpointSlice")
	g.Expect(mine).To(ContainElement(HaveField("Verdict", cutover.Changed)), "the check lists what is changed (http-hostname listeners, slice backendRefs)")
	g.Expect(hubUIDs(state, append(slices.Clone(live), left...))).To(Equal(before), "the check writes nothing")

	// Step 4: the previous manager's webhooks go before this manager starts; the check
	// then blocks on nothing of this project.
	for _, w := range state.Webhooks {
		g.Expect(gt.plane.Client.Delete(ctx, w)).To(Succeed())
	}
	rows, err = cutover.Check(ctx, hub.Client, planes, checkOpts)
	g.Expect(err).NotTo(HaveOccurred())
	for _, r := range rowsOf(rows, gt.ns.Name, hubNS, suffix) {
		g.Expect(r.Verdict).NotTo(Equal(cutover.Blocked), "blocked after the webhooks went: %+v", r)
	}

	edge, err := harness.NewEdge(hub.Client, cutOverDownstreamClass)
	g.Expect(err).NotTo(HaveOccurred())
	edgeCtx, stopEdge := context.WithCancel(ctx)
	edgeDone := make(chan struct{})
	go func() { defer close(edgeDone); edge.Serve(edgeCtx, harness.Namespaces(hubNS), 250*time.Millisecond) }()
	t.Cleanup(func() { stopEdge(); <-edgeDone })

	m := gt.startManager("cutover", edgeReportsStatus, previousNames)

	// 1. The endpoint proxies are programmed by this manager (its own Accepted message,
	// its route naming its Services) and stay so.
	for _, name := range live {
		p := waitAcceptedByUs(gt, name)
		g.Expect(p.Status.CanonicalHostname).To(Equal(state.Proxies[name].CanonicalHostname), "%s: the previous manager's status fields stay", name)
		g.Expect(p.Status.HostnameStatuses).NotTo(BeEmpty(), "%s: hostnameStatuses stay", name)
	}

	// 2. The edge serves them on their hostnames and on their canonical hostname.
	g.Eventually(func(g Gomega) {
		v, err := edge.Translate(ctx, hubNS)
		g.Expect(err).NotTo(HaveOccurred())
		routeConfigs, err := harness.Resources[harness.EnvoyRouteConfig](v, harness.XDSRoutes)
		g.Expect(err).NotTo(HaveOccurred())
		for _, name := range live {
			g.Expect(harness.VirtualHostsFor(routeConfigs, state.Proxies[name].CanonicalHostname)).To(BeNumerically(">=", 2),
				"%s: virtual hosts for the canonical hostname on HTTP and HTTPS", name)
		}
	}, gwProgrammedWithin, time.Second).Should(Succeed())
	v, err := edge.Translate(ctx, hubNS)
	g.Expect(err).NotTo(HaveOccurred())
	for _, name := range live {
		p := &v1alpha.HTTPProxy{}
		g.Expect(gt.plane.Client.Get(ctx, client.ObjectKey{Namespace: gt.ns.Name, Name: name}, p)).To(Succeed())
		t.Run("served/"+name, func(t *testing.T) { expectServed(t, v, hubNS, p) })
	}

	// 3. The connector and instance proxies are refused, and what was programmed for
	// them is left as it is, upstream and on the hub.
	for _, name := range left {
		g.Eventually(func(g Gomega) {
			p := &v1alpha.HTTPProxy{}
			g.Expect(gt.plane.Client.Get(ctx, client.ObjectKey{Namespace: gt.ns.Name, Name: name}, p)).To(Succeed())
			c := meta.FindStatusCondition(p.Status.Conditions, v1alpha.ConditionAccepted)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(v1alpha.ReasonUnsupportedBackend), c.Message)
		}, gwProgrammedWithin, gwPoll).Should(Succeed())
	}
	g.Expect(upstreamSpecs(ctx, g, gt, left)).To(Equal(leftSpecs), "the unsupported proxies' upstream objects are untouched")

	// 4. The proxy being deleted and every deletion the previous manager left half done
	// are finished on both sides, and the stranded anchor (with its hub slice) is
	// collected.
	g.Eventually(func(g Gomega) []string { return halfDoneLeft(ctx, g, gt, state.Proxies["leaving"]) }, gwProgrammedWithin, gwPoll).Should(BeEmpty())
	expectHalfDoneFinished(t, gt, state)
	g.Eventually(func(g Gomega) {
		g.Expect(gone(ctx, hub.Client, state.StrandedAnchor)).To(BeTrue(), "the stranded anchor is collected")
		g.Expect(gone(ctx, hub.Client, state.StrandedSlice)).To(BeTrue(), "and its hub slice with it")
	}, gwProgrammedWithin, gwPoll).Should(Succeed())

	// 5. No live hub object was deleted or recreated, and the audit logs show no delete
	// of one by the manager, on the hub or the plane.
	g.Expect(hubUIDs(state, append(slices.Clone(live), left...))).To(Equal(before), "every live proxy's hub objects keep their UIDs")
	expectNoDeleteOfLive(g, m, gt, state, append(slices.Clone(live), left...))
	for _, name := range live {
		waitAcceptedByUs(gt, name)
	}
	expectNotReissued(ctx, g, gt.plane.Client, hubNS, state, live)

	// 6. Every proxy deleted now leaves nothing on either side, and nothing Terminating.
	for _, name := range append(slices.Clone(live), left...) {
		p := &v1alpha.HTTPProxy{}
		g.Expect(gt.plane.Client.Get(ctx, client.ObjectKey{Namespace: gt.ns.Name, Name: name}, p)).To(Succeed())
		g.Expect(gt.plane.Client.Delete(ctx, p)).To(Succeed())
	}
	g.Eventually(func(g Gomega) {
		for _, name := range append(slices.Clone(live), left...) {
			for _, obj := range upstreamObjects(state.Proxies[name]) {
				g.Expect(gone(ctx, gt.plane.Client, obj)).To(BeTrue(), "%s: upstream %T %s is gone", name, obj, obj.GetName())
			}
			for _, obj := range state.HubObjectsOf(name) {
				if isTenantInstanceSlice(obj) {
					continue // the tenant network's own slice, never the previous manager's
				}
				g.Expect(gone(ctx, hub.Client, obj)).To(BeTrue(), "%s: hub %T %s/%s is gone", name, obj, obj.GetNamespace(), obj.GetName())
			}
		}
		anchors := &corev1.ConfigMapList{}
		g.Expect(hub.Client.List(ctx, anchors, client.InNamespace(hubNS))).To(Succeed())
		for _, cm := range anchors.Items {
			g.Expect(cm.Name).To(Equal("kube-root-ca.crt"), "no anchor or other ConfigMap is left in %s", hubNS)
		}
		claims := &corev1.ConfigMapList{}
		g.Expect(hub.Client.List(ctx, claims, client.InNamespace(gt.env.ClaimsNamespace()))).To(Succeed())
		for _, c := range claims.Items {
			g.Expect(c.Labels["meta.datumapis.com/upstream-namespace"]).NotTo(Equal(gt.ns.Name), "hostname claim %s is released", c.Name)
		}
	}, gwProgrammedWithin, gwPoll).Should(Succeed())
}

// previousNames configures a replica with the previous manager's names, as the runbook
// passes them (steps 2 and 7), and a resync fast enough to collect within a test.
func previousNames(o *app.Options) {
	o.Gateway.ControllerName = cutOverControllerName
	o.Gateway.DownstreamGatewayClassName = cutOverDownstreamClass
	o.Gateway.CertificateIssuer.Name = cutOverIssuer
	o.Gateway.Platform.TargetDomain = harness.PreviousTargetDomain // the previous manager's gateway.targetDomain, mapped
	o.Resync.Period, o.Resync.InitialJitter, o.Resync.ConfirmAfter, o.Resync.MinAge = 2*time.Second, time.Millisecond, time.Second, time.Millisecond
}

// rowsOf returns the check's rows about this test's objects: in its upstream or hub
// namespace, or named with its suffix (the webhook configurations).
func rowsOf(rows []cutover.Row, ns, hubNS, suffix string) []cutover.Row {
	var out []cutover.Row
	for _, r := range rows {
		if r.Namespace == ns || r.Namespace == hubNS || strings.HasSuffix(r.Name, suffix) {
			out = append(out, r)
		}
	}
	return out
}

// waitAcceptedByUs waits until this manager (not the previous one, whose status the
// proxy still carries) has accepted and programmed proxy name for its generation.
func waitAcceptedByUs(gt *gatewayTest, name string) *v1alpha.HTTPProxy {
	gt.t.Helper()
	p := &v1alpha.HTTPProxy{}
	gt.g.Eventually(func(g Gomega) {
		g.Expect(gt.plane.Client.Get(gt.ctx, client.ObjectKey{Namespace: gt.ns.Name, Name: name}, p)).To(Succeed())
		a := meta.FindStatusCondition(p.Status.Conditions, v1alpha.ConditionAccepted)
		g.Expect(a).NotTo(BeNil())
		g.Expect(a.Message).To(Equal("The proxy is valid"), "%s: accepted by this manager", name)
		c := meta.FindStatusCondition(p.Status.Conditions, v1alpha.ConditionProgrammed)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue), "%s Programmed: %s %s", name, c.Reason, c.Message)
		g.Expect(c.ObservedGeneration).To(Equal(p.Generation))
		route := &gatewayv1.HTTPRoute{}
		g.Expect(gt.plane.Client.Get(gt.ctx, client.ObjectKey{Namespace: gt.ns.Name, Name: name}, route)).To(Succeed())
		for _, r := range route.Spec.Rules {
			for _, b := range r.BackendRefs {
				g.Expect(string(*b.Kind)).To(Equal("Service"), "%s: the route names this manager's Services", name)
			}
		}
	}, gwProgrammedWithin, gwPoll).Should(Succeed())
	return p
}

// hubUIDs maps every hub object laid down for the named proxies to its UID now ("" for
// one that is gone).
// expectNotReissued checks, with cert-manager running against the hub the whole time,
// that no Certificate the previous manager ordered for the named proxies was ordered
// again: each still at the revision it was issued at, and no CertificateRequest for it.
// And their Gateways keep the previous manager's canonical name (status.addresses, as
// it wrote them) and listener names.
func expectNotReissued(ctx context.Context, g *WithT, plane client.Client, hubNS string, state *harness.PreviousState, names []string) {
	requests := &unstructured.UnstructuredList{}
	requests.SetAPIVersion("cert-manager.io/v1")
	requests.SetKind("CertificateRequestList")
	g.Expect(hub.Client.List(ctx, requests, client.InNamespace(hubNS))).To(Succeed())
	for _, name := range names {
		for _, obj := range state.HubObjectsOf(name) {
			if obj.GetObjectKind().GroupVersionKind().Kind != "Certificate" {
				continue
			}
			cert := obj.DeepCopyObject().(*unstructured.Unstructured)
			g.Expect(hub.Client.Get(ctx, client.ObjectKeyFromObject(obj), cert)).To(Succeed())
			rev, _, _ := unstructured.NestedInt64(cert.Object, "status", "revision")
			g.Expect(rev).To(Equal(int64(1)), "%s: Certificate %s issued again", name, cert.GetName())
			for _, r := range requests.Items {
				g.Expect(r.GetAnnotations()["cert-manager.io/certificate-name"]).NotTo(Equal(cert.GetName()), "%s: a CertificateRequest for %s", name, cert.GetName())
			}
		}
		p := state.Proxies[name]
		gw := &gatewayv1.Gateway{}
		g.Expect(hub.Client.Get(ctx, client.ObjectKey{Namespace: hubNS, Name: p.Gateway.Name}, gw)).To(Succeed())
		var listeners []gatewayv1.SectionName
		for _, l := range gw.Spec.Listeners {
			listeners = append(listeners, l.Name)
		}
		for _, l := range p.Gateway.Spec.Listeners {
			g.Expect(listeners).To(ContainElement(l.Name), "%s: listener %s kept", name, l.Name)
		}
		up := &gatewayv1.Gateway{}
		g.Expect(plane.Get(ctx, client.ObjectKeyFromObject(p.Gateway), up)).To(Succeed())
		g.Expect(up.Status.Addresses).To(Equal(p.Gateway.Status.Addresses), "%s: the Gateway's addresses as the previous manager wrote them", name)
	}
}

func hubUIDs(state *harness.PreviousState, names []string) map[string]types.UID {
	out := map[string]types.UID{}
	for _, name := range names {
		for _, obj := range state.HubObjectsOf(name) {
			got := obj.DeepCopyObject().(client.Object)
			key := fmt.Sprintf("%T %s/%s", obj, obj.GetNamespace(), obj.GetName())
			if err := hub.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), got); err != nil {
				out[key] = ""
				continue
			}
			out[key] = got.GetUID()
		}
	}
	return out
}

// upstreamSpecs returns, per named proxy, the specs, owners, labels and finalizers of
// its upstream Gateway, HTTPRoute and EndpointSlices as the plane holds them now.
func upstreamSpecs(ctx context.Context, g *WithT, gt *gatewayTest, names []string) map[string]any {
	out := map[string]any{}
	for _, name := range names {
		gw := &gatewayv1.Gateway{}
		g.Expect(gt.plane.Client.Get(ctx, client.ObjectKey{Namespace: gt.ns.Name, Name: name}, gw)).To(Succeed())
		route := &gatewayv1.HTTPRoute{}
		g.Expect(gt.plane.Client.Get(ctx, client.ObjectKey{Namespace: gt.ns.Name, Name: name}, route)).To(Succeed())
		out[name+"/gateway"] = []any{gw.Spec, gw.Finalizers, gw.OwnerReferences, gw.Labels}
		out[name+"/route"] = []any{route.Spec, route.Finalizers, route.OwnerReferences, route.Labels}
		slices := &discoveryv1.EndpointSliceList{}
		g.Expect(gt.plane.Client.List(ctx, slices, client.InNamespace(gt.ns.Name))).To(Succeed())
		for _, s := range slices.Items {
			if metav1.IsControlledBy(&s, gw) || s.Name == name+"-0-0" {
				out[name+"/slice/"+s.Name] = []any{s.Endpoints, s.Ports, s.Finalizers, s.OwnerReferences, s.Labels}
			}
		}
	}
	return out
}

// upstreamObjects are the upstream objects laid down for p.
func upstreamObjects(p *harness.PreviousProxy) []client.Object {
	out := []client.Object{p.Proxy, p.Gateway, p.HTTPRoute}
	for _, s := range p.EndpointSlices {
		if !isTenantInstanceSlice(s) {
			out = append(out, s)
		}
	}
	return out
}

// isTenantInstanceSlice reports whether obj is the tenant network's EndpointSlice an
// instance backend names: published by the network, not by either manager.
func isTenantInstanceSlice(obj client.Object) bool {
	_, ok := obj.GetLabels()[harness.PreviousTenantIDLabel]
	return ok
}

// cutOverHubResources are the hub resources the previous manager left objects of.
var cutOverHubResources = []string{"namespaces", "configmaps", "secrets", "gateways", "httproutes", "certificates",
	"services", "endpointslices", "backendtlspolicies", "httpproxies"}
