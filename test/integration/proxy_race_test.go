package integration

import (
	"context"
	"fmt"
	"maps"
	"math/rand"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"anchorage/api/v1alpha"
	"anchorage/internal/app"
	"anchorage/internal/harness"
	"anchorage/pkg/anchor"
	"anchorage/pkg/shard"
)

// The live guard's promise is checked by the order of the audit logs' events alone
// (unguardedHubCreates), with no bound on the time between a read and a create.

// Shape of the race: proxies created over createSpread, each deleted 0 to maxLifetime
// after its creation; the owner of the first project paused from pauseAt after the first
// creation for twice the Lease duration.
const (
	raceProxies  = 30
	createSpread = 9 * time.Second
	maxLifetime  = 3 * time.Second
	pauseAt      = 3 * time.Second
)

// raceProxy is one proxy of the race: in which project, when it is created (after the
// race begins) and how long it lives.
type raceProxy struct {
	project  int
	name     string
	createAt time.Duration
	lifetime time.Duration
}

// raceProject is one of the race's projects: its plane, upstream namespace and hub
// namespace.
type raceProject struct {
	name  string
	plane *harness.ControlPlane
	ns    *corev1.Namespace
	hubNS string
}

// TestProxyDeletedSoonAfterCreation: many proxies in two projects, each deleted 0 to 3 s
// after it was created (seeded; ANCHORAGE_RACE_SEED replays a run), three replicas, and
// the owner of one project paused past the Lease in the middle. From the API servers'
// audit logs: every hub create for a proxy's objects (the anchors of its Gateway and
// HTTPRoute, the downstream Gateway, HTTPRoute and Certificates) follows a live guard
// read of its own, which saw the proxy before its delete committed when the create
// came after that (unguardedHubCreates); and at the end nothing of any proxy is left,
// upstream or on the hub.
func TestProxyDeletedSoonAfterCreation(t *testing.T) {
	needEnvtest(t)
	g := NewWithT(t)
	ctx := context.Background()
	e := newEnv(t)
	seed := raceSeed(t)
	rng := rand.New(rand.NewSource(seed))
	class := "anchorage-" + utilrand.String(6)

	var projects []raceProject
	var names []string
	for i, plane := range []*harness.ControlPlane{planeA, planeB} {
		p := addRaceProject(t, g, e, fmt.Sprintf("race-%s-%d", utilrand.String(4), i), plane)
		projects = append(projects, p)
		names = append(names, p.name)
	}
	anchors := watchAnchors(t, projects)

	var ms []*harness.Manager
	for i := range 3 {
		ms = append(ms, e.StartManagerT(t, fmt.Sprintf("race%d-%s", i, utilrand.String(4)), harness.ManagerOptions{Adjust: func(o *app.Options) {
			harness.WithTimings(harness.FastTimings)(o)
			o.Gateway.GatewayClassName = class
		}}))
	}
	waitAllServed(g, e, ms, names)

	var proxies []raceProxy
	for i := range raceProxies {
		proxies = append(proxies, raceProxy{
			project:  i % len(projects),
			name:     fmt.Sprintf("race-%02d", i),
			createAt: time.Duration(rng.Int63n(int64(createSpread))),
			lifetime: time.Duration(rng.Int63n(int64(maxLifetime) + 1)),
		})
	}

	begin := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, 2*raceProxies)
	for _, px := range proxies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- createThenDelete(ctx, projects[px.project], px, begin)
		}()
	}
	paused := pauseOwner(t, e, ms, projects[0].name, begin.Add(pauseAt), 2*harness.FastTimings.LeaseDuration)
	wg.Wait()
	<-paused
	close(errs)
	for err := range errs {
		g.Expect(err).NotTo(HaveOccurred())
	}
	t.Logf("created and deleted %d proxies in %s", len(proxies), time.Since(begin).Round(time.Millisecond))

	// Nothing left: every proxy, Gateway and HTTPRoute finalized upstream, no anchor in
	// the projects' hub namespaces, and the hub's garbage collector took the rest.
	settled := time.Now()
	for _, p := range projects {
		g.Eventually(func(g Gomega) {
			for _, list := range []client.ObjectList{&v1alpha.HTTPProxyList{}, &gatewayv1.GatewayList{}, &gatewayv1.HTTPRouteList{}} {
				g.Expect(p.plane.Client.List(ctx, list, client.InNamespace(p.ns.Name))).To(Succeed())
				g.Expect(namesIn(list)).To(BeEmpty(), "%T left in project %s", list, p.name)
			}
			cms := &corev1.ConfigMapList{}
			g.Expect(hub.Client.List(ctx, cms, client.InNamespace(p.hubNS))).To(Succeed())
			g.Expect(namesIn(cms)).To(BeEmpty(), "anchors left on the hub for project %s", p.name)
		}, gwProgrammedWithin, gwPoll).Should(Succeed())
		g.Eventually(func(g Gomega) {
			for _, list := range []client.ObjectList{&gatewayv1.GatewayList{}, &gatewayv1.HTTPRouteList{}} {
				g.Expect(hub.Client.List(ctx, list, client.InNamespace(p.hubNS))).To(Succeed())
				g.Expect(namesIn(list)).To(BeEmpty(), "downstream %T left for project %s", list, p.name)
			}
			g.Expect(certificatesIn(ctx, g, p.hubNS)).To(BeEmpty(), "Certificates left for project %s", p.name)
		}, gwGCWithin, gwPoll).Should(Succeed())
	}
	t.Logf("nothing left %s after the last delete", time.Since(settled).Round(time.Millisecond))

	anchors.waitSeen(g, projects)
	unguarded, checked, maxLate := unguardedHubCreates(g, projects, anchors.owners(), nil)
	t.Logf("checked %d hub creates of %d proxies; latest relative to its proxy's delete commit: %s",
		checked, len(proxies), maxLate.Round(time.Millisecond))
	t.Logf("live guard refusals over the replicas: %v", guardRefusals(ms))
	g.Expect(anchors.err()).NotTo(HaveOccurred(), "the anchor watch")
	g.Expect(unguarded).To(BeEmpty(), "hub creates without a live guard read of their own (seed %d)", seed)
}

