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

// NameIndex answers, from a cache of the hub (resync.AnchorCache), which ConfigMaps
// carry a name, in any namespace, anchors or not. Before it has synced it must fail or
// block until ctx ends, never answer an empty list.
type NameIndex interface {
	Named(ctx context.Context, name string) ([]metav1.PartialObjectMetadata, error)
}

// IndexWait bounds how long DeleteIndexed waits for the index; past it, nothing is
// deleted and the caller retries.
const IndexWait = 10 * time.Second

// DeleteIndexed deletes owner's anchor by a live GET in hubNamespace ("": where index shows
// it) and DeleteAsChecked (docs/design.md, Anchor deletes cost two calls); index showing
// another ns-<uuid> one is ErrAmbiguous. Nothing to delete is no error. hub must be uncached.
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
	target, err := anchorNamespace(ctx, index, name, hubNamespace)
	if err != nil || target == "" {
		return err
	}
	key := client.ObjectKey{Namespace: target, Name: name}
	cm := &metav1.PartialObjectMetadata{}
	cm.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
	err = hub.Get(ctx, key, cm)
	if NotFoundProvesAbsence(err, corev1.Resource("configmaps"), name) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading anchor %s: %w", key, err)
	}
	return deleteIfOwners(ctx, hub, cm, owner)
}

// anchorNamespace returns where the anchor named name is to be read: the one namespace
// among hubNamespace and the ns-<uuid> ones index shows it in (waiting at most IndexWait),
// "" when there is none, ErrAmbiguous when there are more.
func anchorNamespace(ctx context.Context, index NameIndex, name, hubNamespace string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, IndexWait)
	defer cancel()
	items, err := index.Named(ctx, name)
	if err != nil {
		return "", fmt.Errorf("looking up anchor %s in the hub's anchor cache: %w", name, err)
	}
	namespaces := []string{}
	if hubNamespace != "" {
		namespaces = append(namespaces, hubNamespace)
	}
	for _, item := range items {
		if item.Name == name && IsMappedNamespaceName(item.Namespace) && item.Namespace != hubNamespace {
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
