package bench

import (
	"context"
	"sync"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"anchorage/api/v1alpha"
	"anchorage/internal/app"
)

// programTracker remembers when a watch first saw each proxy Programmed=True.
type programTracker struct {
	mu   sync.Mutex
	seen map[ProxyKey]time.Time
}

func newProgramTracker() *programTracker {
	return &programTracker{seen: map[ProxyKey]time.Time{}}
}

// observe records px as seen at at when it is Programmed and was not seen before.
func (t *programTracker) observe(project string, px *v1alpha.HTTPProxy, at time.Time) {
	if !apimeta.IsStatusConditionTrue(px.Status.Conditions, v1alpha.ConditionProgrammed) {
		return
	}
	k := ProxyKey{Project: project, Namespace: px.Namespace, Name: px.Name}
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.seen[k]; !ok {
		t.seen[k] = at
	}
}

func (t *programTracker) count() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.seen)
}

func (t *programTracker) times() map[ProxyKey]time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[ProxyKey]time.Time, len(t.seen))
	for k, v := range t.seen {
		out[k] = v
	}
	return out
}

// watchAll watches the HTTPProxies of every project until ctx ends. Each watch is
// open when watchAll returns.
func (t *programTracker) watchAll(ctx context.Context, env *Env, projects []ProjectLoad) error {
	for _, p := range projects {
		c, err := client.NewWithWatch(env.Planes[p.Plane].Config, client.Options{Scheme: app.Scheme()})
		if err != nil {
			return err
		}
		w, err := c.Watch(ctx, &v1alpha.HTTPProxyList{}, client.InNamespace(p.Namespace))
		if err != nil {
			return err
		}
		go t.follow(ctx, c, p, w)
	}
	return nil
}

// follow records what w delivers; a watch the server ends is opened again, after a
// list that records what was missed (at the list's time: a little late, never early).
func (t *programTracker) follow(ctx context.Context, c client.WithWatch, p ProjectLoad, w watch.Interface) {
	for {
		for ev := range w.ResultChan() {
			if px, ok := ev.Object.(*v1alpha.HTTPProxy); ok {
				t.observe(p.Name, px, time.Now())
			}
		}
		w.Stop()
		if ctx.Err() != nil {
			return
		}
		list := &v1alpha.HTTPProxyList{}
		if err := c.List(ctx, list, client.InNamespace(p.Namespace)); err == nil {
			now := time.Now()
			for i := range list.Items {
				t.observe(p.Name, &list.Items[i], now)
			}
		}
		var err error
		if w, err = c.Watch(ctx, &v1alpha.HTTPProxyList{}, client.InNamespace(p.Namespace)); err != nil {
			if !sleepCtx(ctx, time.Second) {
				return
			}
			w = watch.NewEmptyWatch()
		}
	}
}
