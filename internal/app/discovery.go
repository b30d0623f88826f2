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

// errDiscoveryOnly is what a discovery-only cluster answers to any use but its config.
var errDiscoveryOnly = errors.New("a discovery-only project cluster serves no reads: use the shard's cluster of a held project")

// discoveryOnlyHTTPClient refuses every request.
var discoveryOnlyHTTPClient = &http.Client{Transport: refusingTransport{}}

type refusingTransport struct{}

func (refusingTransport) RoundTrip(*http.Request) (*http.Response, error) {
	return nil, errDiscoveryOnly
}

// DiscoveryOnlyClusterOption makes the kubeconfig provider's clusters carry only their REST
// config (Shard.Engage builds a held project's from it): a refusing HTTP client, an empty
// mapper and a cache with no informers, all shared. Applied last, it overrides the others.
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

func (discoveryOnlyCache) Start(context.Context) error { return nil }

func (discoveryOnlyCache) WaitForCacheSync(context.Context) bool { return true }

func (discoveryOnlyCache) IndexField(context.Context, client.Object, string, client.IndexerFunc) error {
	return nil
}
