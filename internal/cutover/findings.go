package cutover

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"anchorage/pkg/anchor"
	"anchorage/pkg/netpolicy"
)

// Finalizers the previous manager wrote that anchorage honours (wire format).
const (
	FinalizerHTTPProxyCleanup = "networking.datumapis.com/httpproxy-cleanup"
	FinalizerReplicator       = "gateway.networking.datumapis.com/gateway-resource-replicator"
	FinalizerGateway          = "gateway.networking.datumapis.com/gateway-controller"
	FinalizerGC               = "gateway.networking.datumapis.com/gateway-controller-gc"
)

// Kinds the check reads.
const (
	KindHTTPProxy     = "HTTPProxy"
	KindGateway       = "Gateway"
	KindHTTPRoute     = "HTTPRoute"
	KindEndpointSlice = "EndpointSlice"
	KindDomain        = "Domain"
	KindCertificate   = "Certificate"
	KindValidating    = "ValidatingWebhookConfiguration"
	KindMutating      = "MutatingWebhookConfiguration"
	KindSecret        = "Secret"
)

// Honoured are the finalizers someone removes after the cut-over, per kind on a plane:
// anchorage's own (the previous manager's names), besides the garbage collector's
// (orphan, foregroundDeletion), which are honoured on every kind.
var Honoured = map[string][]string{
	KindHTTPProxy:     {FinalizerHTTPProxyCleanup, FinalizerReplicator},
	KindGateway:       {FinalizerGateway},
	KindHTTPRoute:     {FinalizerGC},
	KindEndpointSlice: {FinalizerGC},
}

// Options are what the replicas will run with, as their configuration file says.
type Options struct {
	// GatewayClass is the replicas' gateway.gatewayClassName (default "anchorage").
	GatewayClass string
	// IssuerName is the replicas' gateway.certificateIssuer.name (default "anchorage").
	IssuerName string
	// DownstreamGatewayClass is the replicas' gateway.downstreamGatewayClassName (default
	// "anchorage-edge").
	DownstreamGatewayClass string
	// Projects, when not empty, limits the hub's per-project rows to these projects (the
	// planes checked are the ones Check is given). Hub-level rows (webhooks, reads that
	// failed) are always reported.
	Projects []string
	// Workers is how many planes are read at once (default 4).
	Workers int
	// BackendReservedDomains are the replicas' gateway.backendReservedDomains: backend
	// names in them are refused on top of netpolicy.RefusedName's rule.
	BackendReservedDomains []string
}

// The replicas' defaults (pkg/gateway; cmd/manager's tests check they agree).
const (
	DefaultGatewayClass           = "anchorage"
	DefaultIssuerName             = "anchorage"
	DefaultDownstreamGatewayClass = "anchorage-edge"
)

// WithDefaults fills in what is unset.
func (o Options) WithDefaults() Options {
	if o.GatewayClass == "" {
		o.GatewayClass = DefaultGatewayClass
	}
	if o.IssuerName == "" {
		o.IssuerName = DefaultIssuerName
	}
	if o.DownstreamGatewayClass == "" {
		o.DownstreamGatewayClass = DefaultDownstreamGatewayClass
	}
	if o.Workers <= 0 {
		o.Workers = 4
	}
	return o
}

func (o Options) covers(project string) bool {
	return len(o.Projects) == 0 || slices.Contains(o.Projects, project)
}

// TerminatingRows returns a blocked row per object of kind (one of Honoured's kinds)
// that is terminating (deletionTimestamp set) on a finalizer nothing will remove once
// the previous manager is gone: neither anchorage's for that kind nor the garbage
// collector's.
func TerminatingRows(project, kind string, objs []metav1.Object) []Row {
	var rows []Row
	for _, o := range objs {
		if o.GetDeletionTimestamp() == nil {
			continue
		}
		var stuck []string
		for _, f := range o.GetFinalizers() {
			if f == metav1.FinalizerOrphanDependents || f == metav1.FinalizerDeleteDependents || slices.Contains(Honoured[kind], f) {
				continue
			}
			stuck = append(stuck, f)
		}
		if len(stuck) == 0 {
			continue
		}
		word := "finalizer"
		if len(stuck) > 1 {
			word = "finalizers"
		}
		rows = append(rows, Row{
			Verdict: Blocked, Project: project, Kind: kind, Namespace: o.GetNamespace(), Name: o.GetName(),
			Detail: fmt.Sprintf("terminating since %s on %s %s, which nothing removes after the cut-over (anchorage honours only %s on %s): let the previous manager finish deleting it before you stop it, or remove the %s once what it guards is cleaned up",
				o.GetDeletionTimestamp().UTC().Format(time.RFC3339), word, strings.Join(stuck, ", "), strings.Join(Honoured[kind], " and "), plural(kind), word),
		})
	}
	return rows
}

