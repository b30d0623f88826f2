package app

import (
	"context"
	"errors"
	"net/http"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
)

// The kubeconfig provider builds and starts a cluster for every project Secret it sees,
// held here or not; the shard takes only its REST config (Shard.Engage) and builds the
// cluster it works with when, and only if, this replica holds the project. The
// provider's clusters are therefore discovery-only: no HTTP client of their own, no
// REST mapper, no cache. A replica sees every project of the fleet, so what one of
// these costs is paid per project, not per held project.

// errDiscoveryOnly is what a discovery-only cluster answers to any use but its config.
var errDiscoveryOnly = errors.New("a discovery-only project cluster serves no reads: use the shard's cluster of a held project")

// discoveryOnlyHTTPClient refuses every request; it stands in for the HTTP client the
// cluster would otherwise build (and keep) per project.
var discoveryOnlyHTTPClient = &http.Client{Transport: refusingTransport{}}

type refusingTransport struct{}

func (refusingTransport) RoundTrip(*http.Request) (*http.Response, error) {
	return nil, errDiscoveryOnly
}

// DiscoveryOnlyClusterOption makes the clusters the kubeconfig provider builds carry
// only their REST config: a refusing HTTP client and an empty REST mapper shared by all
// of them, and a cache that holds nothing and starts no informer. Applied last, it
// overrides whatever cache, mapper or HTTP client earlier options set.
func DiscoveryOnlyClusterOption() cluster.Option {
	return func(o *cluster.Options) {
		o.HTTPClient = discoveryOnlyHTTPClient
		o.MapperProvider = func(*rest.Config, *http.Client) (meta.RESTMapper, error) { return emptyMapper, nil }
		o.NewCache = func(*rest.Config, cache.Options) (cache.Cache, error) { return discoveryOnlyCache{}, nil }
	}
}

var emptyMapper = meta.NewDefaultRESTMapper(nil)

// discoveryOnlyCache is the cache of a discovery-only cluster: synced from the start,
// it serves nothing.
type discoveryOnlyCache struct{}

var _ cache.Cache = discoveryOnlyCache{}

func (discoveryOnlyCache) Get(context.Context, client.ObjectKey, client.Object, ...client.GetOption) error {
	return errDiscoveryOnly
}

func (discoveryOnlyCache) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return errDiscoveryOnly
}

func (discoveryOnlyCache) GetInformer(context.Context, client.Object, ...cache.InformerGetOption) (cache.Informer, error) {
	return nil, errDiscoveryOnly
}

func (discoveryOnlyCache) GetInformerForKind(context.Context, schema.GroupVersionKind, ...cache.InformerGetOption) (cache.Informer, error) {
	return nil, errDiscoveryOnly
}

func (discoveryOnlyCache) RemoveInformer(context.Context, client.Object) error { return nil }

// Start returns at once: there is nothing to run, and no goroutine per discovered
// project waits in it (the provider starts every cluster in a goroutine of its own).
func (discoveryOnlyCache) Start(context.Context) error { return nil }

func (discoveryOnlyCache) WaitForCacheSync(context.Context) bool { return true }

// IndexField accepts and drops the index: nothing is ever cached here to index.
func (discoveryOnlyCache) IndexField(context.Context, client.Object, string, client.IndexerFunc) error {
	return nil
}
