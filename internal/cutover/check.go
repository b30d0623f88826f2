package cutover

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"

	"golang.org/x/sync/errgroup"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"anchorage/pkg/anchor"
)

// What the check lists. Everything is read as unstructured objects or metadata, so the
// clients need no scheme beyond client-go's (and none of anchorage's Go types).
var (
	gvkValidating    = admissionregistrationv1.SchemeGroupVersion.WithKind(KindValidating)
	gvkMutating      = admissionregistrationv1.SchemeGroupVersion.WithKind(KindMutating)
	gvkHTTPProxy     = schema.GroupVersionKind{Group: "networking.datumapis.com", Version: "v1alpha", Kind: KindHTTPProxy}
	gvkGateway       = gatewayv1.SchemeGroupVersion.WithKind(KindGateway)
	gvkHTTPRoute     = gatewayv1.SchemeGroupVersion.WithKind(KindHTTPRoute)
	gvkEndpointSlice = schema.GroupVersionKind{Group: "discovery.k8s.io", Version: "v1", Kind: KindEndpointSlice}
	gvkCertificate   = schema.GroupVersionKind{Group: "cert-manager.io", Version: "v1", Kind: KindCertificate}
	gvkDomain        = schema.GroupVersionKind{Group: "networking.datumapis.com", Version: "v1alpha", Kind: KindDomain}

	resourceOf = map[schema.GroupVersionKind]string{
		gvkValidating: "validatingwebhookconfigurations", gvkMutating: "mutatingwebhookconfigurations",
		gvkHTTPProxy: "httpproxies", gvkGateway: "gateways", gvkHTTPRoute: "httproutes",
		gvkEndpointSlice: "endpointslices", gvkCertificate: "certificates", gvkDomain: "domains",
	}
)

// Check reads the hub and every plane (planes by project) and returns the findings,
// sorted (Sort). It changes nothing: it only lists. A list that fails (forbidden, a kind
// not served, a plane unreachable) is a blocked row saying what could not be read, and
// the rest is still checked; the error is only the context's. hub may be nil: the hub
// is then not read. opts' zero fields take the replicas' defaults.
//
// Read on each plane: ValidatingWebhookConfigurations and MutatingWebhookConfigurations,
// HTTPProxies and Domains (networking.datumapis.com/v1alpha), Gateways and HTTPRoutes
// (gateway.networking.k8s.io/v1), EndpointSlices (metadata). On the hub: the webhook
// configurations, and, labelled meta.datumapis.com/upstream-kind, Gateways (=Gateway),
// cert-manager.io/v1 Certificates (=Gateway) and EndpointSlices (=EndpointSlice).
func Check(ctx context.Context, hub client.Client, planes map[string]client.Client, opts Options) ([]Row, error) {
	opts = opts.WithDefaults()
	var (
		mu   sync.Mutex
		rows []Row
		left LeftObjects
	)
	projects := make([]string, 0, len(planes))
	for p := range planes {
		projects = append(projects, p)
	}
	sort.Strings(projects)
	var g errgroup.Group
	g.SetLimit(opts.Workers)
	for _, project := range projects {
		c := planes[project]
		g.Go(func() error {
			found, plane := checkPlane(ctx, project, c, opts)
			mu.Lock()
			defer mu.Unlock()
			rows = append(rows, found...)
			left.Add(project, plane.left, plane.gateways, plane.routes)
			return nil
		})
	}
	_ = g.Wait()
	if hub != nil {
		rows = append(rows, checkHub(ctx, hub, left, opts)...)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	Sort(rows)
	return rows, nil
}

// planeObjects is what checkPlane read that the hub's findings depend on.
type planeObjects struct {
	left     map[types.UID]bool
	gateways []gatewayv1.Gateway
	routes   []gatewayv1.HTTPRoute
}

func checkPlane(ctx context.Context, project string, c client.Client, opts Options) ([]Row, planeObjects) {
	r := &reader{c: c, project: project}
	var out planeObjects
	validating, mutating := r.webhooks(ctx)
	rows := WebhookRows(project, PlaneWrites, validating, mutating)

	proxies, _ := r.unstructured(ctx, gvkHTTPProxy)
	proxyRows, left := ProxyRows(project, proxies, opts)
	rows = append(rows, proxyRows...)
	out.left = left

	for _, u := range r.decoded(ctx, gvkGateway) {
		var gw gatewayv1.Gateway
		if r.decode(u, &gw) {
			out.gateways = append(out.gateways, gw)
		}
	}
	rows = append(rows, GatewayRows(project, out.gateways, left, opts)...)
	for _, u := range r.decoded(ctx, gvkHTTPRoute) {
		var rt gatewayv1.HTTPRoute
		if r.decode(u, &rt) {
			out.routes = append(out.routes, rt)
		}
	}
	rows = append(rows, RouteRows(project, out.routes, left)...)

	slices := r.metadata(ctx, gvkEndpointSlice)
	rows = append(rows, EndpointSliceRows(project, slices)...)
	rows = append(rows, DomainRows(project, r.decoded(ctx, gvkDomain))...)

	rows = append(rows, TerminatingRows(project, KindHTTPProxy, objects(proxies))...)
	rows = append(rows, TerminatingRows(project, KindGateway, objects(out.gateways))...)
	rows = append(rows, TerminatingRows(project, KindHTTPRoute, objects(out.routes))...)
	rows = append(rows, TerminatingRows(project, KindEndpointSlice, objects(slices))...)
	return append(rows, r.rows...), out
}

func checkHub(ctx context.Context, hub client.Client, left LeftObjects, opts Options) []Row {
	r := &reader{c: hub}
	validating, mutating := r.webhooks(ctx)
	rows := WebhookRows("", HubWrites, validating, mutating)

	var gws []gatewayv1.Gateway
	for _, u := range r.decoded(ctx, gvkGateway, client.MatchingLabels{anchor.LabelKind: KindGateway}) {
		var gw gatewayv1.Gateway
		if r.decode(u, &gw) {
			gws = append(gws, gw)
		}
	}
	rows = append(rows, HubGatewayRows(gws, left, opts)...)
	certs, _ := r.unstructured(ctx, gvkCertificate, client.MatchingLabels{anchor.LabelKind: KindGateway})
	rows = append(rows, HubCertificateRows(certs, left, opts)...)
	slices := r.metadata(ctx, gvkEndpointSlice, client.MatchingLabels{anchor.LabelKind: KindEndpointSlice})
	rows = append(rows, HubEndpointSliceRows(slices, left, opts)...)
	return append(rows, r.rows...)
}

// objects views a slice of objects as metav1.Objects.
func objects[T any, P interface {
	*T
	metav1.Object
}](items []T) []metav1.Object {
	out := make([]metav1.Object, len(items))
	for i := range items {
		out[i] = P(&items[i])
	}
	return out
}

// reader lists with one cluster's client and turns every failure into a blocked row.
// Once the cluster is found unreachable (an error that is no API server's answer), it
// reads nothing more of it: one row says so.
type reader struct {
	c           client.Client
	project     string // "" for the hub
	rows        []Row
	unreachable bool
}

func (r *reader) where() string {
	if r.project == "" {
		return "the hub"
	}
	return r.project
}

// list lists into list and reports whether it succeeded.
func (r *reader) list(ctx context.Context, gvk schema.GroupVersionKind, list client.ObjectList, opts ...client.ListOption) bool {
	if r.unreachable || ctx.Err() != nil {
		return false
	}
	err := r.c.List(ctx, list, opts...)
	if err == nil {
		return true
	}
	if ctx.Err() != nil {
		return false
	}
	r.rows = append(r.rows, r.failure(gvk, err))
	return false
}

// failure is the blocked row of a list of gvk that failed with err.
func (r *reader) failure(gvk schema.GroupVersionKind, err error) Row {
	row := Row{Verdict: Blocked, Project: r.project, Kind: gvk.Kind}
	resource := resourceOf[gvk]
	if gvk.Group != "" {
		resource += "." + gvk.Group
	}
	var status apierrors.APIStatus
	switch {
	case apierrors.IsForbidden(err):
		who := "the plane's user (ClusterRole anchorage-project, config/rbac/project-role.yaml)"
		if r.project == "" {
			who = "whoever runs the check (the hub's ClusterRole anchorage-manager grants it)"
		}
		row.Detail = fmt.Sprintf("cannot read %s on %s: grant list on %s to %s; until then these findings are missing", gvk.Kind, r.where(), resource, who)
	case meta.IsNoMatchError(err) || apierrors.IsNotFound(err):
		row.Detail = fmt.Sprintf("cannot read %s on %s: the API server does not serve %s; install its CRD (a prerequisite, docs/operations.md) before anchorage starts", gvk.Kind, r.where(), gvk.GroupVersion().WithKind(gvk.Kind))
	case !errors.As(err, &status):
		r.unreachable = true
		row.Kind = ""
		row.Detail = fmt.Sprintf("cannot reach %s (%v): nothing of it was checked", r.where(), err)
	default:
		row.Detail = fmt.Sprintf("cannot read %s on %s: %v; until it can be read these findings are missing", gvk.Kind, r.where(), err)
	}
	return row
}

func (r *reader) unstructured(ctx context.Context, gvk schema.GroupVersionKind, opts ...client.ListOption) ([]unstructured.Unstructured, bool) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if !r.list(ctx, gvk, list, opts...) {
		return nil, false
	}
	return list.Items, true
}