// plural is a kind's plural, as the detail names it.
func plural(kind string) string {
	if strings.HasSuffix(kind, "y") {
		return strings.TrimSuffix(kind, "y") + "ies"
	}
	return kind + "s"
}

// ProxyRows returns, for HTTPProxies read as unstructured objects (so the check does not
// depend on the Go type's fields): an adopted row per proxy carrying the previous
// manager's replicator finalizer, a left row per proxy with a connector or instance
// backend, and a changed row per other proxy with an endpoint anchorage refuses (a
// name that is not a public DNS name or is in opts.BackendReservedDomains, an IP
// address that is not public unicast: refusedEndpoints). It also returns the UIDs of
// the left ones: what was programmed for them is left alone, so no other row is
// reported about it.
func ProxyRows(project string, proxies []unstructured.Unstructured, opts Options) ([]Row, map[types.UID]bool) {
	var rows []Row
	left := map[types.UID]bool{}
	for i := range proxies {
		p := &proxies[i]
		if slices.Contains(p.GetFinalizers(), FinalizerReplicator) {
			rows = append(rows, Row{
				Verdict: Adopted, Project: project, Kind: KindHTTPProxy, Namespace: p.GetNamespace(), Name: p.GetName(),
				Detail: fmt.Sprintf("carries %s, which anchorage honours: when the proxy is deleted its hub copy goes with the proxy's anchor, then the finalizer is removed", FinalizerReplicator),
			})
		}
		if unsupported := unsupportedBackends(p); len(unsupported) > 0 {
			left[p.GetUID()] = true
			rows = append(rows, Row{
				Verdict: Left, Project: project, Kind: KindHTTPProxy, Namespace: p.GetNamespace(), Name: p.GetName(),
				Detail: fmt.Sprintf("%s: anchorage cannot program these; the proxy gets Accepted=False, reason UnsupportedBackend, and nothing programmed for it (its Gateway, HTTPRoute, EndpointSlices, hub objects) is touched",
					strings.Join(unsupported, "; ")),
			})
			continue
		}
		if refused := refusedEndpoints(p, opts.BackendReservedDomains); len(refused) > 0 {
			rows = append(rows, Row{
				Verdict: Changed, Project: project, Kind: KindHTTPProxy, Namespace: p.GetNamespace(), Name: p.GetName(),
				Detail: fmt.Sprintf("%s: anchorage refuses these; the proxy gets Accepted=False, reason Invalid, with the reason, the refused backend is taken off the hub and the edge (its route's ResolvedRefs=False, RefNotPermitted), and the proxy's other backends and every other proxy keep serving; change the endpoint to a public DNS name or a public IP address before the cut-over",
					strings.Join(refused, "; ")),
			})
		}
	}
	return rows, left
}

// refusedEndpoints says why each of a proxy's endpoint backends anchorage refuses is
// refused: the replicas' judgement (pkg/gateway refusedBackends), without the
// operator's gateway.backendDeniedNetworks.
func refusedEndpoints(p *unstructured.Unstructured, reserved []string) []string {
	var out []string
	rules, _, _ := unstructured.NestedSlice(p.Object, "spec", "rules")
	for i, r := range rules {
		rule, _ := r.(map[string]any)
		backends, _, _ := unstructured.NestedSlice(rule, "backends")
		for _, b := range backends {
			backend, _ := b.(map[string]any)
			endpoint, _, _ := unstructured.NestedString(backend, "endpoint")
			if endpoint == "" {
				continue
			}
			u, err := url.Parse(endpoint)
			if err != nil {
				continue // the proxy is Invalid for its endpoint already
			}
			host := u.Hostname()
			why := ""
			if _, err := netip.ParseAddr(host); err == nil {
				why = netpolicy.Refused(host, nil)
			} else {
				why = netpolicy.RefusedName(host, reserved)
			}
			if why != "" {
				out = append(out, fmt.Sprintf("rule %d: backend %q: %s", i, endpoint, why))
			}
		}
	}
	return out
}

// unsupportedBackends names a proxy's connector and instance backends.
func unsupportedBackends(p *unstructured.Unstructured) []string {
	var out []string
	rules, _, _ := unstructured.NestedSlice(p.Object, "spec", "rules")
	for i, r := range rules {
		rule, _ := r.(map[string]any)
		backends, _, _ := unstructured.NestedSlice(rule, "backends")
		for _, b := range backends {
			backend, _ := b.(map[string]any)
			for _, field := range []string{"connector", "instance"} {
				ref, ok := backend[field]
				if !ok || ref == nil {
					continue
				}
				name, _, _ := unstructured.NestedString(backend, field, "name")
				if name == "" {
					name = "unnamed"
				}
				out = append(out, fmt.Sprintf("rule %d has a %s backend (%s)", i, field, name))
			}
		}
	}
	return out
}

