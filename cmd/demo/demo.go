package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/multicluster-runtime/providers/kubeconfig"

	"anchorage/api/v1alpha"
	"anchorage/internal/harness"
	"anchorage/pkg/anchor"
	"anchorage/pkg/shard"
)

// providerNamespace holds the project Secrets and the Leases on the demo hub.
const providerNamespace = "anchorage-system"

// Bounds of the story's waits: generous, so a loaded machine slows the demo down
// instead of failing it.
const (
	claimWithin      = 90 * time.Second
	programmedWithin = 90 * time.Second
	collectWithin    = 2 * time.Minute
	gcWithin         = time.Minute
	handoverWithin   = time.Minute
	pollEvery        = 100 * time.Millisecond
)

// project is one project control plane and the namespace the demo's proxies live in.
type project struct {
	name       string
	namespace  string
	plane      *harness.ControlPlane
	nsUID      types.UID
	kubeconfig string
}

// hubNamespace is the mapped namespace of the project's proxy namespace.
func (p *project) hubNamespace() string { return anchor.MappedNamespace(p.nsUID) }

// proxy is an HTTPProxy the demo created and the hub objects it produced.
type proxy struct {
	project *project
	name    string
	host    string
	anchors []anchorView
}

func (p *proxy) String() string { return p.project.name + ":" + p.project.namespace + "/" + p.name }

// objects is every hub object of the proxy: anchors and what hangs on them.
func (p *proxy) objects() []hubObject {
	var out []hubObject
	for _, a := range p.anchors {
		out = append(out, a.all()...)
	}
	return out
}

// result is what the summary reports.
type result struct {
	projects, replicas     int
	strandedLeft, liveLost int
	liveKept, collected    int
	deletedWithProxy       int
	killed                 string
	handover               time.Duration
	handovers              []string
	owners                 map[string]string
	checked                bool
}

func (r result) ok() bool {
	return r.checked && r.strandedLeft == 0 && r.liveLost == 0 && r.handover > 0
}

type demo struct {
	cfg   config
	out   io.Writer
	dir   string
	began time.Time

	hub           *harness.ControlPlane
	hubKubeconfig string
	projects      []*project
	replicas      []*replica
	proxies       []*proxy
	stranded      []*stranded
	res           result
}

// run tells the story, stops everything (or, with --keep, waits for ctx to end first)
// and prints the summary. It reports whether the story's claims held.
func run(ctx context.Context, cfg config, out io.Writer) (bool, error) {
	d := &demo{cfg: cfg, out: out, began: time.Now()}
	if err := d.makeDir(); err != nil {
		return false, err
	}
	storyCtx, cancel := context.WithTimeout(ctx, cfg.timeout)
	err := d.story(storyCtx)
	cancel()
	if err != nil {
		d.say("The story stopped: %v", err)
	}
	if d.hub != nil {
		checkCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if cerr := d.check(checkCtx); cerr != nil {
			d.say("Checking the final state of the hub failed: %v", cerr)
		}
		cancel()
	}
	ok := err == nil && d.res.ok()
	if cfg.keep && ctx.Err() == nil {
		d.explore()
		d.summary()
		<-ctx.Done()
		d.stopAll(io.Discard)
		if ok && d.cfg.dir == "" {
			_ = os.RemoveAll(d.dir)
		}
		return ok, err
	}
	d.stopAll(out)
	d.finishDir(ok)
	d.summary()
	return ok, err
}

func (d *demo) makeDir() error {
	if d.cfg.dir != "" {
		d.dir = d.cfg.dir
		return os.MkdirAll(d.dir, 0o700)
	}
	dir, err := os.MkdirTemp("", "anchorage-demo-")
	d.dir = dir
	return err
}

// finishDir removes a temporary directory after a successful run and otherwise says
// where the replicas' logs are.
func (d *demo) finishDir(ok bool) {
	if ok && d.cfg.dir == "" {
		_ = os.RemoveAll(d.dir)
		return
	}
	d.say("Kubeconfigs and replica logs are kept in %s", d.dir)
}

