package gateway

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
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

// Admission is entered around each reconcile for a project (docs/design.md,
// Per-project admission). It returns a context bounded by the replica's validity and a
// release func to run when the reconcile is over; or a refusal: an error wrapping
// multicluster.ErrClusterNotFound ends the request quietly, one with a RetryAfter()
// time.Duration method retries after that delay, any other retries with backoff.
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

// liveClient reads through an uncached reader and writes through a client: every hub
// decision is made on a live read, and a cached read of hub ConfigMaps or Namespaces
// would start informers over all of them.
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