// controllingProxy returns the name and UID of the HTTPProxy controlling obj.
func controllingProxy(obj metav1.Object) (string, types.UID, bool) {
	ref := metav1.GetControllerOf(obj)
	if ref == nil || ref.Kind != KindHTTPProxy || !strings.HasPrefix(ref.APIVersion, "networking.datumapis.com/") {
		return "", "", false
	}
	return ref.Name, ref.UID, true
}

// httpHostnameListener is the previous manager's per-hostname HTTP listener name.
var httpHostnameListener = regexp.MustCompile(`^http-hostname-[0-9]+$`)

// GatewayRows returns changed rows for the upstream Gateways an HTTPProxy controls that
// anchorage rewrites when it takes them over: a gatewayClassName other than
// opts.GatewayClass, and the previous manager's http-hostname-<n> listeners, which
// become one http listener. Gateways of proxies in left, and terminating ones, are not
// rewritten.
func GatewayRows(project string, gws []gatewayv1.Gateway, left map[types.UID]bool, opts Options) []Row {
	opts = opts.WithDefaults()
	var rows []Row
	for i := range gws {
		gw := &gws[i]
		proxy, uid, ok := controllingProxy(gw)
		if !ok || left[uid] || gw.DeletionTimestamp != nil {
			continue
		}
		row := Row{Verdict: Changed, Project: project, Kind: KindGateway, Namespace: gw.Namespace, Name: gw.Name}
		if class := string(gw.Spec.GatewayClassName); class != opts.GatewayClass {
			row.Detail = fmt.Sprintf("HTTPProxy %s's Gateway: gatewayClassName %q becomes %q (gateway.gatewayClassName); GatewayClass %q must exist on this plane, its controllerName the replicas' gateway.controllerName",
				proxy, class, opts.GatewayClass, opts.GatewayClass)
			rows = append(rows, row)
		}
		var merged []string
		for _, l := range gw.Spec.Listeners {
			if httpHostnameListener.MatchString(string(l.Name)) {
				merged = append(merged, string(l.Name))
			}
		}
		if len(merged) > 0 {
			which := "listeners " + strings.Join(merged, ", ") + " become"
			if len(merged) == 1 {
				which = "listener " + merged[0] + " becomes"
			}
			row.Detail = fmt.Sprintf("HTTPProxy %s's Gateway: %s the one listener %q (port 80, every hostname of the proxy)", proxy, which, "http")
			rows = append(rows, row)
		}
	}
	return rows
}

// RouteRows returns a changed row per upstream HTTPRoute an HTTPProxy controls whose
// backendRefs name EndpointSlices (the previous manager's backends): anchorage rewrites
// them to the ExternalName Services <proxy>-backend-<rule>. Routes of proxies in left,
// and terminating ones, are not rewritten.
func RouteRows(project string, routes []gatewayv1.HTTPRoute, left map[types.UID]bool) []Row {
	var rows []Row
	for i := range routes {
		rt := &routes[i]
		proxy, uid, ok := controllingProxy(rt)
		if !ok || left[uid] || rt.DeletionTimestamp != nil {
			continue
		}
		var rewrites []string
		for r, rule := range rt.Spec.Rules {
			var refs []string
			for _, ref := range rule.BackendRefs {
				if isEndpointSliceRef(ref.BackendObjectReference) {
					refs = append(refs, string(ref.Name))
				}
			}
			if len(refs) > 0 {
				rewrites = append(rewrites, fmt.Sprintf("rule %d: EndpointSlice %s -> Service %s", r, strings.Join(refs, ", "), BackendServiceName(proxy, r)))
			}
		}
		if len(rewrites) > 0 {
			rows = append(rows, Row{
				Verdict: Changed, Project: project, Kind: KindHTTPRoute, Namespace: rt.Namespace, Name: rt.Name,
				Detail: fmt.Sprintf("HTTPProxy %s's HTTPRoute: backendRefs of kind EndpointSlice are rewritten to ExternalName Services anchorage writes on this plane (%s)",
					proxy, strings.Join(rewrites, "; ")),
			})
		}
	}
	return rows
}

