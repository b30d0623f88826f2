package harness

// This file lays down, on a project plane and on the hub, the state the previous
// manager (datum-cloud/network-services-operator, "NSO") leaves behind for a handful of
// HTTPProxies, so takeover tests start from what a real migration finds. Every shape
// cites the NSO source (mirror HEAD 41b6db2; line numbers approximate) it follows.

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/binary"
	"encoding/pem"
	"fmt"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"anchorage/pkg/anchor"
)

// Defaults of PreviousInput: NSO's own defaults where it has one, a stand-in otherwise.
const (
	// PreviousGatewayClass is NSO's httpProxy.gatewayClassName default (config.go L1378-1382).
	PreviousGatewayClass = "datum-external-global-proxy"
	// PreviousControllerName is NSO's gateway.controllerName default (config.go L819-823).
	PreviousControllerName = "gateway.networking.datumapis.com/external-global-proxy-controller"
	// PreviousDownstreamClass stands in for downstreamGatewayClassName, which has no default (config.go L841-843).
	PreviousDownstreamClass = "previous-edge"
	// PreviousIssuer stands in for clusterIssuerMap[auto], which has no default (gateway_controller.go L884-953).
	PreviousIssuer = "previous-issuer"
	// PreviousClaimsNamespace is downstreamHostnameAccountingNamespace's default (zz_generated.defaults.go L63-64).
	PreviousClaimsNamespace = "datum-downstream-gateway-hostnames"
	// PreviousTargetDomain stands in for targetDomain, which has no default (config.go L1036-1044).
	PreviousTargetDomain = "prism.example.net"
	// PreviousTenantIDLabel marks a CNI-published instance EndpointSlice (gateway_controller.go L2346-2362).
	PreviousTenantIDLabel = "galactic.datum.net/tenant-id"
)

// NSO's finalizers, annotation and option keys.
const (
	prevProxyFinalizer      = "networking.datumapis.com/httpproxy-cleanup"                   // httpproxy_controller.go L102
	prevReplicatorFinalizer = "gateway.networking.datumapis.com/gateway-resource-replicator" // gateway_resource_replicator_controller.go L45
	prevGatewayFinalizer    = "gateway.networking.datumapis.com/gateway-controller"          // gateway_controller.go L54
	prevGCFinalizer         = "gateway.networking.datumapis.com/gateway-controller-gc"       // gateway_controller.go L55
	prevCertHostAnnotation  = "networking.datumapis.com/backend-cert-hostname"               // httpproxy_controller.go L113
	prevIssuerOption        = "gateway.networking.datumapis.com/certificate-issuer"          // gateway_controller.go L56-62
	prevProxyAPIVersion     = "networking.datumapis.com/v1alpha"
)

// PreviousProxyNames are the proxies LayDownPrevious writes, in order.
var PreviousProxyNames = []string{"plain", "secure", "tunnel", "vm", "leaving"}

// prevBackend is one proxy's single backend, as its spec says it.
type prevBackend struct {
	endpoint, tlsHostname, connector string
	instance                         string
	instancePort                     int64
}

var prevBackends = map[string]prevBackend{
	"plain":   {endpoint: "http://plain-origin.example.org:8080"},
	"secure":  {endpoint: "https://secure-origin.example.org", tlsHostname: "cert.secure-origin.example.org"},
	"tunnel":  {endpoint: "http://localhost:8080", connector: "tunnel-1"},
	"vm":      {instance: "vm-slice", instancePort: 8080},
	"leaving": {endpoint: "http://leaving-origin.example.org"},
	// A connector proxy being deleted (PreviousHalfDone); every other half-done proxy
	// has an endpoint of its name (prevLayer.proxy).
	"half-connector": {endpoint: "http://localhost:8080", connector: "tunnel-2"},
}

// PreviousInput says where to lay NSO's state down. Empty strings take the defaults above.
type PreviousInput struct {
	Hub, Plane client.Client
	// Project is the project's name; NSO knew it as cluster "/<project>" (the legacy form).
	Project string
	// Namespace is the upstream namespace, already created on Plane.
	Namespace *corev1.Namespace
	// Suffix makes hostnames (<proxy>.<Suffix>) and webhook configuration names unique.
	Suffix                                                                 string
	GatewayClass, ControllerName, DownstreamClass, Issuer, ClaimsNamespace string
	TargetDomain                                                           string
	// Endpoints, when set, replace the endpoint of the named endpoint proxies (plain,
	// leaving; secure keeps its tls.hostname): what a tenant may have stored under the
	// previous manager, such as a name only the edge's resolver completes.
	Endpoints map[string]string
}

// PreviousProxy is what was laid down for one proxy.
type PreviousProxy struct {
	Name, Hostname, CanonicalHostname string
	// Proxy, Gateway, HTTPRoute and EndpointSlices are the upstream objects as last written.
	Proxy          *unstructured.Unstructured
	Gateway        *gatewayv1.Gateway
	HTTPRoute      *gatewayv1.HTTPRoute
	EndpointSlices []*discoveryv1.EndpointSlice
	// Hub is every hub object of the proxy (anchors, claims and Secrets included), with UIDs.
	Hub []client.Object
}

// PreviousState is what LayDownPrevious wrote.
type PreviousState struct {
	HubNamespace   string
	Proxies        map[string]*PreviousProxy
	StrandedAnchor *corev1.ConfigMap
	StrandedSlice  client.Object
	Webhooks       []client.Object
	// HalfDone are the deletions laid down half done, one proxy each (PreviousHalfDone).
	HalfDone []HalfDone
}

// HubObjectsOf returns the hub objects laid down for proxy name.
func (s *PreviousState) HubObjectsOf(name string) []client.Object {
	if p := s.Proxies[name]; p != nil {
		return p.Hub
	}
	return nil
}

// prevLayer carries the inputs of one LayDownPrevious call.
type prevLayer struct {
	in         PreviousInput
	hubNS      string
	clusterRaw string // NSO's cluster name: "/<project>" for slash-less projects
	clusterLbl string // its label form (mappednamespace.go L106, L163)
}

