package resync

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/uuid"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// planeWithIdentity reads the hub as a plane whose "default" Namespace has UID id: the
// same objects, another plane's identity.
func planeWithIdentity(id types.UID) Plane {
	live := interceptor.NewClient(hub, interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		if err := c.Get(ctx, key, obj, opts...); err != nil {
			return err
		}
		if key.Namespace == "" && key.Name == metav1.NamespaceDefault && obj.GetObjectKind().GroupVersionKind().Kind == "Namespace" {
			obj.SetUID(id)
		}
		return nil
	}})
	return Plane{Live: live, Mapper: hub.RESTMapper()}
}

// The plane identity record belongs to the project, not to its Secret. A
// Secret deleted and created again pointing at another plane halts the project's
// deletions until an operator acknowledges the new plane on the record.
func TestPassPlaneIdentityOutlivesSecret(t *testing.T) {
	f := newPassFixture(t)
	g := f.g
	orphan := f.plant(f.owner("gone", uuid.NewUUID()))
	rep := f.run()
	g.Expect(rep.PlaneDetail).To(Equal("identity recorded"))
	rec := f.record()
	g.Expect(rec.OwnerReferences).To(BeEmpty(), "the record must not go with the Secret")
	g.Expect(rec.Data).To(HaveKeyWithValue("secret-uid", string(f.secret.UID)))

	// Restored from backup, pointing at another plane.
	f.recreateSecret()
	other := uuid.NewUUID()
	f.plane = planeWithIdentity(other)
	f.clock.Step(time.Minute)
	f.drainEvents()
	rep = f.run()
	g.Expect(rep.Plane).To(Equal(PlaneChanged), rep.PlaneDetail)
	g.Expect(rep.Halt).To(Equal(HaltPlaneChanged))
	g.Expect(f.line(rep, orphan).Verdict).To(Equal(Verdict{Decision: Unknown, Reason: ReasonPlaneChanged}))
	g.Expect(f.drainEvents()).To(ConsistOf(And(HavePrefix("Warning PlaneIdentityChanged"), ContainSubstring("acknowledge-plane"))))
	f.clock.Step(time.Minute)
	rep = f.run()
	g.Expect(rep.Halt).To(Equal(HaltPlaneChanged), "the halt holds until acknowledged")
	g.Expect(f.exists(orphan)).To(BeTrue())

	// An acknowledgement of some other plane changes nothing.
	setAnnotation(t, f.record(), "anchorage.datumapis.com/acknowledge-plane", string(uuid.NewUUID()))
	rep = f.run()
	g.Expect(rep.Halt).To(Equal(HaltPlaneChanged))

	// The operator acknowledges the new plane: recorded, logged and evented.
	setAnnotation(t, f.record(), "anchorage.datumapis.com/acknowledge-plane", string(other))
	f.drainEvents()
	rep = f.run()
	g.Expect(rep.Plane).To(Equal(PlaneVerified), rep.PlaneDetail)
	g.Expect(rep.Halt).To(BeEmpty())
	g.Expect(f.drainEvents()).To(ContainElement(HavePrefix("Normal PlaneIdentityAcknowledged")))
	rec = f.record()
	g.Expect(rec.Data).To(HaveKeyWithValue(planeKeyUID, string(other)))
	g.Expect(rec.Data).To(HaveKeyWithValue("secret-uid", string(f.secret.UID)))
	g.Expect(rec.Annotations).NotTo(HaveKey("anchorage.datumapis.com/acknowledge-plane"))
	f.clock.Step(time.Minute)
	rep = f.run()
	g.Expect(f.line(rep, orphan).Action).To(Equal(ActionDeleted))
}

// A Secret created again for the same plane is verified against the record,
// and deletion resumes.
func TestPassSecretRecreatedForSamePlane(t *testing.T) {
	f := newPassFixture(t)
	g := f.g
	orphan := f.plant(f.owner("gone", uuid.NewUUID()))
	live := f.plant(f.liveOwner("alive"))
	f.run()
	f.recreateSecret()
	f.clock.Step(time.Minute)
	rep := f.run()
	g.Expect(rep.Plane).To(Equal(PlaneVerified), rep.PlaneDetail)
	g.Expect(f.record().Data).To(HaveKeyWithValue("secret-uid", string(f.secret.UID)))
	g.Expect(f.line(rep, orphan).Action).To(Equal(ActionDeleted))
	g.Expect(f.exists(live)).To(BeTrue())
}

