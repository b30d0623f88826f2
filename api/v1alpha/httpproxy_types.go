package v1alpha

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// HTTPProxyFinalizer is the finalizer the manager puts on every HTTPProxy so that it can
// delete what the proxy produced before the proxy goes away. The name is shared with the
// manager this one replaces, so that it can take over proxies the old one wrote.
const HTTPProxyFinalizer = "networking.datumapis.com/httpproxy-cleanup"

// HTTPProxyReplicatorFinalizer is the finalizer the previous manager's resource
// replicator put on the proxies it copied downstream. Proxies taken over from that
// manager may still carry it; this manager honours it as its own, so that a proxy
// written by the previous manager is not deleted before what it produced is cleaned up.
const HTTPProxyReplicatorFinalizer = "gateway.networking.datumapis.com/gateway-resource-replicator"

// Condition types reported in HTTPProxyStatus.Conditions. They mirror Gateway API's, so
// an operator reads a proxy the same way as the Gateway it produced.
const (
	// ConditionAccepted is True when the proxy is valid and the manager has taken it on.
	ConditionAccepted = "Accepted"

	// ConditionProgrammed is True when the proxy's Gateway and HTTPRoute exist on the hub.
	ConditionProgrammed = "Programmed"
)

// Reasons used with the condition types above.
const (
	// ReasonAccepted goes with Accepted=True.
	ReasonAccepted = "Accepted"

	// ReasonProgrammed goes with Programmed=True.
	ReasonProgrammed = "Programmed"

	// ReasonPending means the manager has not finished acting on the current generation.
	ReasonPending = "Pending"

	// ReasonInvalid means the proxy passed schema validation but cannot be programmed
	// as written (for example a combination the downstream Gateway refuses).
	ReasonInvalid = "Invalid"

	// ReasonHubWriteFailed means writing the downstream objects or their anchor to the
	// hub failed; the manager retries.
	ReasonHubWriteFailed = "HubWriteFailed"

	// ReasonUnsupportedBackend means a backend is of a kind the schema accepts (it was
	// part of the previous manager's API) but this manager cannot program: a connector
	// or an instance backend.
	ReasonUnsupportedBackend = "UnsupportedBackend"

	// ReasonProxyLimitReached means the project already has as many proxies as it may
	// program (the manager's per-project cap), all created before this one; the proxy
	// is programmed once an older one is deleted or the cap is raised.
	ReasonProxyLimitReached = "ProxyLimitReached"
)

// HTTPProxySpec is what the tenant asks for: which hostnames to serve and how to route
// requests for them.
type HTTPProxySpec struct {
	// Hostnames the proxy serves. Each is a fully qualified DNS name (RFC 1123
	// subdomain). Wildcards are refused because each hostname gets its own certificate.
	// An IP address passes the schema, as it did under the previous manager, whose
	// stored proxies must stay valid; the manager refuses such a hostname instead, with
	// a condition saying why, because no certificate can be issued for it.
	//
	// Two rules here are stricter than the previous manager's CRD: wildcards and
	// duplicates (listType=set) are refused. The previous manager refused both in its
	// admission webhook on every create and every update that changed the spec, so no
	// proxy it stored carries either.
	//
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:XValidation:rule="!self.startsWith('*')",message="must not be a wildcard hostname"
	Hostnames []gatewayv1.Hostname `json:"hostnames,omitempty"`

	// Rules route requests to backends, in the manner of HTTPRoute rules. A rule may
	// have up to 64 matches, but all rules together at most 128: the HTTPRoute limit,
	// so a proxy the API server accepts always yields a valid HTTPRoute.
	//
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:XValidation:rule="self.all(r1, !has(r1.name) || self.exists_one(r2, has(r2.name) && r2.name == r1.name))",message="rule names must be unique"
	// +kubebuilder:validation:XValidation:rule="self.map(r, has(r.matches) ? size(r.matches) : 0).sum() <= 128",message="the rules may have at most 128 matches in total"
	Rules []HTTPProxyRule `json:"rules"`
}

