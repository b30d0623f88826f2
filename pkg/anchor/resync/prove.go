package resync

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"anchorage/pkg/anchor"
)

// prove makes the live reads suspects need, then checks for a mass loss of namespaces.
func (p *pass) prove(ctx context.Context) error {
	for _, it := range p.items {
		for it.verdict.Need == NeedNamespace || it.verdict.Need == NeedLive {
			var err error
			switch it.verdict.Need {
			case NeedNamespace:
				it.facts.Namespace, err = p.namespaceState(ctx, it.owner.Namespace, it.obj.Namespace)
			case NeedLive:
				it.facts.Live, it.detail, err = p.proveOwner(ctx, it.owner)
			}
			if err != nil {
				return err
			}
			it.verdict = Decide(it.facts)
		}
	}
	return p.checkNamespaceLoss(ctx)
}

// A pass that reads at least namespaceLossMin mapped namespaces and finds at least
// namespaceLossPercent of them gone or recreated treats the plane as changed
// (docs/design.md, Plane identity).
const (
	namespaceLossMin     = 3
	namespaceLossPercent = 90
)

// namespaceLoss counts the namespaces read with an answer, those lost, and whether that is a mass loss.
func namespaceLoss(states map[string]NamespaceState) (read, lost int, mass bool) {
	for _, st := range states {
		switch st {
		case NamespaceMatches:
			read++
		case NamespaceRecreated, NamespaceGone:
			read++
			lost++
		}
	}
	return read, lost, read >= namespaceLossMin && lost*100 >= read*namespaceLossPercent
}

// checkNamespaceLoss halts the pass as a changed plane on a mass loss, unless the
// recorded plane is acknowledged; without a mass loss it clears that acknowledgement.
func (p *pass) checkNamespaceLoss(ctx context.Context) error {
	if p.rep.Plane != PlaneVerified {
		return nil
	}
	read, lost, mass := namespaceLoss(p.namespaces)
	if !mass {
		if p.planeCheck.LossAcknowledged && p.recordIdentity && !p.opts.DryRun {
			return p.step(ctx, func(ctx context.Context, w client.Writer, r client.Reader) error {
				if err := clearLossAcknowledgement(ctx, r, w, p.leaseNamespace, p.project, p.planeCheck.Current); err != nil {
					p.log.Info("Clearing the acknowledgement on the plane identity record failed", "error", err.Error())
				}
				return nil
			})
		}
		return nil
	}
	detail := fmt.Sprintf("%d of the %d mapped namespaces read in this pass are gone or recreated upstream", lost, read)
	if p.planeCheck.LossAcknowledged {
		p.log.Info("Mass loss of namespaces acknowledged by an operator on the plane identity record; deletion proceeds", "detail", detail)
		p.rep.PlaneDetail = strings.TrimPrefix(p.rep.PlaneDetail+"; "+detail+" (acknowledged)", "; ")
		return nil
	}
	p.haltPlane(fmt.Sprintf("%s, as if the plane were another one. If the plane is right, acknowledge it: kubectl annotate configmap -n %s %s %s=%s",
		detail, p.leaseNamespace, PlaneIdentityName(p.project), AnnotationAcknowledgePlane, p.planeCheck.Current))
	p.rep.PlaneDetail = detail
	for _, it := range p.items {
		it.facts.Plane = PlaneChanged
		it.verdict = Decide(it.facts)
	}
	return nil
}

// namespaceState returns the state of upstream namespace ns relative to hubNS, read once
// per pass; only an abort is an error.
func (p *pass) namespaceState(ctx context.Context, ns, hubNS string) (NamespaceState, error) {
	key := ns + "/" + hubNS
	if st, ok := p.namespaces[key]; ok {
		return st, nil
	}
	st := NamespaceUnknown
	if !p.unreachable {
		err := p.liveRead(ctx, func(ctx context.Context) error {
			var err error
			st, err = p.plane.readNamespace(ctx, ns, hubNS)
			return err
		})
		if err != nil {
			return st, err
		}
	}
	p.namespaces[key] = st
	return st, nil
}

// proveOwner reads owner live: from a batched list (owners.go) if a GET would read it
// (configured, not refused), else a GET.
func (p *pass) proveOwner(ctx context.Context, owner anchor.Owner) (Observation, string, error) {
	gk := schema.GroupKind{Group: owner.Group, Kind: owner.Kind}
	if _, refused := p.forbidden[gk]; !p.unreachable && !refused && slices.Contains(p.opts.LiveOwnerKinds, gk) {
		obs, ok, err := p.batchedOwner(ctx, owner)
		if err != nil || ok {
			return obs, "", err
		}
	}
	return p.readOwner(ctx, owner)
}