// LayDownPrevious writes NSO's state for the proxies PreviousProxyNames in
// in.Namespace, one more proxy per deletion NSO may leave half done (PreviousHalfDone),
// a stranded EndpointSlice anchor, deletes "leaving" (left Terminating on its
// finalizers) and, last, NSO's webhook configurations, whose service is gone.
func LayDownPrevious(ctx context.Context, in PreviousInput) (*PreviousState, error) {
	for p, d := range map[*string]string{&in.GatewayClass: PreviousGatewayClass, &in.ControllerName: PreviousControllerName,
		&in.DownstreamClass: PreviousDownstreamClass, &in.Issuer: PreviousIssuer, &in.ClaimsNamespace: PreviousClaimsNamespace,
		&in.TargetDomain: PreviousTargetDomain} {
		if *p == "" {
			*p = d
		}
	}
	l := &prevLayer{in: in, hubNS: anchor.MappedNamespace(in.Namespace.UID), clusterRaw: in.Project}
	if !strings.Contains(in.Project, "/") {
		l.clusterRaw = "/" + in.Project // as before NSO #196 (mappednamespace.go L131-143)
	}
	l.clusterLbl = "cluster-" + strings.ReplaceAll(l.clusterRaw, "/", "_")
	st := &PreviousState{HubNamespace: l.hubNS, Proxies: map[string]*PreviousProxy{}}
	if err := l.namespaces(ctx); err != nil {
		return nil, err
	}
	for _, name := range PreviousProxyNames {
		p, err := l.proxy(ctx, name, false)
		if err != nil {
			return nil, fmt.Errorf("laying down previous proxy %s: %w", name, err)
		}
		st.Proxies[name] = p
	}
	for _, h := range PreviousHalfDone() {
		p, err := l.proxy(ctx, h.Proxy, h.gatewayFinalized())
		if err != nil {
			return nil, fmt.Errorf("laying down previous proxy %s: %w", h.Proxy, err)
		}
		st.Proxies[h.Proxy] = p
		if err := l.halfDelete(ctx, p, h); err != nil {
			return nil, fmt.Errorf("half-deleting previous proxy %s (%s): %w", h.Proxy, h, err)
		}
		st.HalfDone = append(st.HalfDone, h)
	}
	if err := l.stranded(ctx, st); err != nil {
		return nil, err
	}
	leaving := st.Proxies["leaving"].Proxy
	if err := in.Plane.Delete(ctx, leaving); err != nil {
		return nil, fmt.Errorf("deleting proxy leaving: %w", err)
	}
	if err := in.Plane.Get(ctx, client.ObjectKeyFromObject(leaving), leaving); err != nil {
		return nil, err
	}
	hooks, err := l.webhooks(ctx)
	st.Webhooks = hooks
	return st, err
}

// namespaces ensures the UP GatewayClass, the hub's mapped namespace and the claims namespace.
func (l *prevLayer) namespaces(ctx context.Context) error {
	// UP GatewayClass: NSO's Gateway controller only serves Gateways whose class has its
	// controllerName (gateway_controller.go L139-153); status per gatewayclass_controller.go L55-85.
	gc := &gatewayv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: l.in.GatewayClass},
		Spec: gatewayv1.GatewayClassSpec{ControllerName: gatewayv1.GatewayController(l.in.ControllerName)}}
	if err := l.in.Plane.Create(ctx, gc); err == nil {
		gc.Status.Conditions = []metav1.Condition{prevTrue("Accepted", "Accepted", "The GatewayClass has been accepted by the controller", gc.Generation)}
		if err := l.in.Plane.Status().Update(ctx, gc); err != nil {
			return fmt.Errorf("writing GatewayClass status: %w", err)
		}
	} else if !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating GatewayClass %s: %w", gc.Name, err)
	}
	// Mapped namespace: ns-<upstream namespace UID> with the cluster and namespace
	// labels (mappednamespace.go L76-121).
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: l.hubNS, Labels: map[string]string{
		anchor.LabelClusterName: l.clusterLbl, anchor.LabelNamespace: l.in.Namespace.Name}}}
	if err := l.in.Hub.Create(ctx, ns); err != nil {
		return fmt.Errorf("creating hub namespace %s: %w", l.hubNS, err)
	}
	// Claims namespace: NSO writes claims through its raw client, never creating it (gateway_controller.go L1233-1334).
	claims := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: l.in.ClaimsNamespace}}
	if err := l.in.Hub.Create(ctx, claims); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating claims namespace: %w", err)
	}
	return nil
}

// proxy lays down one proxy, upstream then hub, then the status NSO writes upstream;
// without the Gateway's hub side when NSO has finalized the Gateway already (hub).
func (l *prevLayer) proxy(ctx context.Context, name string, gatewayFinalized bool) (*PreviousProxy, error) {
	b, ok := prevBackends[name]
	if !ok {
		b = prevBackend{endpoint: "http://" + name + "-origin.example.org"}
	}
	if e, ok := l.in.Endpoints[name]; ok && b.endpoint != "" && b.connector == "" {
		b.endpoint = e
	}
	p := &PreviousProxy{Name: name, Hostname: name + "." + l.in.Suffix}
	if err := l.upstream(ctx, p, b); err != nil {
		return nil, err
	}
	if err := l.hub(ctx, p, b, gatewayFinalized); err != nil {
		return nil, err
	}
	return p, l.upstreamStatus(ctx, p)
}

