package shard

import (
	"context"
	"errors"
	"fmt"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
)

// startClaimLocked starts an engagement; rv is "" for the announced next holder (ClaimStart.RV).
func (s *Shard) startClaimLocked(ctx context.Context, project, holder, rv string, d discovered, lease *coordinationv1.Lease) {
	hctx, cancel := context.WithCancel(ctx)
	h := &holding{project: project, holder: holder, engagement: string(uuid.NewUUID())[:8], rv: rv, discovery: d.gen, ctx: hctx, cancel: cancel}
	s.holdings[project] = h
	go s.claim(h, d, lease.DeepCopy())
}

// claim builds and engages the cluster, writes the claim on h.rv, then opens admission.
func (s *Shard) claim(h *holding, d discovered, lease *coordinationv1.Lease) {
	log := s.log.WithValues("project", h.project, "holder", h.holder, "engagement", h.engagement)
	fail := func(err error) {
		log.Info("Claim failed; releasing the engagement", "error", err.Error())
		s.dropHolding(h)
		h.close()
	}
	claimStart := s.clock.Now()
	claimCtx, cancel := context.WithTimeout(h.ctx, s.t.ClaimDeadline)
	defer cancel()
	// Applied first, to cluster.New's zero Options: no earlier Scheme or NewClient to keep.
	opts := append([]cluster.Option{func(o *cluster.Options) {
		o.Scheme = s.opts.Scheme
		o.NewClient = func(cfg *rest.Config, co client.Options) (client.Client, error) {
			c, err := client.New(cfg, co)
			if err != nil {
				return nil, err
			}
			return guardedClient{Client: c, check: s.checkValid}, nil
		}
	}}, s.opts.ClusterOptions...)
	cl, err := cluster.New(d.config, opts...)
	if err != nil {
		fail(fmt.Errorf("building cluster: %w", err))
		return
	}
	built := s.clock.Now()
	s.mu.Lock()
	// Set with the copy of the indexers, under one lock: IndexField indexes this
	// cluster itself exactly when its field is not in the copy.
	h.cluster = cl
	indexers := append([]fieldIndex(nil), s.indexers...)
	awares := append([]multicluster.Aware(nil), s.awares...)
	s.mu.Unlock()
	for _, idx := range indexers {
		if err := cl.GetFieldIndexer().IndexField(claimCtx, idx.obj, idx.field, idx.extract); err != nil {
			fail(fmt.Errorf("indexing %s: %w", idx.field, err))
			return
		}
	}
	go func() {
		if err := cl.Start(h.ctx); err != nil && h.ctx.Err() == nil {
			log.Error(err, "Project cluster stopped")
		}
	}()
	if err := warmInformers(claimCtx, cl, s.opts.WarmKinds); err != nil {
		fail(err)
		return
	}
	for _, a := range awares {
		if err := a.Engage(h.ctx, multicluster.ClusterName(h.project), cl); err != nil {
			fail(fmt.Errorf("engaging: %w", err))
			return
		}
	}
	engaged := s.clock.Now()
	if !cl.GetCache().WaitForCacheSync(claimCtx) {
		fail(fmt.Errorf("caches not synced within the claim deadline %s", s.t.ClaimDeadline))
		return
	}
	synced := s.clock.Now()
	if h.rv == "" { // warmed up as the next holder: wait for the owner's write to name us
		if lease = s.awaitHolder(claimCtx, h); lease == nil {
			fail(fmt.Errorf("planned hand-over to this replica did not happen within the claim deadline %s", s.t.ClaimDeadline))
			return
		}
		h.rv = lease.ResourceVersion
	}
	if !s.member.valid(h.holder) {
		fail(ErrValidityEnded)
		return
	}
	l := lease.DeepCopy()
	l.ResourceVersion = h.rv
	metav1.SetMetaDataAnnotation(&l.ObjectMeta, AnnotationClaim, ClaimValue(h.holder, h.engagement))
	wrote, err := s.writeProjectLease(claimCtx, h.holder, l, false)
	if err != nil {
		if !errors.Is(err, ErrValidityEnded) {
			err = fmt.Errorf("writing claim: %w", err)
		}
		fail(err)
		return
	}
	h.mu.Lock()
	h.leaseUID, h.claimRV = wrote.UID, wrote.ResourceVersion
	h.moveLocked(holdingOpen)
	h.mu.Unlock()
	s.eventf(h.holder, wrote, "Normal", "Claimed", "Project %s claimed by %s", h.project, h.holder)
	log.Info("Claimed project; admission open", "took", s.clock.Since(claimStart).String(), "built", built.Sub(claimStart).String(), "engaged", engaged.Sub(claimStart).String(), "synced", synced.Sub(claimStart).String())
	s.updateGauges()
}

// warmInformers starts the informers of kinds in parallel and waits for them to sync.
func warmInformers(ctx context.Context, cl cluster.Cluster, kinds []client.Object) error {
	errs := make(chan error, len(kinds))
	for _, k := range kinds {
		go func() {
			_, err := cl.GetCache().GetInformer(ctx, k)
			errs <- err
		}()
	}
	for range kinds {
		if err := <-errs; err != nil {
			return fmt.Errorf("syncing informers: %w", err)
		}
	}
	return nil
}
