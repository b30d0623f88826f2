package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/multicluster-runtime/providers/kubeconfig"

	"anchorage/internal/harness"
	"anchorage/internal/testenv"
)

// Env is the control planes every run of one harness invocation shares: a hub with its
// garbage collector and RealPlanes project planes. Runs do not share anything else:
// each has its own hub namespace (Secrets and Leases), its own project names, its own
// upstream namespaces and its own replica users, so audit events and records of one
// run never mix with another's.
type Env struct {
	Hub    *harness.ControlPlane
	Planes []*harness.ControlPlane
	// Light is the plane every lightweight project names: it never carries load, so
	// what a replica caches per lightweight project is the same in every run.
	Light *harness.ControlPlane
	Dir   string
	// projectKubeconfig is one admin kubeconfig per plane, reused by every run.
	projectKubeconfig [][]byte
	lightKubeconfig   []byte
	runs              int
}

// StartEnv starts the hub and n project planes, and the lightweight projects' plane
// when light.
func StartEnv(n int, light bool, dir string) (*Env, error) {
	hubCRDs, err := testenv.HubCRDs()
	if err != nil {
		return nil, err
	}
	projectCRDs, err := testenv.ProjectCRDs()
	if err != nil {
		return nil, err
	}
	e := &Env{Dir: dir}
	if e.Hub, err = harness.StartControlPlane("bench-hub", harness.PlaneOptions{CRDs: hubCRDs, GarbageCollector: true, Lean: true}); err != nil {
		return nil, err
	}
	for i := 0; i < n; i++ {
		p, kc, err := startProjectPlane("bench-project-"+strconv.Itoa(i), projectCRDs, true)
		if err != nil {
			e.Stop()
			return nil, err
		}
		e.Planes = append(e.Planes, p)
		e.projectKubeconfig = append(e.projectKubeconfig, kc)
	}
	if light {
		if e.Light, e.lightKubeconfig, err = startProjectPlane("bench-light", projectCRDs, false); err != nil {
			e.Stop()
			return nil, err
		}
	}
	return e, nil
}

// startProjectPlane starts a project plane and returns an admin kubeconfig for it. A
// scenario's planes audit the proxies' reads (auditProxyReads): a hub create for a proxy
// is judged against the live guard's read it followed (CreatesAfterDeletion).
func startProjectPlane(name string, crds []*apiextensionsv1.CustomResourceDefinition, auditProxyReads bool) (*harness.ControlPlane, []byte, error) {
	p, err := harness.StartControlPlane(name, harness.PlaneOptions{CRDs: crds, AuditProxyReads: auditProxyReads, Lean: true})
	if err != nil {
		return nil, nil, err
	}
	cfg, _, err := p.User("anchorage-project", "system:masters")
	if err != nil {
		return p, nil, errors.Join(err, p.Stop())
	}
	kc, err := harness.KubeconfigVia(cfg, "")
	if err != nil {
		return p, nil, errors.Join(err, p.Stop())
	}
	return p, kc, nil
}

// Stop stops every plane.
func (e *Env) Stop() {
	var errs []error
	for _, p := range append(e.Planes, e.Light) {
		if p != nil {
			errs = append(errs, p.Stop())
		}
	}
	if e.Hub != nil {
		errs = append(errs, e.Hub.Stop())
	}
	if err := errors.Join(errs...); err != nil {
		fmt.Fprintf(os.Stderr, "bench: stopping planes: %v\n", err)
	}
}

// Run is one run's slice of the environment.
type Run struct {
	Env *Env
	// ID is unique per harness invocation, e.g. "r3"; Namespace is the run's hub
	// namespace for project Secrets and every Lease.
	ID, Namespace string
	Dir           string
}

// NewRun creates the run's hub namespace and directory.
func (e *Env) NewRun(ctx context.Context, label string) (*Run, error) {
	e.runs++
	r := &Run{Env: e, ID: fmt.Sprintf("r%d", e.runs)}
	r.Namespace = "bench-" + r.ID
	r.Dir = filepath.Join(e.Dir, r.ID+"-"+label)
	if err := os.MkdirAll(r.Dir, 0o755); err != nil {
		return nil, err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: r.Namespace}}
	if err := e.Hub.Client.Create(ctx, ns); err != nil {
		return nil, fmt.Errorf("creating run namespace: %w", err)
	}
	return r, nil
}

// AddProject writes the kubeconfig Secret exposing plane i as project name.
func (r *Run) AddProject(ctx context.Context, name string, plane int) error {
	return r.addSecret(ctx, name, r.Env.projectKubeconfig[plane])
}

// AddLightweightProject writes a kubeconfig Secret naming the shared light plane.
func (r *Run) AddLightweightProject(ctx context.Context, name string) error {
	if r.Env.Light == nil {
		return errors.New("the environment has no plane for lightweight projects")
	}
	return r.addSecret(ctx, name, r.Env.lightKubeconfig)
}

func (r *Run) addSecret(ctx context.Context, name string, kubeconfigBytes []byte) error {
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: r.Namespace,
			Labels: map[string]string{kubeconfig.DefaultKubeconfigSecretLabel: "true"},
		},
		Data: map[string][]byte{kubeconfig.DefaultKubeconfigSecretKey: kubeconfigBytes},
	}
	if err := r.Env.Hub.Client.Create(ctx, s); err != nil {
		return fmt.Errorf("creating project Secret %s: %w", name, err)
	}
	return nil
}

// ReplicaKubeconfig creates the replica's own hub user (in system:masters: the
// baseline's Leases live where the product's RBAC does not reach) and writes its
// kubeconfig; the user name is what the hub's audit log attributes writes to. With
// proxy, the kubeconfig reaches the hub through a new fault proxy (returned), which
// forwards as that user.
func (r *Run) ReplicaKubeconfig(replica string, proxy bool) (path, user string, fp *harness.FaultProxy, err error) {
	user = "bench:" + replica
	cfg, _, err := r.Env.Hub.User(user, "system:masters")
	if err != nil {
		return "", "", nil, err
	}
	var kc []byte
	if proxy {
		if fp, err = harness.NewFaultProxy(cfg, uint64(len(r.ID))); err != nil {
			return "", "", nil, err
		}
		kc, err = fp.Kubeconfig()
	} else {
		kc, err = harness.KubeconfigVia(cfg, "")
	}
	if err != nil {
		return "", "", nil, err
	}
	path = filepath.Join(r.Dir, replica+".kubeconfig")
	return path, user, fp, os.WriteFile(path, kc, 0o600)
}

// CreateUpstreamNamespace creates the load's namespace in plane i and returns its UID.
func (r *Run) CreateUpstreamNamespace(ctx context.Context, plane int, name string) (types.UID, error) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := r.Env.Planes[plane].Client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", err
	}
	return ns.UID, nil
}

// Close deletes the run's hub namespace.
func (r *Run) Close(ctx context.Context) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: r.Namespace}}
	if err := r.Env.Hub.Client.Delete(ctx, ns); err != nil && !apierrors.IsNotFound(err) {
		fmt.Fprintf(os.Stderr, "bench: deleting %s: %v\n", r.Namespace, err)
	}
}
