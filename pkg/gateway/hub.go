package gateway

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	lru "github.com/hashicorp/golang-lru/v2"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"anchorage/pkg/anchor"
)

// hubWriter writes and deletes the downstream objects of one upstream owner in one hub
// namespace. hub must be a live client (liveClient).
type hubWriter struct {
	hub     client.Client
	owner   anchor.Owner
	ns      string
	metrics *Metrics
	written *WrittenObjects
}

// apply creates desired on the hub on the owner's anchor, or copies the fields it owns
// (copyContent) into the existing object and updates it if that changed; one labelled
// for another owner is refused (isPreviousBackendSliceOf aside). It returns the result.
func (w hubWriter) apply(ctx context.Context, kind string, desired client.Object, copyContent func(dst, src client.Object) error) (client.Object, error) {
	return w.write(ctx, kind, desired, copyContent, false)
}

// write is apply; replacing is set on the second attempt, after an object whose
// immutable fields differ (an *addressTypeChangedError from copyContent) was deleted.
func (w hubWriter) write(ctx context.Context, kind string, desired client.Object, copyContent func(dst, src client.Object) error, replacing bool) (client.Object, error) {
	key := client.ObjectKeyFromObject(desired)
	existing := newEmptyLike(desired)
	err := w.hub.Get(ctx, key, existing)
	if apierrors.IsNotFound(err) {
		obj := desired.DeepCopyObject().(client.Object)
		if _, err := anchor.Attach(ctx, w.hub, w.owner, w.ns, obj); err != nil {
			return nil, fmt.Errorf("attaching %s %s to its anchor: %w", kind, key, err)
		}
		if err := w.hub.Create(ctx, obj); err != nil {
			if !isGuardRefusal(err) { // nothing was sent: not a failed write
				w.metrics.downstreamWrite(kind, resultError)
			}
			return nil, fmt.Errorf("creating %s %s on the hub: %w", kind, key, err)
		}
		w.metrics.downstreamWrite(kind, resultCreated)
		w.written.remember(w.owner.UID, kind, obj)
		logf.FromContext(ctx).V(2).Info("Created downstream object", "kind", kind, "object", klog.KObj(obj), "anchor", anchor.Name(w.owner.UID))
		return obj, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s %s on the hub: %w", kind, key, err)
	}
	if existing.GetDeletionTimestamp() != nil {
		return nil, fmt.Errorf("%s %s on the hub is being deleted; it is written again once it is gone", kind, key)
	}
	if err := notLabelledForAnotherOwner(existing, w.owner); err != nil && !isPreviousBackendSliceOf(existing, w.owner) {
		return nil, fmt.Errorf("%s %s on the hub: %w", kind, key, err)
	}
	obj := existing.DeepCopyObject().(client.Object)
	if err := copyContent(obj, desired); err != nil {
		var changed *addressTypeChangedError
		if !errors.As(err, &changed) || replacing {
			return nil, err
		}
		// An immutable field changed (a backend moved between a DNS name and an IP
		// address): the object is deleted, then written anew.
		if err := w.deleteIfAttached(ctx, kind, existing); err != nil {
			return nil, err
		}
		return w.write(ctx, kind, desired, copyContent, true)
	}
	if _, err := anchor.Attach(ctx, w.hub, w.owner, w.ns, obj); err != nil {
		return nil, fmt.Errorf("attaching %s %s to its anchor: %w", kind, key, err)
	}
	if equality.Semantic.DeepEqual(existing, obj) {
		w.written.remember(w.owner.UID, kind, existing)
		return existing, nil
	}
	if err := w.hub.Update(ctx, obj); err != nil {
		w.metrics.downstreamWrite(kind, resultError)
		return nil, fmt.Errorf("updating %s %s on the hub: %w", kind, key, err)
	}
	w.metrics.downstreamWrite(kind, resultUpdated)
	w.written.remember(w.owner.UID, kind, obj)
	logf.FromContext(ctx).V(2).Info("Updated downstream object", "kind", kind, "object", klog.KObj(obj), "anchor", anchor.Name(w.owner.UID))
	return obj, nil
}

