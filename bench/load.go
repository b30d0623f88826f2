package bench

import (
	"context"
	"fmt"
	"math/rand"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"anchorage/api/v1alpha"
)

// ProjectLoad is one real project of a run: its plane, its upstream namespace.
type ProjectLoad struct {
	Name      string
	Plane     int
	Namespace string
	// NamespaceUID maps the project's hub namespace (anchor.MappedNamespace).
	NamespaceUID types.UID
}

// ProxyKey names an HTTPProxy of a run.
type ProxyKey struct {
	Project   string `json:"project"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// Load creates, updates and deletes HTTPProxies in every project at a set rate,
// keeping between minLive and maxLive alive per project, and remembers when it
// deleted each one.
type Load struct {
	run      *Run
	projects []ProjectLoad
	interval time.Duration
	minLive  int
	maxLive  int
	rnd      *rand.Rand

	mu      sync.Mutex
	next    int
	live    map[string][]string // project -> live proxy names
	deleted map[ProxyKey]time.Time
	ops     map[string]int
	errors  []string
}

// NewLoad prepares a load of one operation per project every interval.
func NewLoad(run *Run, projects []ProjectLoad, interval time.Duration, seed int64) *Load {
	return &Load{
		run: run, projects: projects, interval: interval, minLive: 2, maxLive: 5,
		rnd:  rand.New(rand.NewSource(seed)),
		live: map[string][]string{}, deleted: map[ProxyKey]time.Time{}, ops: map[string]int{},
	}
}

// Run drives the load until ctx ends.
func (l *Load) Run(ctx context.Context) {
	tick := time.NewTicker(l.interval)
	defer tick.Stop()
	for {
		for _, p := range l.projects {
			l.step(ctx, p)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (l *Load) client(p ProjectLoad) client.Client { return l.run.Env.Planes[p.Plane].Client }

func (l *Load) step(ctx context.Context, p ProjectLoad) {
	l.mu.Lock()
	live := len(l.live[p.Name])
	roll := l.rnd.Float64()
	l.mu.Unlock()
	var err error
	switch {
	case live < l.minLive || (live < l.maxLive && roll < 0.3):
		err = l.create(ctx, p)
	case live > l.minLive && roll > 0.75:
		err = l.delete(ctx, p)
	default:
		err = l.update(ctx, p)
	}
	if err != nil && ctx.Err() == nil {
		l.mu.Lock()
		l.errors = append(l.errors, err.Error())
		l.mu.Unlock()
	}
}

func (l *Load) create(ctx context.Context, p ProjectLoad) error {
	l.mu.Lock()
	l.next++
	name := fmt.Sprintf("px-%d", l.next)
	l.mu.Unlock()
	if err := l.client(p).Create(ctx, benchProxy(p.Name, name, p.Namespace)); err != nil {
		return fmt.Errorf("creating %s/%s: %w", p.Name, name, err)
	}
	l.mu.Lock()
	l.live[p.Name] = append(l.live[p.Name], name)
	l.ops["create"]++
	l.mu.Unlock()
	return nil
}

// benchProxy is the load's HTTPProxy name in namespace of project: one hostname, named
// after it and its project (a hostname is programmed for one project at a time), and
// one backend.
func benchProxy(project, name, namespace string) *v1alpha.HTTPProxy {
	return &v1alpha.HTTPProxy{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: v1alpha.HTTPProxySpec{
			Hostnames: []gatewayv1.Hostname{gatewayv1.Hostname(benchHost(project, name))},
			Rules:     []v1alpha.HTTPProxyRule{{Backends: []v1alpha.HTTPProxyBackend{{Endpoint: "https://backend.example.com"}}}},
		},
	}
}

// pick returns a random live proxy of p, removing it from the live set when take.
func (l *Load) pick(p ProjectLoad, take bool) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	names := l.live[p.Name]
	if len(names) == 0 {
		return ""
	}
	i := l.rnd.Intn(len(names))
	name := names[i]
	if take {
		l.live[p.Name] = append(names[:i:i], names[i+1:]...)
	}
	return name
}

func (l *Load) update(ctx context.Context, p ProjectLoad) error {
	name := l.pick(p, false)
	if name == "" {
		return nil
	}
	px := &v1alpha.HTTPProxy{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: p.Namespace}}
	hosts := fmt.Sprintf(`{"spec":{"hostnames":["%s","v%d.%s"]}}`, benchHost(p.Name, name), time.Now().UnixNano()%1000, benchHost(p.Name, name))
	if err := l.client(p).Patch(ctx, px, client.RawPatch(types.MergePatchType, []byte(hosts))); err != nil {
		return fmt.Errorf("updating %s/%s: %w", p.Name, name, err)
	}
	l.mu.Lock()
	l.ops["update"]++
	l.mu.Unlock()
	return nil
}

func (l *Load) delete(ctx context.Context, p ProjectLoad) error {
	name := l.pick(p, true)
	if name == "" {
		return nil
	}
	at := time.Now()
	if err := l.deleteProxy(ctx, p, name); err != nil {
		// The load's context ending mid-request among others: the server may have
		// committed the delete all the same. Only what a fresh read shows still alive
		// goes back to the live set for DeleteAll.
		if !l.confirmDeleted(p, name, at) {
			l.mu.Lock()
			l.live[p.Name] = append(l.live[p.Name], name)
			l.mu.Unlock()
		}
		return err
	}
	return nil
}

// confirmDeleted reads the proxy afresh and records its deletion when it is gone or
// being deleted (at the server's deletion time, or at when it is gone already).
func (l *Load) confirmDeleted(p ProjectLoad, name string, at time.Time) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	px := &v1alpha.HTTPProxy{}
	err := l.client(p).Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: name}, px)
	switch {
	case apierrors.IsNotFound(err):
		l.recordDeleted(ProxyKey{p.Name, p.Namespace, name}, at)
		return true
	case err == nil && px.DeletionTimestamp != nil:
		l.recordDeleted(ProxyKey{p.Name, p.Namespace, name}, px.DeletionTimestamp.Time)
		return true
	}
	return false
}

// recordDeleted keeps a proxy's first deletion time.
func (l *Load) recordDeleted(k ProxyKey, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.deleted[k]; !ok {
		l.deleted[k] = at
	}
	l.ops["delete"]++
}

func (l *Load) deleteProxy(ctx context.Context, p ProjectLoad, name string) error {
	at := time.Now()
	px := &v1alpha.HTTPProxy{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: p.Namespace}}
	if err := client.IgnoreNotFound(l.client(p).Delete(ctx, px)); err != nil {
		return fmt.Errorf("deleting %s/%s: %w", p.Name, name, err)
	}
	l.recordDeleted(ProxyKey{p.Name, p.Namespace, name}, at)
	return nil
}

// DeleteAll deletes every proxy of the run's namespaces (the end of a run), retrying
// each a few times. It lists them rather than trusting the live set: a create the
// load's end cancelled mid-request may still have been committed.
func (l *Load) DeleteAll(ctx context.Context) error {
	for _, p := range l.projects {
		list := &v1alpha.HTTPProxyList{}
		if err := l.client(p).List(ctx, list, client.InNamespace(p.Namespace)); err != nil {
			return fmt.Errorf("listing the proxies of %s: %w", p.Name, err)
		}
		l.mu.Lock()
		l.live[p.Name] = nil
		l.mu.Unlock()
		for _, px := range list.Items {
			if px.DeletionTimestamp != nil {
				// Deleted already (a delete whose response the load's end cut off).
				l.recordDeleted(ProxyKey{p.Name, p.Namespace, px.Name}, px.DeletionTimestamp.Time)
				continue
			}
			name := px.Name
			var err error
			for attempt := 0; attempt < 5; attempt++ {
				if err = l.deleteProxy(ctx, p, name); err == nil {
					break
				}
				time.Sleep(time.Second)
			}
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// DeletedAt returns when the load deleted the proxy, if it did.
func (l *Load) DeletedAt(k ProxyKey) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	t, ok := l.deleted[k]
	return t, ok
}

// Deleted returns how many proxies the load deleted.
func (l *Load) Deleted() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.deleted)
}

// Ops returns the operation counts and the errors met.
func (l *Load) Ops() (map[string]int, []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ops := map[string]int{}
	for k, v := range l.ops {
		ops[k] = v
	}
	return ops, append([]string(nil), l.errors...)
}

// benchHost is the hostname of proxy name of project.
func benchHost(project, name string) string {
	return name + "." + strings.ToLower(strings.ReplaceAll(project, "/", "-")) + ".bench.example.com"
}
