package resync

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/util/flowcontrol"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// switchableCoordinator is a CoordinatorShard whose leadership the test turns on and
// off.
type switchableCoordinator struct {
	leading bool
	hub     client.Client
}

var errNotLeading = errors.New("not leading")

func (c *switchableCoordinator) EnterCoordinator(ctx context.Context) (context.Context, func(), error) {
	if !c.leading {
		return nil, nil, errNotLeading
	}
	return ctx, func() {}, nil
}

func (c *switchableCoordinator) CoordinatorHub(context.Context) (client.Client, client.Reader, error) {
	if !c.leading {
		return nil, nil, errNotLeading
	}
	return c.hub, c.hub, nil
}

// retiredResync builds a Resync over the fixture's hub whose retired passes run under
// coord, and the log of its passes.
func (f *passFixture) retiredResync(coord *switchableCoordinator) (*Resync, *passLog) {
	f.t.Helper()
	access := CoordinatorAccess{Shard: coord}
	log := &passLog{}
	deps, err := NewHubDependentLister(hubConfig, nil, DependentKindsOf(DefaultHubWrites, nil), dependentsQPS, dependentsBurst)
	f.g.Expect(err).NotTo(HaveOccurred())
	r, err := New(Config{
		Options: f.opts, Admission: openAdmission{}, Hub: staticHub{c: hub}, RetiredAdmission: access, RetiredHub: access,
		Anchors: &AnchorCache{}, Dependents: deps, HubReader: hub, ProviderNamespace: f.provider, LeaseNamespace: f.provider,
		Holder: func() string { return "test" }, Logger: testr.New(f.t), Observer: log,
	})
	f.g.Expect(err).NotTo(HaveOccurred())
	anchors, err := listAnchors(f.ctx, hub)
	f.g.Expect(err).NotTo(HaveOccurred())
	r.passDeps.anchors, r.passDeps.deletes = anchors, flowcontrol.NewFakeAlwaysRateLimiter()
	return r, log
}

// TestCollectRetiredOnlyOnTheCoordinator: a retired project (tombstone, no Secret) is
// passed over only while the replica coordinates; its anchors are collected on the
// second pass ConfirmAfter after the first; a replica that stops coordinating forgets
// what it proved, so after it comes back the absence is confirmed again before anything
// is collected.
func TestCollectRetiredOnlyOnTheCoordinator(t *testing.T) {
	f := newPassFixture(t)
	g := f.g
	a := f.plant(f.owner("gone", uuid.NewUUID()))
	g.Expect(hub.Delete(f.ctx, f.secret)).To(Succeed())
	g.Expect(hub.Create(f.ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "retired-" + rand.String(5), Namespace: f.provider, Labels: map[string]string{LabelTombstone: "true"}},
		Data:       map[string]string{TombstoneKeyProject: f.project},
	})).To(Succeed())
	coord := &switchableCoordinator{hub: hub}
	r, log := f.retiredResync(coord)
	retired := []string{f.project}

	// Not the coordinator: nothing at all.
	g.Expect(r.collectRetired(f.ctx, retired)).To(Equal(f.opts.Period))
	g.Expect(log.Reports(f.project)).To(BeEmpty())

	// The coordinator: the first pass finds the project retired and schedules the
	// confirmation.
	coord.leading = true
	delay := r.collectRetired(f.ctx, retired)
	g.Expect(delay).To(BeNumerically("<", f.opts.Period), "the next run comes at the confirmation")
	rep, ok := log.LastReport(f.project)
	g.Expect(ok).To(BeTrue())
	g.Expect(rep.Retired).To(BeTrue())
	g.Expect(f.line(rep, a).Verdict.Reason).To(Equal(ReasonAwaitingConfirmation))

	// Leadership lost and regained: what was proved is forgotten.
	coord.leading = false
	r.collectRetired(f.ctx, retired)
	g.Expect(r.retired).To(BeEmpty())
	coord.leading = true
	f.clock.Step(f.opts.ConfirmAfter + time.Second)
	r.collectRetired(f.ctx, retired)
	rep, _ = log.LastReport(f.project)
	g.Expect(f.line(rep, a).Verdict.Reason).To(Equal(ReasonAwaitingConfirmation), "confirmed again after coming back")
	g.Expect(f.exists(a)).To(BeTrue())

	// Confirmed on a second pass: collected.
	f.clock.Step(f.opts.ConfirmAfter + time.Second)
	r.collectRetired(f.ctx, retired)
	rep, _ = log.LastReport(f.project)
	l := f.line(rep, a)
	g.Expect(l.Verdict.Reason).To(Equal(ReasonProjectRetired))
	g.Expect(l.Action).To(Equal(ActionDeleted))
	g.Expect(f.exists(a)).To(BeFalse())

	// No longer retired (nothing left to collect): its memory goes.
	r.collectRetired(f.ctx, nil)
	g.Expect(r.retired).To(BeEmpty())
}
