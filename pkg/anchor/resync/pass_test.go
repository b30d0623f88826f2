package resync

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/flowcontrol"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"anchorage/pkg/anchor"
)

// passFixture runs passes against the package's API server, which plays both the hub
// and the project's plane: owners are ConfigMaps in an upstream namespace "up-*",
// anchors live in "ns-<its UID>". The clock starts an hour after the real now, so
// anchors created by the test are older than the default minimum age.
type passFixture struct {
	t        *testing.T
	g        *WithT
	ctx      context.Context
	project  string
	provider string
	upstream *corev1.Namespace
	hubNS    string
	clock    *clocktesting.FakeClock
	opts     Options
	memory   *projectMemory
	events   *events.FakeRecorder
	enqueued []anchor.Owner
	secret   *corev1.Secret
	// plane is the plane the passes read; zero: the hub itself.
	plane Plane
	// admission and hubClient replace the passes' open admission and the hub client
	// when set.
	admission Admission
	hubClient client.Client
}

func newPassFixture(t *testing.T) *passFixture {
	t.Helper()
	c := needHub(t)
	f := &passFixture{t: t, g: NewWithT(t), ctx: context.Background(), project: "p-" + rand.String(6), events: events.NewFakeRecorder(100)}
	f.clock = clocktesting.NewFakeClock(time.Now().Add(time.Hour))
	// The fixture's owners are ConfigMaps, and their live path (as far as claims go)
	// writes a ConfigMap of the owner's name.
	// Owners are ConfigMaps here (and Services, for a kind the plane refuses).
	f.opts = DefaultOptions()
	f.opts.Clock, f.opts.Writes = f.clock, map[schema.GroupKind][]HubWrite{{Kind: "ConfigMap"}: {{Kind: "ConfigMap"}}}
	f.opts.LiveOwnerKinds = []schema.GroupKind{{Kind: "ConfigMap"}, {Kind: "Service"}}
	f.memory = newProjectMemory()
	f.provider = "prov-" + rand.String(6)
	for _, name := range []string{f.provider, "up-" + rand.String(6)} {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
		f.g.Expect(c.Create(f.ctx, ns)).To(Succeed())
		f.upstream = ns
	}
	f.hubNS = anchor.MappedNamespace(f.upstream.UID)
	f.g.Expect(c.Create(f.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.hubNS}})).To(Succeed())
	f.secret = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: f.project, Namespace: f.provider, Labels: map[string]string{DefaultSecretLabel: "true"}}}
	f.g.Expect(c.Create(f.ctx, f.secret)).To(Succeed())
	return f
}

// owner returns a ConfigMap owner in the upstream namespace.
func (f *passFixture) owner(name string, uid types.UID) anchor.Owner {
	return anchor.Owner{Project: f.project, Kind: "ConfigMap", Namespace: f.upstream.Name, Name: name, UID: uid}
}

// liveOwner creates an upstream ConfigMap and returns its owner.
func (f *passFixture) liveOwner(name string) anchor.Owner {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.upstream.Name}}
	f.g.Expect(hub.Create(f.ctx, cm)).To(Succeed())
	return f.owner(name, cm.UID)
}

// plant creates owner's anchor in the hub namespace and one dependent hanging on it,
// and returns the anchor.
func (f *passFixture) plant(owner anchor.Owner) *corev1.ConfigMap {
	a := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: anchor.Name(owner.UID), Namespace: f.hubNS, Labels: owner.Labels()}}
	f.g.Expect(hub.Create(f.ctx, a)).To(Succeed())
	dep := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name: owner.Name + "-" + rand.String(4), Namespace: f.hubNS, Labels: owner.Labels(),
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: a.Name, UID: a.UID}},
	}}
	f.g.Expect(hub.Create(f.ctx, dep)).To(Succeed())
	return a
}

func (f *passFixture) run() PassReport {
	f.t.Helper()
	anchors, err := listAnchors(f.ctx, hub)
	f.g.Expect(err).NotTo(HaveOccurred())
	deps, err := NewHubDependentLister(hubConfig, nil, DependentKindsOf(DefaultHubWrites, nil), dependentsQPS, dependentsBurst)
	f.g.Expect(err).NotTo(HaveOccurred())
	var adm Admission = openAdmission{}
	if f.admission != nil {
		adm = f.admission
	}
	hc := client.Client(hub)
	if f.hubClient != nil {
		hc = f.hubClient
	}
	p := newPass(passDeps{
		holder: "test", admission: adm, hub: staticHub{c: hc}, anchors: anchors, dependents: deps,
		secrets: secrets{namespace: f.provider, label: DefaultSecretLabel}, leaseNamespace: f.provider,
		events: f.events, enqueue: func(o anchor.Owner) error { f.enqueued = append(f.enqueued, o); return nil },
		opts: f.opts, deletes: flowcontrol.NewFakeAlwaysRateLimiter(), recordIdentity: true,
	}, f.project, f.livePlane(), f.memory, testr.New(f.t))

	rep, err := p.run(f.ctx)
	f.g.Expect(err).NotTo(HaveOccurred())
	return rep
}

