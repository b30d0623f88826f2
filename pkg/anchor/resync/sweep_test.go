package resync

import (
	"context"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"anchorage/pkg/anchor"
)

// hubKubeconfig returns a kubeconfig of the package's API server.
func hubKubeconfig(t *testing.T) []byte {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["hub"] = &clientcmdapi.Cluster{Server: hubConfig.Host, CertificateAuthorityData: hubConfig.CAData}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: hubConfig.CertData, ClientKeyData: hubConfig.KeyData, Token: hubConfig.BearerToken}
	cfg.Contexts["hub"] = &clientcmdapi.Context{Cluster: "hub", AuthInfo: "admin"}
	cfg.CurrentContext = "hub"
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// A project named by two Secrets is skipped and reported, never served by
// whichever Secret happens to be listed last; every plane carries the Secret it was
// built from.
func TestSweepPlanesSkipsProjectsNamedTwice(t *testing.T) {
	c := needHub(t)
	g := NewWithT(t)
	ctx := context.Background()
	ns := "prov-" + rand.String(6)
	g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	kc := hubKubeconfig(t)
	const annotation = "anchorage.datumapis.com/project"
	secret := func(name string, annotations map[string]string) *corev1.Secret {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{DefaultSecretLabel: "true"}, Annotations: annotations},
			Data: map[string][]byte{"kubeconfig": kc}}
		g.Expect(c.Create(ctx, s)).To(Succeed())
		return s
	}
	secret("proj", nil)
	secret("zz-proj", map[string]string{annotation: "proj"})
	single := secret("single", nil)
	ro := DefaultOptions()
	ro.MinAge = time.Hour
	reports, _, err := Sweep(ctx, SweepOptions{Hub: hubConfig, ProviderNamespace: ns, SecretProjectAnnotation: annotation, Resync: ro})
	g.Expect(err).NotTo(HaveOccurred())
	byProject := map[string]PassReport{}
	for _, r := range reports {
		byProject[r.Project] = r
	}
	g.Expect(byProject).To(HaveKey("proj"))
	g.Expect(byProject["proj"].Aborted).To(ContainSubstring("named by 2 kubeconfig Secrets (proj, zz-proj)"))
	g.Expect(byProject["single"].Aborted).To(BeEmpty())
	err = c.Get(ctx, client.ObjectKey{Namespace: ns, Name: PlaneIdentityName("proj")}, &corev1.ConfigMap{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "no plane recorded for a project named twice: %v", err)
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: PlaneIdentityName("single")}, &corev1.ConfigMap{})).To(Succeed())
	var out strings.Builder
	g.Expect(writeTable(&out, reports, nil)).To(Succeed())
	g.Expect(out.String()).To(ContainSubstring("named by 2 kubeconfig Secrets"))
	_ = single
}

// A pass uses exactly the Secret that built its plane: a plane built from
// another Secret (one replaced since) proves nothing and records nothing.
func TestPassUsesTheSecretOfItsPlane(t *testing.T) {
	f := newPassFixture(t)
	g := f.g
	orphan := f.plant(f.owner("gone", uuid.NewUUID()))
	f.plane = Plane{Live: hub, Mapper: hub.RESTMapper(), SecretUID: uuid.NewUUID()}
	f.run()
	f.clock.Step(time.Minute)
	rep := f.run()
	g.Expect(rep.Plane).To(Equal(PlaneUnverified))
	g.Expect(f.exists(orphan)).To(BeTrue())
	err := hub.Get(f.ctx, client.ObjectKey{Namespace: f.provider, Name: PlaneIdentityName(f.project)}, &corev1.ConfigMap{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "nothing recorded from a plane of another Secret: %v", err)
}

// sweepFixture is a provider namespace of kubeconfig Secrets on the package's API
// server, which plays the hub and every project's plane: owners are ConfigMaps in one
// upstream namespace, their anchors live in its mapped namespace on the hub.
type sweepFixture struct {
	t        *testing.T
	g        *WithT
	ctx      context.Context
	provider string
	upstream *corev1.Namespace
	hubNS    string
}

func newSweepFixture(t *testing.T) *sweepFixture {
	t.Helper()
	c := needHub(t)
	f := &sweepFixture{t: t, g: NewWithT(t), ctx: context.Background(), provider: "prov-" + rand.String(6)}
	f.g.Expect(c.Create(f.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.provider}})).To(Succeed())
	f.upstream = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "up-" + rand.String(6)}}
	f.g.Expect(c.Create(f.ctx, f.upstream)).To(Succeed())
	f.hubNS = anchor.MappedNamespace(f.upstream.UID)
	f.g.Expect(c.Create(f.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.hubNS}})).To(Succeed())
	return f
}

