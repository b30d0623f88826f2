package cutover

import (
	"context"
	"errors"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// toUnstructured turns a typed object into what the API server serves, unstructured.
func toUnstructured(t *testing.T, obj runtime.Object, gvk schema.GroupVersionKind) *unstructured.Unstructured {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(gvk)
	return u
}

// fakeCluster is a fake API server holding objs, with client-go's scheme only (what the
// check's clients have), and Gateway API and cert-manager kinds known to it as
// unstructured ones.
func fakeCluster(t *testing.T, funcs *interceptor.Funcs, objs ...client.Object) client.Client {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	for _, gvk := range []schema.GroupVersionKind{gvkHTTPProxy, gvkGateway, gvkHTTPRoute, gvkCertificate} {
		scheme.AddKnownTypeWithName(gvk, &unstructured.Unstructured{})
		scheme.AddKnownTypeWithName(gvk.GroupVersion().WithKind(gvk.Kind+"List"), &unstructured.UnstructuredList{})
	}
	b := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...)
	if funcs != nil {
		b = b.WithInterceptorFuncs(*funcs)
	}
	return b.Build()
}

// forbidding refuses lists of the kind whose list type is listKind, as an API server
// refuses a user without the grant.
func forbidding(listKind string) *interceptor.Funcs {
	return &interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
		if list.GetObjectKind().GroupVersionKind().Kind == listKind {
			return apierrors.NewForbidden(schema.GroupResource{Group: "discovery.k8s.io", Resource: "endpointslices"}, "", errors.New("no grant"))
		}
		return c.List(ctx, list, opts...)
	}}
}

