package resync

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/flowcontrol"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"anchorage/pkg/anchor"
)

// Admission admits one step of work for a project: the shard's Enter. The context ends
// with the replica's validity or the project; release must be called when the step ends.
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

// Observer watches a Resync's passes; its calls must not block nor call the Resync.
type Observer interface {
	// Examined: an anchor looked at by a pass, under admission.
	Examined(Examination)
	// PassDone: a pass ended, aborted ones too (rep.Aborted); completed: without error.
	PassDone(rep PassReport, completed bool)
}

// projectMemory is what a project's loop keeps between passes; lost with the project.
type projectMemory struct {
	proofs     map[types.UID]Proof
	claims     map[types.UID]int // counts, per anchor, the passes in a row that found a claimed dependent
	retiredAt  time.Time         // when a pass first found the project retired (zero: not retired)
	secretName string            // the name of the project's kubeconfig Secret as last found
	live       flowcontrol.RateLimiter
}

func newProjectMemory() *projectMemory {
	return &projectMemory{proofs: map[types.UID]Proof{}, claims: map[types.UID]int{}, live: flowcontrol.NewTokenBucketRateLimiter(liveQPS, liveBurst)}
}

// memoryOf returns project's memory in mems, made on first use.
func memoryOf(mems map[string]*projectMemory, project string) *projectMemory {
	if mems[project] == nil {
		mems[project] = newProjectMemory()
	}
	return mems[project]
}

// passDeps is what every pass of one runner (a Resync, a sweep, a test) shares.
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
	observer       Observer
	hubClock       *HubClock
	opts           Options
	deletes        flowcontrol.RateLimiter
	recordIdentity bool // may write plane identity records: a replica always, a sweep unless dry-run
}

// newPass builds one pass over project, reading plane; mem outlives the pass.
func newPass(d passDeps, project string, plane Plane, mem *projectMemory, log logr.Logger) *pass {
	if d.events != nil {
		d.events = admittedEvents{admission: d.admission, project: project, next: d.events}
	}
	p := &pass{passDeps: d, project: project, plane: plane, memory: mem, log: log}
	p.dependents = countingDependents{d.dependents, &p.calls}
	if plane.Live != nil {
		p.plane.Live = countingReader{plane.Live, &p.calls}
	}
	return p
}

// pass is one resync pass over one project; each step runs inside its admission.
type pass struct {
	passDeps
	project string
	plane   Plane
	memory  *projectMemory
	log     logr.Logger
	calls   atomic.Int64 // counts the pass's API requests (calls.go)

	rep   PassReport
	items []*item

	// What examine learns besides the report's Plane and Retired: the Secret, the plane check.
	secret     *metav1.PartialObjectMetadata
	planeCheck planeCheck

	// What the live reads of the plane found (examine and prove).
	namespaces  map[string]NamespaceState
	failures    int
	unreachable bool
	forbidden   map[schema.GroupKind]string // the owner kinds refused with a 403 in this pass, with the detail
	ownerLists  map[ownerBatch]ownerList    // this pass's batched owner lists; unlistable, the kinds refused
	unlistable  map[schema.GroupKind]bool

	// What the collect phase reads once per pass.
	others       map[anchor.Owner]otherOwner
	enqueued     map[anchor.Owner]bool
	switchReadAt time.Time       // when the runtime switch was last read (zero: not yet)
	kinds        []DependentKind // the dependent kinds the hub serves (kindsErr if discovery failed)
	kindsErr     error
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
	seq     int // the item's place in the anchor cache's listing
}

// errAborted ends a pass without failure: the project was lost or not admitted.
var errAborted = errors.New("pass aborted")

// unreachableAfter failed reads of the plane in a row make a pass stop reading it.
const unreachableAfter = 3

func (p *pass) now() time.Time { return p.opts.Clock.Now() }

// run runs the pass and returns its report as far as it got; the error wraps errAborted
// when the project was lost or not admitted.
func (p *pass) run(ctx context.Context) (PassReport, error) {
	started := time.Now()
	p.rep = PassReport{Project: p.project, Holder: p.holder, Start: p.now(), DryRun: p.opts.DryRun}
	p.namespaces, p.others = map[string]NamespaceState{}, map[anchor.Owner]otherOwner{}
	p.forbidden, p.enqueued = map[schema.GroupKind]string{}, map[anchor.Owner]bool{}
	p.ownerLists, p.unlistable = map[ownerBatch]ownerList{}, map[schema.GroupKind]bool{}
	err := p.phases(ctx)
	p.rep.Duration, p.rep.APICalls = time.Since(started), int(p.calls.Load())
	if len(p.items) > 0 {
		p.rep.Anchors = make([]AnchorReport, 0, len(p.items))
	}
	for _, it := range p.items {
		p.rep.Anchors = append(p.rep.Anchors, reportOf(it, p.now()))
	}
	if err != nil {
		p.rep.Aborted = err.Error()
	}
	return p.rep, err
}

