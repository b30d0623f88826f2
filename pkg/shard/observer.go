package shard

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"sync"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/watchlist"
	"k8s.io/utils/clock"
)

// leaseObserver watches the Leases from process start, noting each change's local time.
type leaseObserver struct {
	clock   clock.Clock
	started time.Time

	mu          sync.RWMutex
	members     map[string]Observed  // by Lease name
	projects    map[string]Observed  // by Lease name
	vanished    map[string]time.Time // holders of member Leases seen deleted, and when
	recorded    map[string]time.Time // when this process last stored its own write or read
	watchLag    time.Duration
	log         logr.Logger
	retry       time.Duration // the longest wait before listing again (listAgainAfter)
	regressions int           // versions taken although older than the stored one
	synced      bool
	notify      chan struct{}
	watched     func(*coordinationv1.Lease) // when set, told of every Lease the watch delivers (view.go)
}

// newLeaseObserver observes Leases; watchLag is how long the watch may trail an own write.
func newLeaseObserver(clk clock.Clock, watchLag, retry time.Duration) *leaseObserver {
	return &leaseObserver{clock: clk, started: clk.Now(), members: map[string]Observed{}, projects: map[string]Observed{}, vanished: map[string]time.Time{}, recorded: map[string]time.Time{}, watchLag: watchLag, retry: retry, log: logr.Discard(), notify: make(chan struct{}, 1)}
}

// run watches Leases in namespace until ctx ends.
func (o *leaseObserver) run(ctx context.Context, cs kubernetes.Interface, namespace string) {
	o.follow(ctx, &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			opts.LabelSelector = LabelRole
			return cs.CoordinationV1().Leases(namespace).List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.LabelSelector = LabelRole
			return cs.CoordinationV1().Leases(namespace).Watch(ctx, opts)
		},
	})
}

// follow lists and watches through lw until ctx ends (docs/design.md, Coordinator).
func (o *leaseObserver) follow(ctx context.Context, lw toolscache.ListerWatcherWithContext) {
	feed := &leaseFeed{o: o, known: map[string]*coordinationv1.Lease{}}
	r := toolscache.NewReflectorWithOptions(refusalsEndTheWatch{lw}, &coordinationv1.Lease{}, feed,
		toolscache.ReflectorOptions{Name: "anchorage-lease-observer", TypeDescription: "Lease"})
	failed := 0
	for ctx.Err() == nil {
		began := o.clock.Now()
		err := r.ListAndWatchWithContext(ctx)
		if ctx.Err() != nil {
			return
		}
		if o.clock.Since(began) >= o.retry {
			failed = 0 // a watch that ran for a while and ended
		} else {
			failed++ // refused, or a list the hub answered and a watch it did not keep
		}
		if err != nil {
			o.log.V(1).Info("Listing or watching Leases failed; trying again", "error", err.Error(), "failedInARow", failed)
		}
		sleep(ctx, o.clock, listAgainAfter(failed, o.retry)) // the loop ends if ctx did
	}
}

// listAgainAfter is retry/8 doubled per failure in a row, at most retry.
func listAgainAfter(failed int, retry time.Duration) time.Duration {
	wait := retry / 8
	for i := 0; i < failed && wait < retry; i++ {
		wait *= 2
	}
	return min(wait, retry)
}

// refusalsEndTheWatch makes a refused watch end the reflector's attempt, not back off.
type refusalsEndTheWatch struct {
	toolscache.ListerWatcherWithContext
}

func (r refusalsEndTheWatch) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	w, err := r.ListerWatcherWithContext.WatchWithContext(ctx, opts)
	if err != nil && (utilnet.IsConnectionRefused(err) || apierrors.IsTooManyRequests(err)) {
		return nil, fmt.Errorf("watching Leases: %s", err.Error())
	}
	return w, err
}

// List and Watch satisfy the reflector's ListerWatcher; it calls the context-aware ones.
func (r refusalsEndTheWatch) List(opts metav1.ListOptions) (runtime.Object, error) {
	return r.ListWithContext(context.Background(), opts)
}

func (r refusalsEndTheWatch) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	return r.WatchWithContext(context.Background(), opts)
}

// IsWatchListSemanticsUnSupported passes on the wrapped lister-watcher's answer.
func (r refusalsEndTheWatch) IsWatchListSemanticsUnSupported() bool {
	return watchlist.DoesClientNotSupportWatchListSemantics(r.ListerWatcherWithContext)
}

// leaseFeed is the reflector's store: it hands every Lease to the observer.
type leaseFeed struct {
	o *leaseObserver

	mu    sync.Mutex
	known map[string]*coordinationv1.Lease
}

func (f *leaseFeed) Add(obj any) error { return f.Update(obj) }
func (f *leaseFeed) Update(obj any) error {
	if l, ok := obj.(*coordinationv1.Lease); ok {
		f.mu.Lock()
		f.known[l.Name] = l
		f.mu.Unlock()
		f.o.observe(l, false)
	}
	return nil
}

func (f *leaseFeed) Delete(obj any) error {
	if l, ok := obj.(*coordinationv1.Lease); ok {
		f.mu.Lock()
		delete(f.known, l.Name)
		f.mu.Unlock()
		f.o.forget(l)
	}
	return nil
}

