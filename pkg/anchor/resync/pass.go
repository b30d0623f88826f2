package resync

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"anchorage/pkg/anchor"
)

// Admission admits one step of work for a project: the shard's Enter. The returned
// context ends when the replica's validity does or the project is lost; release must
// be called when the step ends.
type Admission interface {
	Enter(ctx context.Context, project string) (context.Context, func(), error)
}

// HubAccess hands out the hub clients for work on behalf of a project: the shard's
// Hub. The writer refuses once validity has ended; the reader is uncached.
type HubAccess interface {
	Hub(ctx context.Context, project string) (client.Client, client.Reader, error)
}

// Examination records one anchor looked at by one pass, under admission.
type Examination struct {
	Holder, Project string
	Namespace, Name string
	UID             types.UID
	At              time.Time
}

// ExaminationRecorder receives Examinations (tests, audits).
type ExaminationRecorder interface{ RecordExamination(Examination) }

// projectMemory is what a project's loop keeps between passes: proofs of absence
// waiting for confirmation, and the project's live-read rate limiter. It is lost when
// the project is (a new holder starts confirming again, which only delays).
type projectMemory struct {
	proofs map[types.UID]Proof
	live   flowcontrol.RateLimiter
}

func newProjectMemory(o Options) *projectMemory {
	return &projectMemory{proofs: map[types.UID]Proof{}, live: flowcontrol.NewTokenBucketRateLimiter(o.LiveQPS, o.LiveBurst)}
}

// passDeps is what every pass of one runner shares: the replica's Resync, the sweep
// and the tests each build it once, and newPass adds what belongs to one pass.
type passDeps struct {
	holder         string
	admission      Admission
	hub            HubAccess
	anchors        AnchorSource
	dependents     DependentLister
	secrets        secrets
	leaseNamespace string
	events         events.EventRecorder
	enqueue        func(anchor.Owner) error
	recorder       ExaminationRecorder
	opts           Options
	deletes        flowcontrol.RateLimiter
	// recordIdentity allows recording the plane identity when none is on record. A
	// replica records it even in dry-run (it deletes nothing, and a record made early
	// is what exposes a later repointing); the sweep in dry-run writes nothing.
	recordIdentity bool
}

// newPass builds one pass over project, reading plane and keeping what outlives the
// pass in mem.
func newPass(d passDeps, project string, plane Plane, mem *projectMemory, log logr.Logger) *pass {
	if log.GetSink() == nil {
		log = logr.Discard()
	}
	return &pass{passDeps: d, project: project, plane: plane, memory: mem, log: log}
}

// pass is one resync pass over one project: a short list of phases, each step of which
// runs inside the project's admission.
type pass struct {
	passDeps
	project string
	plane   Plane
	memory  *projectMemory
	log     logr.Logger

	rep         PassReport
	items       []*item
	secret      *metav1.PartialObjectMetadata
	namespaces  map[string]NamespaceState
	others      map[ownerKey]otherOwner
	failures    int
	unreachable bool
	// kinds the hub serves, discovered once per pass (kindsErr if that failed).
	kinds    []DependentKind
	kindsErr error
}

// item is one anchor under examination.
type item struct {
	obj     *metav1.PartialObjectMetadata
	owner   anchor.Owner
	facts   Facts
	verdict Verdict
	action  Action
	deps    []string
	detail  string
}

// errAborted marks an end of the pass that is not a failure: the project was lost or
// not admitted.
var errAborted = errors.New("pass aborted")

// unreachableAfter is how many consecutive failed reads of the plane make a pass treat
// it as unreachable and stop reading it: each would only wait for its timeout.
const unreachableAfter = 3

func (p *pass) now() time.Time { return p.opts.Clock.Now() }

// run runs the pass and returns its report, complete up to where the pass ended. An
// error wrapping errAborted means the project was lost or not admitted; any other
// error, that a step failed. Either way nothing more was done.
func (p *pass) run(ctx context.Context) (PassReport, error) {
	started := time.Now()
	p.rep = PassReport{Project: p.project, Holder: p.holder, Start: p.now(), DryRun: p.opts.DryRun}
	p.namespaces, p.others = map[string]NamespaceState{}, map[ownerKey]otherOwner{}
	err := p.phases(ctx)
	p.rep.Duration = time.Since(started)
	for _, it := range p.items {
		p.rep.Anchors = append(p.rep.Anchors, p.reportOf(it))
	}
	if err != nil {
		p.rep.Aborted = err.Error()
	}
	return p.rep, err
}

