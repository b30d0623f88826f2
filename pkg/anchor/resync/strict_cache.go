package resync

import (
	"context"
	"errors"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
)

// StrictCacheOption builds a project cluster's cache in ReaderFailOnMissingInformer
// mode for the resync (StrictReader), wrapped so that every other reader still starts
// a missing informer on first use.
func StrictCacheOption() cluster.Option {
	return func(o *cluster.Options) {
		inner := o.NewCache
		if inner == nil {
			inner = cache.New
		}
		o.NewCache = func(cfg *rest.Config, co cache.Options) (cache.Cache, error) {
			co.ReaderFailOnMissingInformer = true
			c, err := inner(cfg, co)
			if err != nil {
				return nil, err
			}
			return &lazyCache{Cache: c, scheme: co.Scheme}, nil
		}
	}
}

// StrictReader returns the reader of c that fails with cache.ErrResourceNotCached for a
// kind c does not already watch, if c was built with StrictCacheOption.
func StrictReader(c cache.Cache) (client.Reader, bool) {
	l, ok := c.(*lazyCache)
	if !ok {
		return nil, false
	}
	return l.Cache, true
}

// lazyCache is a strict cache that, like a default one, starts a missing informer.
type lazyCache struct {
	cache.Cache
	scheme *runtime.Scheme
}

func isNotCached(err error) bool {
	var nc *cache.ErrResourceNotCached
	return errors.As(err, &nc)
}

// Get implements client.Reader.
func (l *lazyCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	err := l.Cache.Get(ctx, key, obj, opts...)
	if !isNotCached(err) {
		return err
	}
	if _, err := l.Cache.GetInformer(ctx, obj); err != nil {
		return err
	}
	return l.Cache.Get(ctx, key, obj, opts...)
}

// List implements client.Reader.
func (l *lazyCache) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	err := l.Cache.List(ctx, list, opts...)
	if !isNotCached(err) {
		return err
	}
	item, err := l.itemOf(list)
	if err != nil {
		return err
	}
	if _, err := l.Cache.GetInformer(ctx, item); err != nil {
		return err
	}
	return l.Cache.List(ctx, list, opts...)
}

// itemOf returns an empty item of list's kind and flavour (typed, unstructured or
// metadata): the cache keys informers by both.
func (l *lazyCache) itemOf(list client.ObjectList) (client.Object, error) {
	gvk, err := apiutil.GVKForObject(list, l.scheme)
	if err != nil {
		return nil, err
	}
	gvk.Kind = strings.TrimSuffix(gvk.Kind, "List")
	switch list.(type) {
	case *unstructured.UnstructuredList:
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		return u, nil
	case *metav1.PartialObjectMetadataList:
		p := &metav1.PartialObjectMetadata{}
		p.SetGroupVersionKind(gvk)
		return p, nil
	}
	obj, err := l.scheme.New(gvk)
	if err != nil {
		return nil, err
	}
	cobj, ok := obj.(client.Object)
	if !ok {
		return nil, fmt.Errorf("%s is not a client.Object", gvk)
	}
	return cobj, nil
}