// upstream writes the proxy, its Gateway, HTTPRoute and EndpointSlice on the plane.
func (l *prevLayer) upstream(ctx context.Context, p *PreviousProxy, b prevBackend) error {
	c, ns := l.in.Plane, l.in.Namespace.Name
	backend := map[string]any{}
	switch {
	case b.instance != "":
		backend["instance"] = map[string]any{"name": b.instance, "port": b.instancePort}
		// The CNI's slice NSO references but never writes (httpproxy_controller.go L869-901).
		vm := prevInstanceSlice(ns, b.instance)
		if err := c.Create(ctx, vm); err != nil {
			return fmt.Errorf("creating instance EndpointSlice: %w", err)
		}
		p.EndpointSlices = append(p.EndpointSlices, vm)
	default:
		backend["endpoint"] = b.endpoint
		if b.tlsHostname != "" {
			backend["tls"] = map[string]any{"hostname": b.tlsHostname}
		}
		if b.connector != "" {
			backend["connector"] = map[string]any{"name": b.connector}
		}
	}
	// HTTPProxy: both finalizers, no labels or annotations (httpproxy_controller.go L208-221;
	// gateway_resource_replicator_controller.go L265-274).
	hp := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": prevProxyAPIVersion, "kind": "HTTPProxy",
		"metadata": map[string]any{"name": p.Name, "namespace": ns, "finalizers": []any{prevProxyFinalizer, prevReplicatorFinalizer}},
		"spec": map[string]any{"hostnames": []any{p.Hostname}, "rules": []any{map[string]any{
			"matches":  []any{map[string]any{"path": map[string]any{"type": "PathPrefix", "value": "/"}}},
			"backends": []any{backend}}}},
	}}
	if err := c.Create(ctx, hp); err != nil {
		return fmt.Errorf("creating HTTPProxy: %w", err)
	}
	p.Proxy = hp
	owned := metav1.ObjectMeta{Name: p.Name, Namespace: ns, OwnerReferences: []metav1.OwnerReference{
		prevController(prevProxyAPIVersion, "HTTPProxy", hp)}}

	// Gateway: created by the HTTPProxy controller with unnamed default listeners
	// (httpproxy_controller.go L789-833, listeners.go L60-85), then given the finalizer
	// and the canonical hostname by the Gateway controller (gateway_controller.go L195-220),
	// which needs the Gateway's UID: hence create, then update.
	gw := &gatewayv1.Gateway{ObjectMeta: *owned.DeepCopy(), Spec: gatewayv1.GatewaySpec{
		GatewayClassName: gatewayv1.ObjectName(l.in.GatewayClass), Listeners: prevUpListeners(nil, gatewayv1.Hostname(p.Hostname))}}
	if err := c.Create(ctx, gw); err != nil {
		return fmt.Errorf("creating Gateway: %w", err)
	}
	p.CanonicalHostname = PreviousCanonicalHostname(gw.UID, l.in.TargetDomain)
	gw.Finalizers = []string{prevGatewayFinalizer}
	gw.Spec.Listeners = prevUpListeners(ptr.To(gatewayv1.Hostname(p.CanonicalHostname)), gatewayv1.Hostname(p.Hostname))
	if err := c.Update(ctx, gw); err != nil {
		return fmt.Errorf("naming the Gateway's default listeners: %w", err)
	}
	p.Gateway = gw

	// EndpointSlice <p>-0-0 for endpoint and connector backends (httpproxy_controller.go
	// L943-1104, L342-407); finalizer from gateway_controller.go L2364-2369.
	ref := gatewayv1.BackendObjectReference{Group: ptr.To(gatewayv1.Group("discovery.k8s.io")), Kind: ptr.To(gatewayv1.Kind("EndpointSlice"))}
	rule := gatewayv1.HTTPRouteRule{Matches: []gatewayv1.HTTPRouteMatch{{Path: &gatewayv1.HTTPPathMatch{
		Type: ptr.To(gatewayv1.PathMatchPathPrefix), Value: ptr.To("/")}}}}
	if b.instance != "" {
		ref.Name, ref.Port = gatewayv1.ObjectName(b.instance), ptr.To(gatewayv1.PortNumber(b.instancePort))
	} else {
		w := b.wire()
		es := &discoveryv1.EndpointSlice{ObjectMeta: *owned.DeepCopy(), AddressType: discoveryv1.AddressTypeFQDN,
			Endpoints: []discoveryv1.Endpoint{{Addresses: []string{w.address}, Conditions: discoveryv1.EndpointConditions{
				Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)}}},
			Ports: []discoveryv1.EndpointPort{{Name: ptr.To("httpproxy-0-0"), Protocol: ptr.To(corev1.ProtocolTCP),
				AppProtocol: ptr.To(w.appProtocol), Port: ptr.To(w.port)}}}
		es.Name, es.Finalizers = p.Name+"-0-0", []string{prevGCFinalizer}
		if w.certHost != "" {
			es.Annotations = map[string]string{prevCertHostAnnotation: w.certHost}
		}
		if err := c.Create(ctx, es); err != nil {
			return fmt.Errorf("creating EndpointSlice: %w", err)
		}
		p.EndpointSlices = append(p.EndpointSlices, es)
		ref.Name, ref.Port = gatewayv1.ObjectName(es.Name), ptr.To(w.port)
		if w.rewrite != "" { // rule-level, appended last (httpproxy_controller.go L1013-1065)
			rule.Filters = []gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterURLRewrite,
				URLRewrite: &gatewayv1.HTTPURLRewriteFilter{Hostname: ptr.To(gatewayv1.PreciseHostname(w.rewrite))}}}
		}
	}
	rule.BackendRefs = []gatewayv1.HTTPBackendRef{{BackendRef: gatewayv1.BackendRef{BackendObjectReference: ref}}}

	// HTTPRoute: parentRefs by name only, no hostnames (httpproxy_controller.go L835-849,
	// L1106-1128); finalizer from gateway_controller.go L1921-1927.
	route := &gatewayv1.HTTPRoute{ObjectMeta: *owned.DeepCopy(), Spec: gatewayv1.HTTPRouteSpec{
		CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Name: gatewayv1.ObjectName(p.Name)}}},
		Rules:           []gatewayv1.HTTPRouteRule{rule}}}
	route.Finalizers = []string{prevGCFinalizer}
	if err := c.Create(ctx, route); err != nil {
		return fmt.Errorf("creating HTTPRoute: %w", err)
	}
	p.HTTPRoute = route
	return nil
}

// prevUpListeners are the UP Gateway's listeners (listeners.go L60-85;
// httpproxy_controller.go L802-833); canonical is nil until the Gateway controller names them.
func prevUpListeners(canonical *gatewayv1.Hostname, custom gatewayv1.Hostname) []gatewayv1.Listener {
	mk := func(name string, host *gatewayv1.Hostname, https bool) gatewayv1.Listener {
		l := gatewayv1.Listener{Name: gatewayv1.SectionName(name), Hostname: host, Port: 80, Protocol: gatewayv1.HTTPProtocolType,
			AllowedRoutes: &gatewayv1.AllowedRoutes{Namespaces: &gatewayv1.RouteNamespaces{From: ptr.To(gatewayv1.NamespacesFromSame)}}}
		if https {
			l.Port, l.Protocol = 443, gatewayv1.HTTPSProtocolType
			l.TLS = &gatewayv1.ListenerTLSConfig{Mode: ptr.To(gatewayv1.TLSModeTerminate),
				Options: map[gatewayv1.AnnotationKey]gatewayv1.AnnotationValue{prevIssuerOption: "auto"}}
		}
		return l
	}
	return []gatewayv1.Listener{mk("default-http", canonical, false), mk("default-https", canonical, true),
		mk("http-hostname-0", ptr.To(custom), false), mk("https-hostname-0", ptr.To(custom), true)}
}

// prevInstanceSlice is the CNI-published slice an instance backend names: tenant-labelled,
// so NSO neither finalizes it nor synthesizes a backend (gateway_controller.go L2346-2362).
func prevInstanceSlice(namespace, name string) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{PreviousTenantIDLabel: "prev-tenant"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.64.0.5"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(int32(8080))}},
	}
}

// prevWire is what NSO derives from an endpoint (httpproxy_controller.go L943-1074):
// the slice address, the backend-cert hostname, the Host rewrite, the port and scheme.
type prevWire struct {
	address, certHost, rewrite, appProtocol string
	port                                    int32
}

// wire derives prevWire for an endpoint or connector backend. No fixture backend has an
// IP literal, so only FQDN endpoints (cert host = rewrite = lowercased host, even when
// tls.hostname is set) and connectors (connector.local, neither) are handled.
func (b prevBackend) wire() prevWire {
	u, _ := url.Parse(b.endpoint)
	w := prevWire{address: u.Hostname(), appProtocol: u.Scheme, port: 80}
	if u.Scheme == "https" {
		w.port = 443
	}
	if s := u.Port(); s != "" {
		n, _ := strconv.Atoi(s)
		w.port = int32(n)
	}
	if b.connector != "" {
		w.address = "connector.local"
		return w
	}
	w.certHost = strings.ToLower(u.Hostname())
	w.rewrite = w.certHost
	return w
}