// notLabelledForAnotherOwner returns an error wrapping anchor.ErrForeign when obj's
// labels name another owner. Missing labels pass, and so does owner's name with another
// UID: a recreated owner takes over its predecessor's objects.
func notLabelledForAnotherOwner(obj client.Object, owner anchor.Owner) error {
	labels := obj.GetLabels()
	want := owner.Labels()
	for _, k := range []string{anchor.LabelGroup, anchor.LabelKind, anchor.LabelName, anchor.LabelNamespace} {
		if v, ok := labels[k]; ok && v != want[k] {
			return fmt.Errorf("label %s=%q belongs to another owner than %s: %w", k, v, owner, anchor.ErrForeign)
		}
	}
	if v, ok := labels[anchor.LabelClusterName]; ok {
		if p, err := anchor.ProjectFromClusterName(v); err != nil || p != owner.Project {
			return fmt.Errorf("label %s=%q belongs to another project than %q: %w", anchor.LabelClusterName, v, owner.Project, anchor.ErrForeign)
		}
	}
	return nil
}

// deleteAttached deletes the hub object of obj's type and key when it hangs on the
// owner's anchor: one remembered in WrittenObjects with one DELETE conditional on its
// UID, any other read first (deleteIfAttached). One already gone is fine.
func (w hubWriter) deleteAttached(ctx context.Context, kind string, obj client.Object) error {
	key := client.ObjectKeyFromObject(obj)
	if uid, ok := w.written.uidOf(w.owner.UID, kind, key); ok {
		done, err := w.deleteWritten(ctx, kind, obj, uid)
		if done || err != nil {
			return err
		}
	}
	existing := newEmptyLike(obj)
	err := w.hub.Get(ctx, key, existing)
	if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading %s %s on the hub: %w", kind, key, err)
	}
	return w.deleteIfAttached(ctx, kind, existing)
}

// deleteWritten deletes obj's key on the hub, conditional on uid, the object this
// replica attached to the owner's anchor. done is false when the hub holds another
// object there: the caller reads it and decides.
func (w hubWriter) deleteWritten(ctx context.Context, kind string, obj client.Object, uid types.UID) (done bool, err error) {
	key := client.ObjectKeyFromObject(obj)
	target := newEmptyLike(obj)
	target.SetNamespace(key.Namespace)
	target.SetName(key.Name)
	err = w.hub.Delete(ctx, target, client.Preconditions{UID: &uid})
	switch {
	case err == nil:
		logf.FromContext(ctx).Info("Deleted downstream object", "kind", kind, "object", klog.KRef(key.Namespace, key.Name), "uid", uid)
		w.metrics.downstreamWrite(kind, resultDeleted)
	case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
	case apierrors.IsConflict(err):
		w.written.forget(w.owner.UID, kind, key)
		return false, nil
	default:
		w.metrics.downstreamWrite(kind, resultError)
		return true, fmt.Errorf("deleting %s %s on the hub: %w", kind, key, err)
	}
	w.written.forget(w.owner.UID, kind, key)
	return true, nil
}

// deleteIfAttached deletes existing, conditional on its UID and resourceVersion, unless
// it hangs on another anchor (a newer owner's), is labelled for another owner, or is
// already terminating.
func (w hubWriter) deleteIfAttached(ctx context.Context, kind string, existing client.Object) error {
	log := logf.FromContext(ctx)
	key := client.ObjectKeyFromObject(existing)
	if !anchor.HangsOn(existing, anchor.Name(w.owner.UID)) {
		log.V(4).Info("Leaving downstream object that hangs on another anchor", "kind", kind, "object", klog.KObj(existing))
		return nil
	}
	// The anchor's name is a UID the plane reports, which a plane may forge.
	if err := notLabelledForAnotherOwner(existing, w.owner); err != nil {
		log.Info("Leaving downstream object labelled for another owner", "kind", kind, "object", klog.KObj(existing), "reason", err.Error())
		return nil
	}
	if existing.GetDeletionTimestamp() != nil {
		return nil
	}
	uid, rv := existing.GetUID(), existing.GetResourceVersion()
	log.Info("Deleting downstream object", "kind", kind, "object", klog.KObj(existing), "uid", uid)
	switch err := w.hub.Delete(ctx, existing, client.Preconditions{UID: &uid, ResourceVersion: &rv}); {
	case err == nil:
		w.metrics.downstreamWrite(kind, resultDeleted)
	case !apierrors.IsNotFound(err):
		w.metrics.downstreamWrite(kind, resultError)
		return fmt.Errorf("deleting %s %s on the hub: %w", kind, key, err)
	}
	w.written.forget(w.owner.UID, kind, key)
	return nil
}