func isEndpointSliceRef(ref gatewayv1.BackendObjectReference) bool {
	return ref.Kind != nil && *ref.Kind == KindEndpointSlice && ref.Group != nil && *ref.Group == "discovery.k8s.io"
}

// BackendServiceName is the name anchorage gives the Service standing for the backend
// of proxy's rule at index rule (pkg/gateway's naming, a wire format):
// "<proxy>-backend-<rule>" when that is a DNS-1035 label, else
// "backend-<12 hex digits of the proxy name's SHA-256>-<rule>".
func BackendServiceName(proxy string, rule int) string {
	readable := proxy + "-backend-" + strconv.Itoa(rule)
	if len(validation.IsDNS1035Label(readable)) == 0 {
		return readable
	}
	sum := sha256.Sum256([]byte(proxy))
	return "backend-" + hex.EncodeToString(sum[:])[:12] + "-" + strconv.Itoa(rule)
}

// EndpointSliceRows returns an adopted row per upstream EndpointSlice carrying the
// previous manager's gateway-controller-gc finalizer, which anchorage honours.
func EndpointSliceRows(project string, slices []metav1.PartialObjectMetadata) []Row {
	var rows []Row
	for i := range slices {
		s := &slices[i]
		if !hasFinalizer(s, FinalizerGC) {
			continue
		}
		rows = append(rows, Row{
			Verdict: Adopted, Project: project, Kind: KindEndpointSlice, Namespace: s.Namespace, Name: s.Name,
			Detail: fmt.Sprintf("carries %s, which anchorage honours: when it is deleted its anchor on the hub goes, then the finalizer is removed", FinalizerGC),
		})
	}
	return rows
}

// DomainRows are the rows of the previous manager's Domains: each is adopted as it is
// stored. A Verified one keeps its hostnames programmable; a pending one keeps its proof
// (the token a tenant may already have published) and is checked again by anchorage.
func DomainRows(project string, domains []unstructured.Unstructured) []Row {
	rows := make([]Row, 0, len(domains))
	for i := range domains {
		d := &domains[i]
		name, _, _ := unstructured.NestedString(d.Object, "spec", "domainName")
		record, _, _ := unstructured.NestedString(d.Object, "status", "verification", "dnsRecord", "name")
		token, _, _ := unstructured.NestedString(d.Object, "status", "verification", "dnsRecord", "content")
		detail := fmt.Sprintf("pending: anchorage gives %s its proof and checks it; hostnames under it are programmed once it is Verified", name)
		switch {
		case conditionTrue(d, "Verified"):
			detail = fmt.Sprintf("Verified: hostnames under %s are programmed as before", name)
		case token != "":
			detail = fmt.Sprintf("pending: keeps its proof (TXT %s, content %s) and is checked again; hostnames under %s are programmed once it is Verified, those programmed today stay", record, token, name)
		}
		rows = append(rows, Row{Verdict: Adopted, Project: project, Kind: KindDomain, Namespace: d.GetNamespace(), Name: d.GetName(), Detail: detail})
	}
	return rows
}

// conditionTrue reports whether u's status carries condition typ with status True.
func conditionTrue(u *unstructured.Unstructured, typ string) bool {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == typ && m["status"] == "True" {
			return true
		}
	}
	return false
}

func hasFinalizer(o metav1.Object, f string) bool { return slices.Contains(o.GetFinalizers(), f) }

// Upstream identifies an upstream object by project, namespace and name.
type Upstream struct{ Project, Namespace, Name string }

// LeftObjects are the upstream objects programmed for proxies anchorage leaves alone
// (ProxyRows' left): their Gateways and their HTTPRoutes' UIDs. The hub objects written
// for them are not reported either.
type LeftObjects struct {
	Gateways  map[Upstream]bool
	RouteUIDs map[types.UID]bool
}

// Add collects, from one plane's Gateways and HTTPRoutes, those the proxies in left
// control.
func (l *LeftObjects) Add(project string, left map[types.UID]bool, gws []gatewayv1.Gateway, routes []gatewayv1.HTTPRoute) {
	if l.Gateways == nil {
		l.Gateways, l.RouteUIDs = map[Upstream]bool{}, map[types.UID]bool{}
	}
	for i := range gws {
		if _, uid, ok := controllingProxy(&gws[i]); ok && left[uid] {
			l.Gateways[Upstream{project, gws[i].Namespace, gws[i].Name}] = true
		}
	}
	for i := range routes {
		if _, uid, ok := controllingProxy(&routes[i]); ok && left[uid] {
			l.RouteUIDs[routes[i].UID] = true
		}
	}
}

