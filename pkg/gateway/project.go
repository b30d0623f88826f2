package gateway

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"anchorage/pkg/anchor"
)

// mappedNamespaceOf returns the hub namespace of the upstream namespace name, read
// live, or "" when that namespace no longer exists.
func mappedNamespaceOf(ctx context.Context, project client.Reader, name string) (string, error) {
	ns := &corev1.Namespace{}
	err := project.Get(ctx, client.ObjectKey{Name: name}, ns)
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("reading upstream namespace %s: %w", name, err)
	}
	return anchor.MappedNamespace(ns.UID), nil
}

// addFinalizer adds finalizer to obj with a patch conditional on the resourceVersion
// read.
func addFinalizer(ctx context.Context, c client.Client, obj client.Object, finalizer string) error {
	if controllerutil.ContainsFinalizer(obj, finalizer) {
		return nil
	}
	orig := obj.DeepCopyObject().(client.Object)
	controllerutil.AddFinalizer(obj, finalizer)
	if err := c.Patch(ctx, obj, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("adding finalizer %s to %s: %w", finalizer, client.ObjectKeyFromObject(obj), err)
	}
	return nil
}

// removeFinalizer removes finalizers from obj in one patch, conditional on the
// resourceVersion read. Only a NotFound that proves obj gone is success (one naming its
// namespace is not).
func removeFinalizer(ctx context.Context, c client.Client, obj client.Object, finalizers ...string) error {
	orig := obj.DeepCopyObject().(client.Object)
	removed := false
	for _, f := range finalizers {
		removed = controllerutil.RemoveFinalizer(obj, f) || removed
	}
	if !removed {
		return nil
	}
	err := c.Patch(ctx, obj, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
	if err != nil && !isNotFoundOf(c, err, obj) {
		return fmt.Errorf("removing finalizers %v from %s: %w", finalizers, client.ObjectKeyFromObject(obj), err)
	}
	return nil
}

// isNotFoundOf reports whether err proves obj itself absent
// (anchor.NotFoundProvesAbsence); an unresolvable resource proves nothing.
func isNotFoundOf(c client.Client, err error, obj client.Object) bool {
	if !apierrors.IsNotFound(err) {
		return false
	}
	gvk, gvkErr := c.GroupVersionKindFor(obj)
	if gvkErr != nil {
		return false
	}
	mapping, mapErr := c.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
	if mapErr != nil {
		return false
	}
	return anchor.NotFoundProvesAbsence(err, mapping.Resource.GroupResource(), obj.GetName())
}

// patchStatus writes after's status when it differs from before's, conditional on the
// resourceVersion read.
func patchStatus(ctx context.Context, c client.Client, before, after client.Object) error {
	if equality.Semantic.DeepEqual(before, after) {
		return nil
	}
	err := c.Status().Patch(ctx, after, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("writing status of %s: %w", client.ObjectKeyFromObject(after), err)
	}
	return nil
}