// ownerLabels selects the objects labelled for the owner but for cluster-name (legacy
// spellings; the namespace and the anchor pin the owner).
func (w hubWriter) ownerLabels() client.MatchingLabels {
	labels := w.owner.Labels()
	delete(labels, anchor.LabelClusterName)
	return client.MatchingLabels(labels)
}

// certificates returns the Certificates in the writer's namespace labelled for the
// owner and hanging on its anchor; none when the hub does not serve Certificates.
func (w hubWriter) certificates(ctx context.Context) ([]*unstructured.Unstructured, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(CertificateGVK.GroupVersion().WithKind(CertificateGVK.Kind + "List"))
	err := w.hub.List(ctx, list, client.InNamespace(w.ns), w.ownerLabels())
	if meta.IsNoMatchError(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing Certificates of %s in %s: %w", w.owner, w.ns, err)
	}
	var out []*unstructured.Unstructured
	for i := range list.Items {
		if anchor.HangsOn(&list.Items[i], anchor.Name(w.owner.UID)) {
			out = append(out, &list.Items[i])
		}
	}
	return out, nil
}

// DefaultWrittenOwners bounds WrittenObjects: a few megabytes; an owner pushed out
// costs its finalizer one GET per object.
const DefaultWrittenOwners = 50_000

// WrittenObjects remembers, per upstream owner, the UID of each downstream object this
// replica wrote on its anchor, so a finalizer deletes it with one DELETE conditional on
// that UID (docs/design.md, Gateway path). A nil *WrittenObjects remembers nothing.
type WrittenObjects struct {
	mu     sync.Mutex
	owners *lru.Cache[types.UID, map[writtenKey]types.UID]
}

type writtenKey struct{ kind, namespace, name string }

// NewWrittenObjects remembers the writes of at most owners upstream owners (the least
// recently written are forgotten first); owners must be positive.
func NewWrittenObjects(owners int) *WrittenObjects {
	c, err := lru.New[types.UID, map[writtenKey]types.UID](owners)
	if err != nil { // only for a size ≤ 0
		panic(err)
	}
	return &WrittenObjects{owners: c}
}

// remember records that obj, of kind, now hangs on owner's anchor on the hub.
func (m *WrittenObjects) remember(owner types.UID, kind string, obj client.Object) {
	if m == nil || obj.GetUID() == "" {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	objs, ok := m.owners.Get(owner)
	if !ok {
		objs = map[writtenKey]types.UID{}
		m.owners.Add(owner, objs)
	}
	objs[writtenKey{kind, obj.GetNamespace(), obj.GetName()}] = obj.GetUID()
}

// uidOf returns the UID owner's write of kind at key left on the hub, if remembered.
func (m *WrittenObjects) uidOf(owner types.UID, kind string, key client.ObjectKey) (types.UID, bool) {
	if m == nil {
		return "", false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	objs, ok := m.owners.Peek(owner)
	if !ok {
		return "", false
	}
	uid, ok := objs[writtenKey{kind, key.Namespace, key.Name}]
	return uid, ok
}

// namesOf returns the names of the objects of kind in namespace that owner wrote, sorted.
func (m *WrittenObjects) namesOf(owner types.UID, kind, namespace string) []string {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	objs, _ := m.owners.Peek(owner)
	var out []string
	for k := range objs {
		if k.kind == kind && k.namespace == namespace {
			out = append(out, k.name)
		}
	}
	slices.Sort(out)
	return out
}

// forget drops what was remembered of owner's object of kind at key: it is gone, or
// no longer the one written.
func (m *WrittenObjects) forget(owner types.UID, kind string, key client.ObjectKey) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if objs, ok := m.owners.Peek(owner); ok {
		delete(objs, writtenKey{kind, key.Namespace, key.Name})
	}
}

// forgetOwner drops everything remembered of owner: its finalizer is done.
func (m *WrittenObjects) forgetOwner(owner types.UID) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.owners.Remove(owner)
}