// livePlane is the plane the fixture's passes read.
func (f *passFixture) livePlane() Plane {
	if f.plane.Live == nil {
		return Plane{Live: hub, Mapper: hub.RESTMapper()}
	}
	return f.plane
}

// anchorIn creates owner's anchor, alone, in hub namespace hubNS.
func (f *passFixture) anchorIn(owner anchor.Owner, hubNS string) *corev1.ConfigMap {
	a := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: anchor.Name(owner.UID), Namespace: hubNS, Labels: owner.Labels()}}
	f.g.Expect(hub.Create(f.ctx, a)).To(Succeed())
	return a
}

// dependent creates a ConfigMap named name in hub namespace hubNS, labelled labels,
// hanging on the anchors.
func (f *passFixture) dependent(hubNS, name string, labels map[string]string, anchors ...*corev1.ConfigMap) *corev1.ConfigMap {
	d := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: hubNS, Labels: labels}}
	for _, a := range anchors {
		d.OwnerReferences = append(d.OwnerReferences, metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: a.Name, UID: a.UID})
	}
	f.g.Expect(hub.Create(f.ctx, d)).To(Succeed())
	return d
}

// hubNamespace creates a mapped namespace for an upstream namespace that never existed
// and returns its name.
func (f *passFixture) hubNamespace() string {
	name := anchor.MappedNamespace(uuid.NewUUID())
	f.g.Expect(hub.Create(f.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})).To(Succeed())
	return name
}

// recreateSecret deletes the project's Secret and creates it again (a new UID).
func (f *passFixture) recreateSecret() {
	f.g.Expect(hub.Delete(f.ctx, f.secret)).To(Succeed())
	f.secret = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: f.project, Namespace: f.provider, Labels: map[string]string{DefaultSecretLabel: "true"}}}
	f.g.Expect(hub.Create(f.ctx, f.secret)).To(Succeed())
}

// record returns the project's plane identity record.
func (f *passFixture) record() *corev1.ConfigMap {
	rec := &corev1.ConfigMap{}
	f.g.Expect(hub.Get(f.ctx, client.ObjectKey{Namespace: f.provider, Name: PlaneIdentityName(f.project)}, rec)).To(Succeed())
	return rec
}

// confirm runs a pass, steps past the confirmation delay and runs another.
func (f *passFixture) confirm() (first, second PassReport) {
	first = f.run()
	f.clock.Step(f.opts.ConfirmAfter + time.Second)
	return first, f.run()
}

func (f *passFixture) line(rep PassReport, a *corev1.ConfigMap) AnchorReport {
	f.t.Helper()
	l, ok := rep.Find(a.Name)
	f.g.Expect(ok).To(BeTrue(), "anchor %s in the report", a.Name)
	return l
}

func (f *passFixture) exists(a *corev1.ConfigMap) bool {
	err := hub.Get(f.ctx, client.ObjectKeyFromObject(a), &corev1.ConfigMap{})
	if apierrors.IsNotFound(err) {
		return false
	}
	f.g.Expect(err).NotTo(HaveOccurred())
	return true
}

func (f *passFixture) drainEvents() []string {
	var out []string
	for {
		select {
		case e := <-f.events.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func TestPassCollectsOnlyConfirmedOrphans(t *testing.T) {
	f := newPassFixture(t)
	g := f.g
	live := f.plant(f.liveOwner("alive"))
	orphan := f.plant(f.owner("gone", uuid.NewUUID()))
	widget := f.owner("w", uuid.NewUUID())
	widget.Group, widget.Kind = "example.com", "Widget"
	unserved := f.plant(widget)
	// Anchor-named, but with an ownerReference: not an anchor.
	malformed := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name: anchor.Name(uuid.NewUUID()), Namespace: f.hubNS, Labels: f.owner("m", "").Labels(),
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: live.Name, UID: live.UID}},
	}}
	g.Expect(hub.Create(f.ctx, malformed)).To(Succeed())

	first, second := f.confirm()
	g.Expect(f.line(first, live).Verdict).To(Equal(Verdict{Decision: Keep, Reason: ReasonLive}))
	g.Expect(f.line(first, orphan).Verdict).To(Equal(Verdict{Decision: Suspect, Reason: ReasonAwaitingConfirmation, Proof: ReasonNotFound}))
	g.Expect(f.line(first, unserved).Verdict).To(Equal(Verdict{Decision: Unknown, Reason: ReasonKindNotServed}))
	g.Expect(f.line(first, malformed).Verdict).To(Equal(Verdict{Decision: Unknown, Reason: ReasonMalformed}))
	g.Expect(first.Plane).To(Equal(PlaneVerified))
	g.Expect(first.PendingConfirmation).To(Equal(first.Start.Add(f.opts.ConfirmAfter)))

	l := f.line(second, orphan)
	g.Expect(l.Verdict).To(Equal(Verdict{Decision: Collect, Reason: ReasonNotFound, Proof: ReasonNotFound}))
	g.Expect(l.Action).To(Equal(ActionDeleted))
	g.Expect(l.Dependents).To(HaveLen(1))
	g.Expect(f.exists(orphan)).To(BeFalse())
	for _, a := range []*corev1.ConfigMap{live, unserved, malformed} {
		g.Expect(f.exists(a)).To(BeTrue(), "anchor %s kept", a.Name)
	}
	evs := f.drainEvents()
	g.Expect(evs).To(HaveLen(1))
	g.Expect(evs[0]).To(And(ContainSubstring("AnchorCollected"), ContainSubstring(string(orphan.UID)), ContainSubstring(anchor.LabelName+"=gone")))
	t.Logf("second pass: %d API calls for %d anchors", second.APICalls, len(second.Anchors))
}