func (p *pass) phases(ctx context.Context) error {
	for _, phase := range []func(context.Context) error{
		p.examine,  // admission, plane identity, anchors from the cache, cache reads
		p.prove,    // live reads of suspects' namespaces and owners
		p.remember, // record proofs for confirmation, forget the rest
		p.collect,  // ceiling, cap, dependents, switch, delete
	} {
		if err := phase(ctx); err != nil {
			return err
		}
	}
	return nil
}

// step runs f inside the project's admission with the hub clients.
func (p *pass) step(ctx context.Context, f func(ctx context.Context, w client.Client, r client.Reader) error) error {
	sctx, release, err := p.admission.Enter(ctx, p.project)
	if err != nil {
		return fmt.Errorf("%w: %w", errAborted, err)
	}
	defer release()
	w, r, err := p.hub.Hub(sctx, p.project)
	if err != nil {
		return fmt.Errorf("%w: %w", errAborted, err)
	}
	return f(sctx, w, r)
}

// examine reads the Secret, checks the plane identity and decides every anchor from the
// owner's cache: live anchors end here, with no API call.
func (p *pass) examine(ctx context.Context) error {
	err := p.step(ctx, func(ctx context.Context, w client.Client, r client.Reader) error {
		sec, calls, err := p.secrets.find(ctx, r, p.project)
		p.rep.APICalls += calls
		if err != nil {
			return err
		}
		if sec == nil {
			// A project that matches no Secret belongs to no shard (docs/design.md).
			return fmt.Errorf("%w: project %q matches no kubeconfig Secret", errAborted, p.project)
		}
		p.secret = sec
		p.rep.Excluded = excluded(sec)
		p.checkPlane(ctx, w, r)
		return nil
	})
	if err != nil {
		return err
	}
	// A step of its own: the reads above may have used up most of the first one.
	return p.step(ctx, func(ctx context.Context, _ client.Client, _ client.Reader) error {
		objs, err := p.anchors.ProjectAnchors(ctx, p.project)
		if err != nil {
			return err
		}
		names := map[string]int{}
		for i := range objs {
			names[objs[i].Name]++
		}
		now := p.now()
		for i := range objs {
			obj := &objs[i]
			if !looksLikeAnchor(obj) {
				continue
			}
			it := &item{obj: obj}
			it.facts = Facts{
				Now: now, AnchorUID: types.UID(strings.TrimPrefix(obj.Name, anchor.NamePrefix)), Created: obj.CreationTimestamp.Time,
				Plane: p.rep.Plane, Ambiguous: names[obj.Name] > 1, Timing: p.opts.timing(),
			}
			// IsAnchor, without decoding twice: looksLikeAnchor checked the name and
			// namespace, Decode the labels; an anchor has no ownerReferences.
			if owner, err := anchor.Decode(obj.Name, obj.Labels); err != nil || len(obj.OwnerReferences) > 0 {
				it.facts.Malformed = true
			} else {
				it.owner = owner
				it.facts.Finalizer = p.opts.Finalizers[schema.GroupKind{Group: owner.Group, Kind: owner.Kind}]
				it.facts.Earlier = p.memory.proofs[obj.UID]
				it.facts.Cache = p.plane.readCached(ctx, owner)
			}
			it.verdict = Decide(it.facts)
			p.items = append(p.items, it)
			if p.recorder != nil {
				p.recorder.RecordExamination(Examination{Holder: p.holder, Project: p.project, Namespace: obj.Namespace, Name: obj.Name, UID: obj.UID, At: time.Now()})
			}
		}
		sort.SliceStable(p.items, func(i, j int) bool {
			a, b := p.items[i].obj, p.items[j].obj
			if a.Namespace != b.Namespace {
				return a.Namespace < b.Namespace
			}
			return a.Name < b.Name
		})
		return nil
	})
}

// looksLikeAnchor reports whether a cached ConfigMap has an anchor's name and place, so
// that failing IsAnchor makes it a malformed anchor rather than something else.
func looksLikeAnchor(obj *metav1.PartialObjectMetadata) bool {
	_, ok := anchor.UIDOfName(obj.Name)
	return ok && anchor.IsMappedNamespaceName(obj.Namespace)
}

