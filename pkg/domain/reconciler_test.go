package domain

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	"anchorage/api/v1alpha"
)

// fakeProver returns canned outcomes and counts the checks.
type fakeProver struct {
	txt, token         Outcome
	txtCalls, tokCalls int
	seen               []v1alpha.DomainVerificationStatus
}

func (p *fakeProver) TXT(_ context.Context, v *v1alpha.DomainVerificationStatus) Outcome {
	p.txtCalls++
	p.seen = append(p.seen, *v)
	return p.txt
}

func (p *fakeProver) Token(_ context.Context, v *v1alpha.DomainVerificationStatus) Outcome {
	p.tokCalls++
	return p.token
}

// fakeCluster is a project's plane: a fake client and a fake event recorder.
type fakeCluster struct {
	cluster.Cluster
	cl  client.Client
	rec *events.FakeRecorder
}

func (c *fakeCluster) GetClient() client.Client                     { return c.cl }
func (c *fakeCluster) GetEventRecorder(string) events.EventRecorder { return c.rec }

type fakeClusters struct {
	project string
	c       *fakeCluster
}

func (f fakeClusters) Project(_ context.Context, project string) (cluster.Cluster, error) {
	if project != f.project {
		return nil, multicluster.ErrClusterNotFound
	}
	return f.c, nil
}

type retryErr struct{ after time.Duration }

func (e retryErr) Error() string             { return "busy" }
func (e retryErr) RetryAfter() time.Duration { return e.after }

// fakeAdmission admits all but when err is set.
type fakeAdmission struct {
	err            error
	entered, exits int
}

func (a *fakeAdmission) Enter(ctx context.Context, _ string) (context.Context, func(), error) {
	if a.err != nil {
		return nil, nil, a.err
	}
	a.entered++
	return ctx, func() { a.exits++ }, nil
}

type rig struct {
	r      *Reconciler
	prover *fakeProver
	adm    *fakeAdmission
	clock  *clocktesting.FakeClock
	c      *fakeCluster
	tokens int
}

func newRig(t *testing.T, objs ...client.Object) *rig {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := v1alpha.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	g := &rig{
		prover: &fakeProver{txt: Outcome{Reason: v1alpha.DomainReasonRecordNotFound, Message: "no TXT"}, token: Outcome{Reason: v1alpha.DomainReasonRecordNotFound, Message: "404"}},
		adm:    &fakeAdmission{},
		clock:  clocktesting.NewFakeClock(t0),
		c: &fakeCluster{
			cl:  fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(&v1alpha.Domain{}).WithObjects(objs...).Build(),
			rec: events.NewFakeRecorder(10),
		},
	}
	s := settings
	s.Jitter = 0
	g.r = &Reconciler{
		Clusters: fakeClusters{project: "p1", c: g.c}, Admission: g.adm, Settings: s, Prover: g.prover, Clock: g.clock,
		NewToken: func() string { g.tokens++; return "token-" + string(rune('0'+g.tokens)) },
	}
	return g
}

var req = mcreconcile.Request{ClusterName: "p1", Request: reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "team", Name: "www.acme.com"}}}

func (g *rig) reconcile(t *testing.T) (reconcile.Result, *v1alpha.Domain) {
	t.Helper()
	res, err := g.r.Reconcile(context.Background(), req)
	if err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	d := &v1alpha.Domain{}
	if err := g.c.cl.Get(context.Background(), req.NamespacedName, d); err != nil {
		t.Fatal(err)
	}
	return res, d
}

func storedDomain(name string) *v1alpha.Domain {
	d := newDomain(name, t0.Add(-time.Hour))
	d.UID, d.Generation = testUID, 1
	return d
}

