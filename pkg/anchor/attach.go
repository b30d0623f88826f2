package anchor

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// EnsureMappedNamespace creates or adopts the hub namespace mirroring upstreamNS in
// project and returns its name; adopting adds the labels it lacks, and one labelled with
// other values (ErrForeign) or terminating is refused (docs/design.md, Mapped namespaces).
func EnsureMappedNamespace(ctx context.Context, hub client.Client, project string, upstreamNS *corev1.Namespace) (string, error) {
	if upstreamNS == nil {
		return "", fmt.Errorf("ensuring mapped namespace in project %q: no upstream namespace given", project)
	}
	if err := validateMappedNamespaceInput(project, upstreamNS); err != nil {
		return "", err
	}
	name := MappedNamespace(upstreamNS.UID)
	want := map[string]string{
		LabelNamespace:   upstreamNS.Name,
		LabelClusterName: ClusterNameValue(project),
	}

	// Changed or created since read: read again.
	retriable := func(err error) bool { return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) }
	err := retry.OnError(retry.DefaultRetry, retriable, func() error {
		// Fresh each time: decoding into a used object merges maps.
		current := &corev1.Namespace{}
		err := hub.Get(ctx, client.ObjectKey{Name: name}, current)
		if apierrors.IsNotFound(err) {
			return hub.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: want}})
		}
		if err != nil {
			return err
		}
		return adoptMappedNamespace(ctx, hub, current, project, want)
	})
	if err != nil {
		return "", fmt.Errorf("ensuring mapped namespace %s for namespace %s of project %q: %w", name, upstreamNS.Name, project, err)
	}
	return name, nil
}

// validateMappedNamespaceInput refuses inputs that would produce a namespace IsAnchor
// rejects, or labels no one can read back.
func validateMappedNamespaceInput(project string, upstreamNS *corev1.Namespace) error {
	if !isUUID(string(upstreamNS.UID)) {
		return fmt.Errorf("ensuring mapped namespace for namespace %q of project %q: UID %q is not a canonical UUID: %w", upstreamNS.Name, project, upstreamNS.UID, ErrMalformed)
	}
	if errs := validation.IsDNS1123Label(upstreamNS.Name); len(errs) > 0 {
		return fmt.Errorf("ensuring mapped namespace for namespace %q of project %q: %s: %w", upstreamNS.Name, project, strings.Join(errs, "; "), ErrMalformed)
	}
	cluster := ClusterNameValue(project)
	if got, err := ProjectFromClusterName(cluster); err != nil || got != project {
		return fmt.Errorf("ensuring mapped namespace for namespace %q: project %q cannot be encoded in a label: %w", upstreamNS.Name, project, ErrMalformed)
	}
	if errs := validation.IsValidLabelValue(cluster); len(errs) > 0 {
		return fmt.Errorf("ensuring mapped namespace for namespace %q: project %q: %s: %w", upstreamNS.Name, project, strings.Join(errs, "; "), ErrMalformed)
	}
	return nil
}

// adoptMappedNamespace adds the labels in want that ns lacks, with a patch conditional
// on the resourceVersion read, so a concurrent writer's change is never overwritten.
func adoptMappedNamespace(ctx context.Context, hub client.Client, ns *corev1.Namespace, project string, want map[string]string) error {
	if ns.DeletionTimestamp != nil {
		return fmt.Errorf("namespace is terminating")
	}
	if v, ok := ns.Labels[LabelNamespace]; ok && v != want[LabelNamespace] {
		return fmt.Errorf("label %s=%q, want %q: %w", LabelNamespace, v, want[LabelNamespace], ErrForeign)
	}
	if v, ok := ns.Labels[LabelClusterName]; ok {
		if got, err := ProjectFromClusterName(v); err != nil || got != project {
			return fmt.Errorf("label %s=%q does not name project %q: %w", LabelClusterName, v, project, ErrForeign)
		}
	}

	orig := ns.DeepCopy()
	labels := maps.Clone(want)
	maps.Copy(labels, ns.Labels) // its own values stay
	if maps.Equal(labels, ns.Labels) {
		return nil
	}
	ns.Labels = labels
	return hub.Patch(ctx, ns, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
}

// Attach finds or creates owner's anchor in hubNamespace, then gives downstream (in memory;
// it must be in hubNamespace) owner's labels and one anchor ownerReference, to it, keeping
// its other references (docs/design.md, Downstream objects). A foreign ConfigMap: ErrForeign.
func Attach(ctx context.Context, hub client.Client, owner Owner, hubNamespace string, downstream client.Object) (*corev1.ConfigMap, error) {
	if err := owner.Validate(); err != nil {
		return nil, fmt.Errorf("attaching to the anchor of %s: %w", owner, err)
	}
	if !IsMappedNamespaceName(hubNamespace) {
		return nil, fmt.Errorf("attaching to the anchor of %s: hub namespace %q is not named %s<uuid>: %w", owner, hubNamespace, NamespacePrefix, ErrMalformed)
	}
	if downstream == nil {
		return nil, fmt.Errorf("attaching to the anchor of %s: no downstream object given", owner)
	}
	if downstream.GetNamespace() != hubNamespace {
		return nil, fmt.Errorf("attaching %s/%s to the anchor of %s: the object is not in the anchor's namespace %s", downstream.GetNamespace(), downstream.GetName(), owner, hubNamespace)
	}

	anchor, err := ensureAnchor(ctx, hub, owner, hubNamespace)
	if err != nil {
		return nil, err
	}

	labels := downstream.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, owner.Labels())
	downstream.SetLabels(labels)
	downstream.SetOwnerReferences(withAnchorReference(downstream.GetOwnerReferences(), anchor))
	return anchor, nil
}

