package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"anchorage/api/v1alpha"
	"anchorage/internal/app"
	"anchorage/internal/harness"
	"anchorage/pkg/anchor"
	"anchorage/pkg/gateway"
)

// Bounds of the gateway tests' waits. A project is first claimed about one lease
// duration (FastTimings) after a manager starts; everything after that is quick.
const (
	gwProgrammedWithin = 60 * time.Second
	gwCleanWithin      = 10 * time.Second // the acceptance's "within seconds"
	gwGCWithin         = 30 * time.Second
	gwPoll             = 100 * time.Millisecond
)

// gatewayTest is one test's project: a fresh project name exposed on a shared plane, a
// fresh upstream namespace in it, and a gateway class of its own, so no other test's
// manager ever treats this test's Gateways as its own.
type gatewayTest struct {
	t       *testing.T
	g       *WithT
	ctx     context.Context
	env     *harness.Env
	project string
	plane   *harness.ControlPlane
	class   string
	ns      *corev1.Namespace
}

func newGatewayTest(t *testing.T, plane *harness.ControlPlane) *gatewayTest {
	t.Helper()
	needEnvtest(t)
	gt := &gatewayTest{t: t, g: NewWithT(t), ctx: context.Background(), env: newEnv(t), plane: plane}
	gt.project = "gw-" + rand.String(6)
	gt.class = "anchorage-" + rand.String(6)
	if _, err := gt.env.AddProject(gt.ctx, gt.project, plane); err != nil {
		t.Fatal(err)
	}
	gt.ns = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "gw-" + rand.String(6)}}
	if err := plane.Client.Create(gt.ctx, gt.ns); err != nil {
		t.Fatal(err)
	}
	// Registered first, so it runs last, after every manager has stopped: nothing of
	// this test may be left for a later test's manager on the shared plane.
	t.Cleanup(gt.cleanUpstream)
	return gt
}

// another returns a second project of gt's test, on plane, with a namespace of its own
// and gt's class, cleaned up the same way.
func (gt *gatewayTest) another(plane *harness.ControlPlane) *gatewayTest {
	gt.t.Helper()
	b := &gatewayTest{t: gt.t, g: gt.g, ctx: gt.ctx, env: gt.env, plane: plane, class: gt.class, project: "gw-" + rand.String(6)}
	_, err := gt.env.AddProject(gt.ctx, b.project, plane)
	gt.g.Expect(err).NotTo(HaveOccurred())
	b.ns = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "gw-" + rand.String(6)}}
	gt.g.Expect(plane.Client.Create(gt.ctx, b.ns)).To(Succeed())
	gt.t.Cleanup(b.cleanUpstream)
	return b
}

// startManager starts a replica with fast protocol timings and this test's class,
// under the generated roles on the hub and the planes.
func (gt *gatewayTest) startManager(name string, adjust ...func(*app.Options)) *harness.Manager {
	gt.t.Helper()
	return gt.env.StartManagerT(gt.t, name+"-"+rand.String(4), harness.ManagerOptions{Adjust: func(o *app.Options) {
		harness.WithTimings(harness.FastTimings)(o)
		o.Gateway.GatewayClassName = gt.class
		for _, a := range adjust {
			a(o)
		}
	}})
}

// stopManager stops m gracefully now.
func (gt *gatewayTest) stopManager(m *harness.Manager) {
	gt.t.Helper()
	gt.g.Expect(m.Stop(30 * time.Second)).To(Succeed())
}

// cleanUpstream strips finalizers from, and deletes, everything this test left in its
// upstream namespace.
func (gt *gatewayTest) cleanUpstream() {
	ctx, c := context.Background(), gt.plane.Client
	lists := []client.ObjectList{&v1alpha.HTTPProxyList{}, &gatewayv1.GatewayList{}, &gatewayv1.HTTPRouteList{}, &corev1.ServiceList{}, &discoveryv1.EndpointSliceList{}, &v1alpha.DomainList{}}
	for _, list := range lists {
		if err := c.List(ctx, list, client.InNamespace(gt.ns.Name)); err != nil {
			continue
		}
		_ = meta.EachListItem(list, func(o runtime.Object) error {
			obj := o.(client.Object)
			if len(obj.GetFinalizers()) > 0 {
				patch := client.MergeFrom(obj.DeepCopyObject().(client.Object))
				obj.SetFinalizers(nil)
				_ = c.Patch(ctx, obj, patch)
			}
			_ = c.Delete(ctx, obj)
			return nil
		})
	}
	_ = c.Delete(ctx, gt.ns)
}

