package resync

import (
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// HubWrite is one kind of hub object the live path writes for an owner, and how it
// names it (docs/design.md, Downstream objects).
type HubWrite struct {
	Group, Kind string // of the hub object
	PerListener bool   // named <owner>-<listener>, one per listener
	// PerBackendRef: named route-<owner UID>-rule-<n>-backendref-<m>: an owner of the
	// same name, another UID, never writes it, so it is never claimed.
	PerBackendRef bool
}

// DefaultHubWrites is what pkg/gateway writes on the hub, by upstream owner kind (an
// HTTPProxy writes nothing there itself). Only these owners can claim a dependent.
var DefaultHubWrites = map[schema.GroupKind][]HubWrite{
	{Group: "gateway.networking.k8s.io", Kind: "Gateway"}: {
		{Group: "gateway.networking.k8s.io", Kind: "Gateway"},
		{Group: "cert-manager.io", Kind: "Certificate", PerListener: true},
		{Group: "externaldns.k8s.io", Kind: "DNSEndpoint"},
	},
	{Group: "gateway.networking.k8s.io", Kind: "HTTPRoute"}: {
		{Group: "gateway.networking.k8s.io", Kind: "HTTPRoute"},
		{Group: "", Kind: "Service", PerBackendRef: true},
		{Group: "discovery.k8s.io", Kind: "EndpointSlice", PerBackendRef: true},
		{Group: "gateway.networking.k8s.io", Kind: "BackendTLSPolicy", PerBackendRef: true},
	},
}

// wouldWrite reports whether, by writes, a live owner of ownerKind named ownerName would
// write a hub object of kind gk named name. Listener names are not read: any
// <owner>-<suffix> counts.
func wouldWrite(writes map[schema.GroupKind][]HubWrite, ownerKind schema.GroupKind, ownerName string, gk schema.GroupKind, name string) bool {
	for _, w := range writes[ownerKind] {
		if w.Group != gk.Group || w.Kind != gk.Kind || w.PerBackendRef {
			continue
		}
		if w.PerListener {
			if rest, ok := strings.CutPrefix(name, ownerName+"-"); ok && rest != "" {
				return true
			}
		} else if name == ownerName {
			return true
		}
	}
	return false
}