// project returns a fresh project name.
func (f *sweepFixture) project() string { return "p-" + rand.String(6) }

// secret creates project's kubeconfig Secret holding kubeconfig under the
// "kubeconfig" key, or no such key when kubeconfig is nil.
func (f *sweepFixture) secret(project string, kubeconfig []byte) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: project, Namespace: f.provider, Labels: map[string]string{DefaultSecretLabel: "true"}}}
	if kubeconfig != nil {
		s.Data = map[string][]byte{"kubeconfig": kubeconfig}
	} else {
		s.Data = map[string][]byte{"other": []byte("x")}
	}
	f.g.Expect(hub.Create(f.ctx, s)).To(Succeed())
	return s
}

// staleAnchor creates an anchor of project whose owner does not exist upstream.
func (f *sweepFixture) staleAnchor(project string) *corev1.ConfigMap {
	return f.anchorOf(anchor.Owner{Project: project, Kind: "ConfigMap", Namespace: f.upstream.Name, Name: "gone-" + rand.String(4), UID: uuid.NewUUID()})
}

// liveAnchor creates an upstream ConfigMap and its anchor for project.
func (f *sweepFixture) liveAnchor(project string) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "live-" + rand.String(4), Namespace: f.upstream.Name}}
	f.g.Expect(hub.Create(f.ctx, cm)).To(Succeed())
	return f.anchorOf(anchor.Owner{Project: project, Kind: "ConfigMap", Namespace: cm.Namespace, Name: cm.Name, UID: cm.UID})
}

func (f *sweepFixture) anchorOf(owner anchor.Owner) *corev1.ConfigMap {
	a := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: anchor.Name(owner.UID), Namespace: f.hubNS, Labels: owner.Labels()}}
	f.g.Expect(hub.Create(f.ctx, a)).To(Succeed())
	return a
}

// exists reports whether obj is still on the hub with its UID.
func (f *sweepFixture) exists(obj *corev1.ConfigMap) bool {
	got := &corev1.ConfigMap{}
	err := hub.Get(f.ctx, client.ObjectKeyFromObject(obj), got)
	if apierrors.IsNotFound(err) {
		return false
	}
	f.g.Expect(err).NotTo(HaveOccurred())
	return got.UID == obj.UID
}

// options are the sweep's options over the fixture: owners are ConfigMaps read live,
// anchors are old enough at once, and a proof is confirmed after confirm.
func (f *sweepFixture) options(dryRun bool, confirm time.Duration) SweepOptions {
	o := DefaultOptions()
	o.DryRun, o.MinAge, o.ConfirmAfter = dryRun, time.Millisecond, confirm
	o.Writes = map[schema.GroupKind][]HubWrite{{Kind: "ConfigMap"}: {{Kind: "ConfigMap"}}}
	o.LiveOwnerKinds = []schema.GroupKind{{Kind: "ConfigMap"}}
	return SweepOptions{Hub: hubConfig, ProviderNamespace: f.provider, Resync: o}
}

func reportsByProject(reports []PassReport) map[string]PassReport {
	out := map[string]PassReport{}
	for _, r := range reports {
		out[r.Project] = r
	}
	return out
}

func unownedNames(unowned []AnchorReport) []string {
	var out []string
	for _, a := range unowned {
		out = append(out, a.Name)
	}
	return out
}