// addRaceProject registers project name on plane and creates its upstream namespace
// (deleted when t ends).
func addRaceProject(t *testing.T, g Gomega, e *harness.Env, name string, plane *harness.ControlPlane) raceProject {
	ctx := context.Background()
	p := raceProject{name: name, plane: plane}
	_, err := e.AddProject(ctx, p.name, plane)
	g.Expect(err).NotTo(HaveOccurred())
	p.ns = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "race-" + utilrand.String(6)}}
	g.Expect(plane.Client.Create(ctx, p.ns)).To(Succeed())
	p.hubNS = anchor.MappedNamespace(p.ns.UID)
	t.Cleanup(func() { stripAndDelete(p.plane.Client, p.ns.Name) })
	return p
}

// guardRefusals sums the live guard's refusals over ms, by "<kind>/<reason>" (for the
// log: it shows which owner the guard stopped, and why).
func guardRefusals(ms []*harness.Manager) map[string]float64 {
	out := map[string]float64{}
	for _, m := range ms {
		for _, kind := range []string{"HTTPProxy", "Gateway", "HTTPRoute"} {
			for _, reason := range []string{"gone", "replaced", "terminating", "unfinalized"} {
				if v, err := m.Gauge("anchorage_live_guard_refusals_total", "kind", kind, "reason", reason); err == nil && v > 0 {
					out[kind+"/"+reason] += v
				}
			}
		}
	}
	return out
}

// raceSeed is the race's seed: ANCHORAGE_RACE_SEED when set (to replay a run), else the
// time. It is logged either way.
func raceSeed(t *testing.T) int64 {
	seed := time.Now().UnixNano()
	if v := os.Getenv("ANCHORAGE_RACE_SEED"); v != "" {
		var err error
		if seed, err = strconv.ParseInt(v, 10, 64); err != nil {
			t.Fatalf("ANCHORAGE_RACE_SEED: %v", err)
		}
	}
	t.Logf("seed %d (ANCHORAGE_RACE_SEED=%d replays this run)", seed, seed)
	return seed
}