// checkPlane reads the plane identity and compares it with the record. A changed
// identity halts the project's deletions and raises the alert.
func (p *pass) checkPlane(ctx context.Context, w client.Client, r client.Reader) {
	p.rep.Plane = PlaneUnverified
	rctx, cancel := context.WithTimeout(ctx, p.opts.LiveTimeout)
	current, err := p.plane.readPlaneIdentity(rctx)
	cancel()
	p.rep.APICalls++
	if err != nil {
		p.rep.PlaneDetail = "plane unreachable: " + err.Error()
		p.unreachable = true
		return
	}
	pc, calls, err := checkPlane(ctx, r, w, p.leaseNamespace, p.project, p.secret, current, p.recordIdentity)
	p.rep.APICalls += calls
	p.rep.Plane, p.rep.PlaneDetail = pc.State, pc.Detail
	if err != nil {
		p.rep.PlaneDetail = err.Error()
	}
	if pc.State == PlaneChanged {
		p.rep.Halt = HaltPlaneChanged
		p.log.Info("Halting anchor deletion: the project's plane identity changed", "recorded", pc.Recorded, "current", pc.Current)
		p.warn("PlaneIdentityChanged", "Anchor deletion halted for project %s: %s. If the plane was replaced on purpose, delete ConfigMap %s/%s to record the new identity.",
			p.project, pc.Detail, p.leaseNamespace, PlaneIdentityName(p.project))
	}
}

// prove makes the live reads suspects need: the upstream namespace (once per pass and
// namespace), then the owner. Each read is rate-limited and runs in its own step.
func (p *pass) prove(ctx context.Context) error {
	for _, it := range p.items {
		for it.verdict.Need == NeedNamespace || it.verdict.Need == NeedLive {
			var err error
			switch it.verdict.Need {
			case NeedNamespace:
				it.facts.Namespace, err = p.namespaceState(ctx, it.owner.Namespace, it.obj.Namespace)
			case NeedLive:
				it.facts.Live, it.detail, err = p.readOwner(ctx, it.owner)
			}
			if err != nil {
				return err
			}
			it.verdict = Decide(it.facts)
		}
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
			p.noteRead(err == nil || st != NamespaceUnknown)
			return nil
		})
		if err != nil {
			return st, err
		}
	}
	p.namespaces[key] = st
	return st, nil
}

