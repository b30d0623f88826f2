package main

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"anchorage/pkg/anchor"
	"anchorage/pkg/gateway"
)

// Kinds the demo reads on the hub.
var (
	configMapGVK     = corev1.SchemeGroupVersion.WithKind("ConfigMap")
	gatewayGVK       = gatewayv1.SchemeGroupVersion.WithKind("Gateway")
	httpRouteGVK     = gatewayv1.SchemeGroupVersion.WithKind("HTTPRoute")
	endpointSliceGVK = discoveryv1.SchemeGroupVersion.WithKind("EndpointSlice")
	// downstreamKinds are the kinds that hang on anchors.
	downstreamKinds = []schema.GroupVersionKind{gatewayGVK, httpRouteGVK, gateway.CertificateGVK,
		corev1.SchemeGroupVersion.WithKind("Service"), discoveryv1.SchemeGroupVersion.WithKind("EndpointSlice"),
		gatewayv1.SchemeGroupVersion.WithKind("BackendTLSPolicy")}
)

// hubObject is an object on the hub as the demo last saw it.
type hubObject struct {
	gvk       schema.GroupVersionKind
	namespace string
	name      string
	uid       types.UID
}

func (o hubObject) String() string { return o.gvk.Kind + " " + o.name }

// present reports whether the object is on the hub with the same UID; an object
// deleted and recreated under its name counts as lost.
func (o hubObject) present(ctx context.Context, c client.Reader) (bool, error) {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(o.gvk)
	err := c.Get(ctx, client.ObjectKey{Namespace: o.namespace, Name: o.name}, m)
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, err
	}
	return m.UID == o.uid && m.DeletionTimestamp == nil, nil
}

// anchorView is an anchor and what hangs on it.
type anchorView struct {
	anchor     hubObject
	labels     map[string]string
	dependents []hubObject
}

// owner describes the upstream object the anchor stands for, from its labels.
func (a anchorView) owner() string {
	l := a.labels
	return fmt.Sprintf("%s %s/%s (%s)", l[anchor.LabelKind], l[anchor.LabelNamespace], l[anchor.LabelName], l[anchor.LabelClusterName])
}

// all is the anchor followed by its dependents.
func (a anchorView) all() []hubObject { return append([]hubObject{a.anchor}, a.dependents...) }

// metaList lists the metadata of one kind in a hub namespace.
func metaList(ctx context.Context, c client.Reader, gvk schema.GroupVersionKind, namespace string) ([]metav1.PartialObjectMetadata, error) {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err := c.List(ctx, list, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("listing %s in %s: %w", gvk.Kind, namespace, err)
	}
	return list.Items, nil
}

// anchorsIn returns the anchors of a hub namespace with their dependents, sorted by
// the owner they stand for.
func anchorsIn(ctx context.Context, c client.Reader, namespace string) ([]anchorView, error) {
	cms, err := metaList(ctx, c, configMapGVK, namespace)
	if err != nil {
		return nil, err
	}
	byUID := map[types.UID]*anchorView{}
	var views []*anchorView
	for _, cm := range cms {
		if !strings.HasPrefix(cm.Name, anchor.NamePrefix) {
			continue
		}
		v := &anchorView{anchor: hubObject{configMapGVK, namespace, cm.Name, cm.UID}, labels: cm.Labels}
		byUID[cm.UID] = v
		views = append(views, v)
	}
	for _, gvk := range downstreamKinds {
		items, err := metaList(ctx, c, gvk, namespace)
		if err != nil {
			return nil, err
		}
		for _, it := range items {
			for _, ref := range it.OwnerReferences {
				if v := byUID[ref.UID]; v != nil && ref.Kind == "ConfigMap" {
					v.dependents = append(v.dependents, hubObject{gvk, namespace, it.Name, it.UID})
				}
			}
		}
	}
	sort.Slice(views, func(i, j int) bool { return views[i].owner() < views[j].owner() })
	out := make([]anchorView, 0, len(views))
	for _, v := range views {
		out = append(out, *v)
	}
	return out, nil
}

// mappedNamespaces lists the hub namespaces named ns-<uid>.
func mappedNamespaces(ctx context.Context, c client.Reader) ([]corev1.Namespace, error) {
	list := &corev1.NamespaceList{}
	if err := c.List(ctx, list); err != nil {
		return nil, fmt.Errorf("listing hub namespaces: %w", err)
	}
	var out []corev1.Namespace
	for _, ns := range list.Items {
		if anchor.IsMappedNamespaceName(ns.Name) {
			out = append(out, ns)
		}
	}
	// In the order of their projects (mapped namespaces carry the project in a label).
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].Labels[anchor.LabelClusterName], out[j].Labels[anchor.LabelClusterName]
		if a != b {
			return a < b
		}
		return out[i].Name < out[j].Name
	})
	return out, nil
}

// stranded is an anchor planted as the field had them: its upstream owner is long
// gone, and it still holds a downstream object (and, for a Gateway, its Certificate).
type stranded struct {
	project string
	kind    string
	// upstreamNamespace and name are the gone owner's.
	upstreamNamespace, name string
	// hostname of the downstream Gateway and its Certificate (Gateways only).
	hostname string
	// legacyLabel writes the project as "cluster-_<project>", as a project once named
	// with a leading slash was written.
	legacyLabel bool
	// hubNamespace is the mapped namespace it lives in; empty means a namespace of its
	// own, named after a gone upstream namespace and without labels, as older hubs
	// have them.
	hubNamespace string

	// planted is what was created.
	planted anchorView
}