// readOwner reads owner live with a GET, rate-limited, in its own step; only an abort is
// an error. A kind refused with a 403, or not configured, is not read.
func (p *pass) readOwner(ctx context.Context, owner anchor.Owner) (Observation, string, error) {
	if p.unreachable {
		return Observation{State: Failed}, "plane unreachable in this pass", nil
	}
	gk := schema.GroupKind{Group: owner.Group, Kind: owner.Kind}
	if !slices.Contains(p.opts.LiveOwnerKinds, gk) {
		// Discovery needs no grant: a kind not served is told apart.
		if _, err := p.plane.Mapper.RESTMapping(gk); meta.IsNoMatchError(err) {
			return Observation{State: NotServed}, err.Error(), nil
		}
		return Observation{State: NotConfigured}, fmt.Sprintf("kind-not-configured: the resync reads %s owners on no plane (add it to the configuration's resync.ownerKinds, and get on it to the plane's role, anchorage-project); anchors of this kind stay unknown until then", gk.String()), nil
	}
	if detail, ok := p.forbidden[gk]; ok {
		return Observation{State: Forbidden}, detail, nil
	}
	obs := Observation{State: Failed}
	var detail string
	err := p.liveRead(ctx, func(ctx context.Context) error {
		var err error
		obs, err = p.plane.readLive(ctx, owner)
		if err != nil {
			detail = err.Error()
		}
		if obs.State == Forbidden {
			p.forbidden[gk] = detail
		}
		return err
	})
	return obs, detail, err
}

// liveRead waits for the project's live-read rate limiter, then runs read in a step of
// its own, bounded by liveTimeout, and counts its error (noteRead); only an abort is an
// error.
func (p *pass) liveRead(ctx context.Context, read func(ctx context.Context) error) error {
	if err := p.memory.live.Wait(ctx); err != nil {
		return fmt.Errorf("%w: waiting to read the plane: %w", errAborted, err)
	}
	return p.step(ctx, func(ctx context.Context, _ client.Writer, _ client.Reader) error {
		rctx, cancel := context.WithTimeout(ctx, liveTimeout)
		defer cancel()
		p.noteRead(read(rctx))
		return nil
	})
}

// noteRead counts the unreachable failures in a row; a success resets the count.
func (p *pass) noteRead(err error) {
	if err == nil {
		p.failures = 0
		return
	}
	if !unreachable(err) {
		return
	}
	p.failures++
	if p.failures >= unreachableAfter && !p.unreachable {
		p.unreachable = true
		p.log.Info("Treating the plane as unreachable for the rest of the pass", "failedReads", p.failures, "lastError", err.Error())
	}
}

// unreachable reports whether a failed read counts toward the plane being unreachable:
// transport errors, timeouts, 5xx and 401 do; 403, 404, 429 and other client errors do
// not (docs/design.md, Unknown, and charging failures to what failed).
func unreachable(err error) bool {
	if err == nil {
		return false
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		code := status.Status().Code
		return code == http.StatusUnauthorized || code >= http.StatusInternalServerError ||
			apierrors.IsUnauthorized(err) || apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err)
	}
	// Anything else but a missing mapping is the transport or a timeout.
	return !meta.IsNoMatchError(err)
}

// remember records the proofs held now, first seen when, and forgets the rest.
func (p *pass) remember(context.Context) error {
	now := p.now()
	seen := make(map[types.UID]bool, len(p.items))
	for _, it := range p.items {
		uid := it.obj.UID
		seen[uid] = true
		if it.verdict.Proof == "" {
			delete(p.memory.proofs, uid)
			continue
		}
		prev, ok := p.memory.proofs[uid]
		if !ok || prev.Reason != it.verdict.Proof {
			prev = Proof{Reason: it.verdict.Proof, At: now}
			p.memory.proofs[uid] = prev
		}
		if it.verdict.Reason == ReasonAwaitingConfirmation {
			due := prev.At.Add(p.opts.ConfirmAfter)
			if p.rep.PendingConfirmation.IsZero() || due.Before(p.rep.PendingConfirmation) {
				p.rep.PendingConfirmation = due
			}
		}
	}
	maps.DeleteFunc(p.memory.proofs, func(uid types.UID, _ Proof) bool { return !seen[uid] })
	maps.DeleteFunc(p.memory.claims, func(uid types.UID, _ int) bool { return !seen[uid] })
	return nil
}
