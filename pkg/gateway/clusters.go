package gateway

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
)

// Clusters is the only way a reconciler reaches a project plane or the hub. The
// sharding layer implements it to refuse projects this replica does not hold; the
// default (ManagerClusters) refuses nothing.
type Clusters interface {
	// Project returns the project's cluster; an error wrapping
	// multicluster.ErrClusterNotFound when this replica may not work on it.
	Project(ctx context.Context, project string) (cluster.Cluster, error)
	// Hub returns the client for hub writes made on behalf of project, and an uncached
	// reader of the hub.
	Hub(ctx context.Context, project string) (client.Client, client.Reader, error)
}

// Admission is entered around each reconcile for a project. It may refuse (an error
// wrapping multicluster.ErrClusterNotFound: the request then ends quietly; an error with
// a RetryAfter() time.Duration method: the request is retried after that delay, without
// the controller's backoff; any other error: retried with backoff); otherwise
// it returns a context bounded by the replica's validity and a release func that the
// caller runs when the reconcile is over, so a hand-over can wait for in-flight work.
type Admission interface {
	Enter(ctx context.Context, project string) (context.Context, func(), error)
}

// ManagerClusters returns the Clusters of a multicluster manager without sharding:
// project clusters come from the manager's provider, the hub is the manager's local
// cluster.
func ManagerClusters(mgr mcmanager.Manager) Clusters {
	return managerClusters{mgr: mgr}
}

type managerClusters struct{ mgr mcmanager.Manager }

func (m managerClusters) Project(ctx context.Context, project string) (cluster.Cluster, error) {
	// The empty name is the manager's local cluster, the hub: never a project.
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

// liveClient reads through an uncached reader and writes through a client. Every hub
// decision in this package is made on what the hub holds now: the anchor package needs
// an uncached client, and reading hub ConfigMaps or Namespaces through the manager's
// cache would start informers over every ConfigMap and Namespace on the hub.
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
