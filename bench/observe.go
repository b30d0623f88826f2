package bench

import (
	"context"
	"sort"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/multicluster-runtime/pkg/util/sanitize"

	"anchorage/internal/harness"
	"anchorage/pkg/anchor"
	"anchorage/pkg/shard"
)

// ownerSample is who owned each project at one instant, per the coordinator's Leases.
type ownerSample struct {
	at     time.Time
	owners map[string]string // project -> replica
}

// Observer samples a run's ownership and the anchors on the hub.
type Observer struct {
	run         *Run
	coordinator Coordinator
	projects    []string
	fenceOf     map[string]string // sharded fence Lease name -> project

	mu      sync.Mutex
	samples []ownerSample
	anchors map[string]ProxyKey // anchor name -> its proxy
}

// NewObserver watches projects of run under coordinator c.
func NewObserver(run *Run, c Coordinator, projects []string) *Observer {
	o := &Observer{run: run, coordinator: c, projects: projects, fenceOf: map[string]string{}, anchors: map[string]ProxyKey{}}
	for _, p := range projects {
		o.fenceOf[FenceLeaseName(p)] = p
	}
	return o
}

// FenceLeaseName is the sharded coordinator's per-cluster fence Lease name.
func FenceLeaseName(project string) string { return "mcr-shard-" + sanitize.DNS1123(project) }

// Run samples every period until ctx ends; withAnchors also polls the hub's anchors.
func (o *Observer) Run(ctx context.Context, period time.Duration, withAnchors bool) {
	tick := time.NewTicker(period)
	defer tick.Stop()
	for {
		o.sampleOwners(ctx)
		if withAnchors {
			o.pollAnchors(ctx)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (o *Observer) sampleOwners(ctx context.Context) {
	list := &coordinationv1.LeaseList{}
	if err := o.run.Env.Hub.Client.List(ctx, list, client.InNamespace(o.run.Namespace)); err != nil {
		return
	}
	now := time.Now()
	owners := map[string]string{}
	for i := range list.Items {
		l := &list.Items[i]
		if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
			continue
		}
		switch o.coordinator {
		case Sharded:
			p, ok := o.fenceOf[l.Name]
			if !ok || l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
				continue
			}
			if now.After(l.Spec.RenewTime.Add(time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second)) {
				continue
			}
			owners[p] = *l.Spec.HolderIdentity
		default:
			if project, holder := harness.ProjectOf(l), harness.ClaimedHolder(l); project != "" && holder != "" {
				owners[project] = shard.PodOf(holder)
			}
		}
	}
	o.mu.Lock()
	o.samples = append(o.samples, ownerSample{at: now, owners: owners})
	o.mu.Unlock()
}

func (o *Observer) pollAnchors(ctx context.Context) {
	var values []string
	for _, p := range o.projects {
		values = append(values, anchor.ClusterNameValue(p))
	}
	req, err := labels.NewRequirement(anchor.LabelClusterName, selection.In, values)
	if err != nil {
		return
	}
	list := &corev1.ConfigMapList{}
	if err := o.run.Env.Hub.Client.List(ctx, list, client.MatchingLabelsSelector{Selector: labels.NewSelector().Add(*req)}); err != nil {
		return
	}
	projectOf := map[string]string{}
	for _, p := range o.projects {
		projectOf[anchor.ClusterNameValue(p)] = p
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, cm := range list.Items {
		if !strings.HasPrefix(cm.Name, anchor.NamePrefix) {
			continue
		}
		o.anchors[cm.Name] = ProxyKey{Project: projectOf[cm.Labels[anchor.LabelClusterName]], Namespace: cm.Labels[anchor.LabelNamespace], Name: cm.Labels[anchor.LabelName]}
	}
}

// AnchorOwner returns the proxy an anchor stood for, if it was ever seen.
func (o *Observer) AnchorOwner(name string) (ProxyKey, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	k, ok := o.anchors[name]
	return k, ok
}

// OwnerAt returns the project's owner in the last sample at or before t.
func (o *Observer) OwnerAt(project string, t time.Time) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	owner := ""
	for _, s := range o.samples {
		if s.at.After(t) {
			break
		}
		owner = s.owners[project]
	}
	return owner
}

// Owned returns the projects owned by replica in the last sample at or before t.
func (o *Observer) Owned(replica string, t time.Time) []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	var last *ownerSample
	for i := range o.samples {
		if o.samples[i].at.After(t) {
			break
		}
		last = &o.samples[i]
	}
	if last == nil {
		return nil
	}
	var out []string
	for p, r := range last.owners {
		if r == replica {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

// OwnedCount returns how many projects have an owner in the latest sample; when alive
// is not nil, only owners in it count (a dead replica's claims stay on its Leases until
// they are taken over).
func (o *Observer) OwnedCount(alive map[string]bool) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.samples) == 0 {
		return 0
	}
	n := 0
	for _, r := range o.samples[len(o.samples)-1].owners {
		if alive == nil || alive[r] {
			n++
		}
	}
	return n
}

// Timeline returns the samples as per-replica counts.
func (o *Observer) Timeline() []Sample {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make([]Sample, 0, len(o.samples))
	for _, s := range o.samples {
		counts := map[string]int{}
		for _, r := range s.owners {
			counts[r]++
		}
		out = append(out, Sample{At: s.at, Owned: counts})
	}
	return out
}

// OwnerChanges returns every project whose owner left between two samples.
func (o *Observer) OwnerChanges() []OwnerChange {
	o.mu.Lock()
	defer o.mu.Unlock()
	return ownerChanges(o.samples)
}
