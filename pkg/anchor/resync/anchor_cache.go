package resync

import (
	"context"
	"fmt"
	"hash/fnv"
	"net/http"
	"slices"
	"strconv"
	"unique"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"anchorage/pkg/anchor"
)

// Index names of the anchor cache.
const (
	indexProject = "anchorage.anchor.project"
	indexName    = "anchorage.anchor.name"
)

// AnchorCache is a metadata-only cache of the hub's ConfigMaps carrying
// LabelClusterName, slimmed (slimAnchor) and indexed by project and name. A Runnable.
type AnchorCache struct {
	cache cache.Cache
	// store is the informer's indexer, read directly: List cannot hand out cachedAnchors.
	store toolscache.Indexer
}

// NewAnchorCache builds the anchor cache of the hub at cfg, through hc and mapper (built
// from cfg when nil).
func NewAnchorCache(ctx context.Context, cfg *rest.Config, hc *http.Client, mapper meta.RESTMapper) (*AnchorCache, error) {
	req, err := labels.NewRequirement(anchor.LabelClusterName, selection.Exists, nil)
	if err != nil {
		return nil, fmt.Errorf("building the anchor label selector: %w", err)
	}
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("building the anchor cache scheme: %w", err)
	}
	c, err := cache.New(cfg, cache.Options{
		HTTPClient:                  hc,
		Mapper:                      mapper,
		Scheme:                      scheme,
		DefaultLabelSelector:        labels.NewSelector().Add(*req),
		DefaultTransform:            slimAnchor,
		ReaderFailOnMissingInformer: true,
	})
	if err != nil {
		return nil, fmt.Errorf("building the anchor cache: %w", err)
	}
	obj := coreMeta("ConfigMap")
	// Registered before Start, the one informer starts with the cache.
	inf, err := c.GetInformer(ctx, obj, cache.BlockUntilSynced(false))
	if err != nil {
		return nil, fmt.Errorf("registering the anchor informer: %w", err)
	}
	if err := inf.AddIndexers(anchorIndexers()); err != nil {
		return nil, fmt.Errorf("indexing anchors: %w", err)
	}
	indexed, ok := inf.(interface{ GetIndexer() toolscache.Indexer })
	if !ok {
		return nil, fmt.Errorf("the anchor informer (%T) has no indexer", inf)
	}
	return &AnchorCache{cache: c, store: indexed.GetIndexer()}, nil
}

// Start runs the cache until ctx ends.
func (a *AnchorCache) Start(ctx context.Context) error { return a.cache.Start(ctx) }

// WaitForCacheSync waits until the cache has listed the hub's anchors once.
func (a *AnchorCache) WaitForCacheSync(ctx context.Context) bool {
	return a.cache.WaitForCacheSync(ctx)
}

// ProjectAnchors implements AnchorSource. Items share their labels, ownerReferences and
// finalizers with the cache: callers must not change them.
func (a *AnchorCache) ProjectAnchors(ctx context.Context, project string) ([]metav1.PartialObjectMetadata, error) {
	return a.list(ctx, fieldIndexPrefix+indexProject, project)
}

// Named implements AnchorSource.
func (a *AnchorCache) Named(ctx context.Context, name string) ([]metav1.PartialObjectMetadata, error) {
	items, err := a.list(ctx, fieldIndexPrefix+indexName, nameBucket(name))
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(items, func(item metav1.PartialObjectMetadata) bool { return item.Name != name }), nil
}

// All returns every cached item.
func (a *AnchorCache) All(ctx context.Context) ([]metav1.PartialObjectMetadata, error) {
	return a.list(ctx, "", "")
}

// noBucket is a name index value no item has (buckets are hexadecimal).
const noBucket = "none"

