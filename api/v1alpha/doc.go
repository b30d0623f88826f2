// Package v1alpha holds the HTTPProxy API (networking.datumapis.com/v1alpha): a tenant's
// request to serve a set of hostnames and forward matching HTTP requests to a URL. The
// manager turns each HTTPProxy into an upstream Gateway and HTTPRoute (Gateway API v1),
// so the rule shape below deliberately reuses Gateway API's match and filter types.
//
// Validation lives in the CRD schema (OpenAPI and CEL) rather than in a webhook, so a
// malformed proxy is refused by the API server with a message naming the field, and no
// controller ever has to decide what to do with one.
//
// `kubectl get ahp` (the short name) and `kubectl get anchorage` (the category) list
// HTTPProxies with their hostnames, address and Programmed condition. Neither is
// `proxy` or `proxies`: those belong to Contour's HTTPProxy, a different kind of the
// same name that a cluster may also serve.
//
// +kubebuilder:object:generate=true
// +groupName=networking.datumapis.com
package v1alpha