func (d *demo) elapsed() string {
	return fmt.Sprintf("[%5.1fs]", time.Since(d.began).Seconds())
}

// step starts a numbered part of the story.
func (d *demo) step(n int, title string) {
	fmt.Fprintf(d.out, "\n%s %d. %s\n", d.elapsed(), n, title)
}

// say narrates one line under the current step.
func (d *demo) say(format string, args ...any) {
	fmt.Fprintf(d.out, "         %s\n", fmt.Sprintf(format, args...))
}

func (d *demo) story(ctx context.Context) error {
	fmt.Fprintf(d.out, "anchorage demo: a hub, two project control planes and three replicas of %s, on this machine\n", d.cfg.manager)
	steps := []struct {
		title string
		run   func(context.Context) error
	}{
		{"Starting the hub (with its garbage collector) and two project control planes", d.startPlanes},
		{"Installing the manager's namespace and RBAC on the hub, and registering the projects", d.registerProjects},
		{"Starting three replicas of the manager, each its own process", d.startReplicas},
		{"Creating HTTPProxies in each project", d.createProxies},
		{"Who owns what: kubectl get leases -n " + providerNamespace, func(ctx context.Context) error { return d.showLeases(ctx, true) }},
		{"Planting stranded anchors, as the field had them", d.collectStranded},
		{"Deleting a proxy", d.deleteProxy},
		{"Killing the replica that owns project acme (SIGKILL)", d.killOwner},
	}
	for i, s := range steps {
		d.step(i+1, s.title)
		if err := s.run(ctx); err != nil {
			return fmt.Errorf("step %d (%s): %w", i+1, s.title, err)
		}
	}
	return nil
}

// startPlanes starts the hub and the project planes and writes admin kubeconfigs.
func (d *demo) startPlanes(ctx context.Context) error {
	hubCRDs, err := harness.HubCRDs()
	if err != nil {
		return err
	}
	projectCRDs, err := harness.ProjectCRDs()
	if err != nil {
		return err
	}
	began := time.Now()
	if d.hub, err = harness.StartControlPlane("demo-hub", harness.PlaneOptions{CRDs: hubCRDs, GarbageCollector: true}); err != nil {
		return err
	}
	if d.hubKubeconfig, err = d.adminKubeconfig(d.hub, "hub"); err != nil {
		return err
	}
	d.say("hub      %s  kube-apiserver, etcd, kube-controller-manager (garbage collector); serves Gateway API and cert-manager Certificates (%.1fs)",
		d.hub.Config.Host, time.Since(began).Seconds())
	for _, spec := range []struct{ name, namespace string }{{"acme", "shop"}, {"initech", "blog"}} {
		began := time.Now()
		plane, err := harness.StartControlPlane("demo-"+spec.name, harness.PlaneOptions{CRDs: projectCRDs})
		if err != nil {
			return err
		}
		p := &project{name: spec.name, namespace: spec.namespace, plane: plane}
		d.projects = append(d.projects, p)
		if p.kubeconfig, err = d.adminKubeconfig(plane, spec.name); err != nil {
			return err
		}
		d.say("%-8s %s  kube-apiserver, etcd; serves HTTPProxy and Gateway API (%.1fs)", spec.name, plane.Config.Host, time.Since(began).Seconds())
	}
	d.res.projects = len(d.projects)
	return ctx.Err()
}

// adminKubeconfig writes a system:masters kubeconfig for plane into the demo directory.
func (d *demo) adminKubeconfig(plane *harness.ControlPlane, name string) (string, error) {
	_, kc, err := plane.User("demo-admin", "system:masters")
	if err != nil {
		return "", err
	}
	path := filepath.Join(d.dir, name+".kubeconfig")
	return path, os.WriteFile(path, kc, 0o600)
}

