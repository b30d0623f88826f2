package app

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// NewKindMapper returns a REST mapper that asks the server about each kind it maps, one
// group version at a time, and keeps those; a kind not served is asked again next time.
// Methods other than RESTMapping(s), unused on a project, go to a dynamic mapper built lazily.
func NewKindMapper(cfg *rest.Config, httpClient *http.Client) (meta.RESTMapper, error) {
	dc, err := discovery.NewDiscoveryClientForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	return &kindMapper{
		RESTMapper: meta.NewLazyRESTMapperLoader(func() (meta.RESTMapper, error) { return apiutil.NewDynamicRESTMapper(cfg, httpClient) }),
		discovery:  dc,
		mappings:   map[schema.GroupVersionKind]*meta.RESTMapping{},
	}, nil
}

// kindMapper is NewKindMapper's mapper; mappings holds those it has found.
type kindMapper struct {
	meta.RESTMapper
	discovery *discovery.DiscoveryClient

	mu       sync.RWMutex
	mappings map[schema.GroupVersionKind]*meta.RESTMapping
}

// RESTMapping returns the mapping of gk in the first of versions the server serves it
// in; with no versions, in the first of the group's versions that serves it, the
// preferred one first, as the dynamic mapper does. A kind need not be served in its
// group's preferred version: the previous manager's planes serve HTTPProxy in v1alpha
// and its Connectors in v1alpha1, which the server prefers (kube-like versions sort
// first), and an anchor records no version.
func (m *kindMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	// An empty version is no version given; versions is the caller's, so it is cloned.
	versions = slices.DeleteFunc(slices.Clone(versions), func(v string) bool { return v == "" })
	if len(versions) == 0 {
		served, err := m.groupVersions(gk)
		if err != nil {
			return nil, err
		}
		versions = served
	}
	for _, v := range versions {
		mapping, err := m.mappingIn(gk.WithVersion(v))
		if err != nil {
			return nil, err
		}
		if mapping != nil {
			return mapping, nil
		}
	}
	return nil, &meta.NoKindMatchError{GroupKind: gk, SearchedVersions: versions}
}

// RESTMappings returns the mapping RESTMapping finds, as a list.
func (m *kindMapper) RESTMappings(gk schema.GroupKind, versions ...string) ([]*meta.RESTMapping, error) {
	mapping, err := m.RESTMapping(gk, versions...)
	if err != nil {
		return nil, err
	}
	return []*meta.RESTMapping{mapping}, nil
}

// mappingIn returns gvk's mapping, asking the server once for a kind not known yet;
// nil when the server does not serve it.
func (m *kindMapper) mappingIn(gvk schema.GroupVersionKind) (*meta.RESTMapping, error) {
	m.mu.RLock()
	mapping := m.mappings[gvk]
	m.mu.RUnlock()
	if mapping != nil {
		return mapping, nil
	}
	resources, err := m.discovery.ServerResourcesForGroupVersion(gvk.GroupVersion().String())
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("discovering %s: %w", gvk.GroupVersion(), err)
	}
	for _, r := range resources.APIResources {
		if r.Kind != gvk.Kind || strings.Contains(r.Name, "/") {
			continue
		}
		scope := meta.RESTScopeRoot
		if r.Namespaced {
			scope = meta.RESTScopeNamespace
		}
		mapping = &meta.RESTMapping{Resource: gvk.GroupVersion().WithResource(r.Name), GroupVersionKind: gvk, Scope: scope}
		m.mu.Lock()
		m.mappings[gvk] = mapping
		m.mu.Unlock()
		return mapping, nil
	}
	return nil, nil
}

// groupVersions returns the versions the server serves gk's group in, preferred first.
func (m *kindMapper) groupVersions(gk schema.GroupKind) ([]string, error) {
	groups, err := m.discovery.ServerGroups()
	if err != nil {
		return nil, fmt.Errorf("discovering API groups: %w", err)
	}
	for _, g := range groups.Groups {
		if g.Name == gk.Group {
			versions := []string{g.PreferredVersion.Version}
			for _, v := range g.Versions {
				if v.Version != g.PreferredVersion.Version {
					versions = append(versions, v.Version)
				}
			}
			return versions, nil
		}
	}
	return nil, &meta.NoKindMatchError{GroupKind: gk}
}
