package gateway

import (
	"context"
	"fmt"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// hubWriteLimits is one token bucket per project for its hub writes (docs/design.md,
// Threat model). Buckets are kept in an LRU; a rebuilt one starts full.
type hubWriteLimits struct {
	perSecond float64
	burst     int
	clk       clock.Clock
	waited    *prometheus.CounterVec // seconds waited, by project; may be nil

	mu      sync.Mutex
	buckets *lru.Cache[string, *rate.Limiter]
}

// maxLimitedProjects bounds the buckets kept: far more projects than a replica holds.
const maxLimitedProjects = 4096

func newHubWriteLimits(perSecond float64, clk clock.Clock, waited *prometheus.CounterVec) *hubWriteLimits {
	buckets, err := lru.New[string, *rate.Limiter](maxLimitedProjects)
	if err != nil {
		panic(fmt.Sprintf("hub write limits: %v", err)) // only for a size below 1
	}
	return &hubWriteLimits{perSecond: perSecond, burst: max(1, int(2*perSecond)), clk: clk, waited: waited, buckets: buckets}
}

// wait returns once project may send one more hub write, or with ctx's error.
func (l *hubWriteLimits) wait(ctx context.Context, project string) error {
	l.mu.Lock()
	b, ok := l.buckets.Get(project)
	if !ok {
		b = rate.NewLimiter(rate.Limit(l.perSecond), l.burst)
		l.buckets.Add(project, b)
	}
	now := l.clk.Now()
	r := b.ReserveN(now, 1)
	l.mu.Unlock()
	delay := r.DelayFrom(now)
	if delay <= 0 {
		return nil
	}
	if l.waited != nil {
		l.waited.WithLabelValues(project).Add(delay.Seconds())
	}
	if deadline, ok := ctx.Deadline(); ok && deadline.Sub(now) < delay {
		r.CancelAt(now)
		return fmt.Errorf("project %q is over its share of hub writes (%g a second): the next would wait %s, past this reconcile's deadline", project, l.perSecond, delay.Round(time.Millisecond))
	}
	t := l.clk.NewTimer(delay)
	defer t.Stop()
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		r.CancelAt(l.clk.Now())
		return ctx.Err()
	}
}

// fairClusters is Clusters whose hub client waits for the project's share before each
// write; reads are not limited.
type fairClusters struct {
	Clusters
	limits *hubWriteLimits
}

func (f fairClusters) Hub(ctx context.Context, project string) (client.Client, client.Reader, error) {
	w, r, err := f.Clusters.Hub(ctx, project)
	if err != nil {
		return nil, nil, err
	}
	return limitedWrites{Client: w, wait: func(ctx context.Context) error { return f.limits.wait(ctx, project) }}, r, nil
}

// waitFunc waits for the project's share of hub writes.
type waitFunc func(context.Context) error

// then runs write once wait lets it, or returns wait's error.
func (wait waitFunc) then(ctx context.Context, write func() error) error {
	if err := wait(ctx); err != nil {
		return err
	}
	return write()
}

// limitedWrites waits before every write it sends, status and subresource writes too.
type limitedWrites struct {
	client.Client
	wait waitFunc
}

func (c limitedWrites) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	return c.wait.then(ctx, func() error { return c.Client.Create(ctx, obj, opts...) })
}

func (c limitedWrites) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	return c.wait.then(ctx, func() error { return c.Client.Update(ctx, obj, opts...) })
}

func (c limitedWrites) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	return c.wait.then(ctx, func() error { return c.Client.Patch(ctx, obj, patch, opts...) })
}

func (c limitedWrites) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	return c.wait.then(ctx, func() error { return c.Client.Apply(ctx, obj, opts...) })
}

func (c limitedWrites) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	return c.wait.then(ctx, func() error { return c.Client.Delete(ctx, obj, opts...) })
}

func (c limitedWrites) DeleteAllOf(ctx context.Context, obj client.Object, opts ...client.DeleteAllOfOption) error {
	return c.wait.then(ctx, func() error { return c.Client.DeleteAllOf(ctx, obj, opts...) })
}

func (c limitedWrites) Status() client.SubResourceWriter {
	return limitedSubResource{SubResourceWriter: c.Client.Status(), wait: c.wait}
}

// SubResource reads through the subresource client and writes through limitedSubResource.
func (c limitedWrites) SubResource(name string) client.SubResourceClient {
	sub := c.Client.SubResource(name)
	return struct {
		client.SubResourceReader
		limitedSubResource
	}{sub, limitedSubResource{SubResourceWriter: sub, wait: c.wait}}
}

type limitedSubResource struct {
	client.SubResourceWriter
	wait waitFunc
}

func (c limitedSubResource) Create(ctx context.Context, obj, sub client.Object, opts ...client.SubResourceCreateOption) error {
	return c.wait.then(ctx, func() error { return c.SubResourceWriter.Create(ctx, obj, sub, opts...) })
}

func (c limitedSubResource) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	return c.wait.then(ctx, func() error { return c.SubResourceWriter.Update(ctx, obj, opts...) })
}

func (c limitedSubResource) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	return c.wait.then(ctx, func() error { return c.SubResourceWriter.Patch(ctx, obj, patch, opts...) })
}

func (c limitedSubResource) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.SubResourceApplyOption) error {
	return c.wait.then(ctx, func() error { return c.SubResourceWriter.Apply(ctx, obj, opts...) })
}
