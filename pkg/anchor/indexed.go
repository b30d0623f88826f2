package anchor

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// NameIndex answers, from a cache of the hub, which ConfigMaps carry a name. The hub's
// anchor cache (resync.AnchorCache: the metadata of every ConfigMap carrying
// LabelClusterName, indexed by name) is one. Items may be in any namespace and need not
// be anchors; callers filter. A cache that has not synced yet must answer with an error
// or block until ctx ends, never with an empty list (controller-runtime's cache does
// both: it blocks until synced, and fails when not started).
type NameIndex interface {
	Named(ctx context.Context, name string) ([]metav1.PartialObjectMetadata, error)
}

// IndexWait bounds how long DeleteIndexed waits for the index to answer (a cache not
// yet synced makes it wait): past it, nothing is deleted and the caller retries.
const IndexWait = 10 * time.Second

// DeleteIndexed deletes owner's anchor, like Delete, with at most two calls to the hub:
// a GET of the anchor in hubNamespace, the owner's mapped namespace, and a DELETE
// conditional on the UID and resourceVersion that GET returned. It never lists
// ConfigMaps on the hub. Nothing to delete is not an error.
//
// What is deleted is proven by the live read, exactly as Delete proves it: the object
// named Name(owner.UID) in hubNamespace decodes to owner exactly, has no
// ownerReferences, and is deleted only as read. The only thing taken from index is the
// ambiguity check: another ConfigMap of that name in another ns-<uuid> namespace means
// the owner has two anchors (ErrAmbiguous) and none is deleted, nor read.
//
// Why a cache may answer the ambiguity check. A stale index errs in one of two ways:
//   - It still shows a duplicate that is gone: the delete is refused and retried, which
//     is more cautious than needed, never less.
//   - It misses a duplicate created since it last synced. The live path of every
//     replica creates an anchor only in MappedNamespace of the owner's upstream
//     Namespace UID (EnsureMappedNamespace, Attach), and an object never changes
//     namespace, so for one owner the live path only ever writes in hubNamespace. A
//     copy elsewhere comes from a manager of the past or a restore, not from anything
//     racing this call. And even then what is deleted is still only the object proven
//     above, the owner's anchor by every rule that identifies one, for an owner being
//     deleted; the missed copy is never touched and the resync finds it.
//
// An index that cannot answer (not synced within IndexWait, not started, failing) is an
// error and nothing is read or deleted: the caller retries. There is deliberately no
// fallback to Delete's list: a replica that restarts during a mass deletion would turn
// every pending finalizer into a scan of the hub's ConfigMaps at the moment the hub is
// busiest, while waiting costs one sync of the cache, shared by all of them.
//
// hubNamespace "" means the mapped namespace is not known (the upstream Namespace is
// gone). The index then says where the anchor is: one cached anchor of that name in an
// ns-<uuid> namespace is read live and deleted as above; two or more are ambiguous;
// none means nothing is known to delete and nil is returned, with no call at all, so a
// finalizer that retries costs the hub nothing. Without its upstream Namespace no live
// path can create the owner's anchor any more, so the index can only miss one created
// just before the Namespace went; such an anchor is kept, never deleted blind, and the
// resync collects it (namespace-gone).
//
// hub must be an uncached client (see the package doc).
func DeleteIndexed(ctx context.Context, hub client.Client, index NameIndex, hubNamespace string, owner Owner) error {
	if err := owner.Validate(); err != nil {
		return fmt.Errorf("deleting the anchor of %s: %w", owner, err)
	}
	if hubNamespace != "" && !IsMappedNamespaceName(hubNamespace) {
		return fmt.Errorf("deleting the anchor of %s: %q is not a mapped namespace name: %w", owner, hubNamespace, ErrMalformed)
	}
	if index == nil {
		return fmt.Errorf("deleting the anchor of %s: no anchor index", owner)
	}
	name := Name(owner.UID)
	cached, err := indexedAnchorsNamed(ctx, index, name)
	if err != nil {
		return err
	}
	target, err := anchorNamespace(name, hubNamespace, cached)
	if err != nil || target == "" {
		return err
	}
	cm, err := getAnchorMetadata(ctx, hub, client.ObjectKey{Namespace: target, Name: name})
	if err != nil || cm == nil {
		return err
	}
	return deleteIfOwners(ctx, hub, cm, isOwner(owner))
}

// indexedAnchorsNamed returns the items of index named name in namespaces named
// ns-<uuid>, waiting at most IndexWait for the index.
func indexedAnchorsNamed(ctx context.Context, index NameIndex, name string) ([]metav1.PartialObjectMetadata, error) {
	ctx, cancel := context.WithTimeout(ctx, IndexWait)
	defer cancel()
	items, err := index.Named(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("looking up anchor %s in the hub's anchor cache: %w", name, err)
	}
	var found []metav1.PartialObjectMetadata
	for _, item := range items {
		if item.Name == name && IsMappedNamespaceName(item.Namespace) {
			found = append(found, item)
		}
	}
	return found, nil
}

// anchorNamespace decides where the anchor named name is to be read: hubNamespace when
// known and no cached item of that name is elsewhere; otherwise the namespace of the
// single cached item, or "" (nothing to read) when none is cached. Items in more than
// one namespace are ErrAmbiguous.
func anchorNamespace(name, hubNamespace string, cached []metav1.PartialObjectMetadata) (string, error) {
	namespaces := []string{}
	if hubNamespace != "" {
		namespaces = append(namespaces, hubNamespace)
	}
	for _, item := range cached {
		if item.Namespace != hubNamespace {
			namespaces = append(namespaces, item.Namespace)
		}
	}
	switch len(namespaces) {
	case 0:
		return "", nil
	case 1:
		return namespaces[0], nil
	default:
		return "", fmt.Errorf("deleting anchor %s: the anchor cache shows it in namespaces %s, deleting none: %w", name, strings.Join(namespaces, ", "), ErrAmbiguous)
	}
}

// getAnchorMetadata reads the metadata of the ConfigMap key live, or nil when the API
// server proves it absent (NotFoundProvesAbsence).
func getAnchorMetadata(ctx context.Context, hub client.Reader, key client.ObjectKey) (*metav1.PartialObjectMetadata, error) {
	cm := &metav1.PartialObjectMetadata{}
	cm.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
	err := hub.Get(ctx, key, cm)
	if NotFoundProvesAbsence(err, corev1.Resource("configmaps"), key.Name) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading anchor %s: %w", key, err)
	}
	return cm, nil
}
