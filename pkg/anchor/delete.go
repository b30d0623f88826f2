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

// Delete deletes owner's anchor, wherever it is on the hub, through DeleteAsChecked:
// only when exactly one ConfigMap of its name is in an ns-<uuid> namespace
// (else ErrAmbiguous) and decodes to owner exactly (else ErrForeign, ErrMalformed).
// Nothing to delete is not an error. hub must be uncached; its field-selected list
// scans every ConfigMap of the hub, so Delete is for tools (finalizers: DeleteIndexed).
func Delete(ctx context.Context, hub client.Client, owner Owner) error {
	if err := owner.Validate(); err != nil {
		return fmt.Errorf("deleting the anchor of %s: %w", owner, err)
	}
	return deleteAnchor(ctx, hub, owner.UID, isOwner(owner))
}

// isOwner is the match of Delete and DeleteIndexed: the anchor decodes to owner exactly.
func isOwner(owner Owner) func(Owner) error {
	return func(got Owner) error {
		if got != owner {
			return fmt.Errorf("it is the anchor of %s, not of %s: %w", got, owner, ErrForeign)
		}
		return nil
	}
}

// DeleteNamed is Delete for callers that know only the upstream UID: the anchor must
// decode, but its labels are compared with nothing.
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

// deleteIfOwners deletes cm, as just read from the hub, through DeleteAsChecked when it
// decodes, has no ownerReferences, match accepts it and it is not already terminating.
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
		return nil
	}

	log.FromContext(ctx).Info("Deleting anchor", "anchor", klog.KRef(key.Namespace, key.Name), "uid", cm.UID, "project", got.Project, "labels", cm.Labels)
	if _, err := DeleteAsChecked(ctx, hub, cm); err != nil {
		return fmt.Errorf("deleting anchor %s (uid %s): %w", key, cm.UID, err)
	}
	return nil
}

// DeleteAsChecked deletes the anchor cm as it was checked, with its UID and
// resourceVersion as preconditions (a conflict is an error wrapping it) and background
// propagation. An anchor already gone is no error: gone reports it. Every anchor
// deletion, by a finalizer or by the resync, goes through here.
func DeleteAsChecked(ctx context.Context, hub client.Writer, cm metav1.Object) (gone bool, err error) {
	// Metadata list items carry no reliable kind: delete through the typed object.
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

// findAnchorsNamed lists the metadata of ConfigMaps named name in ns-<uuid> namespaces.
func findAnchorsNamed(ctx context.Context, hub client.Client, name string) ([]metav1.PartialObjectMetadata, error) {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMapList"))
	if err := hub.List(ctx, list, client.MatchingFields{"metadata.name": name}); err != nil {
		return nil, fmt.Errorf("listing ConfigMaps named %s in all namespaces: %w", name, err)
	}
	var found []metav1.PartialObjectMetadata
	for _, item := range list.Items {
		// In case a client ignores the field selector.
		if item.Name != name || !IsMappedNamespaceName(item.Namespace) {
			continue
		}
		found = append(found, item)
	}
	return found, nil
}
