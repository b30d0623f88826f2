package integration

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/uuid"
	clocktesting "k8s.io/utils/clock/testing"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"anchorage/internal/app"
	"anchorage/internal/harness"
	"anchorage/internal/testenv"
	"anchorage/pkg/anchor"
	"anchorage/pkg/anchor/resync"
	"anchorage/pkg/config"
)

// TestResyncThrottleDryRunSwitchAndExclusion: dry-run decides what a real pass decides
// and deletes nothing; the runtime switch on the lease namespace and the exclusion
// annotation on the project's Secret each stop deletion without a restart; over the
// per-pass cap, deletion proceeds over several passes.
func TestResyncThrottleDryRunSwitchAndExclusion(t *testing.T) {
	rt := newResyncTest(t, planeB)
	g, ctx := rt.g, rt.ctx
	live := rt.liveGateway("alive")
	var orphans []planted
	for i := range 12 {
		orphans = append(orphans, rt.orphanGateway(fmt.Sprintf("gone-%02d", i)))
	}
	noneDeleted := func() {
		t.Helper()
		for _, o := range orphans {
			g.Expect(exists(ctx, g, o.anchor)).To(BeTrue(), "orphan %s", o.owner.Name)
		}
	}

	dry := rt.startResync("dry", func(o *app.Options) { o.Resync.DryRun = true })
	rep := rt.passes(dry, rt.project, 3)
	g.Expect(rep.DryRun).To(BeTrue())
	dryDecisions := decisionsOf(rep)
	for _, o := range orphans {
		l, _ := rep.Find(o.anchor.Name)
		g.Expect(l.Verdict).To(Equal(resync.Verdict{Decision: resync.Collect, Reason: resync.ReasonNotFound, Proof: resync.ReasonNotFound}))
		g.Expect(l.Action).To(Equal(resync.ActionDryRun))
	}
	noneDeleted()
	rt.stopManager(dry)

	m := rt.startResync("cap", func(o *app.Options) { o.Resync.MaxDeletionsPerPass = 5 })
	leaseNS := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: rt.env.ProviderNamespace}}
	annotate(ctx, g, leaseNS, resync.AnnotationDeletion, resync.DeletionOff)
	rep = rt.passes(m, rt.project, 3)
	g.Expect(rep.SwitchedOff).To(BeTrue())
	g.Expect(rep.CountAction(resync.ActionSwitchedOff)).To(Equal(5), "the cap applies to decisions as to deletions")
	g.Expect(rep.CountAction(resync.ActionDeferred)).To(Equal(7))
	off, err := m.Gauge("anchorage_resync_deletion_switched_off")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(off).To(Equal(1.0))
	noneDeleted()
	annotate(ctx, g, leaseNS, resync.AnnotationDeletion, "")

	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: rt.project, Namespace: rt.env.ProviderNamespace}}
	annotate(ctx, g, secret, resync.AnnotationExclude, "true")
	rep = rt.passes(m, rt.project, 2)
	g.Expect(rep.Excluded).To(BeTrue())
	g.Expect(rep.SwitchedOff).To(BeFalse())
	g.Expect(rep.CountAction(resync.ActionExcluded)).To(Equal(5))
	noneDeleted()
	mark := len(m.ResyncLog.Reports(rt.project))
	annotate(ctx, g, secret, resync.AnnotationExclude, "")

	// Counted below: the reports of the passes that deleted, the last of which reports
	// after the last anchor is gone. Wait for it, not for the anchors alone.
	rt.passesUntilReported(m, rt.project, resyncPassesWithin, func(g Gomega, _ resync.PassReport) {
		for _, o := range orphans {
			g.Expect(exists(ctx, g, o.anchor)).To(BeFalse())
		}
	})
	withDeletions := 0
	var first resync.PassReport
	for _, r := range m.ResyncLog.Reports(rt.project)[mark:] {
		// The cap counts attempts: a delete that failed (a timeout on a loaded machine)
		// may still have committed, and then no later pass sees that anchor again.
		n := r.CountAction(resync.ActionDeleted) + r.CountAction(resync.ActionFailed)
		g.Expect(n).To(BeNumerically("<=", 5))
		if n > 0 {
			if withDeletions == 0 {
				first = r
			}
			withDeletions++
		}
	}
	g.Expect(withDeletions).To(BeNumerically(">=", 3), "12 orphans at 5 a pass")
	// The first deleting pass decided about every anchor what dry-run did.
	g.Expect(decisionsOf(first)).To(Equal(dryDecisions))
	g.Expect(exists(ctx, g, live.anchor)).To(BeTrue())
}