// readOwner reads owner live, rate-limited, in its own step. Only an abort is
// returned as an error; read failures are in the observation and the detail.
func (p *pass) readOwner(ctx context.Context, owner anchor.Owner) (Observation, string, error) {
	if p.unreachable {
		return Observation{State: Failed}, "plane unreachable in this pass", nil
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
		p.noteRead(o.State != Failed)
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

// noteRead counts consecutive failed reads of the plane.
func (p *pass) noteRead(ok bool) {
	if ok {
		p.failures = 0
		return
	}
	p.failures++
	if p.failures >= unreachableAfter && !p.unreachable {
		p.unreachable = true
		p.log.Info("Treating the plane as unreachable for the rest of the pass", "failedReads", p.failures)
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
	return nil
}

// collect applies the ceiling, reads the dependents of candidates namespace by
// namespace (just before deleting), and deletes what is still Collect, within the cap
// and the rate limit, unless dry-run, the switch or the exclusion say otherwise.
func (p *pass) collect(ctx context.Context) error {
	var candidates []*item
	for _, it := range p.items {
		if it.verdict.Decision == Collect && it.verdict.Need == NeedDependents {
			candidates = append(candidates, it)
		}
	}
	if len(candidates) == 0 {
		return nil
	}
	if len(candidates) > p.opts.HaltAbove {
		p.rep.Halt = HaltCeiling
		for _, it := range candidates {
			it.action = ActionHalted
		}
		p.log.Info("Halting anchor deletion: more anchors qualify for collection than the per-pass ceiling", "candidates", len(candidates), "ceiling", p.opts.HaltAbove)
		p.warn("CollectionCeiling", "Anchor deletion halted for project %s: %d anchors qualify for collection in one pass, above the ceiling of %d. Check the project's plane, then raise --resync-halt-above or collect by hand.",
			p.project, len(candidates), p.opts.HaltAbove)
		return nil
	}
	// Oldest first, then grouped by namespace so each namespace's dependents are read
	// once.
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

// readSwitch reads the runtime switch (one request) inside a step.
func (p *pass) readSwitch(ctx context.Context) error {
	return p.step(ctx, func(ctx context.Context, _ client.Client, r client.Reader) error {
		on, err := deletionSwitch(ctx, r, p.leaseNamespace)
		p.rep.APICalls++
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
		if err := p.judgeDependents(ctx, it, idx, listErr); err != nil {
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

// listNamespace reads every object of every namespaced kind in hub namespace ns, one
// admission step per request, so a slow hub cannot outlast one validity window. The
// kinds are discovered once per pass. listErr is a failed read (the dependents are
// then unknown); err, an abort.
func (p *pass) listNamespace(ctx context.Context, ns string) (objs []metav1.PartialObjectMetadata, listErr, err error) {
	if p.kinds == nil {
		err = p.step(ctx, func(ctx context.Context, _ client.Client, _ client.Reader) error {
			kinds, calls, err := p.dependents.Kinds(ctx)
			p.rep.APICalls += calls
			p.kinds, p.kindsErr = kinds, err
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
		err = p.step(ctx, func(ctx context.Context, _ client.Client, _ client.Reader) error {
			items, calls, err := p.dependents.List(ctx, kind, ns)
			p.rep.APICalls += calls
			objs, listErr = append(objs, items...), err
			return nil
		})
		if err != nil || listErr != nil {
			return nil, listErr, err
		}
	}
	return objs, nil, nil
}

// judgeDependents completes a candidate's facts with its dependents and decides again;
// live owners that claim a dependent are enqueued to re-attach it.
func (p *pass) judgeDependents(ctx context.Context, it *item, idx dependentsIndex, listErr error) error {
	if listErr != nil {
		it.facts.Dependents = &DependentsSummary{Failed: true}
		it.detail = listErr.Error()
		it.verdict = Decide(it.facts)
		return nil
	}
	deps := idx.byOwner[it.obj.UID]
	it.deps = []string{}
	for _, d := range deps {
		it.deps = append(it.deps, dependentRef(d))
	}
	for _, key := range otherOwnersToRead(deps, it.obj.UID, it.owner, idx.existing) {
		if _, ok := p.others[key]; ok {
			continue
		}
		o, err := p.readOtherOwner(ctx, key, it.obj.Namespace)
		if err != nil {
			return err
		}
		p.others[key] = o
	}
	summary, claimers := summarizeDependents(deps, it.obj.UID, it.owner, it.verdict.Proof, idx.existing, p.others)
	it.facts.Dependents = &summary
	it.verdict = Decide(it.facts)
	if it.verdict.Reason == ReasonAwaitingReattach {
		p.enqueueClaimers(it, claimers)
	}
	return nil
}

// readOtherOwner reads an owner a dependent's labels name, with its namespace's state
// relative to the dependent's hub namespace.
func (p *pass) readOtherOwner(ctx context.Context, key ownerKey, hubNS string) (otherOwner, error) {
	obs, _, err := p.readOwner(ctx, key.owner(""))
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

// enqueueClaimers asks the live owners claiming an anchor's dependents to re-attach
// them. Nothing is enqueued in dry-run.
func (p *pass) enqueueClaimers(it *item, claimers []anchor.Owner) {
	var names []string
	for _, c := range claimers {
		names = append(names, fmt.Sprintf("%s %s/%s", c.Kind, c.Namespace, c.Name))
		if p.enqueue == nil || p.opts.DryRun {
			continue
		}
		if err := p.enqueue(c); err != nil {
			p.log.Info("Enqueuing a live owner to re-attach a dependent failed", "owner", c.String(), "error", err.Error())
			continue
		}
		it.action = ActionOwnerEnqueued
	}
	it.detail = "claimed by live " + strings.Join(names, ", ")
	p.log.V(1).Info("Keeping stale anchor until its dependents are re-attached", "anchor", klog.KObj(it.obj), "claimedBy", names)
}

// checkUnique refuses a candidate whose name another anchor on the hub shares: which
// one is the owner's cannot be told.
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

// delete deletes a candidate, rate-limited, inside its own step, conditional on the
// UID and resourceVersion the pass examined.
func (p *pass) delete(ctx context.Context, it *item) error {
	if err := p.deletes.Wait(ctx); err != nil {
		return fmt.Errorf("%w: waiting to delete: %w", errAborted, err)
	}
	return p.step(ctx, func(ctx context.Context, w client.Client, _ client.Reader) error {
		key := client.ObjectKeyFromObject(it.obj)
		uid := it.obj.UID
		log := p.log.WithValues("anchor", klog.KObj(it.obj), "uid", uid, "owner", it.owner.String(), "proof", it.verdict.Reason, "labels", it.obj.Labels, "dependents", it.deps)
		log.Info("Deleting anchor")
		p.rep.APICalls++
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
		if p.events != nil {
			ref := &corev1.ObjectReference{APIVersion: "v1", Kind: "ConfigMap", Namespace: key.Namespace, Name: key.Name, UID: uid}
			p.events.Eventf(ref, nil, corev1.EventTypeNormal, "AnchorCollected", "Delete", "%s", truncate(collectionNote(it), 1000))
		}
		return nil
	})
}