// plant creates the stranded anchor, its hub namespace if needed, and its dependents.
func (s *stranded) plant(ctx context.Context, c client.Client) error {
	ns := s.hubNamespace
	if ns == "" {
		ns = anchor.MappedNamespace(uuid.NewUUID())
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return fmt.Errorf("creating old hub namespace %s: %w", ns, err)
		}
	}
	group := gatewayv1.GroupName
	if s.kind == "EndpointSlice" {
		group = discoveryv1.GroupName
	}
	owner := anchor.Owner{Project: s.project, Group: group, Kind: s.kind, Namespace: s.upstreamNamespace, Name: s.name, UID: uuid.NewUUID()}
	labels := owner.Labels()
	if s.legacyLabel {
		labels[anchor.LabelClusterName] = "cluster-_" + s.project
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: anchor.Name(owner.UID), Labels: labels}}
	if err := c.Create(ctx, cm); err != nil {
		return fmt.Errorf("creating stranded anchor: %w", err)
	}
	s.planted = anchorView{anchor: hubObject{configMapGVK, ns, cm.Name, cm.UID}, labels: labels}
	ref := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: cm.Name, UID: cm.UID}

	var deps []*unstructured.Unstructured
	switch defaults := gateway.DefaultConfig(); s.kind {
	case "Gateway":
		gw := newUnstructured(gatewayGVK, ns, s.name, labels, ref)
		gw.Object["spec"] = map[string]any{
			"gatewayClassName": defaults.DownstreamGatewayClassName,
			"listeners": []any{map[string]any{
				"name": "https-" + s.hostname, "hostname": s.hostname, "port": int64(443), "protocol": "HTTPS",
				"tls": map[string]any{"certificateRefs": []any{map[string]any{"name": s.name + "-https-" + s.hostname}}},
			}},
		}
		cert := newUnstructured(gateway.CertificateGVK, ns, s.name+"-https-"+s.hostname, labels, ref)
		cert.Object["spec"] = map[string]any{
			"secretName": s.name + "-https-" + s.hostname,
			"dnsNames":   []any{s.hostname},
			"issuerRef":  map[string]any{"name": defaults.CertificateIssuer.Name, "kind": defaults.CertificateIssuer.Kind, "group": defaults.CertificateIssuer.Group},
		}
		deps = append(deps, gw, cert)
	case "HTTPRoute":
		route := newUnstructured(httpRouteGVK, ns, s.name, labels, ref)
		route.Object["spec"] = map[string]any{}
		deps = append(deps, route)
	case "EndpointSlice":
		// The previous manager's backend slice: a copy of the upstream slice, named for
		// the route's backendRef, on the upstream slice's anchor.
		slice := newUnstructured(endpointSliceGVK, ns, "route-"+string(uuid.NewUUID())+"-rule-0-backendref-0", labels, ref)
		slice.Object["addressType"] = "FQDN"
		slice.Object["endpoints"] = []any{map[string]any{"addresses": []any{s.hostname}}}
		slice.Object["ports"] = []any{map[string]any{"name": "httpproxy-0-0", "port": int64(443), "protocol": "TCP", "appProtocol": "https"}}
		deps = append(deps, slice)
	default:
		return fmt.Errorf("no stranded %s in this demo", s.kind)
	}
	for _, d := range deps {
		if err := c.Create(ctx, d); err != nil {
			return fmt.Errorf("creating %s %s on stranded anchor: %w", d.GetKind(), d.GetName(), err)
		}
		s.planted.dependents = append(s.planted.dependents, hubObject{d.GroupVersionKind(), ns, d.GetName(), d.GetUID()})
	}
	return nil
}

func newUnstructured(gvk schema.GroupVersionKind, namespace, name string, labels map[string]string, ref metav1.OwnerReference) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetGroupVersionKind(gvk)
	u.SetNamespace(namespace)
	u.SetName(name)
	u.SetLabels(labels)
	u.SetOwnerReferences([]metav1.OwnerReference{ref})
	return u
}

// countPresent returns how many of objs are on the hub with their UID.
func countPresent(ctx context.Context, c client.Reader, objs []hubObject) (int, error) {
	n := 0
	for _, o := range objs {
		ok, err := o.present(ctx, c)
		if err != nil {
			return 0, err
		}
		if ok {
			n++
		}
	}
	return n, nil
}

// shortName keeps anchor and mapped namespace names readable in narration:
// anchor-1b2c3d4e….
func shortName(name string) string {
	if len(name) > len(anchor.NamePrefix)+9 && strings.HasPrefix(name, anchor.NamePrefix) {
		return name[:len(anchor.NamePrefix)+8] + "…"
	}
	if len(name) > len(anchor.NamespacePrefix)+9 && strings.HasPrefix(name, anchor.NamespacePrefix) {
		return name[:len(anchor.NamespacePrefix)+8] + "…"
	}
	return name
}
