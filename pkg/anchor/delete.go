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

// isOwner is the match of DeleteIndexed: the anchor decodes to owner exactly.
func isOwner(owner Owner) func(Owner) error {
	return func(got Owner) error {
		if got != owner {
			return fmt.Errorf("it is the anchor of %s, not of %s: %w", got, owner, ErrForeign)
		}
		return nil
	}
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
