package resync

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"anchorage/pkg/anchor"
)

// collect applies the ceiling, then, oldest first by namespace, judges the candidates'
// dependents and deletes, within the cap, what is still Collect (not terminating ones).
func (p *pass) collect(ctx context.Context) error {
	var candidates []*item
	for _, it := range p.items {
		if it.verdict.Decision != Collect || it.verdict.Need != NeedDependents {
			continue
		}
		if ts := it.obj.DeletionTimestamp; ts != nil {
			it.action = ActionAlreadyTerminating
			it.detail = fmt.Sprintf("already terminating since %s (finalizers %v)", ts.UTC().Format(time.RFC3339), it.obj.Finalizers)
			continue
		}
		candidates = append(candidates, it)
	}
	if len(candidates) == 0 {
		return nil
	}
	// Oldest first, grouped by namespace so each namespace is read once.
	sort.SliceStable(candidates, func(i, j int) bool {
		return candidates[i].obj.CreationTimestamp.Before(&candidates[j].obj.CreationTimestamp)
	})
	var order []string
	byNS := map[string][]*item{}
	for _, it := range candidates {
		if _, ok := byNS[it.obj.Namespace]; !ok {
			order = append(order, it.obj.Namespace)
		}
		byNS[it.obj.Namespace] = append(byNS[it.obj.Namespace], it)
	}
	if len(candidates) > p.opts.HaltAbove {
		halted, err := p.ceiling(ctx, candidates, order, byNS)
		if err != nil || halted {
			return err
		}
	}
	collected := 0
	for _, ns := range order {
		if collected >= p.opts.MaxDeletionsPerPass {
			for _, it := range byNS[ns] {
				it.action = ActionDeferred
			}
			continue
		}
		if err := p.collectNamespace(ctx, ns, byNS[ns], &collected); err != nil {
			return err
		}
	}
	return nil
}

// ceiling judges every candidate's dependents (no owner read, enqueue or delete) and
// halts the pass if more than HaltAbove are still collectable; otherwise it resets them.
func (p *pass) ceiling(ctx context.Context, candidates []*item, order []string, byNS map[string][]*item) (bool, error) {
	collectable := 0
	for _, ns := range order {
		objs, listErr, err := p.listNamespace(ctx, ns)
		if err != nil {
			return false, err
		}
		idx := indexDependents(objs)
		for _, it := range byNS[ns] {
			if err := p.judgeDependents(ctx, it, idx, listErr, false); err != nil {
				return false, err
			}
			if it.verdict.Decision == Collect {
				collectable++
				idx.forget(it.obj.UID)
			}
		}
	}
	if collectable <= p.opts.HaltAbove {
		for _, it := range candidates {
			it.facts.Dependents, it.deps, it.detail = nil, nil, ""
			it.verdict = Decide(it.facts)
		}
		return false, nil
	}
	p.rep.Halt = HaltCeiling
	for _, it := range candidates {
		if it.verdict.Decision == Collect {
			it.action = ActionHalted
		}
	}
	p.log.Info("Halting anchor deletion: more anchors can be collected than the per-pass ceiling", "collectable", collectable, "ceiling", p.opts.HaltAbove)
	p.secretEvent(corev1.EventTypeWarning, "CollectionCeiling", "Halt", "Anchor deletion halted for project %s: %d anchors qualify for collection in one pass, above the ceiling of %d. Check the project's plane, then raise resync.haltAbove in the configuration or collect by hand (docs/recovery.md).",
		p.project, collectable, p.opts.HaltAbove)
	return true, nil
}

// switchFresh is how long, within one pass, a read of the runtime switch stands.
const switchFresh = 5 * time.Second

// readSwitch reads the runtime switch in a step, unless read less than switchFresh ago.
func (p *pass) readSwitch(ctx context.Context) error {
	if !p.switchReadAt.IsZero() && time.Since(p.switchReadAt) < switchFresh {
		return nil
	}
	return p.step(ctx, func(ctx context.Context, _ client.Writer, r client.Reader) error {
		p.switchReadAt = time.Now()
		on, err := deletionSwitch(ctx, r, p.leaseNamespace)
		p.rep.SwitchedOff = !on
		if err != nil {
			p.log.Info("Treating anchor deletion as switched off: the switch cannot be read", "error", err.Error())
		}
		return nil
	})
}

