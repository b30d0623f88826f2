package anchor

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/uuid"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// These tests run against the package's API server (TestMain). Every test makes its own
// namespaces and owners with fresh UIDs, so tests never see each other's anchors, even
// though Delete looks across all namespaces. envtest runs no garbage collector and no
// namespace controller, so nothing is cleaned up: fresh names make that harmless.

// newMappedNamespace creates an ns-<uuid> namespace with labels (none for a namespace
// written before labels existed) and returns its name.
func newMappedNamespace(t *testing.T, labels map[string]string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: MappedNamespace(uuid.NewUUID()), Labels: labels}}
	if err := needHub(t).Create(context.Background(), ns); err != nil {
		t.Fatalf("creating namespace %s: %v", ns.Name, err)
	}
	return ns.Name
}

// newOwner returns a Gateway owner with a fresh UID.
func newOwner() Owner {
	o := testOwner()
	o.UID = uuid.NewUUID()
	return o
}

// anchorReference is the ownerReference a downstream object must hold to anchor.
func anchorReference(anchor *corev1.ConfigMap) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: anchor.Name, UID: anchor.UID}
}

// withLabels returns owner's labels plus extra.
func withLabels(owner Owner, extra map[string]string) map[string]string {
	l := owner.Labels()
	for k, v := range extra {
		l[k] = v
	}
	return l
}

func getConfigMap(t *testing.T, namespace, name string) (*corev1.ConfigMap, error) {
	t.Helper()
	cm := &corev1.ConfigMap{}
	err := needHub(t).Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, cm)
	return cm, err
}

func TestAttachCreatesAnchor(t *testing.T) {
	g := NewWithT(t)
	c, ctx := needHub(t), context.Background()
	ns := newMappedNamespace(t, nil)
	owner := newOwner()

	downstream := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: owner.Name, Labels: map[string]string{"app": "web"}},
		Data:       map[string]string{"k": "v"},
	}
	anchor, err := Attach(ctx, c, owner, ns, downstream)
	g.Expect(err).NotTo(HaveOccurred())

	stored, err := getConfigMap(t, ns, Name(owner.UID))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(stored.UID).To(Equal(anchor.UID))
	g.Expect(stored.Labels).To(Equal(owner.Labels()), "an anchor carries exactly the five labels")
	g.Expect(stored.Data).To(BeEmpty())
	g.Expect(stored.BinaryData).To(BeEmpty())
	g.Expect(stored.OwnerReferences).To(BeEmpty())
	g.Expect(IsAnchor(stored)).To(BeTrue())

	g.Expect(downstream.Labels).To(Equal(withLabels(owner, map[string]string{"app": "web"})))
	g.Expect(downstream.OwnerReferences).To(Equal([]metav1.OwnerReference{anchorReference(anchor)}))

	// The API server accepts what Attach wrote.
	g.Expect(c.Create(ctx, downstream)).To(Succeed())
	written, err := getConfigMap(t, ns, owner.Name)
	g.Expect(err).NotTo(HaveOccurred())
	if diff := cmp.Diff([]metav1.OwnerReference{anchorReference(anchor)}, written.OwnerReferences); diff != "" {
		t.Errorf("stored downstream ownerReferences: -want +got:\n%s", diff)
	}
}

func TestAttachAnyObject(t *testing.T) {
	g := NewWithT(t)
	c, ctx := needHub(t), context.Background()
	ns := newMappedNamespace(t, nil)
	owner := newOwner()

	secret := &unstructured.Unstructured{}
	secret.SetAPIVersion("v1")
	secret.SetKind("Secret")
	secret.SetNamespace(ns)
	secret.SetName(owner.Name + "-tls")
	g.Expect(unstructured.SetNestedStringMap(secret.Object, map[string]string{"k": "dg=="}, "data")).To(Succeed())

	anchor, err := Attach(ctx, c, owner, ns, secret)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.Create(ctx, secret)).To(Succeed())

	stored := &corev1.Secret{}
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(secret), stored)).To(Succeed())
	g.Expect(stored.Labels).To(Equal(owner.Labels()))
	g.Expect(stored.OwnerReferences).To(Equal([]metav1.OwnerReference{anchorReference(anchor)}))
}