// hub writes the proxy's hub objects (section 2 of the shapes). The Gateway's, when
// gatewayFinalized, only its anchor (which halfDelete deletes): a hub side written and
// collected at once could race a cert-manager running against the hub, which writes a
// Certificate's Secret again, owner-less, when it applies one the garbage collector has
// just taken.
func (l *prevLayer) hub(ctx context.Context, p *PreviousProxy, b prevBackend, gatewayFinalized bool) error {
	gv := gatewayv1.SchemeGroupVersion
	hpAnchor, err := l.anchor(ctx, p, schema.GroupVersionKind{Group: "networking.datumapis.com", Version: "v1alpha", Kind: "HTTPProxy"}, p.Proxy)
	if err != nil {
		return err
	}
	gwAnchor, err := l.anchor(ctx, p, gv.WithKind("Gateway"), p.Gateway)
	if err != nil {
		return err
	}
	routeAnchor, err := l.anchor(ctx, p, gv.WithKind("HTTPRoute"), p.HTTPRoute)
	if err != nil {
		return err
	}
	// Replicated HTTPProxy: spec copied, the anchor's labels, no status
	// (gateway_resource_replicator_controller.go L359-392).
	cp := prevUnstructured(prevProxyAPIVersion, "HTTPProxy", l.attached(hpAnchor, p.Name), runtime.DeepCopyJSONValue(p.Proxy.Object["spec"]))
	if err := l.create(ctx, p, cp); err != nil {
		return err
	}
	if !gatewayFinalized {
		if err := l.hubGateway(ctx, p, gwAnchor); err != nil {
			return err
		}
	}
	return l.hubRoute(ctx, p, b, routeAnchor)
}

// hubGateway writes the DS Gateway, its Certificates and Secrets, and the hostname claim.
func (l *prevLayer) hubGateway(ctx context.Context, p *PreviousProxy, gwAnchor *corev1.ConfigMap) error {
	// DS Gateway: UP listeners copied, the issuer option replaced by a Secret ref
	// <p>-<listener> (gateway_controller.go L264-355, L703-793).
	ds := &gatewayv1.Gateway{ObjectMeta: l.attached(gwAnchor, p.Name), Spec: gatewayv1.GatewaySpec{GatewayClassName: gatewayv1.ObjectName(l.in.DownstreamClass)}}
	var tlsListeners []gatewayv1.Listener
	for _, up := range p.Gateway.Spec.Listeners {
		ln := *up.DeepCopy()
		if up.TLS != nil && up.TLS.Options[prevIssuerOption] != "" {
			ln.TLS = &gatewayv1.ListenerTLSConfig{Mode: ptr.To(gatewayv1.TLSModeTerminate), CertificateRefs: []gatewayv1.SecretObjectReference{
				{Group: ptr.To(gatewayv1.Group("")), Kind: ptr.To(gatewayv1.Kind("Secret")), Name: gatewayv1.ObjectName(p.Name + "-" + string(up.Name))}}}
			tlsListeners = append(tlsListeners, ln)
		}
		ds.Spec.Listeners = append(ds.Spec.Listeners, ln)
	}
	if err := l.create(ctx, p, ds); err != nil {
		return err
	}
	// What the edge reported, which NSO copied upstream (gateway_controller.go L1153-1231).
	ds.Status.Conditions = []metav1.Condition{prevTrue("Accepted", "Accepted", "Accepted", ds.Generation), prevTrue("Programmed", "Programmed", "Programmed", ds.Generation)}
	if err := l.in.Hub.Status().Update(ctx, ds); err != nil {
		return fmt.Errorf("writing hub Gateway status: %w", err)
	}
	for _, ln := range tlsListeners {
		if err := l.certificate(ctx, p, gwAnchor, ds, ln); err != nil {
			return err
		}
	}
	// Hostname claim, for the custom hostname only (gateway_controller.go L1233-1334).
	claim := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: l.in.ClaimsNamespace, Name: p.Hostname, Labels: map[string]string{
		anchor.LabelClusterName: l.clusterLbl, anchor.LabelNamespace: l.in.Namespace.Name, anchor.LabelName: p.Name}},
		Data: map[string]string{"owner": l.clusterRaw + "/" + l.in.Namespace.Name + "/" + p.Name}}
	return l.create(ctx, p, claim)
}

// certificate writes the Certificate of one HTTPS listener (gateway_controller.go
// L838-1044) and what cert-manager then leaves: the Secret and a Ready status. The
// Secret is written first, in the shape cert-manager writes it, so a cert-manager
// running against the hub finds the Certificate issued and leaves it so (a Certificate
// without its Secret would be issued anew); status writes retry on a conflict with it.
func (l *prevLayer) certificate(ctx context.Context, p *PreviousProxy, gwAnchor *corev1.ConfigMap, ds *gatewayv1.Gateway, ln gatewayv1.Listener) error {
	name, host := string(ln.TLS.CertificateRefs[0].Name), string(*ln.Hostname)
	certPEM, keyPEM, err := selfSigned([]string{host})
	if err != nil {
		return err
	}
	blk, _ := pem.Decode(certPEM)
	x, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		return err
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ds.Namespace, Name: name,
		Labels: map[string]string{anchor.LabelClusterName: l.clusterLbl, "controller.cert-manager.io/fao": "true"},
		Annotations: map[string]string{"cert-manager.io/certificate-name": name, "cert-manager.io/issuer-name": l.in.Issuer,
			"cert-manager.io/issuer-kind": "ClusterIssuer", "cert-manager.io/issuer-group": "", "cert-manager.io/alt-names": host, "cert-manager.io/common-name": host}},
		Type: corev1.SecretTypeTLS, Data: map[string][]byte{corev1.TLSCertKey: certPEM, corev1.TLSPrivateKeyKey: keyPEM}}
	if err := l.create(ctx, p, secret); err != nil {
		return err
	}
	meta := l.attached(gwAnchor, name)
	meta.OwnerReferences = append(meta.OwnerReferences, prevController("gateway.networking.k8s.io/v1", "Gateway", ds))
	cert := prevUnstructured("cert-manager.io/v1", "Certificate", meta, map[string]any{"secretName": name, "dnsNames": []any{host},
		"issuerRef":      map[string]any{"name": l.in.Issuer, "kind": "ClusterIssuer"},
		"secretTemplate": map[string]any{"labels": map[string]any{anchor.LabelClusterName: l.clusterLbl}}})
	if err := l.create(ctx, p, cert); err != nil {
		return err
	}
	// Owned by its Certificate, as cert-manager writes it with --enable-certificate-owner-ref,
	// so the Secret goes with the Certificate.
	owned := client.MergeFrom(secret.DeepCopy())
	secret.OwnerReferences = []metav1.OwnerReference{prevController("cert-manager.io/v1", "Certificate", cert)}
	if err := l.in.Hub.Patch(ctx, secret, owned); err != nil {
		return fmt.Errorf("owning Secret %s by its Certificate: %w", name, err)
	}
	ready, _ := runtime.DefaultUnstructuredConverter.ToUnstructured(ptr.To(prevTrue("Ready", "Ready", "Certificate is up to date and has not expired", cert.GetGeneration())))
	status := map[string]any{"conditions": []any{ready}, "revision": int64(1),
		"notBefore": x.NotBefore.UTC().Format(time.RFC3339), "notAfter": x.NotAfter.UTC().Format(time.RFC3339),
		"renewalTime": x.NotAfter.Add(-8 * time.Hour).UTC().Format(time.RFC3339)}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := l.in.Hub.Get(ctx, client.ObjectKeyFromObject(cert), cert); err != nil {
			return err
		}
		cert.Object["status"] = status
		return l.in.Hub.Status().Update(ctx, cert)
	})
	if err != nil {
		return fmt.Errorf("writing Certificate status: %w", err)
	}
	return nil
}