// registerProjects does what an operator does on the hub: install config/default's
// namespace, ServiceAccount and RBAC, and add each project as a Secret in the provider
// namespace with the project plane's kubeconfig.
func (d *demo) registerProjects(ctx context.Context) error {
	c := d.hub.Client
	created, err := installRBAC(ctx, c)
	if err != nil {
		return err
	}
	d.say("from config/default (rendered with kustomize): %s", strings.Join(created, ", "))
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: providerNamespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", providerNamespace, err)
	}
	for _, p := range d.projects {
		cfg, _, err := p.plane.User("anchorage", "system:masters")
		if err != nil {
			return err
		}
		kc, err := harness.KubeconfigVia(cfg, "")
		if err != nil {
			return err
		}
		s := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: p.name, Namespace: providerNamespace,
				Labels: map[string]string{kubeconfig.DefaultKubeconfigSecretLabel: "true"}},
			Data: map[string][]byte{kubeconfig.DefaultKubeconfigSecretKey: kc},
		}
		if err := c.Create(ctx, s); err != nil {
			return fmt.Errorf("creating the Secret of project %s: %w", p.name, err)
		}
		d.say("Secret %s/%s  label %s=true, data key %q: the project plane's kubeconfig",
			providerNamespace, p.name, kubeconfig.DefaultKubeconfigSecretLabel, kubeconfig.DefaultKubeconfigSecretKey)
	}
	return nil
}