// One Secret whose kubeconfig cannot be read is that project's row (plane
// unverified, its anchors listed and untouched), not the end of the whole sweep.
func TestSweepReportsAnUnreadableKubeconfigAndGoesOn(t *testing.T) {
	f := newSweepFixture(t)
	g := f.g
	good, garbled, keyless := f.project(), f.project(), f.project()
	f.secret(good, hubKubeconfig(t))
	f.secret(garbled, []byte("this: is: not: a kubeconfig: ["))
	f.secret(keyless, nil)
	goodAnchor, garbledAnchor, keylessAnchor := f.staleAnchor(good), f.staleAnchor(garbled), f.staleAnchor(keyless)

	reports, unowned, err := Sweep(f.ctx, f.options(false, time.Second))
	g.Expect(err).NotTo(HaveOccurred())
	rows := reportsByProject(reports)

	g.Expect(rows).To(HaveKey(good))
	g.Expect(rows[good].Plane).To(Equal(PlaneVerified))
	a, ok := rows[good].Find(goodAnchor.Name)
	g.Expect(ok).To(BeTrue())
	g.Expect(a.Decision).To(Equal(Collect))
	g.Expect(a.Reason).To(Equal(ReasonNotFound))
	g.Expect(a.Action).To(Equal(ActionDeleted))
	g.Expect(f.exists(goodAnchor)).To(BeFalse(), "the good project's stale anchor is collected")

	for project, anchorOf := range map[string]*corev1.ConfigMap{garbled: garbledAnchor, keyless: keylessAnchor} {
		g.Expect(rows).To(HaveKey(project))
		row := rows[project]
		g.Expect(row.Plane).To(Equal(PlaneUnverified))
		g.Expect(row.PlaneDetail).To(ContainSubstring("Secret " + f.provider + "/" + project))
		g.Expect(row.Aborted).To(ContainSubstring("Secret " + f.provider + "/" + project))
		a, ok := row.Find(anchorOf.Name)
		g.Expect(ok).To(BeTrue(), "the anchors of %s are listed", project)
		g.Expect(a.Verdict).To(Equal(Verdict{Decision: Unknown, Reason: ReasonUnreadableKubeconfig}))
		g.Expect(a.Action).To(Equal(ActionNone))
		g.Expect(f.exists(anchorOf)).To(BeTrue(), "the anchor of %s is untouched", project)
	}
	g.Expect(rows[keyless].PlaneDetail).To(ContainSubstring(`no "kubeconfig" key`))
	g.Expect(unownedNames(unowned)).NotTo(ContainElements(garbledAnchor.Name, keylessAnchor.Name), "listed in their rows, not as unowned")

	var out strings.Builder
	g.Expect(writeTable(&out, reports, unowned)).To(Succeed())
	g.Expect(out.String()).To(ContainSubstring(string(ReasonUnreadableKubeconfig)))
	g.Expect(out.String()).To(ContainSubstring("PROJECT " + garbled))
}