// createThenDelete creates px at its time, with one hostname, and deletes it when its
// lifetime is over.
func createThenDelete(ctx context.Context, p raceProject, px raceProxy, begin time.Time) error {
	time.Sleep(time.Until(begin.Add(px.createAt)))
	proxy := &v1alpha.HTTPProxy{
		ObjectMeta: metav1.ObjectMeta{Name: px.name, Namespace: p.ns.Name},
		Spec: v1alpha.HTTPProxySpec{
			Hostnames: []gatewayv1.Hostname{gatewayv1.Hostname(px.name + "." + p.name + ".race.example.com")},
			Rules:     []v1alpha.HTTPProxyRule{{Backends: []v1alpha.HTTPProxyBackend{{Endpoint: "https://backend.example.com"}}}},
		},
	}
	if err := p.plane.Client.Create(ctx, proxy); err != nil {
		return fmt.Errorf("creating %s/%s: %w", p.name, px.name, err)
	}
	time.Sleep(px.lifetime)
	if err := p.plane.Client.Delete(ctx, proxy); err != nil {
		return fmt.Errorf("deleting %s/%s: %w", p.name, px.name, err)
	}
	return nil
}

// pauseOwner pauses the traffic of the replica that has claimed project, at at, for
// d, and closes the returned channel once it is resumed.
func pauseOwner(t *testing.T, e *harness.Env, ms []*harness.Manager, project string, at time.Time, d time.Duration) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		time.Sleep(time.Until(at))
		claimed, err := e.ClaimedHolders(context.Background())
		if err != nil {
			t.Errorf("reading the claimed holders: %v", err)
			return
		}
		for _, m := range ms {
			if m.Name == shard.PodOf(claimed[project]) {
				t.Logf("pausing %s, owner of %s, for %s", m.Name, project, d)
				resume := m.PauseTraffic()
				time.Sleep(d)
				resume()
				t.Logf("resumed %s", m.Name)
				return
			}
		}
		t.Errorf("no replica has claimed %s (holder %q)", project, claimed[project])
	}()
	return done
}

// anchorWatch maps the names of the anchors created in the race's hub namespaces to
// the names of their owners, from the labels the managers wrote: the hub's audit log
// records names, not labels.
type anchorWatch struct {
	mu     sync.Mutex
	owner  map[string]anchor.Owner
	failed error
}

// watchAnchors starts watching ConfigMaps in the projects' hub namespaces (which need
// not exist yet) until t ends.
func watchAnchors(t *testing.T, projects []raceProject) *anchorWatch {
	t.Helper()
	wc, err := client.NewWithWatch(hub.Config, client.Options{Scheme: app.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	a := &anchorWatch{owner: map[string]anchor.Owner{}}
	for _, p := range projects {
		w, err := wc.Watch(ctx, &corev1.ConfigMapList{}, client.InNamespace(p.hubNS))
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			defer w.Stop()
			for ev := range w.ResultChan() {
				cm, ok := ev.Object.(*corev1.ConfigMap)
				if !ok || (ev.Type != watch.Added && ev.Type != watch.Modified) {
					continue
				}
				owner, err := anchor.Decode(cm.Name, cm.Labels)
				a.mu.Lock()
				if err == nil {
					a.owner[cm.Name] = owner
				} else if strings.HasPrefix(cm.Name, anchor.NamePrefix) {
					a.failed = fmt.Errorf("anchor %s/%s: %w", cm.Namespace, cm.Name, err)
				}
				a.mu.Unlock()
			}
			if ctx.Err() == nil {
				a.mu.Lock()
				a.failed = fmt.Errorf("the watch of %s ended early", p.hubNS)
				a.mu.Unlock()
			}
		}()
	}
	return a
}

func (a *anchorWatch) owners() map[string]anchor.Owner {
	a.mu.Lock()
	defer a.mu.Unlock()
	return maps.Clone(a.owner)
}

// waitSeen waits until the watch has delivered every anchor that the hub's audit log
// shows a replica creating in the projects' hub namespaces. unguardedHubCreates names
// an anchor create's owner from the watch, and a watch trails the hub: an anchor listed
// gone may not have reached it yet.
func (a *anchorWatch) waitSeen(g Gomega, projects []raceProject) {
	g.Eventually(func(g Gomega) {
		events, err := hub.AuditEvents()
		g.Expect(err).NotTo(HaveOccurred())
		owners := a.owners()
		for _, p := range projects {
			for _, ev := range events {
				ref := ev.ObjectRef
				if ev.Verb == "create" && ref.Namespace == p.hubNS && strings.HasPrefix(ev.UserAgent, "anchorage/") &&
					ref.Resource == "configmaps" && strings.HasPrefix(ref.Name, anchor.NamePrefix) {
					g.Expect(owners).To(HaveKey(ref.Name), "the anchor watch saw %s/%s", ref.Namespace, ref.Name)
				}
			}
		}
	}, 10*time.Second, gwPoll).Should(Succeed())
}

func (a *anchorWatch) err() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.failed
}