// TestPassEventsEndWithAdmission: an Event the pass records once
// the project's admission has ended (the holder's validity lapsed after the anchor's
// delete committed, the residual window every write has) is dropped: another replica
// may hold the project by then, and it reports for itself.
func TestPassEventsEndWithAdmission(t *testing.T) {
	f := newPassFixture(t)
	g := f.g
	orphan := f.plant(f.owner("gone", uuid.NewUUID()))
	adm := &lapsingAdmission{}
	f.admission = adm
	f.hubClient = lapseOnDelete{Client: hub, adm: adm}
	first, second := f.confirm()
	g.Expect(f.line(first, orphan).Verdict.Decision).To(Equal(Suspect))
	g.Expect(f.line(second, orphan).Action).To(Equal(ActionDeleted))
	g.Expect(adm.lapsed.Load()).To(BeTrue(), "admission lapsed at the anchor's delete")
	g.Expect(f.drainEvents()).To(BeEmpty(), "no Event recorded after admission ended")
}

// lapsingAdmission admits until lapsed is set, as the shard's Enter does until the
// holder's validity ends.
type lapsingAdmission struct{ lapsed atomic.Bool }

func (a *lapsingAdmission) Enter(ctx context.Context, project string) (context.Context, func(), error) {
	if a.lapsed.Load() {
		return nil, nil, fmt.Errorf("project %q: validity ended", project)
	}
	return ctx, func() {}, nil
}

// lapseOnDelete ends adm's admission once a delete through it has committed.
type lapseOnDelete struct {
	client.Client
	adm *lapsingAdmission
}

func (c lapseOnDelete) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	err := c.Client.Delete(ctx, obj, opts...)
	if err == nil {
		c.adm.lapsed.Store(true)
	}
	return err
}

func TestPassGatesStopDeletion(t *testing.T) {
	f := newPassFixture(t)
	g := f.g
	orphan := f.plant(f.owner("gone", uuid.NewUUID()))
	f.run()
	f.clock.Step(time.Minute)

	f.opts.DryRun = true
	rep := f.run()
	g.Expect(f.line(rep, orphan).Action).To(Equal(ActionDryRun))
	g.Expect(f.line(rep, orphan).Decision).To(Equal(Collect))
	f.opts.DryRun = false

	setAnnotation(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.provider}}, AnnotationDeletion, DeletionOff)
	rep = f.run()
	g.Expect(rep.SwitchedOff).To(BeTrue())
	g.Expect(f.line(rep, orphan).Action).To(Equal(ActionSwitchedOff))
	setAnnotation(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.provider}}, AnnotationDeletion, "")

	setAnnotation(t, f.secret, AnnotationExclude, "true")
	rep = f.run()
	g.Expect(rep.Excluded).To(BeTrue())
	g.Expect(f.line(rep, orphan).Action).To(Equal(ActionExcluded))
	g.Expect(f.exists(orphan)).To(BeTrue())
	setAnnotation(t, f.secret, AnnotationExclude, "")

	rep = f.run()
	g.Expect(f.line(rep, orphan).Action).To(Equal(ActionDeleted))
	g.Expect(f.exists(orphan)).To(BeFalse())
}