func TestAttachIsIdempotent(t *testing.T) {
	g := NewWithT(t)
	c, ctx := needHub(t), context.Background()
	ns := newMappedNamespace(t, nil)
	owner := newOwner()

	downstream := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: owner.Name}}
	first, err := Attach(ctx, c, owner, ns, downstream)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.Create(ctx, downstream)).To(Succeed())

	stored, err := getConfigMap(t, ns, owner.Name)
	g.Expect(err).NotTo(HaveOccurred())
	before := stored.DeepCopy()
	second, err := Attach(ctx, c, owner, ns, stored)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(second.UID).To(Equal(first.UID), "the existing anchor is reused")
	if diff := cmp.Diff(before, stored); diff != "" {
		t.Errorf("re-attaching an attached object changed it: -want +got:\n%s", diff)
	}

	anchors := &corev1.ConfigMapList{}
	g.Expect(c.List(ctx, anchors, client.InNamespace(ns), client.MatchingLabels{LabelKind: owner.Kind})).To(Succeed())
	g.Expect(anchors.Items).To(HaveLen(2), "one anchor and the downstream object, nothing more")
}

func TestAttachAfterOwnerRecreated(t *testing.T) {
	g := NewWithT(t)
	c, ctx := needHub(t), context.Background()
	ns := newMappedNamespace(t, nil)
	oldOwner := newOwner()

	unrelated := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "settings"}}
	g.Expect(c.Create(ctx, unrelated)).To(Succeed())
	unrelatedRef := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: unrelated.Name, UID: unrelated.UID}

	downstream := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Namespace: ns, Name: oldOwner.Name, OwnerReferences: []metav1.OwnerReference{unrelatedRef},
	}}
	oldAnchor, err := Attach(ctx, c, oldOwner, ns, downstream)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.Create(ctx, downstream)).To(Succeed())

	// The upstream object was deleted and recreated under the same name before its
	// finalizer ran; the downstream object is reused by the new owner.
	newOwner := oldOwner
	newOwner.UID = uuid.NewUUID()
	stored, err := getConfigMap(t, ns, oldOwner.Name)
	g.Expect(err).NotTo(HaveOccurred())
	newAnchor, err := Attach(ctx, c, newOwner, ns, stored)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(newAnchor.UID).NotTo(Equal(oldAnchor.UID))
	g.Expect(c.Update(ctx, stored)).To(Succeed())

	stored, err = getConfigMap(t, ns, oldOwner.Name)
	g.Expect(err).NotTo(HaveOccurred())
	want := []metav1.OwnerReference{unrelatedRef, anchorReference(newAnchor)}
	if diff := cmp.Diff(want, stored.OwnerReferences); diff != "" {
		t.Errorf("downstream ownerReferences after the owner was recreated: -want +got:\n%s", diff)
	}
	g.Expect(stored.Labels).To(Equal(newOwner.Labels()))
}

func TestAttachRefusesForeignConfigMap(t *testing.T) {
	cases := map[string]struct {
		reason string
		cm     func(owner Owner) *corev1.ConfigMap
	}{
		"OtherKind": {
			reason: "A ConfigMap labelled for another owner is not this owner's anchor.",
			cm: func(o Owner) *corev1.ConfigMap {
				o.Kind = "HTTPRoute"
				return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Labels: o.Labels()}}
			},
		},
		"OtherProject": {
			reason: "A restored plane can repeat UIDs; another project's anchor is not ours.",
			cm: func(o Owner) *corev1.ConfigMap {
				o.Project = "someone-else"
				return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Labels: o.Labels()}}
			},
		},
		"NoLabels": {
			reason: "A ConfigMap without labels is not an anchor at all.",
			cm:     func(Owner) *corev1.ConfigMap { return &corev1.ConfigMap{} },
		},
		"Data": {
			reason: "Anchors hold no data; one that does is someone's configuration.",
			cm: func(o Owner) *corev1.ConfigMap {
				return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Labels: o.Labels()}, Data: map[string]string{"k": "v"}}
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			c, ctx := needHub(t), context.Background()
			ns := newMappedNamespace(t, nil)
			owner := newOwner()

			foreign := tc.cm(owner)
			foreign.Namespace, foreign.Name = ns, Name(owner.UID)
			g.Expect(c.Create(ctx, foreign)).To(Succeed())

			downstream := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: owner.Name, Labels: map[string]string{"app": "web"}}}
			before := downstream.DeepCopy()
			_, err := Attach(ctx, c, owner, ns, downstream)
			g.Expect(err).To(HaveOccurred(), tc.reason)
			g.Expect(errors.Is(err, ErrForeign)).To(BeTrue(), "error %v should wrap ErrForeign", err)
			if diff := cmp.Diff(before, downstream); diff != "" {
				t.Errorf("%s\nAttach changed the downstream object although it failed: -want +got:\n%s", tc.reason, diff)
			}
			after, err := getConfigMap(t, ns, foreign.Name)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(after.ResourceVersion).To(Equal(foreign.ResourceVersion), "the foreign ConfigMap is left alone")
		})
	}
}

