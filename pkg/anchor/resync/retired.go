package resync

import (
	"context"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// CoordinatorShard is the shard's admission for work of no project (pkg/shard): it
// admits only while this replica coordinates and is valid.
type CoordinatorShard interface {
	EnterCoordinator(ctx context.Context) (context.Context, func(), error)
	CoordinatorHub(ctx context.Context) (client.Client, client.Reader, error)
}

// CoordinatorAccess adapts the shard's coordinator admission to Admission and HubAccess
// (Config.RetiredAdmission, Config.RetiredHub), whatever the project.
type CoordinatorAccess struct{ Shard CoordinatorShard }

// Enter admits a step of a retired project's pass while this replica coordinates.
func (a CoordinatorAccess) Enter(ctx context.Context, _ string) (context.Context, func(), error) {
	return a.Shard.EnterCoordinator(ctx)
}

// Hub hands out the guarded hub writer and uncached reader while this replica coordinates.
func (a CoordinatorAccess) Hub(ctx context.Context, _ string) (client.Client, client.Reader, error) {
	return a.Shard.CoordinatorHub(ctx)
}

// noSecretUID is the Secret UID of a retired project's empty plane: a pass that finds a
// Secret again (never of this UID) reads and collects nothing.
const noSecretUID = types.UID("retired-project-no-secret")

// collectRetired runs one pass over each retired project with anchors, while this
// replica coordinates, and returns the delay to the next run. Each project's memory is
// kept between runs; all of it is dropped when this replica does not coordinate.
func (r *Resync) collectRetired(ctx context.Context, retired []string) time.Duration {
	if r.cfg.RetiredAdmission == nil || r.cfg.RetiredHub == nil || r.opts.Disabled {
		return r.opts.Period
	}
	_, release, err := r.cfg.RetiredAdmission.Enter(ctx, "")
	if err != nil {
		r.forgetRetired(nil)
		return r.opts.Period
	}
	release()
	r.forgetRetired(retired)

	delay := r.opts.Period
	for _, project := range retired {
		log := r.log.WithValues("project", project, "retired", true)
		d := r.passDeps
		d.admission, d.hub = r.cfg.RetiredAdmission, r.cfg.RetiredHub
		rep, err := r.runPass(ctx, d, project, Plane{SecretUID: noSecretUID}, memoryOf(r.retired, project), log)
		if ctx.Err() != nil {
			return delay
		}
		if err == nil && !rep.PendingConfirmation.IsZero() {
			delay = min(delay, r.nextDelay(rep, nil))
		}
	}
	return delay
}

// forgetRetired drops the memory, halt and last-success metric of the retired projects
// not in keep.
func (r *Resync) forgetRetired(keep []string) {
	var gone []string
	for p := range r.retired {
		if !slices.Contains(keep, p) {
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
			continue // held again: its loop's now
		}
		delete(r.halted, p)
		r.m.lastSuccess.DeleteLabelValues(p)
	}
	r.updateHaltedLocked()
}
