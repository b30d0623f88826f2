package gateway

import (
	"context"
	"errors"
	"fmt"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"
)

// Clusters is the only way a reconciler reaches a project plane or the hub. The shard
// implements it to refuse projects this replica does not hold.
type Clusters interface {
	// Project returns the project's cluster; an error wrapping
	// multicluster.ErrClusterNotFound when this replica may not work on it.
	Project(ctx context.Context, project string) (cluster.Cluster, error)
	// Hub returns the client for hub writes made on behalf of project, and an uncached
	// reader of the hub.
	Hub(ctx context.Context, project string) (client.Client, client.Reader, error)
}

// Admission is entered around each reconcile for a project (docs/design.md, Per-project
// admission): a context bounded by validity and a release func, or a refusal (wrapping
// multicluster.ErrClusterNotFound: dropped; with RetryAfter() time.Duration: retried then).
type Admission interface {
	Enter(ctx context.Context, project string) (context.Context, func(), error)
}

// ManagerClusters returns the Clusters of a multicluster manager without sharding: the
// provider's clusters, and the local cluster as the hub.
func ManagerClusters(mgr mcmanager.Manager) Clusters {
	return managerClusters{mgr: mgr}
}

type managerClusters struct{ mgr mcmanager.Manager }

func (m managerClusters) Project(ctx context.Context, project string) (cluster.Cluster, error) {
	// The empty name is the local cluster, the hub: never a project.
	if project == "" {
		return nil, fmt.Errorf("empty project name: %w", multicluster.ErrClusterNotFound)
	}
	return m.mgr.GetCluster(ctx, multicluster.ClusterName(project))
}

func (m managerClusters) Hub(context.Context, string) (client.Client, client.Reader, error) {
	local := m.mgr.GetLocalManager()
	return local.GetClient(), local.GetAPIReader(), nil
}

// OpenAdmission admits every project: the behaviour of a single replica.
type OpenAdmission struct{}

// Enter admits project at once; release does nothing.
func (OpenAdmission) Enter(ctx context.Context, _ string) (context.Context, func(), error) {
	return ctx, func() {}, nil
}

// liveClient reads through an uncached reader and writes through a client: hub decisions
// are made on live reads, and no informer starts over hub ConfigMaps or Namespaces.
type liveClient struct {
	client.Client
	reader client.Reader
}

func (l liveClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return l.reader.Get(ctx, key, obj, opts...)
}

func (l liveClient) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return l.reader.List(ctx, list, opts...)
}

// hubFor returns the live hub client for writes on behalf of project.
func hubFor(ctx context.Context, clusters Clusters, project string) (client.Client, error) {
	w, r, err := clusters.Hub(ctx, project)
	if err != nil {
		return nil, fmt.Errorf("reaching the hub for project %q: %w", project, err)
	}
	return liveClient{Client: w, reader: r}, nil
}

// phase is one step of a reconcile over scope S; done ends the reconcile.
type phase[S any] func(ctx context.Context, s *S) (done bool, err error)

// reconcileSteps is one reconcile over scope S, as a list of phases.
type reconcileSteps[S any] struct {
	// load reads the scope; a nil scope means there is nothing to do.
	load func(context.Context, mcreconcile.Request) (*S, error)
	// phases run in order until one is done or fails.
	phases []phase[S]
	// finish, when set, runs after the phases however they ended (not on a panic). It
	// sees their error and returns the result of a reconcile without error; its own
	// error is joined with theirs.
	finish func(ctx context.Context, s *S, phasesErr error) (reconcile.Result, error)
}

// admitAndRun is every reconciler: it enters the project's admission (docs/design.md,
// The gate covers every path), loads the scope, runs the phases and the finish step.
func admitAndRun[S any](ctx context.Context, adm Admission, req mcreconcile.Request, steps reconcileSteps[S]) (reconcile.Result, error) {
	admitted, release, err := adm.Enter(ctx, string(req.ClusterName))
	if err != nil { // refused (see Admission)
		var retry interface{ RetryAfter() time.Duration }
		if errors.As(err, &retry) {
			return reconcile.Result{RequeueAfter: retry.RetryAfter()}, nil
		}
		return reconcile.Result{}, quietIfNotHeld(ctx, err)
	}
	defer release()
	s, err := steps.load(admitted, req)
	if s == nil || err != nil {
		return reconcile.Result{}, quietIfNotHeld(admitted, err)
	}
	for _, p := range steps.phases {
		var done bool
		if done, err = p(admitted, s); done || err != nil {
			break
		}
	}
	if steps.finish == nil {
		return reconcile.Result{}, err
	}
	result, finishErr := steps.finish(admitted, s, err)
	if finishErr != nil {
		err = errors.Join(err, finishErr)
	}
	if err != nil {
		return reconcile.Result{}, err
	}
	return result, nil
}

// quietIfNotHeld drops the error of a request for a project this replica does not
// hold: not a failure, and a retry would only spin.
func quietIfNotHeld(ctx context.Context, err error) error {
	if errors.Is(err, multicluster.ErrClusterNotFound) {
		logf.FromContext(ctx).V(4).Info("Dropping request for a project this replica does not hold", "reason", err.Error())
		return nil
	}
	return err
}