// hubNS is the test namespace's hub namespace, ns-<uid>.
func (gt *gatewayTest) hubNS() string { return anchor.MappedNamespace(gt.ns.UID) }

// owner is the anchor owner of an upstream object of this test.
func (gt *gatewayTest) owner(kind string, obj metav1.Object) anchor.Owner {
	group := gatewayv1.GroupName
	if kind == "HTTPProxy" {
		group = v1alpha.GroupVersion.Group
	}
	return anchor.Owner{Project: gt.project, Group: group, Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName(), UID: obj.GetUID()}
}

// newProxy returns a proxy serving hosts and forwarding /api to a backend with a path.
func (gt *gatewayTest) newProxy(name string, hosts ...gatewayv1.Hostname) *v1alpha.HTTPProxy {
	return &v1alpha.HTTPProxy{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: gt.ns.Name},
		Spec: v1alpha.HTTPProxySpec{
			Hostnames: hosts,
			Rules: []v1alpha.HTTPProxyRule{{
				Matches: []gatewayv1.HTTPRouteMatch{{Path: &gatewayv1.HTTPPathMatch{
					Type: ptr.To(gatewayv1.PathMatchPathPrefix), Value: ptr.To("/api"),
				}}},
				Backends: []v1alpha.HTTPProxyBackend{{Endpoint: "https://api.example.com/v1"}},
			}},
		},
	}
}

// createProxy creates p in the project and returns it as created.
func (gt *gatewayTest) createProxy(p *v1alpha.HTTPProxy) *v1alpha.HTTPProxy {
	gt.t.Helper()
	gt.g.Expect(gt.plane.Client.Create(gt.ctx, p)).To(Succeed())
	return p
}

// waitProgrammed waits for the proxy's Programmed=True for its current generation.
func (gt *gatewayTest) waitProgrammed(name string) *v1alpha.HTTPProxy {
	gt.t.Helper()
	p := &v1alpha.HTTPProxy{}
	gt.g.Eventually(func(g Gomega) {
		g.Expect(gt.plane.Client.Get(gt.ctx, client.ObjectKey{Namespace: gt.ns.Name, Name: name}, p)).To(Succeed())
		c := meta.FindStatusCondition(p.Status.Conditions, v1alpha.ConditionProgrammed)
		g.Expect(c).NotTo(BeNil(), "Programmed condition")
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue), "Programmed: %s %s", c.Reason, c.Message)
		g.Expect(c.ObservedGeneration).To(Equal(p.Generation))
	}, gwProgrammedWithin, gwPoll).Should(Succeed())
	return p
}

// upstream reads the proxy's upstream Gateway and HTTPRoute from the project.
func (gt *gatewayTest) upstream(name string) (*gatewayv1.Gateway, *gatewayv1.HTTPRoute) {
	gt.t.Helper()
	gw, route := &gatewayv1.Gateway{}, &gatewayv1.HTTPRoute{}
	key := client.ObjectKey{Namespace: gt.ns.Name, Name: name}
	gt.g.Expect(gt.plane.Client.Get(gt.ctx, key, gw)).To(Succeed())
	gt.g.Expect(gt.plane.Client.Get(gt.ctx, key, route)).To(Succeed())
	return gw, route
}

// routeCondition reads the condition typ of the upstream route's first parent entry,
// or nil.
func (gt *gatewayTest) routeCondition(g Gomega, name string, typ gatewayv1.RouteConditionType) *metav1.Condition {
	route := &gatewayv1.HTTPRoute{}
	g.Expect(gt.plane.Client.Get(gt.ctx, client.ObjectKey{Namespace: gt.ns.Name, Name: name}, route)).To(Succeed())
	if len(route.Status.Parents) == 0 {
		return nil
	}
	return meta.FindStatusCondition(route.Status.Parents[0].Conditions, string(typ))
}