// A pass in which nearly every mapped namespace reads as gone or recreated
// is a changed plane.
func TestPassMassNamespaceLossHalts(t *testing.T) {
	f := newPassFixture(t)
	g := f.g
	var orphans []*corev1.ConfigMap
	for i := range 3 {
		owner := f.owner(fmt.Sprintf("gone-%d", i), uuid.NewUUID())
		owner.Namespace = "vanished-" + rand.String(6)
		orphans = append(orphans, f.anchorIn(owner, f.hubNamespace()))
	}
	_, rep := f.confirm()
	g.Expect(rep.Plane).To(Equal(PlaneChanged), rep.PlaneDetail)
	g.Expect(rep.Halt).To(Equal(HaltPlaneChanged))
	for _, a := range orphans {
		g.Expect(f.line(rep, a).Reason).To(Equal(ReasonPlaneChanged))
		g.Expect(f.exists(a)).To(BeTrue())
	}
	g.Expect(f.drainEvents()).To(ContainElement(HavePrefix("Warning PlaneIdentityChanged")))
}

// The index of dependents forgets each anchor as it goes, so an object
// hanging on two stale anchors is judged when the second one is.
func TestPassForgetsDeletedAnchors(t *testing.T) {
	f := newPassFixture(t)
	g := f.g
	a := f.anchorIn(f.owner("gone-a", uuid.NewUUID()), f.hubNS)
	b := f.anchorIn(f.owner("gone-b", uuid.NewUUID()), f.hubNS)
	foreign := f.owner("edge", uuid.NewUUID())
	foreign.Project = "elsewhere-" + rand.String(4)
	f.dependent(f.hubNS, "legacy-"+rand.String(4), foreign.Labels(), a, b)
	_, rep := f.confirm()
	la, lb := f.line(rep, a), f.line(rep, b)
	g.Expect([]Action{la.Action, lb.Action}).To(ContainElement(ActionDeleted))
	g.Expect([]Reason{la.Reason, lb.Reason}).To(ContainElement(ReasonForeignDependent))
	g.Expect(f.exists(a) || f.exists(b)).To(BeTrue(), "one stale anchor keeps the foreign object")
}

// rereadingPlane reads the hub as the plane, and once armed, creates the owner named
// name right after the next live read of it: a proxy recreated between the prove
// phase and the delete.
type rereadingPlane struct {
	client.Reader
	f      *passFixture
	name   string
	mu     sync.Mutex
	armed  bool
	reads  int
	create func()
}

func (r *rereadingPlane) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	err := r.Reader.Get(ctx, key, obj, opts...)
	r.mu.Lock()
	defer r.mu.Unlock()
	if key.Name == r.name && key.Namespace == r.f.upstream.Name {
		r.reads++
		if r.armed {
			r.armed = false
			r.create()
		}
	}
	return err
}

// An owner recreated between the proof and the delete is seen by a fresh
// read just before the delete, and its dependent is not cascaded.
func TestPassReReadsOwnerJustBeforeDelete(t *testing.T) {
	f := newPassFixture(t)
	g := f.g
	stale := f.anchorIn(f.owner("edge", uuid.NewUUID()), f.hubNS)
	f.dependent(f.hubNS, "edge", stale.Labels, stale)
	rp := &rereadingPlane{Reader: hub, f: f, name: "edge"}
	rp.create = func() { f.liveOwner("edge") }
	f.plane = Plane{Live: rp, Mapper: hub.RESTMapper()}
	f.run()
	f.clock.Step(time.Minute)
	rp.armed = true
	rep := f.run()
	l := f.line(rep, stale)
	g.Expect(l.Reason).To(Equal(ReasonAwaitingReattach), l.Detail)
	g.Expect(f.exists(stale)).To(BeTrue())
	g.Expect(rp.reads).To(BeNumerically(">=", 2), "read again just before the delete")
}