// hubRoute writes the DS HTTPRoute and, per UP slice backend, the Service, EndpointSlice
// and (https) BackendTLSPolicy, or the instance pass-through slice.
func (l *prevLayer) hubRoute(ctx context.Context, p *PreviousProxy, b prevBackend, routeAnchor *corev1.ConfigMap) error {
	up := p.HTTPRoute
	// DS HTTPRoute: parentRefs verbatim, rules with rewritten backendRefs
	// (gateway_controller.go L2053-2113, L2398-2452, L2537-2590).
	ds := &gatewayv1.HTTPRoute{ObjectMeta: l.attached(routeAnchor, p.Name)}
	ds.Spec.ParentRefs = up.Spec.ParentRefs
	for ri, r := range up.Spec.Rules {
		out := gatewayv1.HTTPRouteRule{Name: r.Name, Matches: r.Matches, Filters: r.Filters, Timeouts: r.Timeouts, Retry: r.Retry, SessionPersistence: r.SessionPersistence}
		for bi, br := range r.BackendRefs {
			ref := gatewayv1.BackendObjectReference{Namespace: ptr.To(gatewayv1.Namespace(l.hubNS)), Port: br.Port}
			if b.instance != "" {
				ref.Group, ref.Kind, ref.Name = br.Group, br.Kind, br.Name
			} else {
				ref.Kind, ref.Name = ptr.To(gatewayv1.Kind("Service")), gatewayv1.ObjectName(fmt.Sprintf("route-%s-rule-%d-backendref-%d", up.UID, ri, bi))
			}
			out.BackendRefs = append(out.BackendRefs, gatewayv1.HTTPBackendRef{Filters: br.Filters,
				BackendRef: gatewayv1.BackendRef{Weight: br.Weight, BackendObjectReference: ref}})
		}
		ds.Spec.Rules = append(ds.Spec.Rules, out)
	}
	if b.instance != "" {
		// The slice the CNI publishes on the hub, which NSO requires and never owns (gateway_controller.go L2564-2590).
		if err := l.create(ctx, p, prevInstanceSlice(l.hubNS, b.instance)); err != nil {
			return err
		}
	}
	if err := l.create(ctx, p, ds); err != nil {
		return err
	}
	ds.Status.Parents = []gatewayv1.RouteParentStatus{{ParentRef: ds.Spec.ParentRefs[0], ControllerName: EdgeControllerName, Conditions: []metav1.Condition{
		prevTrue("Accepted", "Accepted", "Route is accepted", ds.Generation), prevTrue("ResolvedRefs", "ResolvedRefs", "Resolved all the Object references", ds.Generation)}}}
	if err := l.in.Hub.Status().Update(ctx, ds); err != nil {
		return fmt.Errorf("writing hub HTTPRoute status: %w", err)
	}
	if b.instance != "" {
		return nil
	}
	return l.hubBackend(ctx, p, ds, p.EndpointSlices[0], ds.Spec.Rules[0].BackendRefs[0])
}

// hubBackend writes the Service, EndpointSlice and BackendTLSPolicy of one UP slice
// (gateway_controller.go L2371-2522, L2115-2213).
func (l *prevLayer) hubBackend(ctx context.Context, p *PreviousProxy, route *gatewayv1.HTTPRoute, upES *discoveryv1.EndpointSlice, ref gatewayv1.HTTPBackendRef) error {
	n := string(ref.Name)
	byRoute := prevController("gateway.networking.k8s.io/v1", "HTTPRoute", route)
	esAnchor, err := l.anchor(ctx, p, discoveryv1.SchemeGroupVersion.WithKind("EndpointSlice"), upES)
	if err != nil {
		return err
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: l.hubNS, Name: n, OwnerReferences: []metav1.OwnerReference{byRoute}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: corev1.ClusterIPNone,
			InternalTrafficPolicy: ptr.To(corev1.ServiceInternalTrafficPolicyCluster), TrafficDistribution: ptr.To(corev1.ServiceTrafficDistributionPreferClose)}}
	for _, pt := range upES.Ports {
		svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: ptr.Deref(pt.Name, ""), Protocol: ptr.Deref(pt.Protocol, corev1.ProtocolTCP), AppProtocol: pt.AppProtocol, Port: *pt.Port})
	}
	if err := l.create(ctx, p, svc); err != nil {
		return err
	}
	es := &discoveryv1.EndpointSlice{ObjectMeta: l.attached(esAnchor, n), AddressType: upES.AddressType, Endpoints: upES.Endpoints, Ports: upES.Ports}
	es.Labels[discoveryv1.LabelServiceName] = n
	es.OwnerReferences = append(es.OwnerReferences, byRoute)
	if err := l.create(ctx, p, es); err != nil {
		return err
	}
	if ptr.Deref(upES.Ports[0].AppProtocol, "") != "https" {
		return nil
	}
	btls := &gatewayv1.BackendTLSPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: l.hubNS, Name: n, OwnerReferences: []metav1.OwnerReference{byRoute}},
		Spec: gatewayv1.BackendTLSPolicySpec{
			TargetRefs: []gatewayv1.LocalPolicyTargetReferenceWithSectionName{{LocalPolicyTargetReference: gatewayv1.LocalPolicyTargetReference{
				Group: "", Kind: "Service", Name: gatewayv1.ObjectName(n)}, SectionName: ptr.To(gatewayv1.SectionName(*upES.Ports[0].Name))}},
			Validation: gatewayv1.BackendTLSPolicyValidation{WellKnownCACertificates: ptr.To(gatewayv1.WellKnownCACertificatesSystem),
				Hostname: gatewayv1.PreciseHostname(upES.Annotations[prevCertHostAnnotation])}}}
	return l.create(ctx, p, btls)
}