// TestResyncThreeReplicasEachAnchorExaminedByItsHolder: three replicas, four projects
// on two planes. Every orphan is collected exactly once, and once the holders are
// settled every anchor is examined only by its project's claimed holder, under that
// holder's admission (the shard's recorder).
func TestResyncThreeReplicasEachAnchorExaminedByItsHolder(t *testing.T) {
	needEnvtest(t)
	g := NewWithT(t)
	ctx := context.Background()
	e := newEnv(t)
	clock := clocktesting.NewFakeClock(time.Now().Add(time.Hour))
	admitted := &harness.MemoryRecorder{}

	type project struct {
		name    string
		live    []planted
		orphans []planted
	}
	var projects []*project
	for i, plane := range []*harness.ControlPlane{planeA, planeB, planeA, planeB} {
		p := &project{name: fmt.Sprintf("rep-%s-%d", rand.String(4), i)}
		_, err := e.AddProject(ctx, p.name, plane)
		g.Expect(err).NotTo(HaveOccurred())
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "rep-" + rand.String(6)}}
		g.Expect(plane.Client.Create(ctx, ns)).To(Succeed())
		hubNS, err := anchor.EnsureMappedNamespace(ctx, hub.Client, p.name, ns)
		g.Expect(err).NotTo(HaveOccurred())
		for j := range 2 {
			gw := &gatewayv1.Gateway{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("live-%d", j), Namespace: ns.Name},
				Spec: gatewayv1.GatewaySpec{GatewayClassName: "other",
					Listeners: []gatewayv1.Listener{{Name: "http", Port: 80, Protocol: gatewayv1.HTTPProtocolType}}},
			}
			g.Expect(plane.Client.Create(ctx, gw)).To(Succeed())
			t.Cleanup(func() { _ = plane.Client.Delete(context.Background(), gw) })
			owner := anchor.Owner{Project: p.name, Group: gatewayv1.GroupName, Kind: "Gateway", Namespace: ns.Name, Name: gw.Name, UID: gw.UID}
			p.live = append(p.live, plant(ctx, g, owner, hubNS, false))
			orphan := owner
			orphan.Name, orphan.UID = fmt.Sprintf("gone-%d", j), uuid.NewUUID()
			p.orphans = append(p.orphans, plant(ctx, g, orphan, hubNS, j == 1))
		}
		projects = append(projects, p)
	}

	var ms []*harness.Manager
	for i := range 3 {
		ms = append(ms, e.StartManagerT(t, fmt.Sprintf("r%d-%s", i, rand.String(4)), harness.ManagerOptions{Adjust: func(o *app.Options) {
			harness.WithTimings(harness.FastTimings)(o)
			o.Resync.Clock = clock
			o.Recorder = admitted
		}}))
	}
	passesOf := func(p string) int {
		n := 0
		for _, m := range ms {
			n += m.ResyncLog.Passes(p)
		}
		return n
	}

	g.Eventually(func(g Gomega) {
		clock.Step(resyncStep)
		for _, p := range projects {
			for _, o := range p.orphans {
				g.Expect(exists(ctx, g, o.anchor)).To(BeFalse(), "orphan %s of %s", o.owner.Name, p.name)
			}
		}
	}, 2*resyncPassesWithin, resyncPoll).Should(Succeed())

	// Settled: every project claimed. From here on, each project passes twice more.
	claimed, err := e.ClaimedHolders(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	start := time.Now()
	before := map[string]int{}
	for _, p := range projects {
		g.Expect(claimed[p.name]).NotTo(BeEmpty(), "project %s claimed", p.name)
		before[p.name] = passesOf(p.name)
	}
	g.Eventually(func(g Gomega) {
		clock.Step(resyncStep)
		for _, p := range projects {
			g.Expect(passesOf(p.name)).To(BeNumerically(">=", before[p.name]+2), "project %s", p.name)
		}
	}, resyncPassesWithin, resyncPoll).Should(Succeed())
	now, err := e.ClaimedHolders(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	byProject := map[string]*project{}
	for _, p := range projects {
		g.Expect(now[p.name]).To(Equal(claimed[p.name]), "holders stayed settled for the check")
		byProject[p.name] = p
	}

	examinedBy := map[string]map[string]bool{} // anchor -> holders
	var examined []resync.Examination
	for _, m := range ms {
		examined = append(examined, m.ResyncLog.Examinations()...)
	}
	for _, x := range examined {
		if byProject[x.Project] == nil || x.At.Before(start) {
			continue
		}
		g.Expect(x.Holder).To(Equal(claimed[x.Project]), "anchor %s of %s examined by a replica that is not its holder", x.Name, x.Project)
		if examinedBy[x.Name] == nil {
			examinedBy[x.Name] = map[string]bool{}
		}
		examinedBy[x.Name][x.Holder] = true
	}
	for _, p := range projects {
		for _, l := range p.live {
			g.Expect(examinedBy[l.anchor.Name]).To(HaveLen(1), "live anchor %s examined by exactly one replica", l.anchor.Name)
			g.Expect(exists(ctx, g, l.anchor)).To(BeTrue())
			g.Expect(exists(ctx, g, l.downstream)).To(BeTrue())
		}
	}
	for _, r := range admitted.Records() {
		if p := byProject[r.Project]; p != nil && r.Start.After(start) {
			g.Expect(r.Holder).To(Equal(claimed[r.Project]), "work on %s admitted for a replica that is not its holder", r.Project)
		}
	}

	// Each orphan was deleted exactly once, by whichever replica held its project.
	deletions := map[string]int{}
	for _, m := range ms {
		for _, p := range projects {
			for _, r := range m.ResyncLog.Reports(p.name) {
				for _, a := range r.Anchors {
					if a.Action == resync.ActionDeleted {
						deletions[a.Name]++
					}
				}
			}
		}
	}
	for _, p := range projects {
		for _, o := range p.orphans {
			g.Expect(deletions[o.anchor.Name]).To(Equal(1), "orphan %s deleted once", o.anchor.Name)
		}
	}
}

// TestResyncSweepPrintsTheTable runs `manager sweep --once --dry-run` against the hub
// and checks its table: a kept anchor, an orphan it would collect, a kind not served,
// and the anchors of a project that has no Secret; nothing is deleted.
func TestResyncSweepPrintsTheTable(t *testing.T) {
	rt := newResyncTest(t, planeA)
	g, ctx := rt.g, rt.ctx
	live := rt.liveGateway("alive")
	orphan := rt.orphanGateway("gone")
	widget := anchor.Owner{Project: rt.project, Group: "example.com", Kind: "Widget", Namespace: rt.ns.Name, Name: "w", UID: uuid.NewUUID()}
	unserved := plant(ctx, g, widget, rt.hubNS(), false)
	ghost := anchor.Owner{Project: "ghost-" + rand.String(6), Group: gatewayv1.GroupName, Kind: "Gateway", Namespace: "web", Name: "edge", UID: uuid.NewUUID()}
	ghostNS := anchor.MappedNamespace(uuid.NewUUID())
	g.Expect(hub.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ghostNS}})).To(Succeed())
	noSecret := plant(ctx, g, ghost, ghostNS, false)

	dir := t.TempDir()
	bin := filepath.Join(dir, "manager")
	build := exec.Command("go", "build", "-o", bin, "./cmd/manager")
	build.Dir = testenv.RepoRoot()
	build.Stderr = os.Stderr
	g.Expect(build.Run()).To(Succeed())
	_, kc, err := hub.User("sweep-"+rand.String(4), "system:masters")
	g.Expect(err).NotTo(HaveOccurred())
	kcPath := filepath.Join(dir, "hub.kubeconfig")
	g.Expect(os.WriteFile(kcPath, kc, 0o600)).To(Succeed())

	// The sweep reads the namespace and the resync's ages from the configuration file,
	// as the replicas do.
	configPath := filepath.Join(dir, "config.yaml")
	g.Expect(harness.WriteConfig(configPath, func(c *config.ManagerConfiguration) {
		c.ProviderNamespace = rt.env.ProviderNamespace
		c.Resync.MinAge = metav1.Duration{Duration: time.Millisecond}
		c.Resync.ConfirmAfter = metav1.Duration{Duration: time.Second}
	})).To(Succeed())

	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin, "sweep", "--once", "--dry-run", "--kubeconfig="+kcPath, "--config="+configPath)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	g.Expect(cmd.Run()).To(Succeed(), "stderr:\n%s", stderr.String())
	out := stdout.String()
	t.Logf("sweep output:\n%s", out)

	g.Expect(out).To(ContainSubstring("PROJECT " + rt.project))
	g.Expect(out).To(ContainSubstring("dry-run"))
	g.Expect(out).To(ContainSubstring("kept 1, suspect 0, collect 1 (deleted 0, would delete 1), unknown 1"))
	g.Expect(hasLine(out, "keep", "live", live.anchor.Name, "Gateway "+rt.ns.Name+"/alive")).To(BeTrue(), "kept line")
	g.Expect(hasLine(out, "collect", "not-found", "dry-run", orphan.anchor.Name, "Gateway "+rt.ns.Name+"/gone", "1")).To(BeTrue(), "orphan line")
	g.Expect(hasLine(out, "unknown", "kind-not-served", unserved.anchor.Name, "Widget "+rt.ns.Name+"/w")).To(BeTrue(), "unserved line")
	g.Expect(out).To(ContainSubstring("NO PROJECT SECRET"))
	g.Expect(hasLine(out, "unknown", "no-project-secret", noSecret.anchor.Name, ghost.Project)).To(BeTrue(), "unowned line")
	for _, p := range []planted{live, orphan, unserved, noSecret} {
		g.Expect(exists(ctx, g, p.anchor)).To(BeTrue())
	}
}