// Another anchor with the same five labels in the same hub namespace is the
// anchor of the owner recreated: the dependent is claimed.
func TestPassSiblingAnchorClaims(t *testing.T) {
	f := newPassFixture(t)
	g := f.g
	stale := f.anchorIn(f.owner("edge", uuid.NewUUID()), f.hubNS)
	f.dependent(f.hubNS, "edge", stale.Labels, stale)
	f.run()
	// The owner comes back (its cache still lags) and its reconcile made its anchor.
	sibling := f.anchorIn(f.owner("edge", uuid.NewUUID()), f.hubNS)
	f.clock.Step(time.Minute)
	rep := f.run()
	l := f.line(rep, stale)
	g.Expect(l.Reason).To(Equal(ReasonAwaitingReattach), l.Detail)
	g.Expect(f.exists(stale)).To(BeTrue())
	g.Expect(f.exists(sibling)).To(BeTrue())
}

// A dependent hanging on a proven orphan alone goes with it when it is
// unlabelled or labelled for the anchor's own owner; one labelled for an owner in
// another project keeps the anchor and is reported.
func TestPassCollectsUnlabelledDependents(t *testing.T) {
	f := newPassFixture(t)
	g := f.g
	unlabelled := f.anchorIn(f.owner("gone-u", uuid.NewUUID()), f.hubNS)
	f.dependent(f.hubNS, "plain-"+rand.String(4), nil, unlabelled)
	own := f.anchorIn(f.owner("gone-o", uuid.NewUUID()), f.hubNS)
	f.dependent(f.hubNS, "gone-o", own.Labels, own)
	foreignOwner := f.owner("gone-f", uuid.NewUUID())
	foreignOwner.Project = "elsewhere-" + rand.String(4)
	foreign := f.anchorIn(f.owner("gone-f", uuid.NewUUID()), f.hubNS)
	f.dependent(f.hubNS, "gone-f", foreignOwner.Labels(), foreign)
	_, rep := f.confirm()
	g.Expect(f.line(rep, unlabelled).Action).To(Equal(ActionDeleted), f.line(rep, unlabelled).Detail)
	g.Expect(f.line(rep, own).Action).To(Equal(ActionDeleted))
	g.Expect(f.line(rep, foreign).Reason).To(Equal(ReasonForeignDependent))
	g.Expect(f.exists(foreign)).To(BeTrue())
}

// forbiddenKind reads the hub as the plane, answering 403 to every read of kind, gets
// and lists alike (a role that grants neither).
func forbiddenKind(kind, resource string, reads *int) Plane {
	live := interceptor.NewClient(hub, interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		if obj.GetObjectKind().GroupVersionKind().Kind == kind {
			*reads++
			return apierrors.NewForbidden(corev1.Resource(resource), key.Name, fmt.Errorf("user cannot get resource %q", resource))
		}
		return c.Get(ctx, key, obj, opts...)
	}, List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
		if list.GetObjectKind().GroupVersionKind().Kind == kind+"List" {
			*reads++
			return apierrors.NewForbidden(corev1.Resource(resource), "", fmt.Errorf("user cannot list resource %q", resource))
		}
		return c.List(ctx, list, opts...)
	}})
	return Plane{Live: live, Mapper: hub.RESTMapper()}
}

// uidWithPrefix returns a fresh UID whose first eight digits are prefix, so anchors
// sort where a test needs them.
func uidWithPrefix(prefix string) types.UID {
	return types.UID(prefix + string(uuid.NewUUID())[8:])
}

// A 403 on one kind makes that kind unknown for the pass, never the plane
// unreachable: legacy anchors of a forbidden kind, sorted first, do not delay any other
// orphan of the project.
func TestPassForbiddenKindIsUnknownForThatKindOnly(t *testing.T) {
	f := newPassFixture(t)
	g := f.g
	legacy := f.legacyAnchors("Service", 4)
	orphan := f.anchorIn(f.owner("gone", uidWithPrefix("ffffffff")), f.hubNS)
	reads := 0
	f.plane = forbiddenKind("Service", "services", &reads)
	first, second := f.confirm()
	g.Expect(f.line(first, orphan).Reason).To(Equal(ReasonAwaitingConfirmation), f.line(first, orphan).Detail)
	g.Expect(f.line(second, orphan).Action).To(Equal(ActionDeleted))
	for _, a := range legacy {
		l := f.line(second, a)
		g.Expect(l.Verdict).To(Equal(Verdict{Decision: Unknown, Reason: ReasonForbidden}))
		g.Expect(l.Detail).To(ContainSubstring("get services"))
		g.Expect(f.exists(a)).To(BeTrue())
	}
	// The legacy anchors share a namespace: a list is tried first, then one GET.
	g.Expect(reads).To(Equal(4), "one list and one GET of the forbidden kind per pass")
}