// collectNamespace reads one hub namespace's objects, judges the dependents of each
// candidate in it and acts on what is still Collect.
func (p *pass) collectNamespace(ctx context.Context, ns string, candidates []*item, collected *int) error {
	objs, listErr, err := p.listNamespace(ctx, ns)
	if err != nil {
		return err
	}
	idx := indexDependents(objs)
	if err := p.readSwitch(ctx); err != nil {
		return err
	}
	for _, it := range candidates {
		if *collected >= p.opts.MaxDeletionsPerPass {
			it.action = ActionDeferred
			continue
		}
		if err := p.judgeDependents(ctx, it, idx, listErr, true); err != nil {
			return err
		}
		if it.verdict.Decision != Collect {
			continue
		}
		if err := p.checkUnique(ctx, it); err != nil {
			return err
		}
		if it.verdict.Decision != Collect {
			continue
		}
		// As good as gone: the next candidates no longer count it as an owner.
		idx.forget(it.obj.UID)
		*collected++
		switch {
		case p.opts.DryRun:
			it.action = ActionDryRun
		case p.rep.Excluded:
			it.action = ActionExcluded
		case p.rep.SwitchedOff:
			it.action = ActionSwitchedOff
		default:
			if err := p.delete(ctx, it); err != nil {
				return err
			}
		}
	}
	return nil
}

// listNamespace reads the objects of every dependent kind in hub namespace ns, a step
// per kind (kinds discovered once per pass). listErr is a failed read; err, an abort.
func (p *pass) listNamespace(ctx context.Context, ns string) (objs []metav1.PartialObjectMetadata, listErr, err error) {
	if p.kinds == nil {
		err = p.step(ctx, func(ctx context.Context, _ client.Writer, _ client.Reader) error {
			p.kinds, p.kindsErr = p.dependents.Kinds(ctx)
			return nil
		})
		if err != nil {
			return nil, nil, err
		}
	}
	if p.kindsErr != nil {
		return nil, p.kindsErr, nil
	}
	for _, kind := range p.kinds {
		err = p.step(ctx, func(ctx context.Context, _ client.Writer, _ client.Reader) error {
			for cont := ""; ; {
				items, next, err := p.dependents.List(ctx, kind, ns, cont)
				objs, listErr = append(objs, items...), err
				if cont = next; err != nil || cont == "" {
					return nil
				}
			}
		})
		if err != nil || listErr != nil {
			return nil, listErr, err
		}
	}
	return objs, nil, nil
}

// judgeDependents completes a candidate's facts with its dependents and decides again.
// When final (just before the delete) it also reads the own owner again if needed,
// counts claims toward expiry and enqueues the claimers.
func (p *pass) judgeDependents(ctx context.Context, it *item, idx dependentsIndex, listErr error, final bool) error {
	if listErr != nil {
		it.facts.Dependents = &DependentsSummary{Failed: true}
		it.detail = listErr.Error()
		it.verdict = Decide(it.facts)
		return nil
	}
	deps := idx.byOwner[it.obj.UID]
	it.deps = []string{}
	for _, d := range deps {
		it.deps = append(it.deps, fmt.Sprintf("%s %s (uid %s)", d.GroupVersionKind().GroupKind(), d.Name, d.UID))
	}
	j := dependentJudge{anchorUID: it.obj.UID, owner: it.owner, proof: it.verdict.Proof, existing: idx.existing, other: p.others, writes: p.opts.Writes}
	for _, key := range j.otherOwnersToRead(deps) {
		if _, ok := p.others[key]; ok {
			continue
		}
		o, err := p.readOtherOwner(ctx, key, it.obj.Namespace)
		if err != nil {
			return err
		}
		p.others[key] = o
	}
	if p.rep.Retired {
		// Nothing of a retired project is live, so nothing of it claims.
		j.own.Fresh = Observation{State: Absent}
	} else if j.needsOwn(deps) {
		_, j.own.Sibling = idx.sibling(it.owner, it.obj.UID)
		if final && !j.own.Sibling {
			// The proof may be minutes old.
			fresh, detail, err := p.readOwner(ctx, it.owner)
			if err != nil {
				return err
			}
			j.own.Fresh = fresh
			if detail != "" {
				it.detail = "owner read again before the delete: " + detail
			}
		}
	}
	summary, claimers := j.summarize(deps)
	it.facts.Dependents = &summary
	if final {
		it.facts.ClaimedPasses = p.memory.claims[it.obj.UID]
	}
	it.verdict = Decide(it.facts)
	if !final {
		return nil
	}
	switch it.verdict.Reason {
	case ReasonAwaitingReattach:
		p.memory.claims[it.obj.UID]++
		p.enqueueClaimers(it, claimers)
	case ReasonClaimExpired:
		p.memory.claims[it.obj.UID]++
		p.claimExpired(it, claimers)
	default:
		delete(p.memory.claims, it.obj.UID)
	}
	return nil
}

