package resync

import (
	"context"
	"fmt"
	"reflect"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"anchorage/pkg/anchor"
)

// Plane is how a pass reads one project's control plane.
type Plane struct {
	Cache  client.Reader   // the owner's strict cache (StrictReader); nil: every owner is read live
	Scheme *runtime.Scheme // holds the typed kinds the cache may watch
	Live   client.Reader   // reads the plane's API server (never a cache)
	Mapper meta.RESTMapper // maps an owner's group and kind to the resource a live read needs
	// SecretUID is the UID of the Secret the plane was built from (the sweep): a pass
	// whose project's Secret has another UID reads nothing of it. Empty: not checked.
	SecretUID types.UID
}

// cacheReader returns a reader of the plane's owner cache for one pass.
func (p Plane) cacheReader() *ownerCacheReader {
	return &ownerCacheReader{plane: p, kinds: map[schema.GroupKind][]client.Object{}}
}

// ownerCacheReader reads owners from the plane's cache for one pass, reusing one
// object per kind and version, zeroed before each read, to spare an allocation per
// owner; observations keep only copies and the cache's finalizers slice.
type ownerCacheReader struct {
	plane Plane
	kinds map[schema.GroupKind][]client.Object // holds, per owner kind, one object per version in the scheme's order
}

// read reads owner from the cache without starting an informer: NotWatched when the
// cache watches no version of the kind the scheme knows.
func (c *ownerCacheReader) read(ctx context.Context, owner anchor.Owner) Observation {
	if c.plane.Cache == nil || c.plane.Scheme == nil {
		return Observation{State: NotWatched}
	}
	key := client.ObjectKey{Namespace: owner.Namespace, Name: owner.Name}
	for _, cobj := range c.objectsOf(schema.GroupKind{Group: owner.Group, Kind: owner.Kind}) {
		reflect.ValueOf(cobj).Elem().SetZero()
		// Read at once and never changed: no deep copy.
		err := c.plane.Cache.Get(ctx, key, cobj, client.UnsafeDisableDeepCopy)
		switch {
		case err == nil:
			return observed(cobj)
		case isNotCached(err):
			continue
		case apierrors.IsNotFound(err):
			return Observation{State: Absent}
		default:
			return Observation{State: Failed}
		}
	}
	return Observation{State: NotWatched}
}

// objectsOf returns the objects owners of gk are read into, built on first use.
func (c *ownerCacheReader) objectsOf(gk schema.GroupKind) []client.Object {
	if objs, ok := c.kinds[gk]; ok {
		return objs
	}
	var objs []client.Object
	for _, gv := range c.plane.Scheme.PrioritizedVersionsForGroup(gk.Group) {
		gvk := gv.WithKind(gk.Kind)
		if !c.plane.Scheme.Recognizes(gvk) {
			continue
		}
		if obj, err := c.plane.Scheme.New(gvk); err == nil {
			if cobj, ok := obj.(client.Object); ok {
				objs = append(objs, cobj)
			}
		}
	}
	c.kinds[gk] = objs
	return objs
}

// readLive reads owner's metadata from the plane's API server.
func (p Plane) readLive(ctx context.Context, owner anchor.Owner) (Observation, error) {
	mapping, err := p.Mapper.RESTMapping(schema.GroupKind{Group: owner.Group, Kind: owner.Kind})
	if meta.IsNoMatchError(err) {
		return Observation{State: NotServed}, err
	}
	if err != nil {
		return Observation{State: Failed}, fmt.Errorf("mapping %s: %w", owner, err)
	}
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(mapping.GroupVersionKind)
	err = p.Live.Get(ctx, client.ObjectKey{Namespace: owner.Namespace, Name: owner.Name}, obj)
	switch {
	case err == nil:
		return observed(obj), nil
	case apierrors.IsNotFound(err) && anchor.NotFoundProvesAbsence(err, mapping.Resource.GroupResource(), owner.Name):
		return Observation{State: Absent}, nil
	case apierrors.IsNotFound(err):
		return Observation{State: NotServed}, err
	case apierrors.IsForbidden(err):
		where := "in namespace " + owner.Namespace
		if owner.Namespace == "" {
			where = "at cluster scope"
		}
		return Observation{State: Forbidden}, fmt.Errorf("forbidden: the manager may not get %s %s on the project's plane; anchors of this kind stay unknown until it may: %w", mapping.Resource.GroupResource(), where, err)
	}
	return Observation{State: Failed}, fmt.Errorf("reading %s live: %w", owner, err)
}

// readNamespace reads the upstream namespace live and compares it with hubNamespace.
func (p Plane) readNamespace(ctx context.Context, upstream, hubNamespace string) (NamespaceState, error) {
	ns := coreMeta("Namespace")
	err := p.Live.Get(ctx, client.ObjectKey{Name: upstream}, ns)
	switch {
	case err == nil:
		if anchor.MappedNamespace(ns.UID) == hubNamespace {
			return NamespaceMatches, nil
		}
		return NamespaceRecreated, nil
	case apierrors.IsNotFound(err) && anchor.NotFoundProvesAbsence(err, corev1.Resource("namespaces"), upstream):
		return NamespaceGone, nil
	}
	return NamespaceUnknown, fmt.Errorf("reading upstream namespace %s: %w", upstream, err)
}

// readPlaneIdentity returns the UID of the plane's "default" Namespace.
func (p Plane) readPlaneIdentity(ctx context.Context) (types.UID, error) {
	ns := coreMeta("Namespace")
	if err := p.Live.Get(ctx, client.ObjectKey{Name: metav1.NamespaceDefault}, ns); err != nil {
		return "", fmt.Errorf("reading the plane's default namespace: %w", err)
	}
	return ns.UID, nil
}

// observed turns a read object into a Present observation.
func observed(obj client.Object) Observation {
	o := Observation{State: Present, UID: obj.GetUID(), Finalizers: obj.GetFinalizers()}
	if ts := obj.GetDeletionTimestamp(); ts != nil {
		t := ts.Time
		o.Deleting = &t
	}
	return o
}