func TestReconcilerProtocol(t *testing.T) {
	g := newRig(t, storedDomain("www.acme.com"))

	// A new Domain: valid, given its proof, checked at once.
	res, d := g.reconcile(t)
	if g.tokens != 1 || d.Status.Verification == nil || d.Status.Verification.DNSRecord.Content != "token-1" {
		t.Fatalf("after the first reconcile, %d tokens, verification %+v", g.tokens, d.Status.Verification)
	}
	if res.RequeueAfter <= 0 || res.RequeueAfter > time.Second {
		t.Errorf("after issuing the proof, requeue after %s, want at once", res.RequeueAfter)
	}
	if g.prover.txtCalls+g.prover.tokCalls != 0 {
		t.Errorf("the proof was checked in the reconcile that issued it")
	}
	if d.Status.Apex {
		t.Errorf("www.acme.com: Apex = %t", d.Status.Apex)
	}
	expectCondition(t, d, v1alpha.DomainConditionValidDomain, metav1.ConditionTrue, v1alpha.DomainReasonValid)
	expectCondition(t, d, v1alpha.DomainConditionVerified, metav1.ConditionFalse, v1alpha.DomainReasonPendingVerification)

	// Due: TXT, then HTTP, neither found; the next check by the schedule.
	res, d = g.reconcile(t)
	if g.prover.txtCalls != 1 || g.prover.tokCalls != 1 {
		t.Errorf("checks: %d TXT, %d HTTP, want one each", g.prover.txtCalls, g.prover.tokCalls)
	}
	if got := g.prover.seen[0]; got.DNSRecord.Name != "_anchorage-challenge.www.acme.com" || got.HTTPToken.URL != "http://www.acme.com/.well-known/anchorage-challenge/"+string(testUID) {
		t.Errorf("the prover was asked about %+v", got)
	}
	if res.RequeueAfter != 5*time.Second {
		t.Errorf("requeue after %s, want the schedule's 5s", res.RequeueAfter)
	}
	expectCondition(t, d, v1alpha.DomainConditionVerifiedDNS, metav1.ConditionFalse, v1alpha.DomainReasonRecordNotFound)
	expectCondition(t, d, v1alpha.DomainConditionVerifiedHTTP, metav1.ConditionFalse, v1alpha.DomainReasonRecordNotFound)
	if !d.Status.Verification.NextVerificationAttempt.Time.Equal(t0.Add(5 * time.Second)) {
		t.Errorf("next attempt %s, want %s", d.Status.Verification.NextVerificationAttempt, t0.Add(5*time.Second))
	}

	// Waiting: not checked, back when due.
	g.clock.Step(2 * time.Second)
	res, _ = g.reconcile(t)
	if g.prover.txtCalls != 1 || g.prover.tokCalls != 1 {
		t.Errorf("checked while waiting: %d TXT, %d HTTP", g.prover.txtCalls, g.prover.tokCalls)
	}
	if res.RequeueAfter != 3*time.Second {
		t.Errorf("while waiting, requeue after %s, want 3s", res.RequeueAfter)
	}

	// Due again, found by TXT: HTTP is not fetched; Verified, proof cleared, no requeue.
	g.clock.Step(3 * time.Second)
	g.prover.txt = Outcome{Found: true, Reason: v1alpha.DomainReasonVerified, Message: "TXT record found"}
	res, d = g.reconcile(t)
	if g.prover.txtCalls != 2 || g.prover.tokCalls != 1 {
		t.Errorf("checks: %d TXT, %d HTTP, want 2 and still 1", g.prover.txtCalls, g.prover.tokCalls)
	}
	if res.RequeueAfter != 0 {
		t.Errorf("once verified, requeue after %s", res.RequeueAfter)
	}
	if ToState(d, g.clock.Now()) != Verified || d.Status.Verification != nil {
		t.Errorf("state %s, verification %+v, want Verified and none", ToState(d, g.clock.Now()), d.Status.Verification)
	}
	select {
	case ev := <-g.c.rec.Events:
		if !strings.Contains(ev, v1alpha.DomainReasonVerified) || !strings.Contains(ev, "www.acme.com") {
			t.Errorf("event %q", ev)
		}
	default:
		t.Error("no event for the verification")
	}

	// Verified stays verified: no check, no token, no event.
	g.clock.Step(time.Hour)
	res, d = g.reconcile(t)
	if g.prover.txtCalls != 2 || g.tokens != 1 || res.RequeueAfter != 0 || ToState(d, g.clock.Now()) != Verified {
		t.Errorf("a verified Domain was worked on: %d TXT, %d tokens, requeue %s, %s", g.prover.txtCalls, g.tokens, res.RequeueAfter, ToState(d, g.clock.Now()))
	}
	if len(g.c.rec.Events) != 0 {
		t.Errorf("%d more events", len(g.c.rec.Events))
	}
	if g.adm.entered != 5 || g.adm.exits != 5 {
		t.Errorf("admission entered %d times, left %d, want 5 and 5", g.adm.entered, g.adm.exits)
	}
}