// upstreamOf reads the upstream owner a hub object's labels name; project is "" when
// the cluster label does not decode.
func upstreamOf(labels map[string]string) Upstream {
	project, _ := anchor.ProjectFromClusterName(labels[anchor.LabelClusterName])
	return Upstream{Project: project, Namespace: labels[anchor.LabelNamespace], Name: labels[anchor.LabelName]}
}

// whose names the upstream object's project in a detail: "project acme's".
func (u Upstream) whose() string {
	if u.Project == "" {
		return "an unknown project's"
	}
	return "project " + u.Project + "'s"
}

// HubGatewayRows returns a changed row per hub Gateway written for an upstream Gateway
// (labelled meta.datumapis.com/upstream-kind=Gateway) whose class is not
// opts.DownstreamGatewayClass.
func HubGatewayRows(gws []gatewayv1.Gateway, left LeftObjects, opts Options) []Row {
	opts = opts.WithDefaults()
	var rows []Row
	for i := range gws {
		gw := &gws[i]
		if gw.Labels[anchor.LabelKind] != KindGateway {
			continue
		}
		up := upstreamOf(gw.Labels)
		if left.Gateways[up] || !opts.covers(up.Project) {
			continue
		}
		if class := string(gw.Spec.GatewayClassName); class != opts.DownstreamGatewayClass {
			rows = append(rows, Row{
				Verdict: Changed, Kind: KindGateway, Namespace: gw.Namespace, Name: gw.Name,
				Detail: fmt.Sprintf("downstream copy of %s Gateway %s/%s: gatewayClassName %q becomes %q (gateway.downstreamGatewayClassName); the edge serving %q takes it over and must run on the hub before anchorage starts",
					up.whose(), up.Namespace, up.Name, class, opts.DownstreamGatewayClass, opts.DownstreamGatewayClass),
			})
		}
	}
	return rows
}

// HubCertificateRows returns a changed row per hub Certificate (cert-manager.io/v1, read
// as unstructured) written for an upstream Gateway whose spec.issuerRef.name is not
// opts.IssuerName.
func HubCertificateRows(certs []unstructured.Unstructured, left LeftObjects, opts Options) []Row {
	opts = opts.WithDefaults()
	var rows []Row
	for i := range certs {
		c := &certs[i]
		labels := c.GetLabels()
		if labels[anchor.LabelKind] != KindGateway {
			continue
		}
		up := upstreamOf(labels)
		if left.Gateways[up] || !opts.covers(up.Project) {
			continue
		}
		issuer, _, _ := unstructured.NestedString(c.Object, "spec", "issuerRef", "name")
		if issuer != opts.IssuerName {
			rows = append(rows, Row{
				Verdict: Changed, Kind: KindCertificate, Namespace: c.GetNamespace(), Name: c.GetName(),
				Detail: fmt.Sprintf("certificate of %s Gateway %s/%s: issuerRef.name %q becomes %q (gateway.certificateIssuer.name), so cert-manager re-issues it from %q, which must exist and be ready on the hub before anchorage starts",
					up.whose(), up.Namespace, up.Name, issuer, opts.IssuerName, opts.IssuerName),
			})
		}
	}
	return rows
}

// hubBackendSlice is the name of the hub EndpointSlice the previous manager wrote for
// backendRef m of rule n of the upstream HTTPRoute of that UID.
var hubBackendSlice = regexp.MustCompile(`^route-([0-9a-fA-F-]+)-rule-([0-9]+)-backendref-([0-9]+)$`)

// HubEndpointSliceRows returns an adopted row per hub EndpointSlice named
// route-<uid>-rule-<n>-backendref-<m> and labelled
// meta.datumapis.com/upstream-kind=EndpointSlice: the route of that UID adopts it.
func HubEndpointSliceRows(slices []metav1.PartialObjectMetadata, left LeftObjects, opts Options) []Row {
	var rows []Row
	for i := range slices {
		s := &slices[i]
		m := hubBackendSlice.FindStringSubmatch(s.Name)
		if m == nil || s.Labels[anchor.LabelKind] != KindEndpointSlice {
			continue
		}
		up := upstreamOf(s.Labels)
		if left.RouteUIDs[types.UID(m[1])] || !opts.covers(up.Project) {
			continue
		}
		rows = append(rows, Row{
			Verdict: Adopted, Kind: KindEndpointSlice, Namespace: s.Namespace, Name: s.Name,
			Detail: fmt.Sprintf("written for %s EndpointSlice %s/%s: adopted by the upstream HTTPRoute of UID %s (rule %s, backendRef %s), whose backend anchorage keeps writing under this name",
				up.whose(), up.Namespace, up.Name, m[1], m[2], m[3]),
		})
	}
	return rows
}
