package v1alpha

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// HTTPProxyFinalizer is the finalizer the manager puts on every HTTPProxy so that it can
// delete what the proxy produced before the proxy goes away. The name is shared with the
// manager this one replaces, so that it can take over proxies the old one wrote.
const HTTPProxyFinalizer = "networking.datumapis.com/httpproxy-cleanup"

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
)

// HTTPProxySpec is what the tenant asks for: which hostnames to serve and how to route
// requests for them.
type HTTPProxySpec struct {
	// Hostnames the proxy serves. Each is a fully qualified DNS name (RFC 1123
	// subdomain): wildcards are refused because each hostname gets its own certificate,
	// and IP addresses are refused because they cannot be given one.
	//
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:XValidation:rule="!self.startsWith('*')",message="must not be a wildcard hostname"
	// +kubebuilder:validation:items:XValidation:rule="!isIP(self)",message="must be a DNS name, not an IP address"
	Hostnames []gatewayv1.Hostname `json:"hostnames,omitempty"`

	// Rules route requests to backends, in the manner of HTTPRoute rules. At most 16
	// rules of at most 8 matches keep every proxy within the HTTPRoute limit of 128
	// matches, so a proxy the API server accepts always yields a valid HTTPRoute.
	//
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:XValidation:rule="self.all(r1, !has(r1.name) || self.exists_one(r2, has(r2.name) && r2.name == r1.name))",message="rule names must be unique"
	Rules []HTTPProxyRule `json:"rules"`
}

// HTTPProxyRule matches requests and forwards them to a backend. It becomes one rule of
// the HTTPRoute the proxy produces, so its fields carry Gateway API's types and meaning.
//
// +kubebuilder:validation:XValidation:rule="!(has(self.backends) && size(self.backends) > 0 && has(self.filters) && self.filters.exists(f, f.type == 'RequestRedirect'))",message="a RequestRedirect filter must not be used together with backends"
type HTTPProxyRule struct {
	// Name of the rule, unique among the proxy's rules when set. It becomes the
	// HTTPRoute rule name, which policies and status can refer to.
	//
	// +optional
	Name *gatewayv1.SectionName `json:"name,omitempty"`

	// Matches select the requests this rule applies to; any one match suffices. No
	// matches means every request (a prefix match on "/").
	//
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
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

// HTTPProxyBackend is where matching requests are sent.
type HTTPProxyBackend struct {
	// Endpoint is the URL requests are forwarded to: scheme http or https and a host,
	// optionally a port and a path (for example https://api.example.com:8443/v1).
	//
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && url(self).getScheme() in ['http', 'https'] && url(self).getHostname() != ''",message="must be an http or https URL with a host"
	Endpoint string `json:"endpoint"`

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

// HTTPProxyStatus is what the manager observed and did.
type HTTPProxyStatus struct {
	// Conditions are the latest observations of the proxy's state: Accepted and
	// Programmed.
	//
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
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
	// +kubebuilder:validation:MaxItems=16
	Hostnames []gatewayv1.Hostname `json:"hostnames,omitempty"`
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
