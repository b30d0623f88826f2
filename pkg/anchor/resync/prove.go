package resync

// The prove and remember phases of a pass: live reads of suspects, and proofs kept for
// confirmation.

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"anchorage/pkg/anchor"
)

// prove makes the live reads suspects need: the upstream namespace (once per pass and
// namespace), then the owner. Each read is rate-limited and runs in its own step. A
// pass in which nearly every mapped namespace read is gone or recreated is a changed
// plane.
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

// Mass namespace loss: a pass that read at least namespaceLossMin mapped namespaces
// and found at least namespaceLossPercent of them gone or recreated upstream treats the
// plane as changed (a wrong or partly restored plane reads that way).
const (
	namespaceLossMin     = 3
	namespaceLossPercent = 90
)

// namespaceLoss counts the mapped namespaces a pass read with a definite answer and
// those among them gone or recreated upstream, and says whether that is a mass loss.
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

// checkNamespaceLoss halts the pass as a changed plane on a mass loss of namespaces,
// unless an operator acknowledged the recorded plane; it clears that acknowledgement
// once a pass finds no mass loss.
func (p *pass) checkNamespaceLoss(ctx context.Context) error {
	if p.rep.Plane != PlaneVerified {
		return nil
	}
	read, lost, mass := namespaceLoss(p.namespaces)
	if !mass {
		if p.planeCheck.LossAcknowledged && p.recordIdentity && !p.opts.DryRun {
			return p.step(ctx, func(ctx context.Context, w client.Client, r client.Reader) error {
				p.rep.APICalls += 2
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

// namespaceState returns the state of upstream namespace ns relative to hubNS, reading
// it once per pass. Only an abort is returned as an error.
func (p *pass) namespaceState(ctx context.Context, ns, hubNS string) (NamespaceState, error) {
	key := ns + "/" + hubNS
	if st, ok := p.namespaces[key]; ok {
		return st, nil
	}
	st := NamespaceUnknown
	if !p.unreachable {
		if err := p.live(ctx); err != nil {
			return st, err
		}
		err := p.step(ctx, func(ctx context.Context, _ client.Client, _ client.Reader) error {
			rctx, cancel := context.WithTimeout(ctx, p.opts.LiveTimeout)
			defer cancel()
			var err error
			st, err = p.plane.readNamespace(rctx, ns, hubNS)
			p.rep.APICalls++
			p.noteRead(err)
			return nil
		})
		if err != nil {
			return st, err
		}
	}
	p.namespaces[key] = st
	return st, nil
}

// proveOwner reads owner live for a proof: from a batched list of its kind and
// namespace when the pass has enough suspects there (owners.go), else with a GET.
func (p *pass) proveOwner(ctx context.Context, owner anchor.Owner) (Observation, string, error) {
	if !p.unreachable && p.ownerReadable(schema.GroupKind{Group: owner.Group, Kind: owner.Kind}) {
		obs, ok, err := p.batchedOwner(ctx, owner)
		if err != nil || ok {
			return obs, "", err
		}
	}
	return p.readOwner(ctx, owner)
}

// readOwner reads owner live, rate-limited, in its own step. Only an abort is
// returned as an error; read failures are in the observation and the detail. A kind
// the plane refused to let the manager read (403) is not read again in this pass.
func (p *pass) readOwner(ctx context.Context, owner anchor.Owner) (Observation, string, error) {
	if p.unreachable {
		return Observation{State: Failed}, "plane unreachable in this pass", nil
	}
	gk := schema.GroupKind{Group: owner.Group, Kind: owner.Kind}
	if !slices.Contains(p.opts.LiveOwnerKinds, gk) {
		// Never read: the plane's role grants get on the configured kinds only, and a
		// read bound to be refused tells nothing the configuration does not. Whether
		// the plane serves the kind at all is still told apart (discovery needs no
		// grant): a kind not served needs no permission, only an operator's look.
		if _, err := p.plane.Mapper.RESTMapping(gk); meta.IsNoMatchError(err) {
			return Observation{State: NotServed}, err.Error(), nil
		}
		return Observation{State: NotConfigured}, notConfiguredDetail(gk), nil
	}
	if detail, ok := p.forbidden[gk]; ok {
		return Observation{State: Forbidden}, detail, nil
	}
	if err := p.live(ctx); err != nil {
		return Observation{State: Failed}, "", err
	}
	var obs Observation
	var detail string
	err := p.step(ctx, func(ctx context.Context, _ client.Client, _ client.Reader) error {
		rctx, cancel := context.WithTimeout(ctx, p.opts.LiveTimeout)
		defer cancel()
		o, calls, err := p.plane.readLive(rctx, owner)
		p.rep.APICalls += calls
		obs = o
		if err != nil {
			detail = err.Error()
		}
		if o.State == Forbidden {
			p.forbidden[gk] = detail
		}
		p.noteRead(err)
		return nil
	})
	return obs, detail, err
}

// live waits for the project's live-read rate limiter.
func (p *pass) live(ctx context.Context) error {
	if err := p.memory.live.Wait(ctx); err != nil {
		return fmt.Errorf("%w: waiting to read the plane: %w", errAborted, err)
	}
	return nil
}

// noteRead counts consecutive reads of the plane that failed in a way that is the
// plane's (unreachable: transport, timeouts, 5xx, 401). A success resets the count; a
// failure that belongs to what was read (403, 404, 429, ...) leaves it as it is.
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

// remember records the proofs held now, keeping the time each was first seen, and
// forgets proofs no longer held and anchors no longer seen.
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
	for uid := range p.memory.proofs {
		if !seen[uid] {
			delete(p.memory.proofs, uid)
		}
	}
	for uid := range p.memory.claims {
		if !seen[uid] {
			delete(p.memory.claims, uid)
		}
	}
	return nil
}