// An anchor whose owner is of a kind the resync is not configured to read live (here
// Secret, which it never reads) is unknown, kind-not-configured, with a detail naming
// the flag and the role; the plane is never asked, and other orphans are collected.
func TestPassUnconfiguredKindIsUnknownAndNeverRead(t *testing.T) {
	f := newPassFixture(t)
	g := f.g
	legacy := f.legacyAnchors("Secret", 3)
	orphan := f.anchorIn(f.owner("gone", uidWithPrefix("ffffffff")), f.hubNS)
	reads := 0
	f.plane = forbiddenKind("Secret", "secrets", &reads)
	_, second := f.confirm()
	g.Expect(f.line(second, orphan).Action).To(Equal(ActionDeleted))
	for _, a := range legacy {
		l := f.line(second, a)
		g.Expect(l.Verdict).To(Equal(Verdict{Decision: Unknown, Reason: ReasonKindNotConfigured}))
		g.Expect(l.Detail).To(And(ContainSubstring("resync.ownerKinds"), ContainSubstring("anchorage-project")))
		g.Expect(f.exists(a)).To(BeTrue())
	}
	g.Expect(reads).To(BeZero(), "a kind not configured is never read")
}

// An anchor already terminating is skipped and reported, and neither counted
// as a deletion nor against the cap.
func TestPassSkipsTerminatingAnchors(t *testing.T) {
	f := newPassFixture(t)
	g := f.g
	terminating := f.plant(f.owner("gone-t", uuid.NewUUID()))
	time.Sleep(1100 * time.Millisecond) // oldest first: the terminating one comes first
	orphan := f.plant(f.owner("gone-o", uuid.NewUUID()))
	terminating.Finalizers = []string{"example.com/hold"}
	g.Expect(hub.Update(f.ctx, terminating)).To(Succeed())
	g.Expect(hub.Delete(f.ctx, terminating)).To(Succeed())
	t.Cleanup(func() {
		cm := &corev1.ConfigMap{}
		if hub.Get(f.ctx, client.ObjectKeyFromObject(terminating), cm) == nil {
			cm.Finalizers = nil
			_ = hub.Update(f.ctx, cm)
		}
	})
	f.opts.MaxDeletionsPerPass, f.opts.HaltAbove = 1, 1
	_, rep := f.confirm()
	g.Expect(f.line(rep, terminating).Action).To(Equal(ActionAlreadyTerminating))
	g.Expect(f.line(rep, orphan).Action).To(Equal(ActionDeleted))
	g.Expect(rep.CountAction(ActionDeleted)).To(Equal(1))
}

// Candidates that cannot be collected do not count toward the ceiling, so a
// ceiling never halts a project forever on anchors that are kept anyway.
func TestPassCeilingCountsOnlyCollectable(t *testing.T) {
	f := newPassFixture(t)
	g := f.g
	elsewhere := f.owner("x", uuid.NewUUID())
	elsewhere.Project = "elsewhere-" + rand.String(4)
	var kept []*corev1.ConfigMap
	for i := range 2 {
		a := f.anchorIn(f.owner(fmt.Sprintf("gone-k%d", i), uuid.NewUUID()), f.hubNS)
		f.dependent(f.hubNS, "foreign-"+rand.String(4), elsewhere.Labels(), a)
		kept = append(kept, a)
	}
	orphan := f.plant(f.owner("gone", uuid.NewUUID()))
	f.opts.MaxDeletionsPerPass, f.opts.HaltAbove = 1, 1
	_, rep := f.confirm()
	g.Expect(rep.Halt).To(BeEmpty())
	g.Expect(f.line(rep, orphan).Action).To(Equal(ActionDeleted))
	for _, a := range kept {
		// Judged foreign-dependent, or deferred by the cap before being judged.
		g.Expect(f.line(rep, a).Reason).To(BeElementOf(ReasonForeignDependent, ReasonNotFound))
		g.Expect(f.line(rep, a).Action).NotTo(Equal(ActionDeleted))
		g.Expect(f.exists(a)).To(BeTrue())
	}
	// Two collectable above a ceiling of one still halt.
	more := []*corev1.ConfigMap{f.plant(f.owner("gone-2", uuid.NewUUID())), f.plant(f.owner("gone-3", uuid.NewUUID()))}
	_, rep = f.confirm()
	g.Expect(rep.Halt).To(Equal(HaltCeiling))
	for _, a := range kept {
		g.Expect(f.line(rep, a).Reason).To(Equal(ReasonForeignDependent), "judged, and not counted")
	}
	for _, a := range more {
		g.Expect(f.exists(a)).To(BeTrue())
	}
}

