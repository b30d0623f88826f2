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
	// claims counts, per anchor, the passes in a row that found a claimed dependent
	// hanging on it (Options.ClaimPasses bounds them).
	claims map[types.UID]int
	// retiredAt is when a pass first found the project retired (zero: not retired).
	retiredAt time.Time
	live      flowcontrol.RateLimiter
}

func newProjectMemory(o Options) *projectMemory {
	return &projectMemory{proofs: map[types.UID]Proof{}, claims: map[types.UID]int{}, live: flowcontrol.NewTokenBucketRateLimiter(o.LiveQPS, o.LiveBurst)}
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
	// forbidden holds the owner kinds the plane refused to let the manager read in this
	// pass, with the missing permission: they are not read again in this pass.
	forbidden map[schema.GroupKind]string
	// retired: the project has no Secret and a tombstone (named tombstone) retires it.
	retired   bool
	tombstone string
	// planeCheck is the plane identity check of this pass.
	planeCheck planeCheck
	// enqueued holds the owners enqueued in this pass.
	enqueued map[anchor.Owner]bool
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
	p.forbidden, p.enqueued = map[schema.GroupKind]string{}, map[anchor.Owner]bool{}
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
// owner's cache: live anchors end here, with no API call. A project with no Secret is
// examined only when a tombstone retires it.
func (p *pass) examine(ctx context.Context) error {
	err := p.step(ctx, func(ctx context.Context, w client.Client, r client.Reader) error {
		sec, calls, err := p.secrets.find(ctx, r, p.project)
		p.rep.APICalls += calls
		if err != nil {
			return err
		}
		if sec == nil {
			return p.examineRetired(ctx, w, r)
		}
		p.memory.retiredAt = time.Time{}
		p.secret = sec
		p.rep.Excluded = excluded(sec)
		if p.plane.SecretUID != "" && p.plane.SecretUID != sec.UID {
			// The plane was built from another Secret (one replaced since): its reads
			// prove nothing about the plane the project's Secret names now.
			p.rep.Plane = PlaneUnverified
			p.rep.PlaneDetail = fmt.Sprintf("the plane was built from Secret uid %s, the project's Secret is now uid %s", p.plane.SecretUID, sec.UID)
			p.unreachable = true
			return nil
		}
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
				Plane: p.rep.Plane, Retired: p.retired, Ambiguous: names[obj.Name] > 1, Timing: p.opts.timing(),
			}
			// IsAnchor, without decoding twice: looksLikeAnchor checked the name and
			// namespace, Decode the labels; an anchor has no ownerReferences.
			if owner, err := anchor.Decode(obj.Name, obj.Labels); err != nil || len(obj.OwnerReferences) > 0 {
				it.facts.Malformed = true
			} else {
				it.owner = owner
				it.facts.Finalizer = p.opts.Finalizers[schema.GroupKind{Group: owner.Group, Kind: owner.Kind}]
				it.facts.Earlier = p.memory.proofs[obj.UID]
				if !p.retired {
					it.facts.Cache = p.plane.readCached(ctx, owner)
				}
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
// identity halts the project's deletions and raises the alert; an operator's
// acknowledgement of the new plane is logged and evented.
func (p *pass) checkPlane(ctx context.Context, w client.Client, r client.Reader) {
	p.rep.Plane = PlaneUnverified
	rctx, cancel := context.WithTimeout(ctx, p.opts.LiveTimeout)
	current, err := p.plane.readPlaneIdentity(rctx)
	cancel()
	p.rep.APICalls++
	if err != nil {
		p.rep.PlaneDetail = "plane unreachable: " + err.Error()
		p.unreachable = unreachable(err)
		return
	}
	pc, calls, err := checkPlane(ctx, r, w, p.leaseNamespace, p.project, p.secret, current, p.recordIdentity)
	p.rep.APICalls += calls
	p.planeCheck = pc
	p.rep.Plane, p.rep.PlaneDetail = pc.State, pc.Detail
	if err != nil {
		p.rep.PlaneDetail = err.Error()
	}
	record := fmt.Sprintf("%s/%s", p.leaseNamespace, PlaneIdentityName(p.project))
	switch {
	case pc.Acknowledged:
		p.log.Info("Operator acknowledged a new plane for the project; recorded it", "record", record, "previous", pc.Recorded, "current", pc.Current, "secretUID", p.secret.UID)
		p.notice("PlaneIdentityAcknowledged", "Acknowledge", "Plane identity of project %s acknowledged by an operator on ConfigMap %s: now %s (was %s), verified with Secret uid %s.",
			p.project, record, pc.Current, pc.Recorded, p.secret.UID)
	case pc.State == PlaneChanged:
		p.haltPlane(fmt.Sprintf("%s. If the plane was replaced on purpose, acknowledge it: kubectl annotate configmap -n %s %s %s=%s",
			pc.Detail, p.leaseNamespace, PlaneIdentityName(p.project), AnnotationAcknowledgePlane, pc.Current))
	}
}

// haltPlane halts the project's deletions for a changed plane: the report, the log and
// a Warning Event on the project's Secret.
func (p *pass) haltPlane(detail string) {
	p.rep.Plane, p.rep.Halt = PlaneChanged, HaltPlaneChanged
	p.log.Info("Halting anchor deletion: the project's plane changed", "detail", detail)
	p.warn("PlaneIdentityChanged", "Anchor deletion halted for project %s: %s", p.project, detail)
}

// examineRetired handles a project that matches no Secret: without a tombstone the pass
// ends (such a project belongs to no shard); with one, its anchors are judged as the
// anchors of a retired project (docs/design.md, Projects with no Secret). Confirmed on two
// passes, the project's plane identity record is dropped.
func (p *pass) examineRetired(ctx context.Context, w client.Client, r client.Reader) error {
	name, calls, err := tombstoneOf(ctx, r, p.leaseNamespace, p.project)
	p.rep.APICalls += calls
	if err != nil {
		return err
	}
	if name == "" {
		p.memory.retiredAt = time.Time{}
		return fmt.Errorf("%w: project %q matches no kubeconfig Secret", errAborted, p.project)
	}
	p.retired, p.tombstone, p.rep.Retired = true, name, true
	p.rep.Plane = PlaneUnverified
	p.rep.PlaneDetail = fmt.Sprintf("retired (tombstone %s/%s), no kubeconfig Secret", p.leaseNamespace, name)
	now := p.now()
	if p.memory.retiredAt.IsZero() {
		p.memory.retiredAt = now
		p.rep.PendingConfirmation = now.Add(p.opts.ConfirmAfter)
		return nil
	}
	if now.Sub(p.memory.retiredAt) < p.opts.ConfirmAfter || !p.recordIdentity || p.opts.DryRun {
		return nil
	}
	gone, n, err := dropPlaneRecord(ctx, r, w, p.leaseNamespace, p.project)
	p.rep.APICalls += n
	switch {
	case err != nil:
		p.log.Info("Dropping the plane identity record of a retired project failed; a later pass tries again", "error", err.Error())
	case !gone:
		p.log.Info("Dropped the plane identity record of a retired project", "record", p.leaseNamespace+"/"+PlaneIdentityName(p.project), "tombstone", name)
	}
	return nil
}

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
				it.facts.Live, it.detail, err = p.readOwner(ctx, it.owner)
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

// readOwner reads owner live, rate-limited, in its own step. Only an abort is
// returned as an error; read failures are in the observation and the detail. A kind
// the plane refused to let the manager read (403) is not read again in this pass.
func (p *pass) readOwner(ctx context.Context, owner anchor.Owner) (Observation, string, error) {
	if p.unreachable {
		return Observation{State: Failed}, "plane unreachable in this pass", nil
	}
	gk := schema.GroupKind{Group: owner.Group, Kind: owner.Kind}
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

// collect applies the ceiling, reads the dependents of candidates namespace by
// namespace (just before deleting), and deletes what is still Collect, within the cap
// and the rate limit, unless dry-run, the switch or the exclusion say otherwise.
// Anchors already terminating are skipped (reported), and count neither as deletions
// nor against the cap or the ceiling.
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
	if len(candidates) > p.opts.HaltAbove {
		halted, err := p.ceiling(ctx, order, byNS)
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

// ceiling judges the dependents of every candidate (no fresh reads, no enqueue, no
// deletion) when there are more candidates than the ceiling, and halts the pass if more
// than the ceiling can be collected: candidates kept for their dependents do not count,
// so anchors that are kept anyway never halt a project forever. Otherwise the
// candidates are judged again, on fresh lists, by the collection that follows.
func (p *pass) ceiling(ctx context.Context, order []string, byNS map[string][]*item) (bool, error) {
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
		for _, ns := range order {
			for _, it := range byNS[ns] {
				it.facts.Dependents, it.deps, it.detail = nil, nil, ""
				it.verdict = Decide(it.facts)
			}
		}
		return false, nil
	}
	p.rep.Halt = HaltCeiling
	for _, ns := range order {
		for _, it := range byNS[ns] {
			if it.verdict.Decision == Collect {
				it.action = ActionHalted
			}
		}
	}
	p.log.Info("Halting anchor deletion: more anchors can be collected than the per-pass ceiling", "collectable", collectable, "ceiling", p.opts.HaltAbove)
	p.warn("CollectionCeiling", "Anchor deletion halted for project %s: %d anchors qualify for collection in one pass, above the ceiling of %d. Check the project's plane, then raise --resync-halt-above or collect by hand (docs/recovery.md).",
		p.project, collectable, p.opts.HaltAbove)
	return true, nil
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
		// From here the anchor is as good as gone: what also hangs on it is judged,
		// for the candidates that follow, as hanging on them alone.
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

// judgeDependents completes a candidate's facts with its dependents and decides again.
// When final (just before the delete), the anchor's own owner is read live again if a
// dependent is labelled for it, claims are counted toward their expiry, and live owners
// that claim a dependent are enqueued to re-attach it.
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
		it.deps = append(it.deps, dependentRef(d))
	}
	j := dependentJudge{anchorUID: it.obj.UID, owner: it.owner, proof: it.verdict.Proof, existing: idx.existing, other: p.others, writes: p.opts.Writes}
	if p.retired {
		// Nothing of a retired project is live: no owner of it claims anything.
		for _, key := range j.otherOwnersToRead(deps) {
			p.others[key] = otherOwner{State: Absent}
		}
		j.own.Fresh = Observation{State: Absent}
	} else {
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
		if j.needsOwn(deps) {
			_, j.own.Sibling = idx.sibling(it.owner, it.obj.UID)
			if final && !j.own.Sibling {
				// The proof may be minutes old: read the owner again, just before the
				// delete.
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

// claimExpired reports a claim that no reconcile resolved within ClaimPasses passes:
// the next pass collects the anchor with the dependents.
func (p *pass) claimExpired(it *item, claimers []anchor.Owner) {
	var names []string
	for _, c := range claimers {
		names = append(names, fmt.Sprintf("%s %s/%s", c.Kind, c.Namespace, c.Name))
	}
	it.detail = fmt.Sprintf("claimed by live %s for %d passes without being re-attached; the next pass collects the anchor with its dependents", strings.Join(names, ", "), p.opts.ClaimPasses)
	p.log.Info("A claim on a stale anchor's dependents expired", "anchor", klog.KObj(it.obj), "claimedBy", names, "passes", p.opts.ClaimPasses, "dependents", it.deps)
	if p.events != nil {
		ref := &corev1.ObjectReference{APIVersion: "v1", Kind: "ConfigMap", Namespace: it.obj.Namespace, Name: it.obj.Name, UID: it.obj.UID}
		p.events.Eventf(ref, nil, corev1.EventTypeWarning, "AnchorClaimExpired", "Judge", "%s", truncate(fmt.Sprintf("Stale anchor %s/%s of %s: %s. Dependents: %s.",
			it.obj.Namespace, it.obj.Name, it.owner, it.detail, strings.Join(it.deps, ", ")), 1000))
	}
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
