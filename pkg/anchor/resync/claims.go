package resync

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"anchorage/pkg/anchor"
)

// gatewayKind is the claimant's kind.
var gatewayKind = schema.GroupKind{Group: "gateway.networking.k8s.io", Kind: "Gateway"}

// releaseClaims, the last phase, deletes this project's hostname claims whose Gateway a
// live read proves absent (docs/design.md, Hostname claims), with UID and
// resourceVersion preconditions; only on a pass that could delete anchors.
func (p *pass) releaseClaims(ctx context.Context) error {
	if p.opts.ClaimsNamespace == "" || p.secret == nil || p.rep.Retired || p.unreachable || p.rep.Halt != "" || p.rep.Plane != PlaneVerified ||
		!slices.Contains(p.opts.LiveOwnerKinds, gatewayKind) {
		return nil
	}
	var claims []metav1.PartialObjectMetadata
	if err := p.step(ctx, func(ctx context.Context, _ client.Writer, r client.Reader) error {
		list := coreMetaList("ConfigMapList")
		err := r.List(ctx, list, client.InNamespace(p.opts.ClaimsNamespace), client.HasLabels{anchor.LabelClusterName})
		if err != nil {
			return fmt.Errorf("listing hostname claims: %w", err)
		}
		claims = list.Items
		return nil
	}); err != nil {
		return err
	}
	cached := p.plane.cacheReader()
	for i := range claims {
		claim := &claims[i]
		owner, ok := p.claimantOf(claim)
		if !ok {
			continue
		}
		// Only a cache miss is read live; only a live proof of absence releases.
		if cached.read(ctx, owner).State == Present {
			continue
		}
		obs, _, err := p.readOwner(ctx, owner)
		if err != nil {
			return err
		}
		if obs.State != Absent {
			continue // present, unreadable or unknown: kept
		}
		if err := p.release(ctx, claim, owner); err != nil {
			return err
		}
	}
	return nil
}

// claimantOf returns the Gateway a claim of this project names; false for another
// project's claim or one whose labels do not name a Gateway.
func (p *pass) claimantOf(claim *metav1.PartialObjectMetadata) (anchor.Owner, bool) {
	l := claim.Labels
	project, err := anchor.ProjectFromClusterName(l[anchor.LabelClusterName])
	if err != nil || project != p.project || l[anchor.LabelNamespace] == "" || l[anchor.LabelName] == "" || claim.DeletionTimestamp != nil {
		return anchor.Owner{}, false
	}
	return anchor.Owner{Project: project, Group: gatewayKind.Group, Kind: gatewayKind.Kind, Namespace: l[anchor.LabelNamespace], Name: l[anchor.LabelName]}, true
}

// release deletes claim, proven orphaned, unless dry-run or the switch says no.
func (p *pass) release(ctx context.Context, claim *metav1.PartialObjectMetadata, owner anchor.Owner) error {
	if err := p.readSwitch(ctx); err != nil {
		return err
	}
	p.rep.ClaimsReleased = append(p.rep.ClaimsReleased, claim.Name)
	if p.opts.DryRun || p.rep.SwitchedOff {
		p.log.Info("Would release a hostname claim: its Gateway is gone", "hostname", claim.Name, "gateway", owner.Namespace+"/"+owner.Name, "dryRun", p.opts.DryRun, "switchedOff", p.rep.SwitchedOff)
		return nil
	}
	return p.step(ctx, func(ctx context.Context, w client.Writer, _ client.Reader) error {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: claim.Namespace, Name: claim.Name}}
		uid, rv := claim.UID, claim.ResourceVersion
		err := w.Delete(ctx, cm, client.Preconditions{UID: &uid, ResourceVersion: &rv})
		switch {
		case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
			return nil // gone already, or granted again since: not ours to delete
		case err != nil:
			return fmt.Errorf("releasing hostname claim %s: %w", claim.Name, err)
		}
		p.log.Info("Released a hostname claim: its Gateway is gone", "hostname", claim.Name, "gateway", owner.Namespace+"/"+owner.Name)
		p.secretEvent(corev1.EventTypeNormal, "HostnameClaimReleased", "Release", "Hostname %s released: the Gateway %s/%s that claimed it is gone from project %s's plane.", claim.Name, owner.Namespace, owner.Name, p.project)
		return nil
	})
}