func TestAttachRefusesOwnedConfigMap(t *testing.T) {
	g := NewWithT(t)
	c, ctx := needHub(t), context.Background()
	ns := newMappedNamespace(t, nil)
	owner := newOwner()

	parent := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "parent"}}
	g.Expect(c.Create(ctx, parent)).To(Succeed())
	owned := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Namespace: ns, Name: Name(owner.UID), Labels: owner.Labels(),
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: parent.Name, UID: parent.UID}},
	}}
	g.Expect(c.Create(ctx, owned)).To(Succeed())

	downstream := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: owner.Name}}
	_, err := Attach(ctx, c, owner, ns, downstream)
	g.Expect(errors.Is(err, ErrForeign)).To(BeTrue(), "a ConfigMap with an owner is someone's dependent, not an anchor: %v", err)
	g.Expect(downstream.OwnerReferences).To(BeEmpty())
}

func TestAttachRefusesBadInput(t *testing.T) {
	c, ctx := needHub(t), context.Background()
	ns := newMappedNamespace(t, nil)
	cases := map[string]struct {
		reason     string
		owner      Owner
		namespace  string
		downstream client.Object
	}{
		"OtherNamespace": {
			reason: "An ownerReference resolves only within the dependent's namespace; across, it would get the object collected.",
			owner:  newOwner(), namespace: ns,
			downstream: &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"}},
		},
		"NotMapped": {
			reason: "Anchors live only in ns-<uuid> namespaces, or IsAnchor would not recognise them.",
			owner:  newOwner(), namespace: "default",
			downstream: &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"}},
		},
		"InvalidOwner": {
			reason: "An owner without a UID would produce an anchor nobody can identify.",
			owner:  func() Owner { o := newOwner(); o.UID = ""; return o }(), namespace: ns,
			downstream: &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}},
		},
		"NilDownstream": {
			reason: "Nothing to attach.",
			owner:  newOwner(), namespace: ns,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := Attach(ctx, c, tc.owner, tc.namespace, tc.downstream); err == nil {
				t.Errorf("%s\nAttach succeeded, want an error", tc.reason)
			}
			_, err := getConfigMap(t, tc.namespace, Name(tc.owner.UID))
			if !apierrors.IsNotFound(err) {
				t.Errorf("%s\nAttach created an anchor (or the read failed: %v)", tc.reason, err)
			}
		})
	}
}

func TestEnsureMappedNamespaceCreates(t *testing.T) {
	g := NewWithT(t)
	c, ctx := needHub(t), context.Background()
	upstream := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a", UID: uuid.NewUUID()}}

	name, err := EnsureMappedNamespace(ctx, c, "org/proj", upstream)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(name).To(Equal(MappedNamespace(upstream.UID)))

	ns := &corev1.Namespace{}
	g.Expect(c.Get(ctx, client.ObjectKey{Name: name}, ns)).To(Succeed())
	g.Expect(ns.Labels).To(HaveKeyWithValue(LabelNamespace, "team-a"))
	g.Expect(ns.Labels).To(HaveKeyWithValue(LabelClusterName, "cluster-org_proj"))

	again, err := EnsureMappedNamespace(ctx, c, "org/proj", upstream)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again).To(Equal(name))
	after := &corev1.Namespace{}
	g.Expect(c.Get(ctx, client.ObjectKey{Name: name}, after)).To(Succeed())
	g.Expect(after.ResourceVersion).To(Equal(ns.ResourceVersion), "a second call writes nothing")
}

