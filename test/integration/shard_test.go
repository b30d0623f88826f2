package integration

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"anchorage/internal/harness"
	"anchorage/pkg/shard"
)

func projectNames(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%02d", prefix, i)
	}
	return out
}

func startManagers(t *testing.T, e *harness.Env, n int, prefix string) []*harness.Manager {
	t.Helper()
	var ms []*harness.Manager
	for i := range n {
		ms = append(ms, e.StartManagerT(t, fmt.Sprintf("%s%d", prefix, i), harness.ManagerOptions{Adjust: harness.WithTimings(harness.FastTimings)}))
	}
	return ms
}

// TestShardEachProjectHasExactlyOneClaimedHolder: three managers, twenty lightweight
// projects; every project is claimed by exactly one replica, which alone admits work
// for it; shares stay within twice the mean; kubectl shows the same holders.
func TestShardEachProjectHasExactlyOneClaimedHolder(t *testing.T) {
	needEnvtest(t)
	g := NewWithT(t)
	ctx := context.Background()
	e := newEnv(t)
	projects := projectNames("lw", 20)
	g.Expect(e.AddLightweightProjects(ctx, planeA, projects...)).To(Succeed())
	ms := startManagers(t, e, 3, "own")

	holderOf := map[string]*harness.Manager{}
	g.Eventually(func(g Gomega) {
		claimed, err := e.ClaimedHolders(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(claimed).To(HaveLen(len(projects)))
		for _, p := range projects {
			g.Expect(claimed[p]).NotTo(BeEmpty(), "project %s claimed", p)
		}
		// Exactly one replica admits work for each project, and it is the claimed holder.
		for _, p := range projects {
			var admitting []*harness.Manager
			for _, m := range ms {
				if len(m.Held([]string{p})) == 1 {
					admitting = append(admitting, m)
				}
			}
			g.Expect(admitting).To(HaveLen(1), "project %s admitted by exactly one replica", p)
			g.Expect(admitting[0].Replica.Shard.Holder()).To(Equal(claimed[p]))
			holderOf[p] = admitting[0]
		}
	}, 30*time.Second, 200*time.Millisecond).Should(Succeed())

	mean := float64(len(projects)) / float64(len(ms))
	for _, m := range ms {
		n := len(m.Held(projects))
		t.Logf("replica %s holds %d projects", m.Name, n)
		g.Expect(float64(n)).To(BeNumerically("<=", 2*mean), "replica %s share", m.Name)
		// A claim opens admission before the replica updates its gauges (after the
		// Claimed Event's write): wait for the gauge, not only for the admission.
		g.Eventually(func() (float64, error) { return m.Gauge("anchorage_shard_projects_held") }, 10*time.Second, 100*time.Millisecond).
			Should(BeEquivalentTo(n), "replica %s's held gauge", m.Name)
	}

	// kubectl get leases tells the same story.
	kc, err := harness.KubeconfigVia(hub.Config, "")
	g.Expect(err).NotTo(HaveOccurred())
	kcPath := filepath.Join(t.TempDir(), "hub.kubeconfig")
	g.Expect(os.WriteFile(kcPath, kc, 0o600)).To(Succeed())
	out, err := exec.Command("kubectl", "--kubeconfig", kcPath, "get", "leases", "-n", e.ProviderNamespace,
		"-l", shard.LabelRole+"=project", "-o", `custom-columns=PROJECT:.metadata.annotations.anchorage\.datumapis\.com/project,HOLDER:.spec.holderIdentity`, "--no-headers").CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), string(out))
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	g.Expect(lines).To(HaveLen(len(projects)))
	for _, line := range lines {
		f := strings.Fields(line)
		g.Expect(f).To(HaveLen(2))
		g.Expect(holderOf).To(HaveKey(f[0]))
		g.Expect(f[1]).To(Equal(holderOf[f[0]].Replica.Shard.Holder()), "kubectl shows the holder of %s", f[0])
	}
	out, err = exec.Command("kubectl", "--kubeconfig", kcPath, "get", "leases", "-n", e.ProviderNamespace, "-l", shard.LabelRole+"=member", "--no-headers").CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), string(out))
	g.Expect(strings.Split(strings.TrimSpace(string(out)), "\n")).To(HaveLen(len(ms)), "one member Lease per replica")
}

