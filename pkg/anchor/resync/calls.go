package resync

import (
	"context"
	"sync/atomic"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The API calls of a pass (PassReport.APICalls) are counted by wrapping every hub and
// plane client the pass uses; reads served by an informer cache go around them.

// countingReader counts each Get and List as one request.
type countingReader struct {
	client.Reader
	n *atomic.Int64
}

func (c countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	c.n.Add(1)
	return c.Reader.Get(ctx, key, obj, opts...)
}

func (c countingReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	c.n.Add(1)
	return c.Reader.List(ctx, list, opts...)
}

// countingWriter counts each write as one request; a pass reads only through
// countingReader (step hands out the writer as a client.Writer).
type countingWriter struct {
	client.Writer
	n *atomic.Int64
}

func (c countingWriter) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	c.n.Add(1)
	return c.Writer.Create(ctx, obj, opts...)
}

func (c countingWriter) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	c.n.Add(1)
	return c.Writer.Update(ctx, obj, opts...)
}

func (c countingWriter) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	c.n.Add(1)
	return c.Writer.Patch(ctx, obj, patch, opts...)
}

func (c countingWriter) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	c.n.Add(1)
	return c.Writer.Delete(ctx, obj, opts...)
}

// countingDependents counts a DependentLister's requests: discovery is two (aggregated
// /api and /apis), a page of a list one.
type countingDependents struct {
	next DependentLister
	n    *atomic.Int64
}

func (c countingDependents) Kinds(ctx context.Context) ([]DependentKind, error) {
	c.n.Add(2)
	return c.next.Kinds(ctx)
}

func (c countingDependents) List(ctx context.Context, kind DependentKind, namespace, cont string) ([]metav1.PartialObjectMetadata, string, error) {
	c.n.Add(1)
	return c.next.List(ctx, kind, namespace, cont)
}
