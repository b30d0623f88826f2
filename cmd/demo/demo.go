// The demo's state and its run: the story's steps in order, then the check, the teardown and the summary.

package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"anchorage/internal/harness"
	"anchorage/pkg/anchor"
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
	// domainVerified and hostnameRefused narrate the verified-domain steps.
	domainVerified, hostnameRefused string
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
	edge          *harness.Edge
	stopEdge      func()
	// dns is the tenants' nameserver the replicas verify Domains through.
	dns *dnsServer
	// session runs the platform's parts (platform.go); zone is its DNS server.
	session *harness.Session
	zone    *harness.DNSServer
	// acmeRecord is the TXT record acme published to verify its domain.
	acmeRecord string
	// refused is initech's proxy for a hostname under acme's domain, never programmed.
	refused *proxy
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

func (d *demo) story(ctx context.Context) error {
	fmt.Fprintf(d.out, "anchorage demo: a hub, two project control planes and three replicas of %s, on this machine\n", d.cfg.manager)
	steps := []struct {
		title string
		run   func(context.Context) error
	}{
		{"Starting the hub (with its garbage collector) and two project control planes", d.startPlanes},
		{"Installing the manager's namespace and RBAC on the hub, and registering the projects", d.registerProjects},
		{"Starting the platform's parts: cert-manager, the platform's DNS and external-dns", d.startPlatform},
		{"Starting the tenants' DNS: a nameserver on loopback for their domains", d.startDNSStep},
		{"Starting three replicas of the manager, each its own process", d.startReplicas},
		{"Verifying a domain: acme's first proxy waits until acme proves it owns " + acmeDomain, d.verifyDomain},
		{"Refusing an unverified hostname: initech asks for a hostname under " + acmeDomain, d.refuseUnverified},
		{"Creating the other HTTPProxies in each project", d.createProxies},
		{"Serving a request through a proxy", d.serveRequest},
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
	if d.stopEdge != nil {
		d.stopEdge()
	}
	for _, r := range d.replicas {
		r.stop(15 * time.Second)
	}
	if d.dns != nil {
		d.dns.stop()
	}
	if d.session != nil {
		d.session.Close(false)
	}
	for _, p := range d.projects {
		_ = p.plane.Stop()
	}
	if d.hub != nil {
		// The hub's audit log (every Secret request, reads included) outlives the hub in
		// the demo's folder: the demo's test reads from it who read which Secrets.
		if data, err := os.ReadFile(d.hub.AuditLogPath); err == nil {
			_ = os.WriteFile(filepath.Join(d.dir, hubAuditLog), data, 0o600)
		}
		_ = d.hub.Stop()
	}
}

// hubAuditLog is the name of the copy of the hub's audit log in the demo's folder.
const hubAuditLog = "hub-audit.log"
