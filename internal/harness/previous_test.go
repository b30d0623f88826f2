package harness

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"anchorage/internal/testenv"
	"anchorage/pkg/anchor"
)

func TestPreviousCanonicalHostnameHasTheWordsForm(t *testing.T) {
	h := PreviousCanonicalHostname("0b7c6a3e-1f6d-4c1e-9a51-2d7f0c9e8b11", "prism.example.net")
	if h != PreviousCanonicalHostname("0b7c6a3e-1f6d-4c1e-9a51-2d7f0c9e8b11", "prism.example.net") {
		t.Fatal("not deterministic")
	}
	label, domain, _ := strings.Cut(h, ".")
	parts := strings.Split(label, "-")
	if domain != "prism.example.net" || len(parts) != 3 || len(parts[2]) != 5 {
		t.Fatalf("got %q, want <word>-<word>-<5 chars>.prism.example.net", h)
	}
}

// TestLayDownPrevious lays the previous manager's state down on one API server standing
// for both hub and plane, and checks what later tests rely on: anchors read back as the
// project's, the leaving proxy is Terminating, and the webhooks refuse writes.
func TestLayDownPrevious(t *testing.T) {
	crds, err := testenv.HubCRDs() // the hub's CRDs now include HTTPProxy: a superset of the plane's
	if err != nil {
		t.Skip(err)
	}
	cp, err := StartControlPlane("previous", PlaneOptions{CRDs: crds, Lean: true})
	if err != nil {
		t.Skip(err)
	}
	defer cp.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "prev-up"}}
	if err := cp.Client.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	st, err := LayDownPrevious(ctx, PreviousInput{Hub: cp.Client, Plane: cp.Client, Project: "proj", Namespace: ns, Suffix: "t1.example.com"})
	if err != nil {
		t.Fatal(err)
	}
	// plain: 3 anchors + ES anchor, copy, gateway, 2 certs + 2 secrets, claim, route, svc, es.
	if got := len(st.HubObjectsOf("plain")); got != 14 {
		t.Errorf("plain has %d hub objects, want 14", got)
	}
	if got := len(st.HubObjectsOf("secure")); got != 15 {
		t.Errorf("secure has %d hub objects, want 15 (with a BackendTLSPolicy)", got)
	}
	for _, o := range append(st.HubObjectsOf("plain"), st.StrandedAnchor) {
		if cm, ok := o.(*corev1.ConfigMap); ok && strings.HasPrefix(cm.Name, anchor.NamePrefix) {
			if owner, err := anchor.Decode(cm.Name, cm.Labels); err != nil || owner.Project != "proj" {
				t.Errorf("anchor %s decodes as %+v, %v", cm.Name, owner, err)
			}
		}
	}
	leaving := st.Proxies["leaving"].Proxy
	if leaving.GetDeletionTimestamp() == nil || len(leaving.GetFinalizers()) != 2 {
		t.Errorf("leaving: deletionTimestamp %v, finalizers %v", leaving.GetDeletionTimestamp(), leaving.GetFinalizers())
	}
	expectHalfDone(t, ctx, cp.Client, st)
	hp := st.Proxies["plain"].Proxy.DeepCopy()
	if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(hp), hp); err != nil {
		t.Fatal(err)
	}
	canon, _, _ := unstructured.NestedString(hp.Object, "status", "canonicalHostname")
	statuses, _, _ := unstructured.NestedSlice(hp.Object, "status", "hostnameStatuses")
	if canon != st.Proxies["plain"].CanonicalHostname || len(statuses) != 2 {
		t.Errorf("plain's status: canonicalHostname %q, %d hostnameStatuses", canon, len(statuses))
	}
	cert := &unstructured.Unstructured{}
	cert.SetAPIVersion("cert-manager.io/v1")
	cert.SetKind("Certificate")
	if err := cp.Client.Get(ctx, client.ObjectKey{Namespace: st.HubNamespace, Name: "plain-https-hostname-0"}, cert); err != nil {
		t.Fatal(err)
	}
	if conds, _, _ := unstructured.NestedSlice(cert.Object, "status", "conditions"); len(conds) != 1 {
		t.Errorf("certificate conditions %v", conds)
	}
	gw := &gatewayv1.Gateway{}
	if err := cp.Client.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: "plain"}, gw); err != nil {
		t.Fatal(err)
	}
	if h := gw.Spec.Listeners[0].Hostname; h == nil || string(*h) != st.Proxies["plain"].CanonicalHostname {
		t.Errorf("default-http hostname %v, want %s", h, st.Proxies["plain"].CanonicalHostname)
	}
	gw.Labels = map[string]string{"touched": "yes"}
	if err := cp.Client.Update(ctx, gw); err == nil || !strings.Contains(err.Error(), "webhook") {
		t.Errorf("updating a Gateway under the previous webhooks: %v, want a webhook failure", err)
	}
}

