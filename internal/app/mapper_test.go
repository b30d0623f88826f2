package app_test

import (
	"testing"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"anchorage/api/v1alpha"
	"anchorage/internal/app"
	"anchorage/internal/testenv"
)

// The kind mapper answers what controller-runtime's dynamic mapper answers for the
// kinds a replica maps (core, cluster-scoped, CRDs), refuses a kind the server does not
// serve as a no-match, and finds that kind once its CRD is installed.
func TestKindMapperMapsLikeTheDynamicMapperAndFindsLateCRDs(t *testing.T) {
	g := NewWithT(t)
	dir, err := testenv.BinaryDir()
	g.Expect(err).NotTo(HaveOccurred())
	own, err := testenv.ProjectCRDs()
	g.Expect(err).NotTo(HaveOccurred())
	gw, err := testenv.GatewayCRDs()
	g.Expect(err).NotTo(HaveOccurred())
	env := &envtest.Environment{BinaryAssetsDirectory: dir, CRDs: without(own, gw)}
	cfg, err := env.Start()
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = env.Stop() })

	hc, err := rest.HTTPClientFor(cfg)
	g.Expect(err).NotTo(HaveOccurred())
	kinds, err := app.NewKindMapper(cfg, hc)
	g.Expect(err).NotTo(HaveOccurred())
	dynamic, err := apiutil.NewDynamicRESTMapper(cfg, hc)
	g.Expect(err).NotTo(HaveOccurred())

	proxy := v1alpha.GroupVersion.WithKind("HTTPProxy")
	for _, c := range []struct {
		gk       schema.GroupKind
		versions []string
		resource string
		scope    meta.RESTScopeName
	}{
		{schema.GroupKind{Kind: "Service"}, []string{"v1"}, "services", meta.RESTScopeNameNamespace},
		{schema.GroupKind{Kind: "Namespace"}, nil, "namespaces", meta.RESTScopeNameRoot},
		{proxy.GroupKind(), []string{proxy.Version}, "httpproxies", meta.RESTScopeNameNamespace},
		{schema.GroupKind{Group: "coordination.k8s.io", Kind: "Lease"}, []string{"v1beta1", "v1"}, "leases", meta.RESTScopeNameNamespace},
	} {
		got, err := kinds.RESTMapping(c.gk, c.versions...)
		g.Expect(err).NotTo(HaveOccurred(), "%s", c.gk)
		g.Expect(got.Resource.Resource).To(Equal(c.resource))
		g.Expect(got.Scope.Name()).To(Equal(c.scope))
		want, err := dynamic.RESTMapping(c.gk, c.versions...)
		g.Expect(err).NotTo(HaveOccurred(), "%s", c.gk)
		g.Expect(got.Resource).To(Equal(want.Resource), "%s", c.gk)
		g.Expect(got.GroupVersionKind).To(Equal(want.GroupVersionKind), "%s", c.gk)
	}

	gateway := gatewayv1.SchemeGroupVersion.WithKind("Gateway")
	_, err = kinds.RESTMapping(gateway.GroupKind(), gateway.Version)
	g.Expect(meta.IsNoMatchError(err)).To(BeTrue(), "a kind not served: %v", err)

	_, err = envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{CRDs: gw})
	g.Expect(err).NotTo(HaveOccurred())
	got, err := kinds.RESTMapping(gateway.GroupKind(), gateway.Version)
	g.Expect(err).NotTo(HaveOccurred(), "the kind once its CRD is installed")
	g.Expect(got.Resource).To(Equal(gatewayv1.SchemeGroupVersion.WithResource("gateways")))

	// The previous manager's planes also serve its Connectors in v1alpha1 of the same
	// group, which the server then prefers; an anchor's kind, mapped with no version, is
	// still found in v1alpha, as the sweep's dynamic mapper finds it.
	_, err = envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{CRDs: []*apiextensionsv1.CustomResourceDefinition{testenv.PreviousConnectorCRD()}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() (string, error) {
		groups, err := discovery.NewDiscoveryClientForConfigOrDie(cfg).ServerGroups()
		if err != nil {
			return "", err
		}
		for _, gr := range groups.Groups {
			if gr.Name == proxy.Group {
				return gr.PreferredVersion.Version, nil
			}
		}
		return "", nil
	}).Should(Equal("v1alpha1"), "the server prefers the kube-like version")
	for _, kind := range []string{"HTTPProxy", "Connector"} {
		gk := schema.GroupKind{Group: proxy.Group, Kind: kind}
		got, err := kinds.RESTMapping(gk)
		g.Expect(err).NotTo(HaveOccurred(), "%s with no version", kind)
		fresh, err := apiutil.NewDynamicRESTMapper(cfg, hc)
		g.Expect(err).NotTo(HaveOccurred())
		want, err := fresh.RESTMapping(gk)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got.Resource).To(Equal(want.Resource), kind)
	}
	got, err = kinds.RESTMapping(proxy.GroupKind())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.Resource).To(Equal(v1alpha.GroupVersion.WithResource("httpproxies")))
}

// without returns the CRDs of all that are not in drop.
func without[T interface{ GetName() string }](all, drop []T) []T {
	skip := map[string]bool{}
	for _, d := range drop {
		skip[d.GetName()] = true
	}
	var out []T
	for _, a := range all {
		if !skip[a.GetName()] {
			out = append(out, a)
		}
	}
	return out
}