// Replace takes a full list: those missing from it are gone; it marks the observer synced.
func (f *leaseFeed) Replace(items []any, _ string) error {
	f.mu.Lock()
	gone := maps.Clone(f.known)
	f.mu.Unlock()
	for _, obj := range items {
		if l, ok := obj.(*coordinationv1.Lease); ok {
			delete(gone, l.Name)
			_ = f.Update(l)
		}
	}
	for _, l := range gone {
		_ = f.Delete(l)
	}
	f.o.mu.Lock()
	f.o.synced = true
	f.o.mu.Unlock()
	poke(f.o.notify)
	return nil
}

// Resync is not used (no resync period).
func (f *leaseFeed) Resync() error { return nil }

// poke wakes ch's reader unless a wake-up is already pending.
func poke(ch chan<- struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

func (o *leaseObserver) table(l *coordinationv1.Lease) map[string]Observed {
	switch l.Labels[LabelRole] {
	case RoleMember:
		return o.members
	case roleProject:
		return o.projects
	}
	return nil
}

// observe stores a Lease from the watch or, own, one this process just wrote or read, unless not news.
func (o *leaseObserver) observe(l *coordinationv1.Lease, own bool) {
	o.mu.Lock()
	t := o.table(l)
	if t != nil {
		now := o.clock.Now()
		var prevVersion string
		if prev, seen := t[l.Name]; seen {
			prevVersion = prev.Lease.ResourceVersion
		}
		recordedAt, wasRecorded := o.recorded[l.Name]
		switch storeDecision(prevVersion, l.ResourceVersion, own, wasRecorded && now.Sub(recordedAt) < o.watchLag) {
		case storeRegressed:
			o.regressions++
			fallthrough
		case storeNewer:
			t[l.Name] = Observed{Lease: l, Changed: now}
			if own {
				o.recorded[l.Name] = now
			} else {
				delete(o.recorded, l.Name)
			}
			if h := t[l.Name].Holder(); h != "" && l.Labels[LabelRole] == RoleMember {
				delete(o.vanished, h)
			}
		}
	}
	o.mu.Unlock()
	if !own && o.watched != nil {
		o.watched(l)
	}
	poke(o.notify)
}

// storeVerdict is what observe does with a Lease version.
type storeVerdict int

const (
	storeKeep      storeVerdict = iota // not news (the same version, or a stale answer)
	storeNewer                         // a newer version, or the first: stored
	storeRegressed                     // older, not trailing an own write (an etcd restore): stored
)

// storeDecision decides whether version replaces prev; lagging: prev is a recent own write.
func storeDecision(prev, version string, own, lagging bool) storeVerdict {
	switch {
	case prev == "":
		return storeNewer
	case version == prev:
		return storeKeep
	case !olderVersion(version, prev):
		return storeNewer
	case own || lagging: // a late answer to an own write, or the watch not yet past it
		return storeKeep
	}
	return storeRegressed
}

// forget drops a Lease seen deleted.
func (o *leaseObserver) forget(l *coordinationv1.Lease) {
	o.mu.Lock()
	if t := o.table(l); t != nil {
		if h := (Observed{Lease: l}).Holder(); h != "" && l.Labels[LabelRole] == RoleMember {
			o.vanished[h] = o.clock.Now()
		}
		delete(t, l.Name)
	}
	o.mu.Unlock()
	poke(o.notify)
}

// snapshot copies both tables.
func (o *leaseObserver) snapshot() (members, projects map[string]Observed, synced bool) {
	o.mu.RLock()
	defer o.mu.RUnlock()
	return maps.Clone(o.members), maps.Clone(o.projects), o.synced
}

// vanishedKept is how long a vanished member is remembered: far past any Lease duration.
const vanishedKept = time.Hour

// vanishedMembers returns the holders of member Leases seen deleted, with when.
func (o *leaseObserver) vanishedMembers() map[string]time.Time {
	o.mu.Lock()
	defer o.mu.Unlock()
	now := o.clock.Now()
	maps.DeleteFunc(o.vanished, func(_ string, at time.Time) bool { return now.Sub(at) > vanishedKept })
	return maps.Clone(o.vanished)
}

// project returns the observed Lease of a project.
func (o *leaseObserver) project(name string) (Observed, bool) {
	o.mu.RLock()
	defer o.mu.RUnlock()
	ob, ok := o.projects[ProjectLeaseName(name)]
	return ob, ok
}

// liveHolders returns the holders of member Leases in state Live at now.
func liveHolders(members map[string]Observed, now time.Time, leaseDuration time.Duration) map[string]bool {
	live := map[string]bool{}
	for _, m := range members {
		if s, _ := ToMemberState(m, now, leaseDuration); s == MemberLive {
			live[m.Holder()] = true
		}
	}
	return live
}

// olderVersion reports whether resourceVersion a is known to precede b: both numbers, a < b.
func olderVersion(a, b string) bool {
	x, errA := strconv.ParseUint(a, 10, 64)
	y, errB := strconv.ParseUint(b, 10, 64)
	return errA == nil && errB == nil && x < y
}