// startReplicas starts three manager processes, waits until each is ready (its member
// Lease is valid) and every project is claimed.
func (d *demo) startReplicas(ctx context.Context) error {
	began := time.Now()
	saKubeconfig, err := serviceAccountKubeconfig(ctx, d.hub.Config)
	if err != nil {
		return err
	}
	if d.cfg.admin {
		d.say("they run as hub admins (--admin)")
	} else {
		d.say("they run as ServiceAccount %s/%s, bound only to config/default's ClusterRole and Role, as in a cluster", providerNamespace, serviceAccount)
	}
	for _, name := range []string{"replica-a", "replica-b", "replica-c"} {
		kc := saKubeconfig
		if d.cfg.admin {
			if _, kc, err = d.hub.User("anchorage-"+name, "system:masters"); err != nil {
				return err
			}
		}
		path := filepath.Join(d.dir, name+".kubeconfig")
		if err := os.WriteFile(path, kc, 0o600); err != nil {
			return err
		}
		r, err := startReplica(d.cfg.manager, d.dir, name, path, d.cfg.logLevel)
		if err != nil {
			return err
		}
		d.replicas = append(d.replicas, r)
		d.say("%s  pid %d, metrics http://%s/metrics, log %s", name, r.proc.Pid(), r.metrics, r.logPath)
	}
	d.res.replicas = len(d.replicas)
	d.say("each runs: %s --kubeconfig=<hub> --identity=<name> %s", filepath.Base(d.cfg.manager), strings.Join(replicaFlags(), " "))
	err = poll(ctx, claimWithin, "the replicas to become ready", func(ctx context.Context) (bool, error) {
		for _, r := range d.replicas {
			if !r.running() {
				return false, permanent(fmt.Errorf("%s exited; its log: %s", r.name, r.logPath))
			}
			if !r.ready(ctx) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return err
	}
	d.say("all three ready (member Leases valid) after %.1fs", time.Since(began).Seconds())
	err = poll(ctx, claimWithin, "every project to be claimed", func(ctx context.Context) (bool, error) {
		owners, err := d.owners(ctx)
		if err != nil {
			return false, err
		}
		for _, p := range d.projects {
			if owners[p.name] == "" {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return err
	}
	owners, err := d.owners(ctx)
	if err != nil {
		return err
	}
	for _, p := range d.projects {
		d.say("project %s claimed by %s", p.name, owners[p.name])
	}
	d.say("every project claimed %.1fs after the replicas started (a new coordinator first watches the Leases for one lease duration)", time.Since(began).Seconds())
	return nil
}

// owners maps each project to the pod that holds and has claimed it ("" otherwise).
func (d *demo) owners(ctx context.Context) (map[string]string, error) {
	leases, err := d.leases(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for i := range leases {
		if project := harness.ProjectOf(&leases[i]); project != "" {
			out[project] = shard.PodOf(harness.ClaimedHolder(&leases[i]))
		}
	}
	return out, nil
}

func (d *demo) leases(ctx context.Context) ([]coordinationv1.Lease, error) {
	var list coordinationv1.LeaseList
	if err := d.hub.Client.List(ctx, &list, client.InNamespace(providerNamespace)); err != nil {
		return nil, fmt.Errorf("listing Leases: %w", err)
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	return list.Items, nil
}

// createProxies creates two proxies per project, waits until each is Programmed and
// shows what they produced on the hub.
func (d *demo) createProxies(ctx context.Context) error {
	hosts := map[string][][2]string{
		"acme":    {{"storefront", "shop.example.com"}, {"checkout", "pay.example.com"}},
		"initech": {{"blog", "blog.example.com"}, {"feeds", "feeds.example.com"}},
	}
	for _, p := range d.projects {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: p.namespace}}
		if err := p.plane.Client.Create(ctx, ns); err != nil {
			return fmt.Errorf("creating namespace %s in project %s: %w", p.namespace, p.name, err)
		}
		p.nsUID = ns.UID
		for _, h := range hosts[p.name] {
			px, err := d.createProxy(ctx, p, h[0], h[1])
			if err != nil {
				return err
			}
			d.say("%-8s HTTPProxy %s/%s  %s -> https://backend.%s", p.name, p.namespace, px.name, px.host, px.host)
		}
	}
	began := time.Now()
	for _, px := range d.proxies {
		if err := d.waitProgrammed(ctx, px); err != nil {
			return err
		}
	}
	d.say("all %d Programmed=True %.1fs after the last was created; on the hub:", len(d.proxies), time.Since(began).Seconds())
	return d.showHub(ctx)
}

// createProxy creates a proxy serving host and remembers it.
func (d *demo) createProxy(ctx context.Context, p *project, name, host string) (*proxy, error) {
	obj := &v1alpha.HTTPProxy{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: p.namespace},
		Spec: v1alpha.HTTPProxySpec{
			Hostnames: []gatewayv1.Hostname{gatewayv1.Hostname(host)},
			Rules: []v1alpha.HTTPProxyRule{{
				Matches: []gatewayv1.HTTPRouteMatch{{Path: &gatewayv1.HTTPPathMatch{
					Type: ptr.To(gatewayv1.PathMatchPathPrefix), Value: ptr.To("/"),
				}}},
				Backends: []v1alpha.HTTPProxyBackend{{Endpoint: "https://backend." + host}},
			}},
		},
	}
	if err := p.plane.Client.Create(ctx, obj); err != nil {
		return nil, fmt.Errorf("creating HTTPProxy %s in project %s: %w", name, p.name, err)
	}
	px := &proxy{project: p, name: name, host: host}
	d.proxies = append(d.proxies, px)
	return px, nil
}

// waitProgrammed waits for the proxy's Programmed condition and records the anchors
// of its upstream Gateway and HTTPRoute with what hangs on them.
func (d *demo) waitProgrammed(ctx context.Context, px *proxy) error {
	c := px.project.plane.Client
	key := client.ObjectKey{Namespace: px.project.namespace, Name: px.name}
	return poll(ctx, programmedWithin, px.String()+" to be Programmed", func(ctx context.Context) (bool, error) {
		obj := &v1alpha.HTTPProxy{}
		if err := c.Get(ctx, key, obj); err != nil {
			return false, err
		}
		cond := meta.FindStatusCondition(obj.Status.Conditions, v1alpha.ConditionProgrammed)
		if cond == nil || cond.Status != metav1.ConditionTrue || cond.ObservedGeneration != obj.Generation {
			return false, nil
		}
		gw, route := &gatewayv1.Gateway{}, &gatewayv1.HTTPRoute{}
		if err := c.Get(ctx, key, gw); err != nil {
			return false, err
		}
		if err := c.Get(ctx, key, route); err != nil {
			return false, err
		}
		views, err := anchorsIn(ctx, d.hub.Client, px.project.hubNamespace())
		if err != nil {
			return false, err
		}
		px.anchors = nil
		for _, v := range views {
			if v.anchor.name == anchor.Name(gw.UID) || v.anchor.name == anchor.Name(route.UID) {
				if len(v.dependents) == 0 {
					return false, nil
				}
				px.anchors = append(px.anchors, v)
			}
		}
		return len(px.anchors) == 2, nil
	})
}

// showHub prints every mapped namespace on the hub with its anchors and their
// dependents.
func (d *demo) showHub(ctx context.Context) error {
	namespaces, err := mappedNamespaces(ctx, d.hub.Client)
	if err != nil {
		return err
	}
	for _, ns := range namespaces {
		upstream := "labels: none (an older namespace)"
		if v, ok := ns.Labels[anchor.LabelNamespace]; ok {
			upstream = fmt.Sprintf("mirrors namespace %s of %s", v, ns.Labels[anchor.LabelClusterName])
		}
		d.say("Namespace %s  %s", ns.Name, upstream)
		views, err := anchorsIn(ctx, d.hub.Client, ns.Name)
		if err != nil {
			return err
		}
		for _, v := range views {
			d.say("  ConfigMap %s  anchor of %s", v.anchor.name, v.owner())
			var deps []string
			for _, o := range v.dependents {
				deps = append(deps, o.String())
			}
			d.say("    holds %s", strings.Join(deps, ", "))
		}
	}
	return nil
}

// showLeases prints the Leases as kubectl get leases does, then (with legend, what
// each Lease is and) who owns what.
func (d *demo) showLeases(ctx context.Context, legend bool) error {
	leases, err := d.leases(ctx)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(d.out, 0, 0, 3, ' ', 0)
	fmt.Fprintln(tw, "         NAME\tHOLDER\tAGE")
	for _, l := range leases {
		age := duration.HumanDuration(time.Since(l.CreationTimestamp.Time))
		fmt.Fprintf(tw, "         %s\t%s\t%s\n", l.Name, ptr.Deref(l.Spec.HolderIdentity, ""), age)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if legend {
		d.say("anchorage-member-<pod>: each replica's membership, held as <pod>/<incarnation> and renewed every %s", harness.FastTimings.RetryPeriod)
		d.say("anchorage-coordinator: the elected coordinator, which writes the project Leases")
		d.say("anchorage-project-<name>-<hash>: the project's owner (not renewed: valid while its holder's member Lease is)")
	}
	owners, err := d.owners(ctx)
	if err != nil {
		return err
	}
	for _, p := range d.projects {
		d.say("project %s is owned by %s", p.name, owners[p.name])
	}
	return nil
}

// collectStranded plants stranded anchors in both projects, next to live ones, and
// waits for the resync to collect them and the hub's garbage collector to remove what
// hung on them.
func (d *demo) collectStranded(ctx context.Context) error {
	acme, initech := d.projects[0], d.projects[1]
	d.stranded = []*stranded{
		{project: acme.name, kind: "Gateway", upstreamNamespace: acme.namespace, name: "summer-sale", hostname: "sale.example.com", hubNamespace: acme.hubNamespace()},
		{project: acme.name, kind: "HTTPRoute", upstreamNamespace: "shop-2023", name: "old-cart", legacyLabel: true},
		{project: initech.name, kind: "Gateway", upstreamNamespace: "blog-archive", name: "archive", hostname: "archive.example.com", legacyLabel: true},
		{project: initech.name, kind: "HTTPRoute", upstreamNamespace: initech.namespace, name: "drafts", hubNamespace: initech.hubNamespace()},
	}
	for _, s := range d.stranded {
		if err := s.plant(ctx, d.hub.Client); err != nil {
			return err
		}
		where := "beside the live anchors in " + shortName(s.planted.anchor.namespace)
		if s.hubNamespace == "" {
			where = "in " + shortName(s.planted.anchor.namespace) + ", an unlabelled namespace whose upstream namespace is gone"
		}
		var deps []string
		for _, o := range s.planted.dependents {
			deps = append(deps, o.String())
		}
		d.say("%s  anchor of %s, %s; holds %s", shortName(s.planted.anchor.name), s.planted.owner(), where, strings.Join(deps, ", "))
	}
	d.say("(cluster-_<project> is the legacy label of a project once named with a leading slash)")
	d.say("the replicas resync every %s and collect an anchor once it is older than %s and its owner's absence, proven by a live read, holds again %s later",
		resyncPeriod, resyncMinAge, resyncConfirmAfter)

	began := time.Now()
	gone := map[string]bool{}
	err := poll(ctx, collectWithin, "the resync to collect the stranded anchors", func(ctx context.Context) (bool, error) {
		for _, s := range d.stranded {
			a := s.planted.anchor
			if gone[a.name] {
				continue
			}
			ok, err := a.present(ctx, d.hub.Client)
			if err != nil {
				return false, err
			}
			if !ok {
				gone[a.name] = true
				d.say("%s collected after %.1fs%s", shortName(a.name), time.Since(began).Seconds(), d.collectedBy(a.name))
			}
		}
		return len(gone) == len(d.stranded), nil
	})
	if err != nil {
		return err
	}
	var deps []hubObject
	for _, s := range d.stranded {
		deps = append(deps, s.planted.dependents...)
	}
	err = poll(ctx, gcWithin, "the hub's garbage collector to remove what hung on them", func(ctx context.Context) (bool, error) {
		n, err := countPresent(ctx, d.hub.Client, deps)
		return n == 0, err
	})
	if err != nil {
		return err
	}
	d.say("the hub's garbage collector removed the %d objects that hung on them: %.1fs from planting to a clean hub", len(deps), time.Since(began).Seconds())
	live, kept, err := d.liveCount(ctx)
	if err != nil {
		return err
	}
	d.say("live anchors and their objects untouched: %d of %d still there with the same UIDs", kept, live)
	var counts []string
	for _, r := range d.replicas {
		n, err := r.counter(ctx, `anchorage_resync_collections_total{action="deleted"}`)
		if err != nil {
			return err
		}
		counts = append(counts, fmt.Sprintf("%s %g", r.name, n))
	}
	d.say("anchorage_resync_collections_total{action=\"deleted\"}: %s", strings.Join(counts, ", "))
	return nil
}

// collectedBy says which replica logged the deletion of an anchor, and its proof.
func (d *demo) collectedBy(name string) string {
	l, ok := anchorDeletions(d.replicas)[name]
	switch {
	case !ok:
		return ""
	case l.Proof != "":
		return fmt.Sprintf(" by %s (proof: %s)", l.Replica, l.Proof)
	}
	return " by " + l.Replica
}

// liveCount returns how many hub objects of the live proxies the demo expects, and how
// many are there with the UIDs they had.
func (d *demo) liveCount(ctx context.Context) (int, int, error) {
	var objs []hubObject
	for _, px := range d.proxies {
		objs = append(objs, px.objects()...)
	}
	n, err := countPresent(ctx, d.hub.Client, objs)
	return len(objs), n, err
}

// deleteProxy deletes one proxy and waits until nothing of it is left on the hub.
func (d *demo) deleteProxy(ctx context.Context) error {
	var px *proxy
	for i, p := range d.proxies {
		if p.project == d.projects[0] && p.name == "checkout" {
			px = p
			d.proxies = append(d.proxies[:i:i], d.proxies[i+1:]...)
			break
		}
	}
	if px == nil {
		return errors.New("no proxy checkout in the first project")
	}
	c := px.project.plane.Client
	obj := &v1alpha.HTTPProxy{ObjectMeta: metav1.ObjectMeta{Namespace: px.project.namespace, Name: px.name}}
	began := time.Now()
	if err := c.Delete(ctx, obj); err != nil {
		return fmt.Errorf("deleting %s: %w", px, err)
	}
	d.say("deleted HTTPProxy %s/%s in project %s; its finalizers delete the anchors, the hub's garbage collector the rest", px.project.namespace, px.name, px.project.name)
	var anchors []hubObject
	for _, a := range px.anchors {
		anchors = append(anchors, a.anchor)
	}
	err := poll(ctx, gcWithin, "the proxy's anchors to go", func(ctx context.Context) (bool, error) {
		n, err := countPresent(ctx, d.hub.Client, anchors)
		return n == 0, err
	})
	if err != nil {
		return err
	}
	for _, a := range px.anchors {
		d.say("%s (anchor of %s) gone after %.1fs%s", shortName(a.anchor.name), a.owner(), time.Since(began).Seconds(), d.collectedBy(a.anchor.name))
	}
	err = poll(ctx, gcWithin, "everything of the proxy to leave the hub and the project", func(ctx context.Context) (bool, error) {
		n, err := countPresent(ctx, d.hub.Client, px.objects())
		if err != nil || n > 0 {
			return false, err
		}
		err = c.Get(ctx, client.ObjectKeyFromObject(obj), obj)
		if err != nil && !apierrors.IsNotFound(err) {
			return false, err
		}
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		return err
	}
	d.res.deletedWithProxy = len(anchors)
	d.say("nothing of %s left on the hub (%d objects) nor in the project %.1fs after the delete", px.name, len(px.objects()), time.Since(began).Seconds())
	views, err := anchorsIn(ctx, d.hub.Client, px.project.hubNamespace())
	if err != nil {
		return err
	}
	var left []string
	for _, v := range views {
		left = append(left, v.labels[anchor.LabelKind]+" "+v.labels[anchor.LabelName])
	}
	d.say("%s now holds the anchors of: %s", shortName(px.project.hubNamespace()), strings.Join(left, ", "))
	return nil
}

// killOwner kills the replica that owns the first project, measures how long until
// another replica has claimed each of its projects, and shows the new owner at work.
func (d *demo) killOwner(ctx context.Context) error {
	owners, err := d.owners(ctx)
	if err != nil {
		return err
	}
	first := d.projects[0]
	victim := d.replica(owners[first.name])
	if victim == nil {
		return fmt.Errorf("project %s has no live owner to kill (owners: %v)", first.name, owners)
	}
	var held []string
	for _, p := range d.projects {
		if owners[p.name] == victim.name {
			held = append(held, p.name)
		}
	}
	began := time.Now()
	if err := victim.kill(); err != nil {
		return err
	}
	d.res.killed = victim.name
	d.say("killed %s (pid %d), owner of %s", victim.name, victim.proc.Pid(), strings.Join(held, " and "))
	moved := map[string]bool{}
	err = poll(ctx, handoverWithin, "another replica to take over", func(ctx context.Context) (bool, error) {
		owners, err := d.owners(ctx)
		if err != nil {
			return false, err
		}
		for _, p := range held {
			if moved[p] || owners[p] == "" || owners[p] == victim.name {
				continue
			}
			moved[p] = true
			took := time.Since(began)
			d.res.handover = max(d.res.handover, took)
			d.res.handovers = append(d.res.handovers, fmt.Sprintf("%s %s -> %s in %.2fs", p, victim.name, owners[p], took.Seconds()))
			d.say("project %s claimed by %s %.2fs after the kill", p, owners[p], took.Seconds())
		}
		return len(moved) == len(held), nil
	})
	if err != nil {
		return err
	}
	d.say("(expected: about one lease duration, %s, plus a retry period or two; up to about 1.6 durations when the killed replica was the coordinator)", harness.FastTimings.LeaseDuration)
	px, err := d.createProxy(ctx, first, "status", "status.example.com")
	if err != nil {
		return err
	}
	created := time.Now()
	if err := d.waitProgrammed(ctx, px); err != nil {
		return err
	}
	d.say("the new owner programmed HTTPProxy %s/%s, created after the kill, in %.1fs", first.namespace, px.name, time.Since(created).Seconds())
	return d.showLeases(ctx, false)
}

// replica returns the replica named name, nil if none.
func (d *demo) replica(name string) *replica {
	for _, r := range d.replicas {
		if r.name == name {
			return r
		}
	}
	return nil
}

// check reads the final state of the hub: stranded anchors left, live objects lost.
func (d *demo) check(ctx context.Context) error {
	var stranded []hubObject
	for _, s := range d.stranded {
		if s.planted.anchor.name != "" {
			stranded = append(stranded, s.planted.anchor)
		}
	}
	left, err := countPresent(ctx, d.hub.Client, stranded)
	if err != nil {
		return err
	}
	live, kept, err := d.liveCount(ctx)
	if err != nil {
		return err
	}
	if d.res.owners, err = d.owners(ctx); err != nil {
		return err
	}
	d.res.strandedLeft, d.res.collected = left, len(stranded)-left
	d.res.liveLost, d.res.liveKept = live-kept, kept
	d.res.checked = true
	return nil
}

// stopAll stops the replicas, then the control planes, and narrates on w.
func (d *demo) stopAll(w io.Writer) {
	var running []string
	for _, r := range d.replicas {
		if r.running() {
			running = append(running, r.name)
		}
	}
	planes := 0
	if d.hub != nil {
		planes++
	}
	planes += len(d.projects)
	fmt.Fprintf(w, "\n%s Stopping %d replicas (%s) and %d control planes\n", d.elapsed(), len(running), strings.Join(running, ", "), planes)
	for _, r := range d.replicas {
		r.stop(15 * time.Second)
	}
	for _, p := range d.projects {
		_ = p.plane.Stop()
	}
	if d.hub != nil {
		_ = d.hub.Stop()
	}
}

// explore prints how to look around while --keep holds everything up.
func (d *demo) explore() {
	fmt.Fprintf(d.out, "\n%s Everything keeps running until you interrupt the demo (Ctrl-C). To look around:\n", d.elapsed())
	d.say("export KUBECONFIG=%s   # the hub", d.hubKubeconfig)
	d.say("kubectl get leases -n %s", providerNamespace)
	d.say("kubectl get namespaces,configmaps,gateways,httproutes,certificates -A -l %s", anchor.LabelClusterName)
	for _, p := range d.projects {
		d.say("kubectl --kubeconfig=%s get httpproxies,gateways,httproutes -n %s   # project %s", p.kubeconfig, p.namespace, p.name)
	}
	for _, r := range d.replicas {
		if r.running() {
			d.say("%s: metrics http://%s/metrics, log %s", r.name, r.metrics, r.logPath)
		}
	}
}

// summary prints the outcome; its last line is machine-readable.
func (d *demo) summary() {
	r := d.res
	fmt.Fprintf(d.out, "\n%s Summary\n", d.elapsed())
	var owned []string
	for _, p := range d.projects {
		if o := r.owners[p.name]; o != "" {
			owned = append(owned, p.name+" owned by "+o)
		} else {
			owned = append(owned, p.name+" unowned")
		}
	}
	d.say("projects   %d: %s", r.projects, strings.Join(owned, ", "))
	killed := "none killed"
	if r.killed != "" {
		killed = r.killed + " killed"
	}
	d.say("replicas   %d started, %s", r.replicas, killed)
	d.say("anchors    live: %d objects kept, %d lost; stranded: %d collected, %d left; %d deleted with their proxy",
		r.liveKept, r.liveLost, r.collected, r.strandedLeft, r.deletedWithProxy)
	if len(r.handovers) == 0 {
		d.say("hand-over  none measured")
	}
	for _, h := range r.handovers {
		d.say("hand-over  %s", h)
	}
	fmt.Fprintf(d.out, "summary: projects=%d replicas=%d stranded_left=%d live_lost=%d handover_s=%.2f\n",
		r.projects, r.replicas, r.strandedLeft, r.liveLost, r.handover.Seconds())
}

// permanentError ends a poll at once.
type permanentError struct{ error }

func (e permanentError) Unwrap() error { return e.error }

// permanent marks an error that no amount of waiting repairs.
func permanent(err error) error { return permanentError{err} }

// poll calls cond until it reports done, returns a permanent error, or within passes.
// Other errors are retried: the API servers of a busy machine may answer slowly.
func poll(ctx context.Context, within time.Duration, what string, cond func(context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	var last error
	for {
		done, err := cond(ctx)
		if err == nil && done {
			return nil
		}
		var p permanentError
		if errors.As(err, &p) {
			return fmt.Errorf("waiting for %s: %w", what, p.error)
		}
		if err != nil {
			last = err
		}
		select {
		case <-ctx.Done():
			if last != nil {
				return fmt.Errorf("waiting for %s: %w (last error: %w)", what, ctx.Err(), last)
			}
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-time.After(pollEvery):
		}
	}
}