// list returns the items index holds under value (every item when index is ""), after a
// probe List that fails as the cache's reads do (not started, not synced).
func (a *AnchorCache) list(ctx context.Context, index, value string) ([]metav1.PartialObjectMetadata, error) {
	probe := coreMetaList("ConfigMapList")
	if err := a.cache.List(ctx, probe, client.MatchingFields{indexName: noBucket}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing cached anchors: %w", err)
	}
	var objs []any
	if index == "" {
		objs = a.store.List()
	} else {
		var err error
		if objs, err = a.store.ByIndex(index, allNamespacesKey+value); err != nil {
			return nil, fmt.Errorf("listing cached anchors: %w", err)
		}
	}
	items := make([]metav1.PartialObjectMetadata, 0, len(objs))
	for _, obj := range objs {
		c, ok := obj.(*cachedAnchor)
		if !ok {
			return nil, fmt.Errorf("listing cached anchors: the store holds a %T", obj)
		}
		items = append(items, c.item())
	}
	return items, nil
}

// slimAnchor is the anchor cache's transform: it keeps of each item only the fields its
// readers read (cachedAnchor; docs/design.md, What a pass costs), sharing the strings
// that repeat. Anything else (a deletion tombstone, a slimmed item) passes as it is.
func slimAnchor(obj any) (any, error) {
	o, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return obj, nil
	}
	// Name, UID, resourceVersion and owner name share one allocation.
	ownerName := o.Labels[anchor.LabelName]
	own := o.Name + string(o.UID) + o.ResourceVersion + ownerName
	name, rest := own[:len(o.Name)], own[len(o.Name):]
	uid, rest := rest[:len(o.UID)], rest[len(o.UID):]
	rv, ownerName := rest[:len(o.ResourceVersion)], rest[len(o.ResourceVersion):]
	c := &cachedAnchor{
		typeMeta: unique.Make(metav1.TypeMeta{APIVersion: o.APIVersion, Kind: o.Kind}),
		name:     name, namespace: shared(o.Namespace), uid: types.UID(uid), resourceVersion: rv,
		labels: slimLabels(o.Labels, ownerName), created: o.CreationTimestamp,
	}
	if o.OwnerReferences != nil || o.DeletionTimestamp != nil || o.Finalizers != nil {
		c.rare = &cachedRare{ownerReferences: o.OwnerReferences, deletionTimestamp: o.DeletionTimestamp, finalizers: o.Finalizers}
	}
	return c, nil
}

// sharedLabelValues are the anchor labels whose values repeat across anchors.
var sharedLabelValues = map[string]bool{
	anchor.LabelClusterName: true, anchor.LabelGroup: true, anchor.LabelKind: true, anchor.LabelNamespace: true,
}

// slimLabels copies labels, sharing keys and sharedLabelValues; ownerName is LabelName's.
func slimLabels(in map[string]string, ownerName string) map[string]string {
	if in == nil {
		return nil
	}
	out := make(map[string]string, len(in))
	for k, v := range in {
		switch {
		case sharedLabelValues[k]:
			v = shared(v)
		case k == anchor.LabelName:
			v = ownerName
		}
		out[shared(k)] = v
	}
	return out
}

// shared returns the canonical copy of s.
func shared(s string) string { return unique.Make(s).Value() }

// The indexes are read only across namespaces: each item is indexed under its
// all-namespaces key alone, in controller-runtime's field index format. The name index
// holds name buckets (about 100 anchors each at 100,000), not a set per name.
const (
	fieldIndexPrefix = "field:"
	allNamespacesKey = "__all_namespaces/"
	nameBuckets      = 1024
)

// anchorIndexers index the anchor cache by project and by name bucket.
func anchorIndexers() toolscache.Indexers {
	return toolscache.Indexers{
		fieldIndexPrefix + indexProject: indexBy(func(c *cachedAnchor) string { return projectOfLabels(c.labels) }),
		fieldIndexPrefix + indexName:    indexBy(func(c *cachedAnchor) string { return nameBucket(c.name) }),
	}
}

// indexBy indexes a cached anchor under its all-namespaces key and value(c).
func indexBy(value func(*cachedAnchor) string) toolscache.IndexFunc {
	return func(obj any) ([]string, error) {
		c, ok := obj.(*cachedAnchor)
		if !ok {
			return nil, fmt.Errorf("indexing anchors: %T is not a cached anchor", obj)
		}
		return []string{allNamespacesKey + value(c)}, nil
	}
}

// nameBucket returns the name index's bucket of name.
func nameBucket(name string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(name))
	return strconv.FormatUint(uint64(h.Sum32()%nameBuckets), 16)
}
