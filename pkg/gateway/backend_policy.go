package gateway

import (
	"fmt"
	"net/url"

	"anchorage/api/v1alpha"
	"anchorage/pkg/netpolicy"
)

// DefaultBackendReservedDomains are the operator's domains no backend may be in
// (gateway.backendReservedDomains) beyond netpolicy.RefusedName's rule: none. The rule
// refuses every name that is not a public DNS name, which covers every domain the list
// named before (localhost, localdomain, local, internal, svc, cluster.local and the
// reverse zones under arpa); an operator lists the public-looking names its edges
// answer privately (docs/design.md, Threat model).
var DefaultBackendReservedDomains = []string{}

// refusedBackendHost returns why host, a DNS name, may not be a backend, or "": only a
// public DNS name, in none of the reserved domains, passes (netpolicy.RefusedName).
// IP backends are judged by netpolicy.Refused, where an address is carried as one.
func refusedBackendHost(host string, reserved []string) string {
	return netpolicy.RefusedName(host, reserved)
}

// refusedBackends returns why one of proxy's endpoint backends may not be programmed
// (refusedEndpointHost), or "".
func refusedBackends(proxy *v1alpha.HTTPProxy, reserved []string, denied []netpolicy.DeniedNetwork) string {
	for i, r := range proxy.Spec.Rules {
		for _, b := range r.Backends {
			if b.Endpoint == "" {
				continue
			}
			u, err := url.Parse(b.Endpoint)
			if err != nil {
				continue // parseEndpoint says why
			}
			if why := refusedEndpointHost(u.Hostname(), reserved, denied); why != "" {
				return fmt.Sprintf("rule %d: backend %q may not be programmed: %s", i, b.Endpoint, why)
			}
		}
	}
	return ""
}
