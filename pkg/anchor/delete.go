package anchor

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// Delete deletes owner's anchor, wherever it is on the hub, and with it (through the
// hub's garbage collector) everything attached to it. Nothing to delete is not an
// error, so finalizers can call it again until it returns nil.
//
// The anchor is found by name, across all namespaces named ns-<uuid>: the upstream
// Namespace, and so the mapped namespace's name, may no longer be known, and older
// mapped namespaces carry no labels. It is deleted only when exactly one is found and
// it decodes to owner exactly (see IsAnchor and Decode); two or more (ErrAmbiguous) or
// one with other labels or with ownerReferences (ErrForeign, ErrMalformed) is an error
// and nothing is deleted. The delete is conditional on the UID and resourceVersion that
// were checked, so an anchor replaced or changed in between is never deleted: the
// caller retries and the next call checks again.
//
// hub must be an uncached client (see the package doc): the lookup is a field-selected
// list across all namespaces, and deciding on a cache's past view could delete an
// anchor recreated since. That list is a scan of every ConfigMap on the hub by the API
// server, so Delete is for tools and one-off callers; the finalizers, which run once
// per deleted object, use DeleteIndexed.
func Delete(ctx context.Context, hub client.Client, owner Owner) error {
	if err := owner.Validate(); err != nil {
		return fmt.Errorf("deleting the anchor of %s: %w", owner, err)
	}
	return deleteAnchor(ctx, hub, owner.UID, isOwner(owner))
}

// isOwner returns the match of Delete and DeleteIndexed: the anchor must decode to
// owner exactly.
func isOwner(owner Owner) func(Owner) error {
	return func(got Owner) error {
		if got != owner {
			return fmt.Errorf("it is the anchor of %s, not of %s: %w", got, owner, ErrForeign)
		}
		return nil
	}
}

// DeleteNamed deletes the anchor named after uid, like Delete, for callers that know
// only the upstream UID (a finalizer that lost the rest). The anchor must still be a
// well-formed anchor; its labels are not compared with anything, because the name
// already carries the UID and UIDs are unique.
func DeleteNamed(ctx context.Context, hub client.Client, uid types.UID) error {
	if !isUUID(string(uid)) {
		return fmt.Errorf("deleting anchor %s: UID %q is not a canonical UUID: %w", Name(uid), uid, ErrMalformed)
	}
	return deleteAnchor(ctx, hub, uid, func(Owner) error { return nil })
}

// deleteAnchor deletes the single anchor named after uid, if any, after match accepts
// its decoded owner.
func deleteAnchor(ctx context.Context, hub client.Client, uid types.UID, match func(Owner) error) error {
	name := Name(uid)
	found, err := findAnchorsNamed(ctx, hub, name)
	if err != nil {
		return err
	}
	switch len(found) {
	case 0:
		return nil
	case 1:
	default:
		namespaces := make([]string, 0, len(found))
		for _, cm := range found {
			namespaces = append(namespaces, cm.Namespace)
		}
		return fmt.Errorf("deleting anchor %s: found in namespaces %s, deleting none: %w", name, strings.Join(namespaces, ", "), ErrAmbiguous)
	}

	return deleteIfOwners(ctx, hub, &found[0], match)
}

// deleteIfOwners deletes cm, a ConfigMap's metadata as just read from the hub, when it
// is an anchor that match accepts: its name and labels decode (Decode), it has no
// ownerReferences, and it is not already being deleted. The delete is conditional on the
// UID and resourceVersion read (DeleteAsChecked).
func deleteIfOwners(ctx context.Context, hub client.Writer, cm *metav1.PartialObjectMetadata, match func(Owner) error) error {
	key := client.ObjectKeyFromObject(cm)
	got, err := Decode(cm.Name, cm.Labels)
	if err != nil {
		return fmt.Errorf("deleting anchor %s: %w", key, err)
	}
	if len(cm.OwnerReferences) > 0 {
		return fmt.Errorf("deleting anchor %s: it has ownerReferences, so it is not an anchor: %w", key, ErrForeign)
	}
	if err := match(got); err != nil {
		return fmt.Errorf("deleting anchor %s: %w", key, err)
	}
	if cm.DeletionTimestamp != nil {
		// Already on its way out; deleting again would change nothing.
		return nil
	}

	log.FromContext(ctx).Info("Deleting anchor", "anchor", klog.KRef(key.Namespace, key.Name), "uid", cm.UID, "project", got.Project, "labels", cm.Labels)
	if _, err := DeleteAsChecked(ctx, hub, cm); err != nil {
		return fmt.Errorf("deleting anchor %s (uid %s): %w", key, cm.UID, err)
	}
	return nil
}

// DeleteAsChecked deletes the anchor cm exactly as it was checked: conditional on the
// UID and resourceVersion in cm, so an anchor replaced or changed since is never
// deleted (the API server answers with a conflict, returned as an error wrapping it),
// with background propagation, so the hub's garbage collector takes its dependents.
// An anchor already gone is no error: gone reports it. Every anchor deletion, by a
// finalizer or by the resync, goes through here.
func DeleteAsChecked(ctx context.Context, hub client.Writer, cm metav1.Object) (gone bool, err error) {
	// Items of a metadata list carry no reliable kind, so delete through the typed
	// object; the preconditions pin it to exactly what was checked.
	uid, rv := cm.GetUID(), cm.GetResourceVersion()
	target := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: cm.GetNamespace(), Name: cm.GetName()}}
	err = hub.Delete(ctx, target,
		client.Preconditions{UID: &uid, ResourceVersion: &rv},
		client.PropagationPolicy(metav1.DeletePropagationBackground),
	)
	switch {
	case err == nil:
		return false, nil
	case apierrors.IsNotFound(err):
		return true, nil
	case apierrors.IsConflict(err):
		return false, fmt.Errorf("it was replaced or changed since it was checked: %w", err)
	default:
		return false, err
	}
}

// findAnchorsNamed lists the metadata of ConfigMaps named name in namespaces named
// ns-<uuid>. Only metadata is read, since anchors hold nothing else worth reading.
func findAnchorsNamed(ctx context.Context, hub client.Client, name string) ([]metav1.PartialObjectMetadata, error) {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMapList"))
	if err := hub.List(ctx, list, client.MatchingFields{"metadata.name": name}); err != nil {
		return nil, fmt.Errorf("listing ConfigMaps named %s in all namespaces: %w", name, err)
	}
	var found []metav1.PartialObjectMetadata
	for _, item := range list.Items {
		// A field-selected list is filtered by the server; checking again costs nothing
		// and guards against a client that ignores the selector.
		if item.Name != name || !IsMappedNamespaceName(item.Namespace) {
			continue
		}
		found = append(found, item)
	}
	return found, nil
}