// claimExpired reports a claim no reconcile resolved within ClaimPasses passes.
func (p *pass) claimExpired(it *item, claimers []anchor.Owner) {
	names := claimerNames(claimers)
	it.detail = fmt.Sprintf("claimed by live %s for %d passes without being re-attached; the next pass collects the anchor with its dependents", strings.Join(names, ", "), p.opts.ClaimPasses)
	p.log.Info("A claim on a stale anchor's dependents expired", "anchor", klog.KObj(it.obj), "claimedBy", names, "passes", p.opts.ClaimPasses, "dependents", it.deps)
	p.anchorEvent(it, corev1.EventTypeWarning, "AnchorClaimExpired", "Judge", fmt.Sprintf("Stale anchor %s/%s of %s: %s. Dependents: %s.",
		it.obj.Namespace, it.obj.Name, it.owner, it.detail, strings.Join(it.deps, ", ")))
}

// readOtherOwner reads the owner a dependent's labels name, and its namespace's state;
// nothing of a retired project is live: its owners are absent, unread.
func (p *pass) readOtherOwner(ctx context.Context, key anchor.Owner, hubNS string) (otherOwner, error) {
	if p.rep.Retired {
		return otherOwner{State: Absent}, nil
	}
	obs, _, err := p.readOwner(ctx, key)
	if err != nil {
		return otherOwner{}, err
	}
	o := otherOwner{State: obs.State, UID: obs.UID}
	if obs.State == Present {
		if o.Namespace, err = p.namespaceState(ctx, key.Namespace, hubNS); err != nil {
			return otherOwner{}, err
		}
	}
	return o, nil
}

// enqueueClaimers asks the live claiming owners to re-attach the dependents (not in dry-run).
func (p *pass) enqueueClaimers(it *item, claimers []anchor.Owner) {
	names := claimerNames(claimers)
	for _, c := range claimers {
		if p.enqueue == nil || p.opts.DryRun {
			continue
		}
		if p.enqueued[c] {
			it.action = ActionOwnerEnqueued
			continue
		}
		p.enqueued[c] = true
		if err := p.enqueue(c); err != nil {
			p.log.Info("Enqueuing a live owner to re-attach a dependent failed", "owner", c.String(), "error", err.Error())
			continue
		}
		it.action = ActionOwnerEnqueued
	}
	it.detail = "claimed by live " + strings.Join(names, ", ")
	p.log.V(1).Info("Keeping stale anchor until its dependents are re-attached", "anchor", klog.KObj(it.obj), "claimedBy", names)
}

func claimerNames(claimers []anchor.Owner) []string {
	var names []string
	for _, c := range claimers {
		names = append(names, ownerRef(c))
	}
	return names
}

// checkUnique makes a candidate ambiguous when another anchor on the hub has its name.
func (p *pass) checkUnique(ctx context.Context, it *item) error {
	same, err := p.anchors.Named(ctx, it.obj.Name)
	if err != nil {
		return err
	}
	for i := range same {
		if same[i].UID != it.obj.UID && anchor.IsMappedNamespaceName(same[i].Namespace) {
			it.facts.Ambiguous = true
			it.verdict = Decide(it.facts)
			return nil
		}
	}
	return nil
}

// delete deletes a candidate, rate-limited, in its own step, on the examined UID and
// resourceVersion.
func (p *pass) delete(ctx context.Context, it *item) error {
	if err := p.deletes.Wait(ctx); err != nil {
		return fmt.Errorf("%w: waiting to delete: %w", errAborted, err)
	}
	return p.step(ctx, func(ctx context.Context, w client.Writer, _ client.Reader) error {
		log := p.log.WithValues("anchor", klog.KObj(it.obj), "uid", it.obj.UID, "owner", it.owner.String(), "proof", it.verdict.Reason, "labels", it.obj.Labels, "dependents", it.deps)
		log.Info("Deleting anchor")
		gone, err := anchor.DeleteAsChecked(ctx, w, it.obj)
		if err != nil {
			it.action = ActionFailed
			it.detail = err.Error()
			log.Info("Deleting anchor failed; a later pass looks again", "error", err.Error())
			return nil
		}
		it.action = ActionDeleted
		if gone {
			it.detail = "already gone"
		}
		p.anchorEvent(it, corev1.EventTypeNormal, "AnchorCollected", "Delete", collectionNote(it))
		return nil
	})
}