func TestPassCapDefersAndCeilingHalts(t *testing.T) {
	f := newPassFixture(t)
	g := f.g
	var orphans []*corev1.ConfigMap
	for range 3 {
		orphans = append(orphans, f.plant(f.owner("gone-"+rand.String(4), uuid.NewUUID())))
	}
	f.run()
	f.clock.Step(time.Minute)

	f.opts.MaxDeletionsPerPass, f.opts.HaltAbove = 1, 2
	rep := f.run()
	g.Expect(rep.Halt).To(Equal(HaltCeiling))
	g.Expect(rep.CountAction(ActionHalted)).To(Equal(3))
	g.Expect(f.drainEvents()).To(ConsistOf(And(HavePrefix("Warning CollectionCeiling"), ContainSubstring("3 anchors"))))

	f.opts.HaltAbove = 3
	rep = f.run()
	g.Expect(rep.Halt).To(BeEmpty())
	g.Expect(rep.CountAction(ActionDeleted)).To(Equal(1))
	g.Expect(rep.CountAction(ActionDeferred)).To(Equal(2))
	rep = f.run()
	g.Expect(rep.CountAction(ActionDeleted)).To(Equal(1))
	rep = f.run()
	g.Expect(rep.CountAction(ActionDeleted)).To(Equal(1))
	for _, a := range orphans {
		g.Expect(f.exists(a)).To(BeFalse())
	}
}

func TestPassPlaneChangeHalts(t *testing.T) {
	f := newPassFixture(t)
	g := f.g
	orphan := f.plant(f.owner("gone", uuid.NewUUID()))
	rep := f.run()
	g.Expect(rep.PlaneDetail).To(Equal("identity recorded"))

	// Another plane's identity on record: the current plane is not the one claimed.
	rec := &corev1.ConfigMap{}
	g.Expect(hub.Get(f.ctx, client.ObjectKey{Namespace: f.provider, Name: PlaneIdentityName(f.project)}, rec)).To(Succeed())
	g.Expect(rec.OwnerReferences).To(BeEmpty())
	g.Expect(rec.Data).To(HaveKeyWithValue(planeKeySecretUID, string(f.secret.UID)))
	rec.Data[planeKeyUID] = string(uuid.NewUUID())
	g.Expect(hub.Update(f.ctx, rec)).To(Succeed())
	f.clock.Step(time.Minute)
	rep = f.run()
	g.Expect(rep.Plane).To(Equal(PlaneChanged))
	g.Expect(rep.Halt).To(Equal(HaltPlaneChanged))
	g.Expect(f.line(rep, orphan).Verdict).To(Equal(Verdict{Decision: Unknown, Reason: ReasonPlaneChanged}))
	g.Expect(f.exists(orphan)).To(BeTrue())
	g.Expect(f.drainEvents()).To(ConsistOf(HavePrefix("Warning PlaneIdentityChanged")))
}

func TestPassWaitsForReattachment(t *testing.T) {
	f := newPassFixture(t)
	g := f.g
	// The owner was deleted and recreated under the same name: the old anchor's
	// dependent hangs on it alone.
	current := f.liveOwner("edge")
	stale := f.anchorIn(f.owner("edge", uuid.NewUUID()), f.hubNS)
	f.dependent(f.hubNS, "edge", stale.Labels, stale)
	f.run()
	f.clock.Step(time.Minute)
	rep := f.run()
	l := f.line(rep, stale)
	g.Expect(l.Verdict).To(Equal(Verdict{Decision: Suspect, Reason: ReasonAwaitingReattach, Proof: ReasonReplaced}))
	g.Expect(l.Action).To(Equal(ActionOwnerEnqueued))
	want := current
	want.UID = ""
	g.Expect(f.enqueued).To(ConsistOf(want))
	g.Expect(f.exists(stale)).To(BeTrue())

	// The live owner re-attaches the dependent to its own anchor.
	deps := &corev1.ConfigMapList{}
	g.Expect(hub.List(f.ctx, deps, client.InNamespace(f.hubNS))).To(Succeed())
	own := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: anchor.Name(current.UID), Namespace: f.hubNS, Labels: current.Labels()}}
	g.Expect(hub.Create(f.ctx, own)).To(Succeed())
	for i := range deps.Items {
		d := &deps.Items[i]
		if len(d.OwnerReferences) == 1 && d.OwnerReferences[0].UID == stale.UID {
			d.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: own.Name, UID: own.UID}}
			g.Expect(hub.Update(f.ctx, d)).To(Succeed())
		}
	}
	rep = f.run()
	g.Expect(f.line(rep, stale).Action).To(Equal(ActionDeleted))
	g.Expect(f.exists(own)).To(BeTrue())
}

// setAnnotation sets (or, with "", removes) an annotation with a merge patch.
func setAnnotation(t *testing.T, obj client.Object, key, value string) {
	t.Helper()
	var v any = value
	if value == "" {
		v = nil
	}
	patch := map[string]any{"metadata": map[string]any{"annotations": map[string]any{key: v}}}
	data, err := json.Marshal(patch)
	if err != nil {
		t.Fatal(err)
	}
	if err := hub.Patch(context.Background(), obj, client.RawPatch(types.MergePatchType, data)); err != nil {
		t.Fatalf("annotating %s: %v", obj.GetName(), err)
	}
}