// HTTPProxyRule matches requests and forwards them to a backend. It becomes one rule of
// the HTTPRoute the proxy produces, so its fields carry Gateway API's types and meaning.
// The redirect rule below tests a filter's type where the previous manager's tested
// for its requestRedirect field: the filter's own rules make the two agree.
//
// +kubebuilder:validation:XValidation:rule="!(has(self.backends) && size(self.backends) > 0 && has(self.filters) && self.filters.exists(f, f.type == 'RequestRedirect'))",message="a RequestRedirect filter must not be used together with backends"
type HTTPProxyRule struct {
	// Name of the rule, unique among the proxy's rules when set. It becomes the
	// HTTPRoute rule name, which policies and status can refer to.
	//
	// +optional
	Name *gatewayv1.SectionName `json:"name,omitempty"`

	// Matches select the requests this rule applies to; any one match suffices. Left
	// out, the API server fills in a single prefix match on "/", that is every request.
	//
	// The default, the minimum of one and the maximum of 64 are the previous manager's
	// own, so every proxy it stored has between 1 and 64 matches per rule and stays
	// valid. Keeping the minimum also keeps a single spelling of "every request": an
	// explicit empty list was refused before and still is, rather than becoming a
	// second way to write what the default already says.
	//
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:default={{path:{type:"PathPrefix",value:"/"}}}
	Matches []gatewayv1.HTTPRouteMatch `json:"matches,omitempty"`

	// Filters applied to requests matching this rule, before they reach a backend.
	//
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:XValidation:rule="!(self.exists(f, f.type == 'RequestRedirect') && self.exists(f, f.type == 'URLRewrite'))",message="may specify either a RequestRedirect or a URLRewrite filter, not both"
	Filters []gatewayv1.HTTPRouteFilter `json:"filters,omitempty"`

	// Backends receive the matching requests. A single backend per rule for now: there
	// is no weighting between several.
	//
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=1
	Backends []HTTPProxyBackend `json:"backends,omitempty"`
}

// HTTPProxyBackend is where matching requests are sent. It is one of three kinds: an
// endpoint URL, an endpoint reached through a connector (connector and endpoint), or an
// instance (instance alone). All three are part of the schema so that every proxy the
// previous manager stored reads back whole; this manager programs only the first and
// reports the other two with the UnsupportedBackend reason.
//
// +kubebuilder:validation:XValidation:rule="has(self.instance) || has(self.endpoint)",message="endpoint is required unless instance is set"
// +kubebuilder:validation:XValidation:rule="!has(self.instance) || !(has(self.endpoint) || has(self.connector))",message="instance must not be combined with endpoint or connector"
type HTTPProxyBackend struct {
	// Endpoint is the URL requests are forwarded to: scheme http or https and a host,
	// optionally a port and a path (for example https://api.example.com:8443/v1). With
	// a connector, it is the address the connector forwards to. Required unless
	// instance is set.
	//
	// The length cap bounds the cost the API server estimates for the URL rule. The
	// URL rule and the cap are stricter than the previous manager's CRD, but its
	// admission webhook already refused any endpoint that is not an http or https URL
	// with a host, and it allowed no more than a scheme, a host of at most 253
	// characters and a port, far short of 2048.
	//
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && url(self).getScheme() in ['http', 'https'] && url(self).getHostname() != ''",message="must be an http or https URL with a host"
	Endpoint string `json:"endpoint,omitempty"`

	// Connector names the Connector through which the endpoint is reached, for a
	// backend that is not directly reachable from the edge. Used together with
	// endpoint; not with instance.
	//
	// +optional
	Connector *ConnectorReference `json:"connector,omitempty"`

	// Instance names a workload on a tenant network to forward to, instead of an
	// endpoint URL. Used alone: neither endpoint nor connector may be set with it.
	//
	// +optional
	Instance *InstanceBackendRef `json:"instance,omitempty"`

	// TLS configures the connection to an https endpoint.
	//
	// +optional
	TLS *HTTPProxyBackendTLS `json:"tls,omitempty"`

	// Filters applied only to requests sent to this backend.
	//
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	Filters []gatewayv1.HTTPRouteFilter `json:"filters,omitempty"`
}