// TestShardFailoverAfterAbruptStop: the holder of a project dies; a survivor holds and
// claims it within about one lease duration plus two retry periods (plus the time the
// new holder needs to engage), and the unowned gauge is zero before and after.
func TestShardFailoverAfterAbruptStop(t *testing.T) {
	needEnvtest(t)
	g := NewWithT(t)
	ctx := context.Background()
	e := newEnv(t)
	projects := projectNames("fo", 6)
	g.Expect(e.AddLightweightProjects(ctx, planeA, projects...)).To(Succeed())
	ms := startManagers(t, e, 3, "fo")
	waitAllServed(g, e, ms, projects)
	for _, m := range ms {
		g.Eventually(func() (float64, error) { return m.Gauge("anchorage_shard_projects_unowned") }, 10*time.Second).Should(BeZero())
	}

	// Kill a replica that is not the coordinator and holds at least one project.
	var victim *harness.Manager
	var victimProjects []string
	for _, m := range ms {
		held := m.Held(projects)
		if nc, _ := m.Gauge("anchorage_shard_no_coordinator"); len(held) > 0 && !isCoordinator(ctx, e, m) && nc == 0 {
			victim, victimProjects = m, held
			break
		}
	}
	g.Expect(victim).NotTo(BeNil(), "a non-coordinator replica holding projects")
	survivors := except(ms, victim)
	killed := time.Now()
	victim.Kill()

	waitServedByOne(g, survivors, victimProjects, 20*time.Second)
	took := time.Since(killed)
	t.Logf("failure hand-over of %d projects took %s (lease duration %s, retry %s)", len(victimProjects), took, harness.FastTimings.LeaseDuration, harness.FastTimings.RetryPeriod)
	// The bound on took is bench/'s to measure (failure hand-over, × lease); on a shared
	// 2-core machine a test asserts the outcome: each project served by exactly one
	// survivor, within waitServedByOne's liveness bound.
	for _, m := range survivors {
		g.Eventually(func() (float64, error) { return m.Gauge("anchorage_shard_projects_unowned") }, 10*time.Second).Should(BeZero())
	}
}

// except returns ms without victim.
func except(ms []*harness.Manager, victim *harness.Manager) []*harness.Manager {
	var out []*harness.Manager
	for _, m := range ms {
		if m != victim {
			out = append(out, m)
		}
	}
	return out
}

// waitServedByOne waits until each project is admitted by exactly one of managers.
func waitServedByOne(g Gomega, managers []*harness.Manager, projects []string, within time.Duration) {
	for _, p := range projects {
		g.Eventually(func() int {
			n := 0
			for _, m := range managers {
				n += len(m.Held([]string{p}))
			}
			return n
		}, within, 50*time.Millisecond).Should(Equal(1), "project %s served again by exactly one replica", p)
	}
}

func isCoordinator(ctx context.Context, e *harness.Env, m *harness.Manager) bool {
	holder, err := coordinatorHolder(ctx, e)
	return err == nil && holder == m.Replica.Shard.Holder()
}

// coordinatorOf returns the manager among ms that holds the coordinator Lease, nil when
// none does.
func coordinatorOf(ctx context.Context, e *harness.Env, ms []*harness.Manager) *harness.Manager {
	for _, m := range ms {
		if isCoordinator(ctx, e, m) {
			return m
		}
	}
	return nil
}