// expectHalfDone checks each half-done deletion on the plane: the proxy Terminating on
// exactly the finalizers it keeps, or gone; its children live while the proxy stays,
// else Terminating on what they keep or gone.
func expectHalfDone(t *testing.T, ctx context.Context, c client.Client, st *PreviousState) {
	t.Helper()
	if len(st.HalfDone) != len(PreviousHalfDone()) {
		t.Fatalf("%d half-done deletions laid down, want %d", len(st.HalfDone), len(PreviousHalfDone()))
	}
	for _, h := range st.HalfDone {
		p := st.Proxies[h.Proxy]
		_, proxyLeft := h.Left["HTTPProxy"]
		objs := append([]prevChild{{"HTTPProxy", p.Proxy}}, p.upstreamChildren()...)
		for _, o := range objs {
			cur := o.obj.DeepCopyObject().(client.Object)
			err := c.Get(ctx, client.ObjectKeyFromObject(o.obj), cur)
			keep, left := h.Left[o.kind]
			switch {
			case left && err != nil:
				t.Errorf("%s: %s %s: %v, want it Terminating on %v", h, o.kind, o.obj.GetName(), err, keep)
			case left && (cur.GetDeletionTimestamp() == nil || !slices.Equal(cur.GetFinalizers(), keep)):
				t.Errorf("%s: %s %s deleting %v on %v, want Terminating on %v", h, o.kind, o.obj.GetName(), cur.GetDeletionTimestamp(), cur.GetFinalizers(), keep)
			case !left && o.kind != "HTTPProxy" && (proxyLeft || h.Orphaned) && (err != nil || cur.GetDeletionTimestamp() != nil):
				t.Errorf("%s: %s %s should be live while its proxy is Terminating: %v", h, o.kind, o.obj.GetName(), err)
			case !left && (o.kind == "HTTPProxy" || !(proxyLeft || h.Orphaned)) && !apierrors.IsNotFound(err):
				t.Errorf("%s: %s %s should be gone: %v", h, o.kind, o.obj.GetName(), err)
			}
		}
	}
}

// TestPreviousHalfDoneCoversEveryFinalizerSubset: every non-empty subset of each kind's
// finalizers is one half-done deletion of its own, and every proxy name is unique.
func TestPreviousHalfDoneCoversEveryFinalizerSubset(t *testing.T) {
	seen := map[string]bool{}
	names := map[string]bool{}
	for _, h := range PreviousHalfDone() {
		if names[h.Proxy] || slices.Contains(PreviousProxyNames, h.Proxy) {
			t.Errorf("proxy name %s used twice", h.Proxy)
		}
		names[h.Proxy] = true
		if len(h.Left) == 1 {
			for kind, keep := range h.Left {
				seen[kind+" "+strings.Join(keep, ",")] = true
			}
		}
	}
	tests := []struct {
		kind string
		want []string
	}{
		{"HTTPProxy", []string{prevProxyFinalizer, prevReplicatorFinalizer, prevProxyFinalizer + "," + prevReplicatorFinalizer}},
		{"Gateway", []string{prevGatewayFinalizer}},
		{"HTTPRoute", []string{prevGCFinalizer}},
		{"EndpointSlice", []string{prevGCFinalizer}},
	}
	for _, tt := range tests {
		for _, keep := range tt.want {
			if !seen[tt.kind+" "+keep] {
				t.Errorf("no half-done deletion leaves a %s on %s alone", tt.kind, keep)
			}
		}
	}
}
