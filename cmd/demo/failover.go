// Failover: the owner of a project killed, and another replica taking its projects over.

package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"anchorage/internal/harness"
)

// killOwner kills the replica that owns the first project, measures how long until
// another replica has claimed each of its projects, and shows the new owner at work.
func (d *demo) killOwner(ctx context.Context) error {
	owners, err := d.owners(ctx)
	if err != nil {
		return err
	}
	first := d.projects[0]
	victim := d.replica(owners[first.name])
	if victim == nil {
		return fmt.Errorf("project %s has no live owner to kill (owners: %v)", first.name, owners)
	}
	var held []string
	for _, p := range d.projects {
		if owners[p.name] == victim.name {
			held = append(held, p.name)
		}
	}
	began := time.Now()
	if err := victim.kill(); err != nil {
		return err
	}
	d.res.killed = victim.name
	d.say("killed %s (pid %d), owner of %s", victim.name, victim.proc.Pid(), strings.Join(held, " and "))
	moved := map[string]bool{}
	err = poll(ctx, handoverWithin, "another replica to take over", func(ctx context.Context) (bool, error) {
		owners, err := d.owners(ctx)
		if err != nil {
			return false, err
		}
		for _, p := range held {
			if moved[p] || owners[p] == "" || owners[p] == victim.name {
				continue
			}
			moved[p] = true
			took := time.Since(began)
			d.res.handover = max(d.res.handover, took)
			d.res.handovers = append(d.res.handovers, fmt.Sprintf("%s %s -> %s in %.2fs", p, victim.name, owners[p], took.Seconds()))
			d.say("project %s claimed by %s %.2fs after the kill", p, owners[p], took.Seconds())
		}
		return len(moved) == len(held), nil
	})
	if err != nil {
		return err
	}
	d.say("(expected: about one lease duration, %s, plus a retry period or two; up to about 1.6 durations when the killed replica was the coordinator)", harness.FastTimings.LeaseDuration)
	px, err := d.createProxy(ctx, first, "status", "status."+acmeDomain)
	if err != nil {
		return err
	}
	created := time.Now()
	if err := d.waitProgrammed(ctx, px); err != nil {
		return err
	}
	d.say("the new owner programmed HTTPProxy %s/%s, created after the kill, in %.1fs", first.namespace, px.name, time.Since(created).Seconds())
	return d.showLeases(ctx, false)
}

// replica returns the replica named name, nil if none.
func (d *demo) replica(name string) *replica {
	for _, r := range d.replicas {
		if r.name == name {
			return r
		}
	}
	return nil
}