// A project retired on purpose (a tombstone, no Secret) has its anchors
// collected once the absence is confirmed on two passes; its plane record goes too.
// Without a tombstone, a project with no Secret is only reported.
func TestPassRetiredProject(t *testing.T) {
	f := newPassFixture(t)
	g := f.g
	orphan := f.plant(f.owner("any", uuid.NewUUID()))
	f.run() // records the plane identity
	g.Expect(hub.Delete(f.ctx, f.secret)).To(Succeed())
	tomb := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name: "retired-" + f.project, Namespace: f.provider, Labels: map[string]string{"anchorage.datumapis.com/retired-project": "true"},
	}, Data: map[string]string{"project": f.project}}
	g.Expect(hub.Create(f.ctx, tomb)).To(Succeed())
	first, second := f.confirm()
	g.Expect(first.Retired).To(BeTrue())
	g.Expect(f.line(first, orphan).Verdict).To(Equal(Verdict{Decision: Suspect, Reason: ReasonAwaitingConfirmation, Proof: ReasonProjectRetired}))
	g.Expect(f.line(second, orphan).Action).To(Equal(ActionDeleted))
	g.Expect(f.exists(orphan)).To(BeFalse())
	err := hub.Get(f.ctx, client.ObjectKey{Namespace: f.provider, Name: PlaneIdentityName(f.project)}, &corev1.ConfigMap{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the retired project's plane record is dropped: %v", err)
	var out strings.Builder
	g.Expect(WriteProjectTable(&out, second)).To(Succeed())
	g.Expect(out.String()).To(ContainSubstring("retired (tombstone"))
}

// A claim that no reconcile resolves within ClaimPasses passes is reported
// (claim-expired), and the next pass collects the stale anchor with the dependent.
func TestPassClaimExpires(t *testing.T) {
	f := newPassFixture(t)
	g := f.g
	f.liveOwner("edge")
	stale := f.anchorIn(f.owner("edge", uuid.NewUUID()), f.hubNS)
	f.dependent(f.hubNS, "edge", stale.Labels, stale)
	f.run()
	var reasons []Reason
	for range 6 {
		f.clock.Step(time.Minute)
		rep := f.run()
		l := f.line(rep, stale)
		reasons = append(reasons, l.Reason)
		if l.Action == ActionDeleted {
			break
		}
	}
	g.Expect(reasons).To(Equal([]Reason{ReasonAwaitingReattach, ReasonAwaitingReattach, ReasonAwaitingReattach, ReasonClaimExpired, ReasonReplaced}))
	g.Expect(f.exists(stale)).To(BeFalse())
	g.Expect(f.drainEvents()).To(ContainElement(HavePrefix("Warning AnchorClaimExpired")))
}

// An owner of a kind no reconciler re-attaches (nothing in Writes) never
// claims, and is never enqueued.
func TestPassNoClaimWithoutReattachingReconciler(t *testing.T) {
	f := newPassFixture(t)
	g := f.g
	f.opts.Writes = DefaultHubWrites
	f.liveOwner("edge")
	stale := f.anchorIn(f.owner("edge", uuid.NewUUID()), f.hubNS)
	f.dependent(f.hubNS, "edge", stale.Labels, stale)
	_, rep := f.confirm()
	g.Expect(f.line(rep, stale).Action).To(Equal(ActionDeleted))
	g.Expect(f.enqueued).To(BeEmpty())
}

// legacyAnchors plants n anchors of core-group owners of kind in the fixture's hub
// namespace, named to sort before every other anchor of the project.
func (f *passFixture) legacyAnchors(kind string, n int) []*corev1.ConfigMap {
	var out []*corev1.ConfigMap
	for i := range n {
		o := f.owner(fmt.Sprintf("s-%d", i), uidWithPrefix("00000000"))
		o.Kind = kind
		out = append(out, f.anchorIn(o, f.hubNS))
	}
	return out
}
