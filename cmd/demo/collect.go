// Stranded anchors: planted on the hub, collected by the replicas' resync and the hub's garbage collector.

package main

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// collectStranded plants stranded anchors in both projects, next to live ones, and
// waits for the resync to collect them and the hub's garbage collector to remove what
// hung on them.
func (d *demo) collectStranded(ctx context.Context) error {
	acme, initech := d.projects[0], d.projects[1]
	d.stranded = []*stranded{
		{project: acme.name, kind: "Gateway", upstreamNamespace: acme.namespace, name: "summer-sale", hostname: "sale." + acmeDomain, hubNamespace: acme.hubNamespace()},
		{project: acme.name, kind: "HTTPRoute", upstreamNamespace: "shop-2023", name: "old-cart", legacyLabel: true},
		{project: initech.name, kind: "Gateway", upstreamNamespace: "blog-archive", name: "archive", hostname: "archive." + initechDomain, legacyLabel: true},
		{project: initech.name, kind: "HTTPRoute", upstreamNamespace: initech.namespace, name: "drafts", hubNamespace: initech.hubNamespace()},
		// The previous manager also anchored its backend EndpointSlices.
		{project: acme.name, kind: "EndpointSlice", upstreamNamespace: acme.namespace, name: "old-api-0-0", hostname: "old-api.example.org", hubNamespace: acme.hubNamespace(), legacyLabel: true},
	}
	for _, s := range d.stranded {
		if err := s.plant(ctx, d.hub.Client); err != nil {
			return err
		}
		where := "beside the live anchors in " + shortName(s.planted.anchor.namespace)
		if s.hubNamespace == "" {
			where = "in " + shortName(s.planted.anchor.namespace) + ", an unlabelled namespace whose upstream namespace is gone"
		}
		var deps []string
		for _, o := range s.planted.dependents {
			deps = append(deps, o.String())
		}
		d.say("%s  anchor of %s, %s; holds %s", shortName(s.planted.anchor.name), s.planted.owner(), where, strings.Join(deps, ", "))
	}
	d.say("(cluster-_<project> is the legacy label of a project once named with a leading slash)")
	d.say("the replicas resync every %s and collect an anchor once it is older than %s and its owner's absence, proven by a live read, holds again %s later",
		resyncPeriod, resyncMinAge, resyncConfirmAfter)

	began := time.Now()
	gone := map[string]bool{}
	err := poll(ctx, collectWithin, "the resync to collect the stranded anchors", func(ctx context.Context) (bool, error) {
		for _, s := range d.stranded {
			a := s.planted.anchor
			if gone[a.name] {
				continue
			}
			ok, err := a.present(ctx, d.hub.Client)
			if err != nil {
				return false, err
			}
			if !ok {
				gone[a.name] = true
				d.say("%s collected after %.1fs%s", shortName(a.name), time.Since(began).Seconds(), d.collectedBy(a.name))
			}
		}
		return len(gone) == len(d.stranded), nil
	})
	if err != nil {
		return err
	}
	var deps []hubObject
	for _, s := range d.stranded {
		deps = append(deps, s.planted.dependents...)
	}
	err = poll(ctx, gcWithin, "the hub's garbage collector to remove what hung on them", func(ctx context.Context) (bool, error) {
		n, err := countPresent(ctx, d.hub.Client, deps)
		return n == 0, err
	})
	if err != nil {
		return err
	}
	d.say("the hub's garbage collector removed the %d objects that hung on them: %.1fs from planting to a clean hub", len(deps), time.Since(began).Seconds())
	live, kept, err := d.liveCount(ctx)
	if err != nil {
		return err
	}
	d.say("live anchors and their objects untouched: %d of %d still there with the same UIDs", kept, live)
	var counts []string
	for _, r := range d.replicas {
		n, err := r.counter(ctx, `anchorage_resync_collections_total{action="deleted"}`)
		if err != nil {
			return err
		}
		counts = append(counts, fmt.Sprintf("%s %g", r.name, n))
	}
	d.say("anchorage_resync_collections_total{action=\"deleted\"}: %s", strings.Join(counts, ", "))
	return nil
}

// collectedBy says which replica logged the deletion of an anchor, and its proof.
func (d *demo) collectedBy(name string) string {
	l, ok := anchorDeletions(d.replicas)[name]
	switch {
	case !ok:
		return ""
	case l.Proof != "":
		return fmt.Sprintf(" by %s (proof: %s)", l.Replica, l.Proof)
	}
	return " by " + l.Replica
}