func TestEnsureMappedNamespaceAdopts(t *testing.T) {
	g := NewWithT(t)
	c, ctx := needHub(t), context.Background()
	upstream := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-b", UID: uuid.NewUUID()}}
	old := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:   MappedNamespace(upstream.UID),
		Labels: map[string]string{"keep": "me"},
	}}
	g.Expect(c.Create(ctx, old)).To(Succeed())

	name, err := EnsureMappedNamespace(ctx, c, "proj", upstream)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(name).To(Equal(old.Name))

	ns := &corev1.Namespace{}
	g.Expect(c.Get(ctx, client.ObjectKey{Name: name}, ns)).To(Succeed())
	want := map[string]string{
		"keep":                        "me",
		LabelNamespace:                "team-b",
		LabelClusterName:              "cluster-proj",
		"kubernetes.io/metadata.name": name,
	}
	if diff := cmp.Diff(want, ns.Labels); diff != "" {
		t.Errorf("labels of the adopted namespace: -want +got:\n%s", diff)
	}

	// The adopted namespace keeps working for anchors.
	owner := newOwner()
	owner.Project = "proj"
	downstream := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: name, Name: owner.Name}}
	_, err = Attach(ctx, c, owner, name, downstream)
	g.Expect(err).NotTo(HaveOccurred())
}

func TestEnsureMappedNamespaceKeepsLegacyClusterName(t *testing.T) {
	g := NewWithT(t)
	c, ctx := needHub(t), context.Background()
	upstream := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-c", UID: uuid.NewUUID()}}
	old := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:   MappedNamespace(upstream.UID),
		Labels: map[string]string{LabelClusterName: "cluster-_proj"},
	}}
	g.Expect(c.Create(ctx, old)).To(Succeed())

	_, err := EnsureMappedNamespace(ctx, c, "proj", upstream)
	g.Expect(err).NotTo(HaveOccurred())
	ns := &corev1.Namespace{}
	g.Expect(c.Get(ctx, client.ObjectKey{Name: old.Name}, ns)).To(Succeed())
	g.Expect(ns.Labels).To(HaveKeyWithValue(LabelClusterName, "cluster-_proj"), "nothing is rewritten")
	g.Expect(ns.Labels).To(HaveKeyWithValue(LabelNamespace, "team-c"), "the missing label is added")
}

func TestEnsureMappedNamespaceRefusesForeign(t *testing.T) {
	cases := map[string]struct {
		reason string
		labels map[string]string
	}{
		"OtherNamespace": {reason: "The hub namespace mirrors another upstream namespace.", labels: map[string]string{LabelNamespace: "someone-else"}},
		"OtherProject":   {reason: "The hub namespace belongs to another project.", labels: map[string]string{LabelClusterName: "cluster-other"}},
		"Undecodable":    {reason: "A cluster name that does not decode is not ours.", labels: map[string]string{LabelClusterName: "cluster-a_b_c"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			c, ctx := needHub(t), context.Background()
			upstream := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-d", UID: uuid.NewUUID()}}
			old := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: MappedNamespace(upstream.UID), Labels: tc.labels}}
			g.Expect(c.Create(ctx, old)).To(Succeed())

			_, err := EnsureMappedNamespace(ctx, c, "proj", upstream)
			g.Expect(errors.Is(err, ErrForeign)).To(BeTrue(), "%s: got %v", tc.reason, err)
			after := &corev1.Namespace{}
			g.Expect(c.Get(ctx, client.ObjectKey{Name: old.Name}, after)).To(Succeed())
			g.Expect(after.ResourceVersion).To(Equal(old.ResourceVersion), "nothing is changed")
		})
	}
}

func TestEnsureMappedNamespaceRefusesBadInput(t *testing.T) {
	c, ctx := needHub(t), context.Background()
	cases := map[string]struct {
		reason   string
		project  string
		upstream *corev1.Namespace
	}{
		"NoUID":        {reason: "ns- alone mirrors nothing.", project: "proj", upstream: &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "a"}}},
		"LeadingSlash": {reason: "A legacy project name would read back as another project.", project: "/proj", upstream: &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "a", UID: uuid.NewUUID()}}},
		"Nil":          {reason: "Nothing to mirror.", project: "proj"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := EnsureMappedNamespace(ctx, c, tc.project, tc.upstream); err == nil {
				t.Errorf("%s\nEnsureMappedNamespace succeeded, want an error", tc.reason)
			}
		})
	}
}