// upstreamStatus writes the status NSO's controllers write on the Gateway
// (gateway_controller.go L239-262, L433-445, L1153-1231, L1946-2048), the HTTPRoute
// (L2215-2284) and the proxy (httpproxy_controller.go L165-206, L433-609, L1151-1513).
func (l *prevLayer) upstreamStatus(ctx context.Context, p *PreviousProxy) error {
	c, gw, canon := l.in.Plane, p.Gateway, p.CanonicalHostname
	g := gw.Generation
	for _, h := range []string{canon, "v4." + canon, "v6." + canon} {
		gw.Status.Addresses = append(gw.Status.Addresses, gatewayv1.GatewayStatusAddress{Type: ptr.To(gatewayv1.HostnameAddressType), Value: h})
	}
	gw.Status.Conditions = []metav1.Condition{prevTrue("Accepted", "Accepted", "The Gateway has been scheduled by Datum Gateway", g),
		prevTrue("Programmed", "Programmed", "The Gateway has been programmed", g)}
	for _, ln := range gw.Spec.Listeners {
		gw.Status.Listeners = append(gw.Status.Listeners, gatewayv1.ListenerStatus{Name: ln.Name, AttachedRoutes: 1,
			SupportedKinds: []gatewayv1.RouteGroupKind{{Group: ptr.To(gatewayv1.Group(gatewayv1.GroupName)), Kind: "HTTPRoute"}},
			Conditions: []metav1.Condition{prevTrue("Accepted", "Accepted", "The listener has been accepted by the Datum Gateway", g),
				prevTrue("Programmed", "Programmed", "The listener has been programmed by the Datum Gateway", g),
				prevTrue("ResolvedRefs", "ResolvedRefs", "The listener has been resolved by the Datum Gateway", g)}})
	}
	if err := c.Status().Update(ctx, gw); err != nil {
		return fmt.Errorf("writing Gateway status: %w", err)
	}
	route := p.HTTPRoute
	route.Status.Parents = []gatewayv1.RouteParentStatus{{ParentRef: gatewayv1.ParentReference{Name: gatewayv1.ObjectName(p.Name)},
		ControllerName: gatewayv1.GatewayController(l.in.ControllerName), Conditions: []metav1.Condition{
			prevTrue("Accepted", "Accepted", "Route is accepted", route.Generation),
			prevTrue("ResolvedRefs", "ResolvedRefs", "Resolved all the Object references for the Route", route.Generation)}}}
	if err := c.Status().Update(ctx, route); err != nil {
		return fmt.Errorf("writing HTTPRoute status: %w", err)
	}

	hg := p.Proxy.GetGeneration()
	hosts := []string{canon, p.Hostname}
	sort.Strings(hosts)
	var statuses, names, addrs []any
	for _, h := range hosts {
		names = append(names, h)
		statuses = append(statuses, map[string]any{"hostname": h, "conditions": prevConds(
			prevTrue("Available", "Claimed", "Hostname successfully claimed", hg),
			prevTrue("CertificateReady", "CertificateIssued", "Certificate is ready", hg))})
	}
	for _, a := range gw.Status.Addresses {
		addrs = append(addrs, map[string]any{"type": string(*a.Type), "value": a.Value})
	}
	p.Proxy.Object["status"] = map[string]any{
		"conditions": prevConds(prevTrue("Accepted", "Accepted", "The HTTPProxy has been scheduled", hg),
			prevTrue("Programmed", "Programmed", "The HTTPProxy has been programmed", hg),
			prevTrue("HostnamesVerified", "HostnamesVerified", "All hostnames have been accepted and programmed", hg),
			prevTrue("CertificatesReady", "AllCertificatesReady", "All certificates are ready", hg)),
		"addresses": addrs, "canonicalHostname": canon, "hostnames": names, "hostnameStatuses": statuses,
	}
	if err := c.Status().Update(ctx, p.Proxy); err != nil {
		return fmt.Errorf("writing HTTPProxy status: %w", err)
	}
	return nil
}

// stranded writes an anchor of an upstream EndpointSlice gone-0-0 that does not exist,
// with the backend slice NSO left on it once its DS route was gone (gateway_controller.go
// L2417-2435; mappednamespace.go L152-203).
func (l *prevLayer) stranded(ctx context.Context, st *PreviousState) error {
	owner := anchor.Owner{Project: l.in.Project, Group: discoveryv1.GroupName, Kind: "EndpointSlice",
		Namespace: l.in.Namespace.Name, Name: "gone-0-0", UID: uuid.NewUUID()}
	a := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: l.hubNS, Name: anchor.Name(owner.UID), Labels: l.legacyLabels(owner)}}
	if err := l.in.Hub.Create(ctx, a); err != nil {
		return fmt.Errorf("creating stranded anchor: %w", err)
	}
	n := fmt.Sprintf("route-%s-rule-0-backendref-0", uuid.NewUUID())
	es := &discoveryv1.EndpointSlice{ObjectMeta: l.attached(a, n), AddressType: discoveryv1.AddressTypeFQDN,
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"gone-origin.example.org"}, Conditions: discoveryv1.EndpointConditions{
			Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)}}},
		Ports: []discoveryv1.EndpointPort{{Name: ptr.To("httpproxy-0-0"), Protocol: ptr.To(corev1.ProtocolTCP), AppProtocol: ptr.To("http"), Port: ptr.To(int32(80))}}}
	es.Labels[discoveryv1.LabelServiceName] = n
	if err := l.in.Hub.Create(ctx, es); err != nil {
		return fmt.Errorf("creating stranded EndpointSlice: %w", err)
	}
	st.StrandedAnchor, st.StrandedSlice = a, es
	return nil
}

// webhooks writes NSO's webhook configurations (config/webhook/manifests.yaml, rendered
// by config/default/kustomization.yaml; section 3 of the shapes). The real ones have no
// namespaceSelector and no name suffix: here each webhook only matches this test's
// namespace, and the names carry in.Suffix, so tests sharing a plane stay apart. The
// service has no pods, so every write they cover in that namespace fails.
func (l *prevLayer) webhooks(ctx context.Context) ([]client.Object, error) {
	type hook struct{ name, path, group, version, resource string }
	gw, eg := "gateway.networking.k8s.io", "gateway.envoyproxy.io"
	validating := []hook{
		{"vbackendtlspolicy-v1.kb.io", "/validate-gateway-networking-k8s-io-v1-backendtlspolicy", gw, "v1", "backendtlspolicies"},
		{"vgateway-v1.kb.io", "/validate-gateway-networking-k8s-io-v1-gateway", gw, "v1", "gateways"},
		{"vhttproute-v1.kb.io", "/validate-gateway-networking-k8s-io-v1-httproute", gw, "v1", "httproutes"},
		{"vdomain-v1alpha.kb.io", "/validate-networking-datumapis-com-v1alpha-domain", "networking.datumapis.com", "v1alpha", "domains"},
		{"vhttpproxy-v1alpha.kb.io", "/validate-networking-datumapis-com-v1alpha-httpproxy", "networking.datumapis.com", "v1alpha", "httpproxies"},
		{"vbackend-v1alpha1.kb.io", "/validate-gateway-envoyproxy-io-v1alpha1-backend", eg, "v1alpha1", "backends"},
		{"vbackendtrafficpolicy-v1alpha1.kb.io", "/validate-gateway-envoyproxy-io-v1alpha1-backendtrafficpolicy", eg, "v1alpha1", "backendtrafficpolicies"},
		{"vhttproutefilter-v1alpha1.kb.io", "/validate-gateway-envoyproxy-io-v1alpha1-httproutefilter", eg, "v1alpha1", "httproutefilters"},
		{"vsecuritypolicy-v1alpha1.kb.io", "/validate-gateway-envoyproxy-io-v1alpha1-securitypolicy", eg, "v1alpha1", "securitypolicies"},
	}
	parts := func(h hook) (admissionregistrationv1.WebhookClientConfig, []admissionregistrationv1.RuleWithOperations, *metav1.LabelSelector) {
		ops := []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update}
		if h.resource == "domains" {
			ops = []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Delete}
		}
		return admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{
				Namespace: "network-services-operator-system", Name: "network-services-operator-webhook-service", Path: ptr.To(h.path)}},
			[]admissionregistrationv1.RuleWithOperations{{Operations: ops, Rule: admissionregistrationv1.Rule{
				APIGroups: []string{h.group}, APIVersions: []string{h.version}, Resources: []string{h.resource}}}},
			&metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: l.in.Namespace.Name}}
	}
	name := func(base string) string {
		if l.in.Suffix == "" {
			return base
		}
		return base + "-" + l.in.Suffix
	}
	fail, none := ptr.To(admissionregistrationv1.Fail), ptr.To(admissionregistrationv1.SideEffectClassNone)
	v := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name("network-services-operator-validating-webhook-configuration")}}
	for _, h := range validating {
		cc, rules, sel := parts(h)
		v.Webhooks = append(v.Webhooks, admissionregistrationv1.ValidatingWebhook{Name: h.name, ClientConfig: cc, Rules: rules,
			NamespaceSelector: sel, FailurePolicy: fail, SideEffects: none, AdmissionReviewVersions: []string{"v1"}})
	}
	cc, rules, sel := parts(hook{"mgateway-v1.kb.io", "/mutate-gateway-networking-k8s-io-v1-gateway", gw, "v1", "gateways"})
	m := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name("network-services-operator-mutating-webhook-configuration")},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: "mgateway-v1.kb.io", ClientConfig: cc, Rules: rules,
			NamespaceSelector: sel, FailurePolicy: fail, SideEffects: none, AdmissionReviewVersions: []string{"v1"}}}}
	var out []client.Object
	for _, o := range []client.Object{v, m} {
		if err := l.in.Plane.Create(ctx, o); err != nil {
			return out, fmt.Errorf("creating %s: %w", o.GetName(), err)
		}
		out = append(out, o)
	}
	return out, nil
}