// Projects limits the sweep: the other projects' anchors are neither passed over nor
// reported (not as unowned either), their Secrets are not even read, and a named
// project that matches nothing gets a row saying so.
func TestSweepCoversOnlyTheNamedProjects(t *testing.T) {
	f := newSweepFixture(t)
	g := f.g
	chosen, other, otherBroken, ghostNamed, ghostOther, typo := f.project(), f.project(), f.project(), f.project(), f.project(), f.project()
	f.secret(chosen, hubKubeconfig(t))
	f.secret(other, hubKubeconfig(t))
	f.secret(otherBroken, []byte("not a kubeconfig ["))
	chosenAnchor, otherAnchor := f.staleAnchor(chosen), f.staleAnchor(other)
	ghostNamedAnchor, ghostOtherAnchor := f.staleAnchor(ghostNamed), f.staleAnchor(ghostOther)

	opts := f.options(false, time.Second)
	opts.Projects = []string{chosen, ghostNamed, typo}
	reports, unowned, err := Sweep(f.ctx, opts)
	g.Expect(err).NotTo(HaveOccurred())
	rows := reportsByProject(reports)

	g.Expect(rows).To(HaveLen(2), "one row for the chosen project, one for the misspelt one: %v", rows)
	g.Expect(rows[chosen].Plane).To(Equal(PlaneVerified))
	a, ok := rows[chosen].Find(chosenAnchor.Name)
	g.Expect(ok).To(BeTrue())
	g.Expect(a.Action).To(Equal(ActionDeleted))
	g.Expect(f.exists(chosenAnchor)).To(BeFalse())

	g.Expect(rows).To(HaveKey(typo))
	g.Expect(rows[typo].Plane).To(Equal(PlaneUnverified))
	g.Expect(rows[typo].Aborted).To(ContainSubstring(`no kubeconfig Secret in ` + f.provider + ` names project "` + typo + `"`))
	g.Expect(rows[typo].Anchors).To(BeEmpty())

	g.Expect(f.exists(otherAnchor)).To(BeTrue(), "the other project's stale anchor is untouched")
	err = hub.Get(f.ctx, client.ObjectKey{Namespace: f.provider, Name: PlaneIdentityName(other)}, &corev1.ConfigMap{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "no pass over the other project records its plane: %v", err)
	g.Expect(hub.Get(f.ctx, client.ObjectKey{Namespace: f.provider, Name: PlaneIdentityName(chosen)}, &corev1.ConfigMap{})).To(Succeed())

	names := unownedNames(unowned)
	g.Expect(names).To(ContainElement(ghostNamedAnchor.Name), "a named project with anchors and no Secret is reported as unowned")
	g.Expect(names).NotTo(ContainElements(ghostOtherAnchor.Name, otherAnchor.Name))
	for _, a := range unowned {
		g.Expect(a.Owner.Project).To(Equal(ghostNamed), "only the named projects' anchors are reported")
	}
}

// delivery is one call of OnReport.
type delivery struct {
	at     time.Time
	report PassReport
}

// OnReport receives each project's report once, as soon as it is final: a project with
// nothing waiting for confirmation before the confirmation round, the others after it
// with their confirmed verdicts, and never two calls at once.
func TestSweepStreamsEachReportWhenFinal(t *testing.T) {
	f := newSweepFixture(t)
	g := f.g
	quick, slow, broken := f.project(), f.project(), f.project()
	f.secret(quick, hubKubeconfig(t))
	f.secret(slow, hubKubeconfig(t))
	f.secret(broken, nil)
	quickAnchor, slowAnchor := f.liveAnchor(quick), f.staleAnchor(slow)
	f.staleAnchor(broken)

	const confirm = 3 * time.Second
	opts := f.options(true, confirm)
	opts.Projects = []string{quick, slow, broken}
	var got []delivery
	var inside, overlapped atomic.Int32
	opts.OnReport = func(r PassReport) {
		if inside.Add(1) != 1 {
			overlapped.Add(1)
		}
		got = append(got, delivery{at: time.Now(), report: r})
		time.Sleep(10 * time.Millisecond)
		inside.Add(-1)
	}
	start := time.Now()
	reports, _, err := Sweep(f.ctx, opts)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(overlapped.Load()).To(BeZero(), "OnReport is never called concurrently")

	order := make([]string, 0, len(got))
	byProject := map[string]delivery{}
	for _, d := range got {
		order = append(order, d.report.Project)
		byProject[d.report.Project] = d
	}
	g.Expect(order).To(Equal([]string{broken, quick, slow}), "settled rows first, then the first round, then the confirmation round")
	g.Expect(byProject[quick].at.Sub(start)).To(BeNumerically("<", confirm), "a project with nothing to confirm is delivered before the confirmation delay ends")
	g.Expect(byProject[slow].at.Sub(start)).To(BeNumerically(">=", confirm), "a project with a proof to confirm is delivered after the confirmation round")
	g.Expect(byProject[quick].at.Before(byProject[slow].at)).To(BeTrue())

	q, _ := byProject[quick].report.Find(quickAnchor.Name)
	g.Expect(q.Decision).To(Equal(Keep))
	s, _ := byProject[slow].report.Find(slowAnchor.Name)
	g.Expect(s.Decision).To(Equal(Collect), "the confirmed verdict, not the first round's")
	g.Expect(s.Action).To(Equal(ActionDryRun))
	g.Expect(byProject[slow].report.PendingConfirmation.IsZero()).To(BeTrue())

	g.Expect(reports).To(HaveLen(3))
	for _, r := range reports {
		g.Expect(byProject[r.Project].report).To(Equal(r), "Sweep returns what it streamed")
	}
}

// A sweep interrupted during the confirmation delay still delivers, once, the report
// of each project waiting for confirmation (marked interrupted, nothing collected), and
// returns every report with the context's error.
func TestSweepInterruptedBeforeConfirmingReportsEveryProject(t *testing.T) {
	f := newSweepFixture(t)
	g := f.g
	quick, slow := f.project(), f.project()
	f.secret(quick, hubKubeconfig(t))
	f.secret(slow, hubKubeconfig(t))
	f.liveAnchor(quick)
	slowAnchor := f.staleAnchor(slow)

	opts := f.options(false, time.Minute)
	opts.Projects = []string{quick, slow}
	delivered := map[string]int{}
	opts.OnReport = func(r PassReport) { delivered[r.Project]++ }
	ctx, cancel := context.WithTimeout(f.ctx, 3*time.Second)
	defer cancel()
	reports, _, err := Sweep(ctx, opts)
	g.Expect(err).To(MatchError(context.DeadlineExceeded))
	g.Expect(delivered).To(Equal(map[string]int{quick: 1, slow: 1}))
	rows := reportsByProject(reports)
	g.Expect(rows).To(HaveLen(2))
	g.Expect(rows[quick].Aborted).To(BeEmpty())
	g.Expect(rows[slow].Aborted).To(ContainSubstring("interrupted before the confirmation round"))
	a, _ := rows[slow].Find(slowAnchor.Name)
	g.Expect(a.Decision).To(Equal(Suspect))
	g.Expect(f.exists(slowAnchor)).To(BeTrue())
}

// writeTable prints reports and the unowned anchors as `manager sweep` prints them: a
// block per project, then the unowned block.
func writeTable(w io.Writer, reports []PassReport, unowned []AnchorReport) error {
	for _, r := range reports {
		if err := WriteProjectTable(w, r); err != nil {
			return err
		}
	}
	return WriteUnownedTable(w, unowned)
}