func (p *pass) phases(ctx context.Context) error {
	for _, phase := range []func(context.Context) error{
		p.examine,       // admission, plane identity, anchors from the cache, cache reads
		p.prove,         // live reads of suspects' namespaces and owners
		p.remember,      // record proofs for confirmation, forget the rest
		p.collect,       // ceiling, cap, dependents, switch, delete
		p.releaseClaims, // hostname claims of Gateways proven absent
	} {
		if err := phase(ctx); err != nil {
			return err
		}
	}
	return nil
}

// step runs f inside the project's admission with the hub clients.
func (p *pass) step(ctx context.Context, f func(ctx context.Context, w client.Writer, r client.Reader) error) error {
	sctx, release, err := p.admission.Enter(ctx, p.project)
	if err != nil {
		return fmt.Errorf("%w: %w", errAborted, err)
	}
	defer release()
	w, r, err := p.hub.Hub(sctx, p.project)
	if err != nil {
		return fmt.Errorf("%w: %w", errAborted, err)
	}
	return f(sctx, countingWriter{w, &p.calls}, countingReader{r, &p.calls})
}

// examine reads the Secret, checks the plane identity and decides every anchor from the
// owner's cache. A project with no Secret goes on only if a tombstone retires it.
func (p *pass) examine(ctx context.Context) error {
	err := p.step(ctx, func(ctx context.Context, w client.Writer, r client.Reader) error {
		sec, err := p.secrets.findKnown(ctx, r, p.project, p.memory.secretName)
		if err != nil {
			return err
		}
		if sec == nil {
			return p.examineRetired(ctx, w, r)
		}
		p.memory.secretName = sec.Name
		p.memory.retiredAt = time.Time{}
		p.secret = sec
		p.rep.Excluded = strings.EqualFold(sec.Annotations[AnnotationExclude], "true")
		if p.plane.SecretUID != "" && p.plane.SecretUID != sec.UID {
			// Built from a Secret replaced since: its reads prove nothing.
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
	return p.step(ctx, func(ctx context.Context, _ client.Writer, _ client.Reader) error {
		objs, err := p.anchors.ProjectAnchors(ctx, p.project)
		if err != nil {
			return err
		}
		names := make(map[string]int, len(objs))
		for i := range objs {
			names[objs[i].Name]++
		}
		now := p.now()
		hubNow, _ := p.hubClock.At(now)
		owners := p.plane.cacheReader()
		// One allocation for all items; never outgrown, so pointers into it stay valid.
		items := make([]item, 0, len(objs))
		p.items = make([]*item, 0, len(objs))
		for i := range objs {
			obj := &objs[i]
			if !looksLikeAnchor(obj) {
				continue
			}
			items = append(items, item{obj: obj, seq: len(items)})
			it := &items[len(items)-1]
			it.facts = Facts{
				Now: now, HubNow: hubNow, AnchorUID: types.UID(strings.TrimPrefix(obj.Name, anchor.NamePrefix)), Created: obj.CreationTimestamp.Time,
				Plane: p.rep.Plane, Retired: p.rep.Retired, Ambiguous: names[obj.Name] > 1,
				Timing: Timing{MinAge: p.opts.MinAge, ConfirmAfter: p.opts.ConfirmAfter, StuckAfter: p.opts.StuckAfter, ClaimPasses: p.opts.ClaimPasses},
			}
			// IsAnchor without decoding twice: looksLikeAnchor checked name and namespace.
			if owner, err := anchor.Decode(obj.Name, obj.Labels); err != nil || len(obj.OwnerReferences) > 0 {
				it.facts.Malformed = true
			} else {
				it.owner = owner
				it.facts.Finalizer = p.opts.Finalizers[schema.GroupKind{Group: owner.Group, Kind: owner.Kind}]
				it.facts.Earlier = p.memory.proofs[obj.UID]
				if !p.rep.Retired {
					it.facts.Cache = owners.read(ctx, owner)
				}
			}
			it.verdict = Decide(it.facts)
			p.items = append(p.items, it)
			if p.observer != nil {
				p.observer.Examined(Examination{Holder: p.holder, Project: p.project, Namespace: obj.Namespace, Name: obj.Name, UID: obj.UID, At: time.Now()})
			}
		}
		slices.SortFunc(p.items, compareItems)
		return nil
	})
}

// compareItems orders items by namespace, name, then listing order: a total order, so
// an unstable sort gives a stable sort's result.
func compareItems(a, b *item) int {
	return cmp.Or(strings.Compare(a.obj.Namespace, b.obj.Namespace), strings.Compare(a.obj.Name, b.obj.Name), cmp.Compare(a.seq, b.seq))
}

// looksLikeAnchor reports whether obj has an anchor's name and place: such an object
// that fails IsAnchor is a malformed anchor.
func looksLikeAnchor(obj *metav1.PartialObjectMetadata) bool {
	_, ok := anchor.UIDOfName(obj.Name)
	return ok && anchor.IsMappedNamespaceName(obj.Namespace)
}

// checkPlane reads the plane identity, compares it with the record and halts on a change.
func (p *pass) checkPlane(ctx context.Context, w client.Writer, r client.Reader) {
	p.rep.Plane = PlaneUnverified
	rctx, cancel := context.WithTimeout(ctx, liveTimeout)
	current, err := p.plane.readPlaneIdentity(rctx)
	cancel()
	if err != nil {
		p.rep.PlaneDetail = "plane unreachable: " + err.Error()
		p.unreachable = unreachable(err)
		return
	}
	pc, err := checkPlane(ctx, r, w, p.leaseNamespace, p.project, p.secret, current, p.recordIdentity)
	p.planeCheck = pc
	p.rep.Plane, p.rep.PlaneDetail = pc.State, pc.Detail
	if err != nil {
		p.rep.PlaneDetail = err.Error()
	}
	record := fmt.Sprintf("%s/%s", p.leaseNamespace, PlaneIdentityName(p.project))
	switch {
	case pc.Acknowledged:
		p.log.Info("Operator acknowledged a new plane for the project; recorded it", "record", record, "previous", pc.Recorded, "current", pc.Current, "secretUID", p.secret.UID)
		p.secretEvent(corev1.EventTypeNormal, "PlaneIdentityAcknowledged", "Acknowledge", "Plane identity of project %s acknowledged by an operator on ConfigMap %s: now %s (was %s), verified with Secret uid %s.",
			p.project, record, pc.Current, pc.Recorded, p.secret.UID)
	case pc.State == PlaneChanged:
		p.haltPlane(fmt.Sprintf("%s. If the plane was replaced on purpose, acknowledge it: kubectl annotate configmap -n %s %s %s=%s",
			pc.Detail, p.leaseNamespace, PlaneIdentityName(p.project), AnnotationAcknowledgePlane, pc.Current))
	}
}

// haltPlane halts the project for a changed plane: report, log, Warning Event.
func (p *pass) haltPlane(detail string) {
	p.rep.Plane, p.rep.Halt = PlaneChanged, HaltPlaneChanged
	p.log.Info("Halting anchor deletion: the project's plane changed", "detail", detail)
	p.secretEvent(corev1.EventTypeWarning, "PlaneIdentityChanged", "Halt", "Anchor deletion halted for project %s: %s", p.project, detail)
}

// examineRetired handles a project that matches no Secret: without a tombstone the pass
// aborts; with one, the project is retired (docs/design.md, Projects with no Secret) and,
// once that is confirmed, its plane identity record is dropped.
func (p *pass) examineRetired(ctx context.Context, w client.Writer, r client.Reader) error {
	tombs, err := tombstones(ctx, r, p.leaseNamespace)
	if err != nil {
		return err
	}
	name := tombs[p.project]
	if name == "" {
		p.memory.retiredAt = time.Time{}
		return fmt.Errorf("%w: project %q matches no kubeconfig Secret", errAborted, p.project)
	}
	p.rep.Retired = true
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
	gone, err := dropPlaneRecord(ctx, r, w, p.leaseNamespace, p.project)
	switch {
	case err != nil:
		p.log.Info("Dropping the plane identity record of a retired project failed; a later pass tries again", "error", err.Error())
	case !gone:
		p.log.Info("Dropped the plane identity record of a retired project", "record", p.leaseNamespace+"/"+PlaneIdentityName(p.project), "tombstone", name)
	}
	return nil
}

// reportOf turns an item into its report line, its age at now.
func reportOf(it *item, now time.Time) AnchorReport {
	return AnchorReport{
		Namespace: it.obj.Namespace, Name: it.obj.Name, UID: it.obj.UID, Owner: it.owner, Labels: it.obj.Labels,
		Age: max(now.Sub(it.obj.CreationTimestamp.Time), 0), Verdict: it.verdict, Action: it.action, Dependents: it.deps, Detail: it.detail,
	}
}