// anchor creates the anchor ConfigMap of an upstream object (mappednamespace.go
// L152-187): no data, the five labels with the legacy cluster value.
func (l *prevLayer) anchor(ctx context.Context, p *PreviousProxy, gvk schema.GroupVersionKind, obj metav1.Object) (*corev1.ConfigMap, error) {
	owner := anchor.OwnerOf(l.in.Project, gvk, obj)
	a := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: l.hubNS, Name: anchor.Name(owner.UID), Labels: l.legacyLabels(owner)}}
	return a, l.create(ctx, p, a)
}

// legacyLabels are owner's five labels with the cluster value NSO wrote.
func (l *prevLayer) legacyLabels(owner anchor.Owner) map[string]string {
	labels := owner.Labels()
	labels[anchor.LabelClusterName] = l.clusterLbl
	return labels
}

// attached is the metadata NSO gives a hub object of an anchor: the anchor's labels and
// a non-controller ownerRef to it (mappednamespace.go L189-203).
func (l *prevLayer) attached(a *corev1.ConfigMap, name string) metav1.ObjectMeta {
	labels := make(map[string]string, len(a.Labels)+1)
	for k, v := range a.Labels {
		labels[k] = v
	}
	return metav1.ObjectMeta{Namespace: l.hubNS, Name: name, Labels: labels,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: a.Name, UID: a.UID}}}
}

// create writes obj on the hub and records it as one of p's hub objects.
func (l *prevLayer) create(ctx context.Context, p *PreviousProxy, obj client.Object) error {
	if err := l.in.Hub.Create(ctx, obj); err != nil {
		return fmt.Errorf("creating hub %T %s/%s: %w", obj, obj.GetNamespace(), obj.GetName(), err)
	}
	p.Hub = append(p.Hub, obj)
	return nil
}

// prevUnstructured is an object of apiVersion and kind with meta and spec.
func prevUnstructured(apiVersion, kind string, meta metav1.ObjectMeta, spec any) *unstructured.Unstructured {
	m, _ := runtime.DefaultUnstructuredConverter.ToUnstructured(&meta)
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind, "metadata": m, "spec": spec}}
}

// prevController is a controller ownerRef, as controllerutil.SetControllerReference writes it.
func prevController(apiVersion, kind string, owner metav1.Object) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: owner.GetName(), UID: owner.GetUID(),
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}
}

func prevTrue(typ, reason, message string, generation int64) metav1.Condition {
	return metav1.Condition{Type: typ, Status: metav1.ConditionTrue, Reason: reason, Message: message,
		ObservedGeneration: generation, LastTransitionTime: metav1.Now()}
}

// prevConds converts conditions for an unstructured status.
func prevConds(conds ...metav1.Condition) []any {
	out := make([]any, 0, len(conds))
	for i := range conds {
		m, _ := runtime.DefaultUnstructuredConverter.ToUnstructured(&conds[i])
		out = append(out, m)
	}
	return out
}

// prevWords stands in for NSO's dictionary (internal/words/words.go); only the form matters.
var prevWords = []string{"amber", "birch", "cedar", "delta", "ember", "fjord", "grove", "harbor",
	"island", "juniper", "kelp", "lagoon", "meadow", "nectar", "orchid", "pebble"}

// PreviousCanonicalHostname is NSO's platform hostname of the Gateway with uid:
// "<word>-<word>-<5 chars>.<targetDomain>" from sha256(uid) (internal/words/words.go
// L20-35; gateway_controller.go L1522-1552), over a word list of this file's own.
func PreviousCanonicalHostname(uid types.UID, targetDomain string) string {
	d := sha256.Sum256([]byte(uid))
	const charset = "bcdfghjkmnpqrstvwxyz23456789"
	var chars [5]byte
	for i := range chars {
		chars[i] = charset[int(d[i])%len(charset)]
	}
	w1 := prevWords[int(binary.BigEndian.Uint16(d[5:7]))%len(prevWords)]
	w2 := prevWords[int(binary.BigEndian.Uint16(d[7:9]))%len(prevWords)]
	return fmt.Sprintf("%s-%s-%s.%s", w1, w2, chars[:], targetDomain)
}

// kindFinalizers are the previous manager's finalizers of one upstream kind of a proxy.
type kindFinalizers struct {
	kind       string
	finalizers []string
}

// previousFinalizers are NSO's finalizers of each upstream kind of a proxy, in the order
// its controllers add them: the proxy's by its HTTPProxy controller (which removes a
// connector's EnvoyPatchPolicy) and by its replicator (which deletes the proxy's hub
// copy and anchor); the Gateway's by its Gateway controller (the Gateway's anchor and
// hostname claims); the route's and the backend slice's by its downstream GC controller
// (their anchors and, for a route, its hub backend slices). (httpproxy_controller.go
// L102, L147-157; gateway_resource_replicator_controller.go L45, L285-305, L721-750;
// gateway_controller.go L54-55, L155-166, L1642-1730; gateway_downstream_gc_controller.go
// L82-150.)
var previousFinalizers = []kindFinalizers{
	{"HTTPProxy", []string{prevProxyFinalizer, prevReplicatorFinalizer}},
	{"Gateway", []string{prevGatewayFinalizer}},
	{"HTTPRoute", []string{prevGCFinalizer}},
	{"EndpointSlice", []string{prevGCFinalizer}},
}

// HalfDone is a deletion of one proxy the previous manager started and did not finish
// before it was scaled to zero.
type HalfDone struct {
	// Proxy is the proxy's name.
	Proxy string
	// Left maps each of the proxy's upstream kinds still Terminating to the finalizers it
	// keeps. Without HTTPProxy the proxy is gone (NSO finished it), and so is each child
	// kind not listed (NSO finalized it); with it, the children are live, since a plane's
	// garbage collector deletes them only once the proxy is gone.
	Left map[string][]string
	// Orphaned leaves the children live when the proxy is gone: NSO finished the proxy on
	// a plane with no garbage collector to delete what it controlled (Left is empty).
	Orphaned bool
}

