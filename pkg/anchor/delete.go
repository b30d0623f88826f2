package anchor

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// deleteIfOwners deletes cm, as just read from the hub, through DeleteAsChecked when it
// decodes to owner exactly, has no ownerReferences and is not already terminating.
func deleteIfOwners(ctx context.Context, hub client.Writer, cm *metav1.PartialObjectMetadata, owner Owner) error {
	key := client.ObjectKeyFromObject(cm)
	got, err := Decode(cm.Name, cm.Labels)
	if err != nil {
		return fmt.Errorf("deleting anchor %s: %w", key, err)
	}
	if len(cm.OwnerReferences) > 0 {
		return fmt.Errorf("deleting anchor %s: it has ownerReferences, so it is not an anchor: %w", key, ErrForeign)
	}
	if got != owner {
		return fmt.Errorf("deleting anchor %s: it is the anchor of %s, not of %s: %w", key, got, owner, ErrForeign)
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

// DeleteAsChecked deletes the anchor cm as checked, its UID and resourceVersion as
// preconditions (a conflict is an error wrapping it), in the background; gone reports it
// already gone, no error. Every anchor deletion, by a finalizer or the resync, is here.
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