// guardedObject is one upstream object of a proxy whose reconciler writes the hub (its
// Gateway or HTTPRoute, named as the proxy), as one replica (its user agent) sees it.
// That replica reconciles it one reconcile at a time, and before each hub create its
// live guard reads the object and then the proxy (createsGuarded).
type guardedObject struct{ agent, project, resource, proxy string }

// guardTrace is what the audit logs show of one guardedObject: the object's live
// reads, its proxy's (by the same replica, whoever asked) and the hub creates its
// reconciler sent, answered or not.
type guardTrace struct {
	objectReads, proxyReads []time.Time
	creates                 []hubCreate
}

// hubCreate is one create a replica sent for a proxy's object, and how to name it.
type hubCreate struct {
	at   time.Time
	what string
}

// unguardedHubCreates checks, from the audit logs, the live guard's promise for every
// create a replica sent to the hub for an object of a proxy of projects (docs/design.md,
// Residual windows, 4), by order alone: since that replica's previous create for the
// same upstream object, the object was read live (each create has a guard read of its
// own: a create resent past its read, or made with none, has not), and, for a create
// the hub received after the proxy's delete committed, the proxy was read live before
// that commit (a read begun after it saw the proxy terminating, and the guard refused).
// faulted names, by proxy, the creates a fault proxy answered before the hub saw them.
// It returns the creates that break the promise, how many it checked, and the latest
// create relative to its proxy's delete commit (for the log).
func unguardedHubCreates(g Gomega, projects []raceProject, anchorOwners map[string]anchor.Owner, faulted map[string][]harness.FaultAnswer) (unguarded []string, checked int, maxLate time.Duration) {
	hubEvents, err := hub.AuditEvents()
	g.Expect(err).NotTo(HaveOccurred())
	maxLate = -time.Hour
	for _, p := range projects {
		events, err := p.plane.AuditEvents()
		g.Expect(err).NotTo(HaveOccurred())
		committed := map[string]time.Time{}
		traces := map[guardedObject]*guardTrace{}
		trace := func(k guardedObject) *guardTrace {
			if traces[k] == nil {
				traces[k] = &guardTrace{}
			}
			return traces[k]
		}
		var proxyReads []harness.AuditEvent
		for _, ev := range events {
			ref := ev.ObjectRef
			if ref.Namespace != p.ns.Name || !succeeded(ev) {
				continue
			}
			switch {
			case ev.Verb == "delete" && ref.Resource == "httpproxies":
				// Committed when answered: a read served before rightly saw it live.
				if at, ok := committed[ref.Name]; !ok || ev.StageTimestamp.Before(at) {
					committed[ref.Name] = ev.StageTimestamp
				}
			case ev.Verb == "get" && ref.Resource == "httpproxies":
				proxyReads = append(proxyReads, ev)
			case ev.Verb == "get" && (ref.Resource == "gateways" || ref.Resource == "httproutes"):
				t := trace(guardedObject{ev.UserAgent, p.name, ref.Resource, ref.Name})
				t.objectReads = append(t.objectReads, ev.RequestReceivedTimestamp)
			}
		}
		for proxy, answers := range faulted {
			for _, a := range answers {
				// Its name is in the body: only the kind says whose reconciler sent it.
				resource := map[string]string{"gateways": "gateways", "certificates": "gateways", "httproutes": "httproutes"}[a.Info.Resource]
				if a.Info.Verb == "create" && a.Info.Namespace == p.hubNS && resource != "" {
					t := trace(guardedObject{a.UserAgent, p.name, resource, proxy})
					t.creates = append(t.creates, hubCreate{a.At, fmt.Sprintf("%s create answered %d by the fault proxy", a.Info.Resource, a.Status)})
				}
			}
		}
		for _, ev := range hubEvents {
			ref := ev.ObjectRef
			if ev.Verb != "create" || ref.Namespace != p.hubNS || !strings.HasPrefix(ev.UserAgent, "anchorage/") {
				continue
			}
			resource, proxy := guardedBy(ref.Resource, ref.Name, anchorOwners)
			if proxy == "" {
				g.Expect(ref.Resource == "configmaps" && strings.HasPrefix(ref.Name, anchor.NamePrefix)).To(BeFalse(),
					"hub create of anchor %s/%s whose owner the watch never saw", ref.Namespace, ref.Name)
				continue
			}
			at, ok := committed[proxy]
			g.Expect(ok).To(BeTrue(), "no delete of proxy %s/%s in the audit log", p.name, proxy)
			checked++
			maxLate = max(maxLate, ev.RequestReceivedTimestamp.Sub(at))
			t := trace(guardedObject{ev.UserAgent, p.name, resource, proxy})
			t.creates = append(t.creates, hubCreate{ev.RequestReceivedTimestamp, fmt.Sprintf(
				"%s %s/%s (proxy %s/%s, answered %d) by %s, %s after the proxy's delete commit", ref.Resource, ref.Namespace, ref.Name,
				p.name, proxy, ev.ResponseStatus.Code, ev.UserAgent, ev.RequestReceivedTimestamp.Sub(at).Round(time.Millisecond))})
		}
		for k, t := range traces {
			for _, ev := range proxyReads {
				if ev.UserAgent == k.agent && ev.ObjectRef.Name == k.proxy {
					t.proxyReads = append(t.proxyReads, ev.RequestReceivedTimestamp)
				}
			}
			unguarded = append(unguarded, t.unguarded(committed[k.proxy])...)
		}
	}
	sort.Strings(unguarded)
	return unguarded, checked, maxLate
}