func TestReconcilerFoundByHTTP(t *testing.T) {
	g := newRig(t, storedDomain("www.acme.com"))
	g.reconcile(t)
	g.prover.token = Outcome{Found: true, Reason: v1alpha.DomainReasonVerified, Message: "HTTP token found"}
	_, d := g.reconcile(t)
	c := expectCondition(t, d, v1alpha.DomainConditionVerified, metav1.ConditionTrue, v1alpha.DomainReasonVerified)
	if !strings.Contains(c.Message, "HTTP token") {
		t.Errorf("Verified's message %q", c.Message)
	}
}

// TestReconcilerKeepsToken: a Domain the previous manager wrote keeps its token.
func TestReconcilerKeepsToken(t *testing.T) {
	d := storedDomain("www.acme.com")
	d.Status.Verification = &v1alpha.DomainVerificationStatus{
		DNSRecord: v1alpha.DNSVerificationRecord{Name: "_old-prefix.www.acme.com", Type: "TXT", Content: "old-token"},
		HTTPToken: v1alpha.HTTPVerificationToken{URL: "http://www.acme.com/.well-known/old/" + string(testUID), Body: "old-token"},
	}
	g := newRig(t, d)
	_, got := g.reconcile(t)
	if g.tokens != 0 {
		t.Errorf("%d tokens issued to a Domain that holds one", g.tokens)
	}
	if g.prover.txtCalls != 1 || g.prover.seen[0].DNSRecord != d.Status.Verification.DNSRecord {
		t.Errorf("checked %d times, for %+v, want once for the old record", g.prover.txtCalls, g.prover.seen)
	}
	if v := got.Status.Verification; v == nil || v.DNSRecord.Content != "old-token" || v.HTTPToken.Body != "old-token" {
		t.Errorf("verification %+v, want the old token", v)
	}
}

func TestReconcilerInvalid(t *testing.T) {
	d := storedDomain("github.io")
	d.Name = "www.acme.com" // the request's name
	g := newRig(t, d)
	res, got := g.reconcile(t)
	if res.RequeueAfter != 0 || g.tokens != 0 || g.prover.txtCalls+g.prover.tokCalls != 0 {
		t.Errorf("an invalid Domain was worked on: requeue %s, %d tokens, %d checks", res.RequeueAfter, g.tokens, g.prover.txtCalls+g.prover.tokCalls)
	}
	expectCondition(t, got, v1alpha.DomainConditionValidDomain, metav1.ConditionFalse, v1alpha.DomainReasonInvalidDomain)
	if got.Status.Verification != nil {
		t.Errorf("an invalid Domain got a proof: %+v", got.Status.Verification)
	}
}

func TestReconcilerNothingToDo(t *testing.T) {
	g := newRig(t)
	if res, err := g.r.Reconcile(context.Background(), req); err != nil || res != (reconcile.Result{}) {
		t.Errorf("a missing Domain: %+v, %v", res, err)
	}
	other := req
	other.ClusterName = "elsewhere"
	if res, err := g.r.Reconcile(context.Background(), other); err != nil || res != (reconcile.Result{}) {
		t.Errorf("a project not held: %+v, %v", res, err)
	}
	g.adm.err = retryErr{after: 7 * time.Second}
	if res, err := g.r.Reconcile(context.Background(), req); err != nil || res.RequeueAfter != 7*time.Second {
		t.Errorf("admission busy: %+v, %v, want requeue after 7s", res, err)
	}
	g.adm.err = errors.New("broken")
	if _, err := g.r.Reconcile(context.Background(), req); err == nil {
		t.Error("admission broken: no error")
	}
	g.adm.err = multicluster.ErrClusterNotFound
	if res, err := g.r.Reconcile(context.Background(), req); err != nil || res != (reconcile.Result{}) {
		t.Errorf("admission: project not held: %+v, %v", res, err)
	}
	if g.adm.entered != g.adm.exits {
		t.Errorf("admission entered %d times, left %d", g.adm.entered, g.adm.exits)
	}
}
