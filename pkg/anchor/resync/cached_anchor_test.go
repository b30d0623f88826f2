package resync

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"

	"anchorage/pkg/anchor"
)

// TestSlimAnchorKeepsWhatReadersRead checks that what the anchor cache hands out of a
// slimmed item is the item less the fields no reader reads, for anchors and for the
// items that are not quite anchors (ownerReferences, terminating, no labels).
func TestSlimAnchorKeepsWhatReadersRead(t *testing.T) {
	deleted := metav1.NewTime(time.Unix(1700000100, 0))
	grace := int64(30)
	full := func(edit func(*metav1.PartialObjectMetadata)) *metav1.PartialObjectMetadata {
		o := listedAnchor("proj-a", 3, 7)
		o.GenerateName, o.Generation, o.Annotations = "anchor-", 4, map[string]string{"a": "b"}
		o.DeletionGracePeriodSeconds = &grace
		if edit != nil {
			edit(o)
		}
		return o
	}
	// kept is what readers may read of o: everything but the dropped fields.
	kept := func(o *metav1.PartialObjectMetadata) metav1.PartialObjectMetadata {
		k := *o.DeepCopy()
		k.GenerateName, k.Generation, k.Annotations, k.ManagedFields, k.DeletionGracePeriodSeconds = "", 0, nil, nil, nil
		return k
	}
	for _, tc := range []struct {
		name string
		obj  *metav1.PartialObjectMetadata
		rare bool
	}{
		{name: "anchor", obj: full(nil)},
		{name: "owner references", obj: full(func(o *metav1.PartialObjectMetadata) {
			o.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "x", UID: "u"}}
		}), rare: true},
		{name: "terminating", obj: full(func(o *metav1.PartialObjectMetadata) {
			o.DeletionTimestamp, o.Finalizers = &deleted, []string{"example.com/f"}
		}), rare: true},
		{name: "no labels", obj: full(func(o *metav1.PartialObjectMetadata) { o.Labels = nil })},
		{name: "other labels", obj: full(func(o *metav1.PartialObjectMetadata) { o.Labels["extra"] = "x"; delete(o.Labels, anchor.LabelName) })},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			want := kept(tc.obj)
			out, err := slimAnchor(tc.obj)
			g.Expect(err).NotTo(HaveOccurred())
			c, ok := out.(*cachedAnchor)
			g.Expect(ok).To(BeTrue(), "slimAnchor returned %T", out)
			g.Expect(c.rare != nil).To(Equal(tc.rare))
			g.Expect(c.item()).To(Equal(want))

			// The informer's key and namespace index read it through meta.Accessor.
			key, err := toolscache.MetaNamespaceKeyFunc(c)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(key).To(Equal(want.Namespace + "/" + want.Name))
			acc, err := meta.Accessor(c)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(acc.GetLabels()).To(Equal(want.Labels))

			// A deep copy is equal and shares nothing that can be changed.
			cp, ok := c.DeepCopyObject().(*cachedAnchor)
			g.Expect(ok).To(BeTrue())
			g.Expect(cp.item()).To(Equal(want))
			if cp.labels != nil {
				cp.labels["changed"] = "yes"
				g.Expect(c.labels).NotTo(HaveKey("changed"))
			}
			if tc.rare {
				cp.rare.finalizers = append(cp.rare.finalizers[:0:0], "other")
				g.Expect(c.item()).To(Equal(want))
			}

			// Slimming is idempotent (an informer may hand a slimmed item back).
			again, err := slimAnchor(c)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(again).To(BeIdenticalTo(c))
		})
	}
}

// TestAnchorIndexersReadCachedAnchors checks the cache's indexes on slimmed items: the
// project their cluster name decodes to ("" when it does not), and their name's bucket.
func TestAnchorIndexersReadCachedAnchors(t *testing.T) {
	g := NewWithT(t)
	good := listedAnchor("proj-a", 1, 2)
	bad := listedAnchor("proj-a", 1, 3)
	bad.Labels[anchor.LabelClusterName] = "not-a-cluster-name"
	idx := anchorIndexers()
	for _, tc := range []struct {
		obj     *metav1.PartialObjectMetadata
		project string
	}{{good, "proj-a"}, {bad, ""}} {
		c, err := slimAnchor(tc.obj)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(idx[fieldIndexPrefix+indexProject](c)).To(Equal([]string{allNamespacesKey + tc.project}))
		g.Expect(idx[fieldIndexPrefix+indexName](c)).To(Equal([]string{allNamespacesKey + nameBucket(tc.obj.Name)}))
	}
	_, err := idx[fieldIndexPrefix+indexProject](good)
	g.Expect(err).To(HaveOccurred(), "an item the transform did not slim is refused")
}