// unguarded returns the creates of t without a read of the object since the previous
// create, or, received after committed, without a read of the proxy in that span that
// began before committed.
func (t *guardTrace) unguarded(committed time.Time) []string {
	sort.Slice(t.creates, func(i, j int) bool { return t.creates[i].at.Before(t.creates[j].at) })
	readIn := func(reads []time.Time, from, to time.Time) bool {
		return slices.ContainsFunc(reads, func(r time.Time) bool { return r.After(from) && r.Before(to) })
	}
	var out []string
	var previous time.Time
	for _, c := range t.creates {
		switch {
		case !readIn(t.objectReads, previous, c.at):
			out = append(out, c.what+": no guard read since the previous create")
		case c.at.After(committed) && !readIn(t.proxyReads, previous, committed):
			out = append(out, c.what+": no read of the proxy before its delete committed since the previous create")
		}
		previous = c.at
	}
	return out
}

// guardedBy names the upstream object whose reconciler creates a hub object, by its
// resource ("gateways" or "httproutes") and its name, the proxy's: the Gateway's for the
// downstream Gateway, its Certificates ("<gateway>-https-...") and its anchor, the
// HTTPRoute's for the downstream HTTPRoute and its anchor. "" for anything else (the
// hub namespace itself serves every proxy).
func guardedBy(resource, name string, anchorOwners map[string]anchor.Owner) (upstreamResource, proxy string) {
	switch resource {
	case "configmaps":
		if o, ok := anchorOwners[name]; ok && o.Kind == "Gateway" {
			return "gateways", o.Name
		} else if ok && o.Kind == "HTTPRoute" {
			return "httproutes", o.Name
		}
	case "gateways", "httproutes":
		return resource, name
	case "certificates":
		if proxy, _, ok := strings.Cut(name, "-https-"); ok {
			return "gateways", proxy
		}
	}
	return "", ""
}

func succeeded(ev harness.AuditEvent) bool {
	return ev.ResponseStatus.Code >= 200 && ev.ResponseStatus.Code < 300
}

// namesIn returns the names of a list's items.
func namesIn(list client.ObjectList) []string {
	var out []string
	_ = meta.EachListItem(list, func(o runtime.Object) error {
		out = append(out, o.(client.Object).GetName())
		return nil
	})
	return out
}