// HTTPProxyBackendTLS is how the edge connects to an https endpoint.
type HTTPProxyBackendTLS struct {
	// Hostname the backend's certificate must be valid for, and the SNI the edge sends.
	// Default: the endpoint's host.
	//
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Hostname *string `json:"hostname,omitempty"`
}

// ConnectorReference names a Connector in the proxy's namespace.
type ConnectorReference struct {
	// Name of the Connector.
	//
	// +required
	Name string `json:"name"`
}

// InstanceBackendRef points at a workload on a tenant network: the EndpointSlice that
// publishes its address, and the port to use on it.
type InstanceBackendRef struct {
	// Name of the EndpointSlice, in the proxy's namespace.
	//
	// +required
	Name string `json:"name"`

	// Port on that EndpointSlice to send requests to.
	//
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port"`
}

// HostnameStatus is what was observed about one of the proxy's hostnames.
type HostnameStatus struct {
	// Hostname the conditions are about.
	//
	// +required
	Hostname string `json:"hostname"`

	// Conditions about this hostname, for example whether it is verified, whether
	// its DNS record and its certificate are in place.
	//
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// HTTPProxyStatus is what the manager observed and did. Only addresses is capped (at
// 16, as under the previous manager), and the status holds fields this manager does
// not write itself (canonicalHostname, hostnameStatuses): the status the previous
// manager wrote stays valid and is kept whole.
type HTTPProxyStatus struct {
	// Conditions are the latest observations of the proxy's state: Accepted and
	// Programmed, and any others a previous manager left.
	//
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Addresses are the network addresses the proxy's Gateway is reachable at, copied
	// from the Gateway's status.
	//
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	Addresses []gatewayv1.GatewayStatusAddress `json:"addresses,omitempty"`

	// Hostnames are the hostnames the proxy is programmed to serve.
	//
	// +optional
	// +listType=atomic
	Hostnames []gatewayv1.Hostname `json:"hostnames,omitempty"`

	// CanonicalHostname is a stable, platform-assigned hostname for the proxy, which
	// a tenant can point its own DNS records at.
	//
	// +optional
	CanonicalHostname string `json:"canonicalHostname,omitempty"`

	// HostnameStatuses report on each of the proxy's hostnames separately.
	//
	// +optional
	// +listType=atomic
	HostnameStatuses []HostnameStatus `json:"hostnameStatuses,omitempty"`
}

// HTTPProxy serves a set of hostnames and forwards matching HTTP requests to backend
// URLs. The manager programs it as a Gateway and an HTTPRoute.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=ahp,categories=anchorage
// +kubebuilder:printcolumn:name="Hostnames",type=string,JSONPath=`.spec.hostnames`
// +kubebuilder:printcolumn:name="Address",type=string,JSONPath=`.status.addresses[*].value`
// +kubebuilder:printcolumn:name="Accepted",type=string,JSONPath=`.status.conditions[?(@.type=="Accepted")].status`,priority=1
// +kubebuilder:printcolumn:name="Programmed",type=string,JSONPath=`.status.conditions[?(@.type=="Programmed")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type HTTPProxy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired proxy.
	//
	// +required
	Spec HTTPProxySpec `json:"spec"`

	// Status is the proxy's observed state, written by the manager.
	//
	// +optional
	Status HTTPProxyStatus `json:"status,omitempty"`
}

// HTTPProxyList is a list of HTTPProxy.
//
// +kubebuilder:object:root=true
type HTTPProxyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	// Items are the proxies.
	Items []HTTPProxy `json:"items"`
}

func init() {
	SchemeBuilder.Register(&HTTPProxy{}, &HTTPProxyList{})
}