// TestCheckReadsPlanesAndHub runs Check over fake clusters holding what the previous
// manager leaves: one row per finding, sorted, and a plane that may not list
// EndpointSlices is a blocked row, not a failed run.
func TestCheckReadsPlanesAndHub(t *testing.T) {
	validating, mutating := previousManagersWebhooks()
	planeObjs := []client.Object{&validating[0], &mutating[0]}
	for _, p := range []unstructured.Unstructured{
		proxy("p", []string{FinalizerHTTPProxyCleanup, FinalizerReplicator}, map[string]any{"endpoint": "https://api.example.com"}),
		proxy("tunnelled", []string{FinalizerHTTPProxyCleanup}, map[string]any{"endpoint": "http://localhost", "connector": map[string]any{"name": "t"}}),
	} {
		planeObjs = append(planeObjs, &p)
	}
	gw := gateway(controlledBy(objMeta("p", []string{FinalizerGateway}, false), "p"), "datum-external-global-proxy", "default-http", "http-hostname-0")
	leftGW := gateway(controlledBy(objMeta("tunnelled", []string{FinalizerGateway}, false), "tunnelled"), "datum-external-global-proxy", "http-hostname-0")
	rt := route(controlledBy(objMeta("p", []string{FinalizerGC}, false), "p"), []gatewayv1.BackendObjectReference{slice("p-0-0")})
	planeObjs = append(planeObjs,
		toUnstructured(t, &gw, gvkGateway), toUnstructured(t, &leftGW, gvkGateway), toUnstructured(t, &rt, gvkHTTPRoute),
		&discoveryv1.EndpointSlice{ObjectMeta: objMeta("p-0-0", []string{FinalizerGC}, false), AddressType: discoveryv1.AddressTypeFQDN},
		&discoveryv1.EndpointSlice{ObjectMeta: objMeta("stuck", []string{"example.com/hold"}, true), AddressType: discoveryv1.AddressTypeFQDN},
	)
	acme := fakeCluster(t, nil, planeObjs...)
	shop := fakeCluster(t, forbidding("EndpointSliceList"))

	hubGW := gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "ns-1", Name: "p", Labels: labelsOf("acme", "Gateway", "p")}, Spec: gatewayv1.GatewaySpec{GatewayClassName: "datum-downstream-gateway"}}
	hubLeftGW := gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "ns-1", Name: "tunnelled", Labels: labelsOf("acme", "Gateway", "tunnelled")}, Spec: gatewayv1.GatewaySpec{GatewayClassName: "datum-downstream-gateway"}}
	cert := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"namespace": "ns-1", "name": "p-https-hostname-0"},
		"spec":     map[string]any{"issuerRef": map[string]any{"name": "letsencrypt", "kind": "ClusterIssuer"}},
	}}
	cert.SetGroupVersionKind(gvkCertificate)
	cert.SetLabels(labelsOf("acme", "Gateway", "p"))
	uid := "0f7c1a52-7a43-4d1e-9b8e-6a1f4c2d9e10"
	hub := fakeCluster(t, nil, &validating[0],
		toUnstructured(t, &hubGW, gvkGateway), toUnstructured(t, &hubLeftGW, gvkGateway), cert,
		&discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "ns-1", Name: "route-" + uid + "-rule-0-backendref-0", Labels: labelsOf("acme", "EndpointSlice", "p-0-0")}, AddressType: discoveryv1.AddressTypeFQDN},
	)

	rows, err := Check(t.Context(), hub, map[string]client.Client{"acme": acme, "shop": shop}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	vwc, mwc := validating[0].Name, mutating[0].Name
	expectRows(t, "check", rows,
		"blocked  ValidatingWebhookConfiguration  "+vwc, // backendtlspolicies
		"blocked  ValidatingWebhookConfiguration  "+vwc, // gateways
		"blocked  ValidatingWebhookConfiguration  "+vwc, // httpproxies
		"blocked  ValidatingWebhookConfiguration  "+vwc, // httproutes
		"blocked acme EndpointSlice shop stuck",
		"blocked acme MutatingWebhookConfiguration  "+mwc,
		"blocked acme ValidatingWebhookConfiguration  "+vwc,
		"blocked acme ValidatingWebhookConfiguration  "+vwc,
		"blocked acme ValidatingWebhookConfiguration  "+vwc,
		"blocked shop EndpointSlice  ",
		"changed  Certificate ns-1 p-https-hostname-0",
		"changed  Gateway ns-1 p", // not the left proxy's
		"changed acme Gateway shop p",
		"changed acme Gateway shop p",
		"changed acme HTTPRoute shop p",
		"adopted  EndpointSlice ns-1 route-"+uid+"-rule-0-backendref-0",
		"adopted acme EndpointSlice shop p-0-0",
		"adopted acme HTTPProxy shop p",
		"left acme HTTPProxy shop tunnelled",
	)
	for _, r := range rows {
		if r.Project == "shop" {
			if !strings.HasPrefix(r.Detail, "cannot read EndpointSlice on shop: grant list on endpointslices.discovery.k8s.io") {
				t.Errorf("the forbidden list's row says %q", r.Detail)
			}
		}
	}
}

func labelsOf(project, kind, name string) map[string]string {
	return map[string]string{
		"meta.datumapis.com/upstream-cluster-name": "cluster-" + project, "meta.datumapis.com/upstream-kind": kind,
		"meta.datumapis.com/upstream-name": name, "meta.datumapis.com/upstream-namespace": "shop",
	}
}

// TestCheckOfAnUnreachablePlane: a plane that cannot be reached is one blocked row, and
// the other planes are checked.
func TestCheckOfAnUnreachablePlane(t *testing.T) {
	down := fakeCluster(t, &interceptor.Funcs{List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
		return errors.New("dial tcp 10.0.0.1:443: connect: connection refused")
	}})
	hook := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "m"}, Webhooks: []admissionregistrationv1.MutatingWebhook{{
		Name: "m.example.com", Rules: []admissionregistrationv1.RuleWithOperations{rule([]string{""}, []string{"services"})},
	}}}
	up := fakeCluster(t, nil, hook)
	rows, err := Check(t.Context(), nil, map[string]client.Client{"down": down, "up": up}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	expectRows(t, "unreachable", rows, "blocked down   ", "blocked up MutatingWebhookConfiguration  m")
	expectDetail(t, "unreachable", rows, "cannot reach down", "connection refused", "nothing of it was checked")
}

