package resync

// Retired projects, collected by the replicas: the coordinator alone passes over every
// project an operator retired with a tombstone (docs/design.md, Projects with no
// Secret).

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// CoordinatorShard is the shard's admission for work that belongs to no project
// (pkg/shard: EnterCoordinator, CoordinatorHub): admitted only while this replica is
// the coordinator and valid.
type CoordinatorShard interface {
	EnterCoordinator(ctx context.Context) (context.Context, func(), error)
	CoordinatorHub(ctx context.Context) (client.Client, client.Reader, error)
}

// CoordinatorAccess adapts the shard's coordinator admission to Admission and
// HubAccess, for Config.RetiredAdmission and Config.RetiredHub: a retired project has
// no holder, so every step of its pass runs under the coordinator's admission instead,
// whatever the project.
type CoordinatorAccess struct{ Shard CoordinatorShard }

// Enter admits a step of a retired project's pass while this replica coordinates.
func (a CoordinatorAccess) Enter(ctx context.Context, _ string) (context.Context, func(), error) {
	return a.Shard.EnterCoordinator(ctx)
}

// Hub hands out the validity-guarded hub writer and the uncached reader while this
// replica coordinates.
func (a CoordinatorAccess) Hub(ctx context.Context, _ string) (client.Client, client.Reader, error) {
	return a.Shard.CoordinatorHub(ctx)
}

// noSecretUID is the Secret UID a retired project's plane says it was built from: no
// Secret has it, so should the project have a Secret again by the time a pass reads it,
// the pass reads nothing of any plane and collects nothing (examine: a plane built from
// another Secret proves nothing). A retired project has no plane to read.
const noSecretUID = types.UID("retired-project-no-secret")

// collectRetired runs one pass over each retired project (a tombstone, no kubeconfig
// Secret, anchors on the hub) when this replica is the coordinator, and returns how long
// until the next run: the period, or sooner when a proof waits for confirmation.
//
// Protocol rules:
//   - Only the coordinator passes over retired projects: no shard holds a project that
//     has no Secret, and one replica must do it, under an admission that ends with its
//     leadership and its validity (every step of the pass runs inside it).
//   - What a pass proves is kept between passes per retired project, as a project's
//     loop keeps it, so the absence is confirmed on two passes ConfirmAfter apart. It
//     is dropped when the project is no longer retired, and all of it when this replica
//     stops coordinating: a coordinator that comes back starts confirming again, which
//     only delays.
//   - Throttle, dry-run, the switch, the ceiling and the cap are those of every pass of
//     this replica (the shared passDeps and its deletion limiter).
func (r *Resync) collectRetired(ctx context.Context, retired []string) time.Duration {
	if r.cfg.RetiredAdmission == nil || r.cfg.RetiredHub == nil || r.opts.Disabled {
		return r.opts.Period
	}
	// The cheap check first: a replica that does not coordinate does nothing else.
	_, release, err := r.cfg.RetiredAdmission.Enter(ctx, "")
	if err != nil {
		r.forgetRetired(nil)
		return r.opts.Period
	}
	release()
	keep := map[string]bool{}
	for _, p := range retired {
		keep[p] = true
	}
	r.forgetRetired(keep)

	delay := r.opts.Period
	for _, project := range retired {
		mem := r.retired[project]
		if mem == nil {
			mem = newProjectMemory(r.opts)
			r.retired[project] = mem
		}
		log := r.log.WithValues("project", project, "retired", true)
		select {
		case r.workers <- struct{}{}:
		case <-ctx.Done():
			return delay
		}
		d := r.passDeps
		d.holder = r.cfg.Holder()
		d.admission, d.hub = r.cfg.RetiredAdmission, r.cfg.RetiredHub
		rep, err := newPass(d, project, Plane{SecretUID: noSecretUID}, mem, log).run(ctx)
		<-r.workers
		if ctx.Err() != nil {
			return delay
		}
		r.record(rep, err, log)
		if err == nil && !rep.PendingConfirmation.IsZero() {
			delay = min(delay, r.nextDelay(rep, nil))
		}
	}
	return delay
}

// forgetRetired drops the memory, halt and last-success metric of every retired project
// not in keep (nil: all of them).
func (r *Resync) forgetRetired(keep map[string]bool) {
	var gone []string
	for p := range r.retired {
		if !keep[p] {
			gone = append(gone, p)
			delete(r.retired, p)
		}
	}
	if len(gone) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range gone {
		if _, held := r.loops[p]; held {
			continue // a Secret names it again and this replica holds it: the loop's now
		}
		delete(r.halted, p)
		r.history.forget(p)
		r.m.lastSuccess.DeleteLabelValues(p)
	}
	r.updateHaltedLocked()
}