// claimOf returns a poll of project's claim annotation, as the hub holds it now.
func claimOf(ctx context.Context, g Gomega, e *harness.Env, project string) func() string {
	return func() string {
		leases, err := e.ProjectLeases(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		l := leases[project]
		return l.Annotations[shard.AnnotationClaim]
	}
}

// coordinatorHolder returns the holder identity of the coordinator Lease ("" when it is
// not held).
func coordinatorHolder(ctx context.Context, e *harness.Env) (string, error) {
	var l coordinationv1.Lease
	if err := e.Hub.Client.Get(ctx, client.ObjectKey{Namespace: e.ProviderNamespace, Name: shard.CoordinatorLeaseName}, &l); err != nil {
		return "", fmt.Errorf("reading the coordinator Lease: %w", err)
	}
	return ptr.Deref(l.Spec.HolderIdentity, ""), nil
}

// TestShardFailoverAfterCoordinatorDies: the replica that is both coordinator and a
// holder dies; a new coordinator is elected and the projects are served again within
// about 1.7 lease durations.
func TestShardFailoverAfterCoordinatorDies(t *testing.T) {
	needEnvtest(t)
	g := NewWithT(t)
	ctx := context.Background()
	e := newEnv(t)
	projects := projectNames("cd", 9)
	g.Expect(e.AddLightweightProjects(ctx, planeA, projects...)).To(Succeed())
	ms := startManagers(t, e, 3, "cd")
	waitAllServed(g, e, ms, projects)

	victim := coordinatorOf(ctx, e, ms)
	g.Expect(victim).NotTo(BeNil())
	// Make sure the coordinator also holds projects: add projects until hashing gives it one.
	for i := 0; len(victim.Held(projects)) == 0; i++ {
		g.Expect(i).To(BeNumerically("<", 40), "rendezvous hashing never picked the coordinator")
		more := fmt.Sprintf("cd-extra-%02d", i)
		g.Expect(e.AddLightweightProjects(ctx, planeA, more)).To(Succeed())
		projects = append(projects, more)
		waitAllServed(g, e, ms, projects)
	}
	held := victim.Held(projects)
	survivors := except(ms, victim)
	killed := time.Now()
	victim.Kill()
	waitServedByOne(g, survivors, held, 30*time.Second)
	took := time.Since(killed)
	t.Logf("coordinator failure hand-over of %d projects took %s = %.2f lease durations", len(held), took, float64(took)/float64(harness.FastTimings.LeaseDuration))
	// As above: the time is bench/'s measurement; the outcome is asserted here.
}

// TestShardLeaseWritesDoNotGrowWithProjects: at steady state project Leases are not
// renewed (their validity is their holder's), so over a quiet window three replicas
// holding 50 projects write member Leases only: not one write to a project Lease. How
// the write rate compares across project counts is bench/'s to measure (Lease writes/s
// at P=10, 100, 1000).
func TestShardLeaseWritesDoNotGrowWithProjects(t *testing.T) {
	needEnvtest(t)
	g := NewWithT(t)
	ctx := context.Background()
	e := newEnv(t)
	projects := projectNames("w", 50)
	g.Expect(e.AddLightweightProjects(ctx, planeA, projects...)).To(Succeed())
	ms := startManagers(t, e, 3, "w-")
	waitAllServed(g, e, ms, projects)

	leases, err := e.ProjectLeases(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	projectLease := map[string]bool{}
	for _, l := range leases {
		projectLease[l.Name] = true
	}
	// A window of three lease durations: every member renews several times in it.
	window := 3 * harness.FastTimings.LeaseDuration
	from := time.Now()
	time.Sleep(window) // the observation window itself, not a wait for state
	to := time.Now()
	events, err := hub.AuditEvents()
	g.Expect(err).NotTo(HaveOccurred())
	var memberWrites, projectWrites []string
	for _, ev := range events {
		if ev.ObjectRef.Resource != "leases" || ev.ObjectRef.Namespace != e.ProviderNamespace ||
			!slices.Contains([]string{"update", "create", "patch", "delete"}, ev.Verb) ||
			ev.RequestReceivedTimestamp.Before(from) || ev.RequestReceivedTimestamp.After(to) {
			continue
		}
		w := ev.Verb + " " + ev.ObjectRef.Name + " by " + ev.User.Username
		if projectLease[ev.ObjectRef.Name] {
			projectWrites = append(projectWrites, w)
		} else {
			memberWrites = append(memberWrites, w)
		}
	}
	t.Logf("Lease writes by 3 replicas holding %d projects over %s: %d member, %d project", len(projects), window, len(memberWrites), len(projectWrites))
	g.Expect(memberWrites).NotTo(BeEmpty(), "member renews are in the audit log (the window is read)")
	g.Expect(projectWrites).To(BeEmpty(), "no project Lease is written at steady state")
}

// TestShardUnownedGaugeRisesWhileTheOnlyHolderIsDead: every replica's unowned gauge is
// zero at steady state, rises once the dead holder's member Lease has gone silent for a
// lease duration, and returns to zero once the projects have a live holder again. The
// coordinator's assignments are held back for a while (its project Lease writes fail),
// so the window is wide enough to be seen from every replica.
func TestShardUnownedGaugeRisesWhileTheOnlyHolderIsDead(t *testing.T) {
	needEnvtest(t)
	g := NewWithT(t)
	ctx := context.Background()
	e := newEnv(t)
	projects := projectNames("ug", 6)
	g.Expect(e.AddLightweightProjects(ctx, planeA, projects...)).To(Succeed())
	ms := startManagers(t, e, 3, "ug")
	waitAllServed(g, e, ms, projects)
	for _, m := range ms {
		g.Eventually(func() (float64, error) { return m.Gauge("anchorage_shard_projects_unowned") }, 10*time.Second).Should(BeZero())
	}
	victim, held := nonCoordinatorHolder(ctx, e, ms, projects)
	g.Expect(victim).NotTo(BeNil())
	var survivors []*harness.Manager
	for _, m := range ms {
		if m != victim {
			survivors = append(survivors, m)
			m.SetFault(func(tr harness.Traffic, r *http.Request) (time.Duration, error) {
				if tr == harness.HubTraffic && r.Method != http.MethodGet && strings.Contains(r.URL.Path, "/leases/"+shard.ProjectLeasePrefix) {
					return 0, errInjected
				}
				return 0, nil
			})
		}
	}
	victim.Kill()
	for _, m := range survivors {
		g.Eventually(func() (float64, error) { return m.Gauge("anchorage_shard_projects_unowned") }, 10*time.Second, 50*time.Millisecond).
			Should(BeEquivalentTo(len(held)), "replica %s sees the dead holder's projects unowned", m.Name)
	}
	for _, m := range survivors {
		m.SetFault(nil)
	}
	waitServedByOne(g, survivors, held, 20*time.Second)
	for _, m := range survivors {
		g.Eventually(func() (float64, error) { return m.Gauge("anchorage_shard_projects_unowned") }, 10*time.Second).Should(BeZero())
	}
}