// TestCheckOfAKindNotServed: a plane without a CRD says so, blocked.
func TestCheckOfAKindNotServed(t *testing.T) {
	// No Gateway API or HTTPProxy CRDs: the REST mapper knows neither group.
	c := fakeCluster(t, &interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
		gvk := list.GetObjectKind().GroupVersionKind()
		if gvk.Group == "gateway.networking.k8s.io" || gvk.Group == "networking.datumapis.com" {
			return &meta.NoKindMatchError{GroupKind: schema.GroupKind{Group: gvk.Group, Kind: strings.TrimSuffix(gvk.Kind, "List")}, SearchedVersions: []string{gvk.Version}}
		}
		return c.List(ctx, list, opts...)
	}})
	rows, err := Check(t.Context(), nil, map[string]client.Client{"acme": c}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	expectRows(t, "not served", rows, "blocked acme Domain  ", "blocked acme Gateway  ", "blocked acme HTTPProxy  ", "blocked acme HTTPRoute  ")
	expectDetail(t, "not served", rows, "cannot read Domain on acme: the API server does not serve networking.datumapis.com/v1alpha, Kind=Domain", "install its CRD")
}

func TestCheckStopsWithTheContext(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := Check(ctx, fakeCluster(t, nil), map[string]client.Client{"a": fakeCluster(t, nil)}, Options{}); !errors.Is(err, context.Canceled) {
		t.Errorf("got %v, want the context's error", err)
	}
}

func TestPlanes(t *testing.T) {
	const ns = "anchorage-system"
	good := []byte(`apiVersion: v1
kind: Config
clusters: [{name: p, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: p, context: {cluster: p, user: u}}]
current-context: p
`)
	secret := func(name, project string, data []byte) *corev1.Secret {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"kc": "true"}}}
		if project != "" {
			s.Annotations = map[string]string{"project": project}
		}
		if data != nil {
			s.Data = map[string][]byte{"kubeconfig": data}
		}
		return s
	}
	hub := fakeCluster(t, nil,
		secret("acme", "", good),
		secret("shop-a", "shop", good), secret("shop-b", "shop", good),
		secret("broken", "", []byte("{not yaml")),
		secret("empty", "", nil),
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "unlabelled"}, Data: map[string][]byte{"kubeconfig": good}},
	)
	s := Secrets{Namespace: ns, Label: "kc", ProjectAnnotation: "project"}
	planes, rows, err := Planes(t.Context(), hub, s, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(planes) != 1 || planes["acme"] == nil {
		t.Errorf("planes %v: want acme only", planes)
	}
	Sort(rows)
	expectRows(t, "secrets", rows,
		"blocked broken Secret anchorage-system broken",
		"blocked empty Secret anchorage-system empty",
		"blocked shop Secret anchorage-system shop-a",
		"blocked shop Secret anchorage-system shop-b")
	expectDetail(t, "unparsable", rows[0:1], "kubeconfig does not parse", "fix the Secret")
	expectDetail(t, "no key", rows[1:2], `no "kubeconfig" key`)
	expectDetail(t, "duplicate", rows[2:3], "named by 2 kubeconfig Secrets (shop-a, shop-b)")

	planes, rows, err = Planes(t.Context(), hub, s, []string{"acme", "nope"})
	if err != nil {
		t.Fatal(err)
	}
	if len(planes) != 1 || planes["acme"] == nil {
		t.Errorf("planes %v: want acme only", planes)
	}
	expectRows(t, "--project", rows, "blocked nope Secret anchorage-system ")
	expectDetail(t, "--project", rows, "no kubeconfig Secret in anchorage-system (labelled kc=true) names project nope")
}
