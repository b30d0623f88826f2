package resync

import (
	"maps"
	"unique"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// cachedAnchor is what the anchor cache's store holds of one item: name, namespace,
// UID, resourceVersion, labels and creation time, and, only when set, ownerReferences,
// deletion time and finalizers. Readers get item(), never the cachedAnchor.
type cachedAnchor struct {
	typeMeta        unique.Handle[metav1.TypeMeta]
	name, namespace string
	uid             types.UID
	resourceVersion string
	labels          map[string]string
	created         metav1.Time
	rare            *cachedRare // nil when the item has none of its fields
}

// cachedRare holds the cached fields that a well-formed, live anchor never has.
type cachedRare struct {
	ownerReferences   []metav1.OwnerReference
	deletionTimestamp *metav1.Time
	finalizers        []string
}

var _ runtime.Object = &cachedAnchor{}
var _ metav1.ObjectMetaAccessor = &cachedAnchor{}

// item returns the item c stands for. Labels, ownerReferences and finalizers are shared
// with the cache: callers must not change them.
func (c *cachedAnchor) item() metav1.PartialObjectMetadata {
	out := metav1.PartialObjectMetadata{
		TypeMeta: c.typeMeta.Value(),
		ObjectMeta: metav1.ObjectMeta{
			Name: c.name, Namespace: c.namespace, UID: c.uid, ResourceVersion: c.resourceVersion,
			Labels: c.labels, CreationTimestamp: c.created,
		},
	}
	if r := c.rare; r != nil {
		out.OwnerReferences, out.DeletionTimestamp, out.Finalizers = r.ownerReferences, r.deletionTimestamp, r.finalizers
	}
	return out
}

// GetObjectMeta returns a copy of c's metadata, for the informer's key functions.
func (c *cachedAnchor) GetObjectMeta() metav1.Object {
	item := c.item()
	return &item.ObjectMeta
}

// GetObjectKind returns a copy of c's type: changing it does not change c.
func (c *cachedAnchor) GetObjectKind() schema.ObjectKind {
	tm := c.typeMeta.Value()
	return &tm
}

// DeepCopyObject implements runtime.Object.
func (c *cachedAnchor) DeepCopyObject() runtime.Object {
	out := *c
	out.labels = maps.Clone(c.labels)
	if c.rare != nil {
		item := c.item()
		deep := item.DeepCopy()
		out.rare = &cachedRare{ownerReferences: deep.OwnerReferences, deletionTimestamp: deep.DeletionTimestamp, finalizers: deep.Finalizers}
	}
	return &out
}