// expectRefNotPermitted waits for the upstream route's ResolvedRefs=False, reason
// RefNotPermitted, with want in its message, and checks the hub holds no backend object
// for its first backendRef.
func (gt *gatewayTest) expectRefNotPermitted(route *gatewayv1.HTTPRoute, want string) {
	gt.t.Helper()
	gt.g.Eventually(func(g Gomega) {
		c := gt.routeCondition(g, route.Name, gatewayv1.RouteConditionResolvedRefs)
		g.Expect(c).NotTo(BeNil(), route.Name)
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse), "%s: %s", route.Name, c.Message)
		g.Expect(c.Reason).To(Equal(string(gatewayv1.RouteReasonRefNotPermitted)), "%s: %s", route.Name, c.Message)
		g.Expect(c.Message).To(ContainSubstring(want), route.Name)
	}, gwProgrammedWithin, gwPoll).Should(Succeed())
	got := &gatewayv1.HTTPRoute{}
	gt.g.Expect(gt.plane.Client.Get(gt.ctx, client.ObjectKeyFromObject(route), got)).To(Succeed())
	for _, obj := range []client.Object{&corev1.Service{}, &discoveryv1.EndpointSlice{}, &gatewayv1.BackendTLSPolicy{}} {
		obj.SetNamespace(gt.hubNS())
		obj.SetName(gateway.BackendObjectName(got.UID, 0, 0))
		gt.g.Expect(gone(gt.ctx, hub.Client, obj)).To(BeTrue(), "no hub %T for %s's refused backend", obj, route.Name)
	}
}

// anchorsNamed lists the ConfigMaps named anchor-<uid> anywhere on the hub.
func anchorsNamed(ctx context.Context, g Gomega, uid string) []corev1.ConfigMap {
	list := &corev1.ConfigMapList{}
	g.Expect(hub.Client.List(ctx, list, client.MatchingFields{"metadata.name": anchor.NamePrefix + uid})).To(Succeed())
	return list.Items
}

// anchorsOf lists the anchors on the hub whose labels name owner (any UID).
func anchorsOf(ctx context.Context, g Gomega, owner anchor.Owner) []corev1.ConfigMap {
	list := &corev1.ConfigMapList{}
	g.Expect(hub.Client.List(ctx, list, client.MatchingLabels(owner.Labels()))).To(Succeed())
	var out []corev1.ConfigMap
	for _, cm := range list.Items {
		if strings.HasPrefix(cm.Name, anchor.NamePrefix) {
			out = append(out, cm)
		}
	}
	return out
}

// expectAttached checks that obj carries owner's five labels and exactly one anchor
// reference, to anchorCM.
func expectAttached(g Gomega, obj client.Object, owner anchor.Owner, anchorCM *corev1.ConfigMap) {
	for k, v := range owner.Labels() {
		g.Expect(obj.GetLabels()).To(HaveKeyWithValue(k, v), "%T %s", obj, obj.GetName())
	}
	var anchors []metav1.OwnerReference
	for _, ref := range obj.GetOwnerReferences() {
		if ref.Kind == "ConfigMap" && strings.HasPrefix(ref.Name, anchor.NamePrefix) {
			anchors = append(anchors, ref)
		}
	}
	g.Expect(anchors).To(ConsistOf(metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: anchorCM.Name, UID: anchorCM.UID}),
		"%T %s must hang on %s", obj, obj.GetName(), anchorCM.Name)
}

// certificate returns an empty Certificate for reads.
func certificate() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gateway.CertificateGVK)
	return u
}

// certificatesIn lists the Certificates in a hub namespace.
func certificatesIn(ctx context.Context, g Gomega, namespace string) []unstructured.Unstructured {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gateway.CertificateGVK.GroupVersion().WithKind("CertificateList"))
	g.Expect(hub.Client.List(ctx, list, client.InNamespace(namespace))).To(Succeed())
	return list.Items
}

// gone reports whether the API server says NotFound for obj's key.
func gone(ctx context.Context, c client.Client, obj client.Object) bool {
	return apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(obj), obj))
}

// hubWritesBy returns the hub audit events of user with one of verbs on one of
// resources, in namespace (any namespace when "", and cluster-scoped objects).
func hubWritesBy(g Gomega, user string, verbs, resources []string, namespace string) []harness.AuditEvent {
	events, err := hub.AuditEvents()
	g.Expect(err).NotTo(HaveOccurred())
	in := func(s string, set []string) bool {
		for _, x := range set {
			if x == s {
				return true
			}
		}
		return false
	}
	var out []harness.AuditEvent
	for _, ev := range events {
		if ev.User.Username != user || !in(ev.Verb, verbs) || !in(ev.ObjectRef.Resource, resources) {
			continue
		}
		if namespace != "" && ev.ObjectRef.Namespace != namespace && !(ev.ObjectRef.Resource == "namespaces" && ev.ObjectRef.Name == namespace) {
			continue
		}
		out = append(out, ev)
	}
	return out
}
