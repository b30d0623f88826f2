package gateway

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"anchorage/pkg/platform"
)

// Refusal reasons of a listener (and of a proxy's Accepted, for ReservedHostname).
const (
	// ReasonHostnameRequired: a listener without a hostname would answer every Host on
	// an edge that merges the class's Gateways, and it could not be narrowed to the
	// Gateway's platform hostname (withPlatformHostname).
	ReasonHostnameRequired = "HostnameRequired"
	// ReasonReservedHostname: the hostname is under the platform's domain and is not
	// this Gateway's own platform hostname.
	ReasonReservedHostname = "ReservedHostname"
)

// Condition types the Gateway reconciler adds to an upstream Gateway, which its proxy
// shows (the previous manager's names).
const (
	ConditionDNSRecordsProgrammed = "DNSRecordsProgrammed"
	ConditionCertificatesReady    = "CertificatesReady"
)

const kindDNSEndpoint = "DNSEndpoint"

// withPlatformHostname returns gw with its hostname-less listeners given canonical: the
// platform listeners (platform.DefaultListeners) the previous manager filled in the same
// way, and any other, narrowed from every Host to the one name the platform gave this
// Gateway, so none answers every Host on an edge that merges Gateways. A listener whose
// port and protocol another one already serves canonical on stays hostname-less (and is
// refused by platformRefusals). gw itself when there is nothing to fill.
func withPlatformHostname(gw *gatewayv1.Gateway, canonical string) *gatewayv1.Gateway {
	if canonical == "" {
		return gw
	}
	type slot struct {
		port     gatewayv1.PortNumber
		protocol gatewayv1.ProtocolType
	}
	taken := map[slot]bool{}
	for _, l := range gw.Spec.Listeners {
		if string(ptr.Deref(l.Hostname, "")) == canonical {
			taken[slot{l.Port, l.Protocol}] = true
		}
	}
	out := gw
	for i, l := range gw.Spec.Listeners {
		if ptr.Deref(l.Hostname, "") != "" || taken[slot{l.Port, l.Protocol}] {
			continue
		}
		taken[slot{l.Port, l.Protocol}] = true
		if out == gw {
			out = gw.DeepCopy()
		}
		out.Spec.Listeners[i].Hostname = ptr.To(gatewayv1.Hostname(canonical))
	}
	return out
}

// platformRefusals refuses gw's hostname-less listeners and its listener hostnames
// under the platform's domain that are not its own platform hostnames.
func (r *GatewayReconciler) platformRefusals(gw *gatewayv1.Gateway, canonical string) refusedHostnames {
	refused := refusedHostnames{}
	for _, l := range gw.Spec.Listeners {
		host := ptr.Deref(l.Hostname, "")
		switch {
		case host == "":
			refused[""] = refusal{ReasonHostnameRequired, fmt.Sprintf("listener %s has no hostname and another listener on its port already serves the Gateway's platform hostname %s: a listener without one would answer every Host on an edge that merges Gateways, so it is not programmed; give it a hostname", l.Name, canonical)}
		case r.Config.Platform.Reserved(string(host), canonical):
			refused[host] = refusal{ReasonReservedHostname, fmt.Sprintf("hostname %s is under the platform's domain %s and is not this Gateway's platform hostname (%s), so it is not programmed", host, strings.Join(r.Config.Platform.Domains(), ", "), canonical)}
		}
	}
	return refused
}

// withoutListenersOn returns gw without its listeners on hosts and its hostname-less
// ones: the listeners a tenant's hostname rules (verification, claims, bounds) apply to.
func withoutListenersOn(gw *gatewayv1.Gateway, hosts []string) *gatewayv1.Gateway {
	out := gw.DeepCopy()
	out.Spec.Listeners = slices.DeleteFunc(out.Spec.Listeners, func(l gatewayv1.Listener) bool {
		return ptr.Deref(l.Hostname, "") == "" || slices.Contains(hosts, string(*l.Hostname))
	})
	return out
}

// dnsState is what writeDNSRecords found, for the DNSRecordsProgrammed condition.
type dnsState struct {
	records  int
	missing  []platform.Family
	observed bool // external-dns acted on the DNSEndpoint's current spec
}

// writeDNSRecords writes the DNSEndpoint of the hub Gateway down: the records of the
// platform hostnames pointing at the addresses the edge reports for down. Until the
// edge reports one, none is written; a DNSEndpoint written before is kept (records the
// edge stopped reporting for a moment are not withdrawn).
func (r *GatewayReconciler) writeDNSRecords(ctx context.Context, w hubWriter, canonical string, down *gatewayv1.Gateway) (dnsState, error) {
	records, missing := r.Config.Platform.Records(canonical, down.Status.Addresses)
	st := dnsState{records: len(records), missing: missing}
	if len(records) == 0 {
		return st, nil
	}
	written, err := w.apply(ctx, kindDNSEndpoint, platform.DNSEndpoint(down.Name, down.Namespace, records), copyDNSEndpointSpec)
	if err != nil {
		return st, err
	}
	st.observed = platform.RecordsObserved(written.(*unstructured.Unstructured))
	return st, nil
}

func copyDNSEndpointSpec(dst, src client.Object) error {
	return platform.CopySpec(dst.(*unstructured.Unstructured), src.(*unstructured.Unstructured))
}

// dnsVerdict is the DNSRecordsProgrammed condition of st: True once external-dns has
// acted on records for every enabled family.
func dnsVerdict(st dnsState, canonical string) verdict {
	switch {
	case st.records == 0:
		return verdict{false, "Pending", fmt.Sprintf("Waiting for the edge to report an address for %s", canonical)}
	case len(st.missing) > 0:
		return verdict{false, "Pending", fmt.Sprintf("The edge reports no %s address: %s has no record of that family", joinFamilies(st.missing), canonical)}
	case !st.observed:
		return verdict{false, "Pending", fmt.Sprintf("Waiting for the DNS records of %s to be published", canonical)}
	}
	return verdict{true, "AllRecordsCreated", fmt.Sprintf("%s and its per-family names resolve to the edge", canonical)}
}

func joinFamilies(fs []platform.Family) string {
	s := make([]string, len(fs))
	for i, f := range fs {
		s[i] = string(f)
	}
	return strings.Join(s, " or ")
}