// ensureAnchor returns owner's anchor in namespace, creating it if absent.
func ensureAnchor(ctx context.Context, hub client.Client, owner Owner, namespace string) (*corev1.ConfigMap, error) {
	key := client.ObjectKey{Namespace: namespace, Name: Name(owner.UID)}
	anchor := &corev1.ConfigMap{}
	err := hub.Get(ctx, key, anchor)
	if apierrors.IsNotFound(err) {
		anchor = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			Namespace: key.Namespace,
			Name:      key.Name,
			Labels:    owner.Labels(),
		}}
		if err = hub.Create(ctx, anchor); err == nil {
			return anchor, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("creating anchor %s for %s: %w", key, owner, err)
		}
		// Created concurrently: use it if it is ours.
		anchor = &corev1.ConfigMap{}
		err = hub.Get(ctx, key, anchor)
	}
	if err != nil {
		return nil, fmt.Errorf("reading anchor %s for %s: %w", key, owner, err)
	}
	if err := checkAnchorOf(anchor, owner); err != nil {
		return nil, fmt.Errorf("attaching to anchor %s for %s: %w", key, owner, err)
	}
	return anchor, nil
}

// checkAnchorOf returns an error wrapping ErrForeign unless cm is owner's anchor and
// can still take dependents.
func checkAnchorOf(cm *corev1.ConfigMap, owner Owner) error {
	got, err := Decode(cm.Name, cm.Labels)
	if err != nil {
		return fmt.Errorf("existing ConfigMap is not an anchor (%w): %w", err, ErrForeign)
	}
	if got != owner {
		return fmt.Errorf("existing ConfigMap is the anchor of %s: %w", got, ErrForeign)
	}
	if len(cm.OwnerReferences) > 0 {
		return fmt.Errorf("existing ConfigMap has ownerReferences: %w", ErrForeign)
	}
	if len(cm.Data) > 0 || len(cm.BinaryData) > 0 {
		return fmt.Errorf("existing ConfigMap holds data: %w", ErrForeign)
	}
	// A dependent attached now would be collected with it.
	if cm.DeletionTimestamp != nil {
		return fmt.Errorf("existing anchor is being deleted: %w", ErrForeign)
	}
	return nil
}

// withAnchorReference returns refs with every anchor reference replaced by one to
// anchor, in the place of the first, so re-attaching changes nothing.
func withAnchorReference(refs []metav1.OwnerReference, anchor *corev1.ConfigMap) []metav1.OwnerReference {
	want := metav1.OwnerReference{
		APIVersion: "v1",
		Kind:       "ConfigMap",
		Name:       anchor.Name,
		UID:        anchor.UID,
	}
	first := slices.IndexFunc(refs, IsAnchorReference)
	out := slices.DeleteFunc(slices.Clone(refs), IsAnchorReference)
	if first < 0 {
		return append(out, want)
	}
	return slices.Insert(out, first, want)
}

// IsAnchorReference reports whether ref points at an anchor-named core ConfigMap, which
// only the manager hangs objects on.
func IsAnchorReference(ref metav1.OwnerReference) bool {
	return ref.APIVersion == "v1" && ref.Kind == "ConfigMap" && strings.HasPrefix(ref.Name, NamePrefix)
}

// HangsOn reports whether obj holds an ownerReference to the anchor named anchorName.
func HangsOn(obj metav1.Object, anchorName string) bool {
	return slices.ContainsFunc(obj.GetOwnerReferences(), func(ref metav1.OwnerReference) bool {
		return IsAnchorReference(ref) && ref.Name == anchorName
	})
}
