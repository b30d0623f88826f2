package resync

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	toolscache "k8s.io/client-go/tools/cache"

	"anchorage/pkg/anchor"
)

// listedAnchor is an anchor's metadata as a metadata list decodes it: every string its
// own allocation, managed fields included.
func listedAnchor(project string, ns, i int) *metav1.PartialObjectMetadata {
	o := anchor.Owner{Project: project, Group: "gateway.networking.k8s.io", Kind: "Gateway",
		Namespace: fmt.Sprintf("team-%03d", ns), Name: fmt.Sprintf("gw-%03d", i), UID: uuid.NewUUID()}
	labels := map[string]string{}
	for k, v := range o.Labels() {
		labels[strings.Clone(k)] = strings.Clone(v)
	}
	now := metav1.NewTime(time.Now())
	return &metav1.PartialObjectMetadata{
		TypeMeta: metav1.TypeMeta{APIVersion: strings.Clone("v1"), Kind: strings.Clone("ConfigMap")},
		ObjectMeta: metav1.ObjectMeta{
			Name: anchor.Name(o.UID), Namespace: anchor.MappedNamespace(types.UID(fmt.Sprintf("00000000-0000-0000-0000-%012d", ns))),
			UID: uuid.NewUUID(), ResourceVersion: fmt.Sprint(100000 + i), CreationTimestamp: now, Labels: labels,
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: strings.Clone("anchorage"), Operation: metav1.ManagedFieldsOperationApply,
				APIVersion: strings.Clone("v1"), Time: &now, FieldsType: strings.Clone("FieldsV1"),
				FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:labels":{"f:meta.datumapis.com/upstream-cluster-name":{},"f:meta.datumapis.com/upstream-group":{},"f:meta.datumapis.com/upstream-kind":{},"f:meta.datumapis.com/upstream-name":{},"f:meta.datumapis.com/upstream-namespace":{}}}}`)}}},
		},
	}
}

// storeHeap returns the heap an indexer with indexers holds per 1,000 of n anchors
// passed through transform, in MB.
func storeHeap(t *testing.T, n int, transform func(any) (any, error), indexers toolscache.Indexers) float64 {
	t.Helper()
	all := toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc}
	for k, v := range indexers {
		all[k] = v
	}
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	store := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, all)
	for i := range n {
		obj, err := transform(listedAnchor("proj-a", i/100, i%100))
		if err != nil {
			t.Fatal(err)
		}
		if err := store.Add(obj); err != nil {
			t.Fatal(err)
		}
	}
	after := heap()
	runtime.KeepAlive(store)
	return float64(after-before) / float64(n) * 1000 / 1e6
}

// fieldIndexBothWays indexes as cache.IndexField does: each value under the item's
// namespace and under all namespaces.
func fieldIndexBothWays(value func(*metav1.PartialObjectMetadata) string) toolscache.IndexFunc {
	return func(obj any) ([]string, error) {
		o := obj.(*metav1.PartialObjectMetadata)
		return []string{o.Namespace + "/" + value(o), allNamespacesKey + value(o)}, nil
	}
}

// TestAnchorCacheStoreMemory measures the anchor cache's store (the informer's indexer
// with the cache's transform and indexes) over realistic anchor metadata, without an
// API server: the heap per 1,000 anchors must stay within 0.9 MB (the real informer
// adds a few dozen bytes per anchor: its queue keeps the array it synced through). The
// layout the cache had before (managed fields stripped only, IndexField indexes by
// project and exact name) is measured the same way for comparison.
// BenchmarkResyncSteadyPass measures the real informer.
func TestAnchorCacheStoreMemory(t *testing.T) {
	const n = 100000
	stripManaged := func(obj any) (any, error) {
		o := obj.(*metav1.PartialObjectMetadata)
		o.ManagedFields = nil
		return o, nil
	}
	before := storeHeap(t, n, stripManaged, toolscache.Indexers{
		fieldIndexPrefix + indexProject: fieldIndexBothWays(func(o *metav1.PartialObjectMetadata) string { return projectOfLabels(o.Labels) }),
		fieldIndexPrefix + indexName:    fieldIndexBothWays(func(o *metav1.PartialObjectMetadata) string { return o.Name }),
	})
	now := storeHeap(t, n, slimAnchor, anchorIndexers())
	t.Logf("anchor cache store: %.2f MB per 1,000 anchors (the former layout: %.2f MB)", now, before)
	if now > 0.9 {
		t.Errorf("the anchor cache holds %.2f MB per 1,000 anchors, want at most 0.9 MB", now)
	}
}
