// Package harness is the envtest harness, a library rather than a test package so that
// test/integration, cmd/demo, bench and the config tests start environments the same
// way: control planes with audit logs (and, on request, the hub's garbage collector),
// the CRDs each plane serves, a TCP proxy that cuts a project off, and anchorage
// managers in one process with the faults the tests need (abrupt stops, failing or
// slow API calls). It also holds the judgements several of them share: who has claimed
// a project (ClaimedHolder), the fast protocol timings (FastTimings) and overlapping
// work (Overlaps).
//
// Real planes versus lightweight projects: a test of the gateway data path needs one
// ControlPlane per project (AddProject), because anchors are keyed by upstream UIDs and
// hub namespaces by upstream Namespace UIDs. Tests that only exercise ownership at scale
// (dozens to a thousand projects) may use AddLightweightProjects: several Secrets
// pointing at one shared API server. Those projects share every object, cluster-scoped
// ones and Namespace UIDs included, so they are NOT valid for the gateway data path.
package harness

import (
	"context"
	"fmt"
	"net/url"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/multicluster-runtime/providers/kubeconfig"

	"anchorage/pkg/shard"
)

// DefaultProviderNamespace is the hub namespace holding project kubeconfig Secrets and
// Leases in tests.
const DefaultProviderNamespace = "anchorage-system"

// Env is one hub with the projects exposed to managers through kubeconfig Secrets.
type Env struct {
	Hub               *ControlPlane
	ProviderNamespace string

	mu       sync.Mutex
	projects map[string]*Project
	// bound holds the planes on which ProjectUser is bound to the plane's role already.
	bound map[*ControlPlane]bool
}

// Project is a project exposed to managers: its control plane, reached through a
// TCPProxy the test can cut.
type Project struct {
	Name  string
	Plane *ControlPlane
	Proxy *TCPProxy
}

// NewEnv wraps a running hub and creates the provider namespace.
func NewEnv(ctx context.Context, hub *ControlPlane) (*Env, error) {
	e := &Env{Hub: hub, ProviderNamespace: DefaultProviderNamespace, projects: map[string]*Project{}, bound: map[*ControlPlane]bool{}}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.ProviderNamespace}}
	if err := hub.Client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("creating provider namespace: %w", err)
	}
	return e, nil
}

// AddProject exposes plane as project name: a TCPProxy in front of its API server and
// a kubeconfig Secret on the hub pointing through the proxy.
func (e *Env) AddProject(ctx context.Context, name string, plane *ControlPlane) (*Project, error) {
	u, err := url.Parse(plane.Config.Host)
	if err != nil {
		return nil, err
	}
	proxy, err := NewTCPProxy(u.Host)
	if err != nil {
		return nil, err
	}
	p := &Project{Name: name, Plane: plane, Proxy: proxy}
	if err := e.writeSecret(ctx, name, plane, proxy.Addr(), nil); err != nil {
		_ = proxy.Close()
		return nil, err
	}
	e.mu.Lock()
	e.projects[name] = p
	e.mu.Unlock()
	return p, nil
}

// AddLightweightProjects exposes one shared plane under several project names, for
// ownership tests at scale only (see the package comment).
func (e *Env) AddLightweightProjects(ctx context.Context, plane *ControlPlane, names ...string) error {
	for _, n := range names {
		if err := e.writeSecret(ctx, n, plane, "", nil); err != nil {
			return err
		}
	}
	return nil
}

// AddSecretNaming writes a project Secret called secretName whose annotation names the
// project (for project names a Secret name cannot hold, or to test duplicates).
func (e *Env) AddSecretNaming(ctx context.Context, secretName, project string, plane *ControlPlane) error {
	return e.writeSecret(ctx, secretName, plane, "", map[string]string{shard.AnnotationProject: project})
}

// RepointProject rewrites the kubeconfig in project name's Secret to reach plane via
// addr ("" for its API server directly), as an operator rotating credentials or moving
// a plane would: the provider engages the project again with the new config.
func (e *Env) RepointProject(ctx context.Context, name string, plane *ControlPlane, via string) error {
	cfg, _, err := plane.User(ProjectUser)
	if err != nil {
		return err
	}
	kc, err := KubeconfigVia(cfg, via)
	if err != nil {
		return err
	}
	s := &corev1.Secret{}
	if err := e.Hub.Client.Get(ctx, client.ObjectKey{Namespace: e.ProviderNamespace, Name: name}, s); err != nil {
		return fmt.Errorf("reading project Secret %s: %w", name, err)
	}
	s.Data[kubeconfig.DefaultKubeconfigSecretKey] = kc
	if err := e.Hub.Client.Update(ctx, s); err != nil {
		return fmt.Errorf("updating project Secret %s: %w", name, err)
	}
	return nil
}

// RemoveProject deletes the project's Secret (and closes its proxy, if any).
func (e *Env) RemoveProject(ctx context.Context, name string) error {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ProviderNamespace}}
	if err := e.Hub.Client.Delete(ctx, s); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting project Secret %s: %w", name, err)
	}
	e.mu.Lock()
	p := e.projects[name]
	delete(e.projects, name)
	e.mu.Unlock()
	if p != nil {
		return p.Proxy.Close()
	}
	return nil
}

// Project returns the project AddProject exposed as name, nil when there is none (a
// lightweight project has no Project: it has no plane or proxy of its own).
func (e *Env) Project(name string) *Project {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.projects[name]
}

// Close closes every project proxy.
func (e *Env) Close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, p := range e.projects {
		_ = p.Proxy.Close()
	}
}

func (e *Env) writeSecret(ctx context.Context, name string, plane *ControlPlane, via string, annotations map[string]string) error {
	// The project's kubeconfig user is the manager's identity on that plane, bound only
	// to the plane's role, as an operator binds it (docs/operations.md).
	cfg, _, err := plane.User(ProjectUser)
	if err != nil {
		return err
	}
	e.mu.Lock()
	bound := e.bound[plane]
	e.mu.Unlock()
	if !bound {
		if err := BindProjectRole(ctx, plane, ProjectUser); err != nil {
			return err
		}
		e.mu.Lock()
		e.bound[plane] = true
		e.mu.Unlock()
	}
	kc, err := KubeconfigVia(cfg, via)
	if err != nil {
		return err
	}
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: e.ProviderNamespace, Annotations: annotations,
			Labels: map[string]string{kubeconfig.DefaultKubeconfigSecretLabel: "true"},
		},
		Data: map[string][]byte{kubeconfig.DefaultKubeconfigSecretKey: kc},
	}
	if err := e.Hub.Client.Create(ctx, s); err != nil {
		return fmt.Errorf("creating project Secret %s: %w", name, err)
	}
	return nil
}

// Client returns an admin client for a project's plane (direct, not through the
// proxy, so a test can arrange state while the project is cut off).
func (p *Project) Client() client.Client { return p.Plane.Client }