// String names the kinds left Terminating and what each keeps.
func (h HalfDone) String() string {
	var parts []string
	if _, ok := h.Left["HTTPProxy"]; !ok {
		parts = append(parts, "HTTPProxy gone")
	}
	if h.Orphaned {
		parts = append(parts, "its Gateway, HTTPRoute and EndpointSlice live")
	}
	for _, kf := range previousFinalizers {
		if keep, ok := h.Left[kf.kind]; ok {
			parts = append(parts, kf.kind+" on "+strings.Join(keep, ", "))
		}
	}
	return strings.Join(parts, "; ")
}

// PreviousHalfDone returns every deletion NSO may leave half done, one proxy each: for
// each kind, every non-empty subset of its finalizers left on an object of that kind
// being deleted (named half-<kind>-<bits>, bit i for the kind's finalizer i); every child
// at once, as a plane's garbage collector leaves them when NSO finalized none of them
// (half-cascade), or all live, as a plane without one keeps them (half-orphans); and a
// connector proxy whose replicator finished and whose HTTPProxy controller did not
// (half-connector).
func PreviousHalfDone() []HalfDone {
	var out []HalfDone
	cascade := map[string][]string{}
	for _, kf := range previousFinalizers {
		for bits := 1; bits < 1<<len(kf.finalizers); bits++ {
			var keep []string
			for i, f := range kf.finalizers {
				if bits&(1<<i) != 0 {
					keep = append(keep, f)
				}
			}
			out = append(out, HalfDone{Proxy: fmt.Sprintf("half-%s-%d", strings.ToLower(kf.kind), bits), Left: map[string][]string{kf.kind: keep}})
		}
		if kf.kind != "HTTPProxy" {
			cascade[kf.kind] = kf.finalizers
		}
	}
	return append(out, HalfDone{Proxy: "half-cascade", Left: cascade}, HalfDone{Proxy: "half-orphans", Orphaned: true},
		HalfDone{Proxy: "half-connector", Left: map[string][]string{"HTTPProxy": {prevProxyFinalizer}}})
}

// gatewayFinalized reports whether NSO finalized the proxy's Gateway before it stopped.
func (h HalfDone) gatewayFinalized() bool {
	_, proxyLeft := h.Left["HTTPProxy"]
	_, gatewayLeft := h.Left["Gateway"]
	return !proxyLeft && !gatewayLeft && !h.Orphaned
}

// halfDelete leaves p's deletion as h says NSO left it: first what NSO finished (on the
// hub and on the plane), then each object left Terminating on the finalizers it keeps.
func (l *prevLayer) halfDelete(ctx context.Context, p *PreviousProxy, h HalfDone) error {
	keep, proxyLeft := h.Left["HTTPProxy"]
	if !proxyLeft && !h.Orphaned {
		for _, c := range p.upstreamChildren() {
			childKeeps, left := h.Left[c.kind]
			if !left {
				if err := l.finalized(ctx, p, c); err != nil {
					return err
				}
			}
			if err := deleteKeeping(ctx, l.in.Plane, c.obj, childKeeps); err != nil {
				return err
			}
		}
	}
	if !slices.Contains(keep, prevReplicatorFinalizer) {
		// The replicator's part: the proxy's hub copy, then its anchor.
		cp := prevUnstructured(prevProxyAPIVersion, "HTTPProxy", metav1.ObjectMeta{Namespace: l.hubNS, Name: p.Name}, nil)
		if err := l.deleteHub(ctx, cp, l.anchorRef(p.Proxy.GetUID())); err != nil {
			return err
		}
	}
	return deleteKeeping(ctx, l.in.Plane, p.Proxy, keep)
}

// prevChild is one upstream object a proxy controls, with its kind.
type prevChild struct {
	kind string
	obj  client.Object
}

// upstreamChildren are the upstream objects NSO wrote for p and finalizes: its Gateway,
// HTTPRoute and backend EndpointSlices (not the tenant network's instance slice).
func (p *PreviousProxy) upstreamChildren() []prevChild {
	out := []prevChild{{"Gateway", p.Gateway}, {"HTTPRoute", p.HTTPRoute}}
	for _, es := range p.EndpointSlices {
		if _, tenant := es.Labels[PreviousTenantIDLabel]; !tenant {
			out = append(out, prevChild{"EndpointSlice", es})
		}
	}
	return out
}

// finalized does on the hub what NSO's finalizer of c does before removing itself: a
// Gateway's anchor and hostname claim; a route's anchor and hub backend slices; a
// backend slice's anchor. The hub's garbage collector takes what hangs on an anchor.
func (l *prevLayer) finalized(ctx context.Context, p *PreviousProxy, c prevChild) error {
	objs := []client.Object{l.anchorRef(c.obj.GetUID())}
	switch c.kind {
	case "Gateway":
		objs = append(objs, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: l.in.ClaimsNamespace, Name: p.Hostname}})
	case "HTTPRoute":
		for ri, r := range p.HTTPRoute.Spec.Rules {
			for bi := range r.BackendRefs {
				objs = append(objs, &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: l.hubNS,
					Name: fmt.Sprintf("route-%s-rule-%d-backendref-%d", p.HTTPRoute.UID, ri, bi)}})
			}
		}
	}
	return l.deleteHub(ctx, objs...)
}

// anchorRef is the anchor of the upstream object with uid, for a delete.
func (l *prevLayer) anchorRef(uid types.UID) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: l.hubNS, Name: anchor.Name(uid)}}
}

// deleteHub deletes objs from the hub, in order; one already gone is no error.
func (l *prevLayer) deleteHub(ctx context.Context, objs ...client.Object) error {
	for _, o := range objs {
		if err := l.in.Hub.Delete(ctx, o); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting hub %T %s/%s: %w", o, o.GetNamespace(), o.GetName(), err)
		}
	}
	return nil
}

// deleteKeeping deletes obj and leaves it Terminating on the finalizers keep, or gone
// when keep is empty; obj is left as last read.
func deleteKeeping(ctx context.Context, c client.Client, obj client.Object, keep []string) error {
	if err := c.Delete(ctx, obj); err != nil {
		return fmt.Errorf("deleting %T %s: %w", obj, obj.GetName(), err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
		return fmt.Errorf("reading %T %s: %w", obj, obj.GetName(), err)
	}
	obj.SetFinalizers(keep)
	if err := c.Update(ctx, obj); err != nil {
		return fmt.Errorf("leaving %T %s on finalizers %v: %w", obj, obj.GetName(), keep, err)
	}
	return nil
}

// selfSigned is a certificate for dns signed by its own key: what the previous
// manager's cert-manager left in a listener's Secret, for a fixture.
// selfSigned returns a PEM certificate and key for dns, valid for a day.
func selfSigned(dns []string) (certPEM, keyPEM []byte, err error) {
	key, tmpl, err := newKeyAndTemplate(dns[0])
	if err != nil {
		return nil, nil, err
	}
	tmpl.DNSNames = dns
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	return signPEM(tmpl, tmpl, key, key)
}
