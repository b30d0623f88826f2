package gateway

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	"anchorage/api/v1alpha"
)

// proxySlots caps the proxies a project programs: the first cap by creation time (then
// namespace and name) hold a slot. The rank is read from the cache, never remembered,
// so every replica agrees; a project's ranking is reused for rankFreshFor.
type proxySlots struct {
	cap     int
	clk     clock.WithDelayedExecution
	enqueue func(mcreconcile.Request)

	mu       sync.Mutex
	rankings *lru.Cache[string, *ranking]
}

// rankFreshFor is how long a project's ranking is reused.
const rankFreshFor = time.Second

// slotHandOverDelay is how long after a proxy is finalized the proxy taking its slot is
// enqueued: past rankFreshFor and a cache's usual lag behind a delete.
const slotHandOverDelay = 2 * time.Second

// slotRecheck is how often a proxy past the cap looks again, in case of a missed hand-over.
const slotRecheck = 10 * time.Minute

type ranking struct {
	at    time.Time
	order []types.NamespacedName
	rank  map[types.NamespacedName]int
}

func newProxySlots(limit int, clk clock.WithDelayedExecution, enqueue func(mcreconcile.Request)) *proxySlots {
	rankings, err := lru.New[string, *ranking](maxLimitedProjects)
	if err != nil {
		panic(fmt.Sprintf("proxy slots: %v", err))
	}
	return &proxySlots{cap: limit, clk: clk, enqueue: enqueue, rankings: rankings}
}

// slotRefusal is the message of a proxy past the cap, or "" for one within it. rank
// counts from 0; total is the project's proxies.
func slotRefusal(rank, total, limit int) string {
	if rank < limit {
		return ""
	}
	return fmt.Sprintf("The project has %d proxies and programs at most %d, the oldest first; this proxy is number %d by creation time. It is programmed once %d older proxies are deleted, or the cap is raised",
		total, limit, rank+1, rank+1-limit)
}

// refusal returns why proxy may not be programmed, or "" when it holds a slot.
func (p *proxySlots) refusal(ctx context.Context, project string, reader client.Reader, proxy *v1alpha.HTTPProxy) (string, error) {
	if p == nil {
		return "", nil
	}
	key := client.ObjectKeyFromObject(proxy)
	r, err := p.rankingOf(ctx, project, reader, key)
	if err != nil {
		return "", err
	}
	rank, ok := r.rank[key]
	if !ok {
		return "", nil // not in the cache at all: the reconcile ends at load next time
	}
	return slotRefusal(rank, len(r.order), p.cap), nil
}

func (p *proxySlots) rankingOf(ctx context.Context, project string, reader client.Reader, key types.NamespacedName) (*ranking, error) {
	now := p.clk.Now()
	p.mu.Lock()
	r, ok := p.rankings.Get(project)
	p.mu.Unlock()
	if ok && now.Sub(r.at) < rankFreshFor {
		if _, known := r.rank[key]; known {
			return r, nil
		}
	}
	list := &v1alpha.HTTPProxyList{}
	if err := reader.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing the project's proxies to rank them: %w", err)
	}
	r = rankProxies(list.Items, now)
	p.mu.Lock()
	p.rankings.Add(project, r)
	p.mu.Unlock()
	return r, nil
}

// rankProxies orders proxies oldest first; ties go by namespace and name.
func rankProxies(items []v1alpha.HTTPProxy, at time.Time) *ranking {
	type entry struct {
		created time.Time
		key     types.NamespacedName
	}
	entries := make([]entry, len(items))
	for i := range items {
		entries[i] = entry{items[i].CreationTimestamp.Time, client.ObjectKeyFromObject(&items[i])}
	}
	slices.SortFunc(entries, func(a, b entry) int {
		return cmp.Or(a.created.Compare(b.created), strings.Compare(a.key.Namespace, b.key.Namespace), strings.Compare(a.key.Name, b.key.Name))
	})
	r := &ranking{at: at, order: make([]types.NamespacedName, len(entries)), rank: make(map[types.NamespacedName]int, len(entries))}
	for i, e := range entries {
		r.order[i], r.rank[e.key] = e.key, i
	}
	return r
}

// released is told that a proxy of project is finalized: the first waiting, if any, is
// enqueued.
func (p *proxySlots) released(project string, gone types.NamespacedName) {
	if p == nil {
		return
	}
	p.mu.Lock()
	r, ok := p.rankings.Get(project)
	p.mu.Unlock()
	if !ok {
		return
	}
	if rank, in := r.rank[gone]; in && rank < p.cap && p.cap < len(r.order) {
		// The first waiting proxy takes the slot, once the cache has seen the gone one go.
		next := mcreconcile.Request{ClusterName: multicluster.ClusterName(project), Request: reconcile.Request{NamespacedName: r.order[p.cap]}}
		p.clk.AfterFunc(slotHandOverDelay, func() { p.enqueue(next) })
	}
	p.mu.Lock()
	p.rankings.Remove(project) // the next reconcile ranks again without the gone proxy
	p.mu.Unlock()
}