// decoded lists gvk as unstructured objects, to be decoded into Go types one by one.
func (r *reader) decoded(ctx context.Context, gvk schema.GroupVersionKind, opts ...client.ListOption) []unstructured.Unstructured {
	items, _ := r.unstructured(ctx, gvk, opts...)
	return items
}

// decode converts u into out; an object that does not convert is a blocked row.
func (r *reader) decode(u unstructured.Unstructured, out any) bool {
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out); err != nil {
		r.rows = append(r.rows, Row{Verdict: Blocked, Project: r.project, Kind: u.GetKind(), Namespace: u.GetNamespace(), Name: u.GetName(),
			Detail: fmt.Sprintf("cannot be read as %s: %v; check it by hand", u.GroupVersionKind(), err)})
		return false
	}
	return true
}

func (r *reader) metadata(ctx context.Context, gvk schema.GroupVersionKind, opts ...client.ListOption) []metav1.PartialObjectMetadata {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if !r.list(ctx, gvk, list, opts...) {
		return nil
	}
	return list.Items
}

func (r *reader) webhooks(ctx context.Context) ([]admissionregistrationv1.ValidatingWebhookConfiguration, []admissionregistrationv1.MutatingWebhookConfiguration) {
	var validating []admissionregistrationv1.ValidatingWebhookConfiguration
	for _, u := range r.decoded(ctx, gvkValidating) {
		var c admissionregistrationv1.ValidatingWebhookConfiguration
		if r.decode(u, &c) {
			validating = append(validating, c)
		}
	}
	var mutating []admissionregistrationv1.MutatingWebhookConfiguration
	for _, u := range r.decoded(ctx, gvkMutating) {
		var c admissionregistrationv1.MutatingWebhookConfiguration
		if r.decode(u, &c) {
			mutating = append(mutating, c)
		}
	}
	return validating, mutating
}
