package resync

import (
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// HubWrite is one kind of hub object the live path writes for an owner, and how it
// names it (docs/design.md, Wire formats: a downstream object keeps the upstream object's
// name; Certificates are named <gateway>-<listener>).
type HubWrite struct {
	// Group and Kind of the hub object.
	Group, Kind string
	// PerListener: named <owner>-<listener>, one per listener, instead of the owner's
	// own name.
	PerListener bool
	// PerBackendRef: named route-<owner UID>-rule-<n>-backendref-<m>, one per backend
	// of the owner. The name carries the owner's UID, so a live owner of the same name
	// (another UID) never writes the name a stale anchor's dependent has: such a
	// dependent is never claimed, and goes with the stale anchor.
	PerBackendRef bool
}

// DefaultHubWrites is what pkg/gateway writes on the hub, by upstream owner kind: a
// downstream Gateway and one cert-manager Certificate per HTTPS listener for a Gateway,
// a downstream HTTPRoute and, per backend, a Service, an EndpointSlice and (https) a
// BackendTLSPolicy for an HTTPRoute. An HTTPProxy writes nothing on the hub
// itself. Only these owners can re-attach a dependent, so only these can claim one.
var DefaultHubWrites = map[schema.GroupKind][]HubWrite{
	{Group: "gateway.networking.k8s.io", Kind: "Gateway"}: {
		{Group: "gateway.networking.k8s.io", Kind: "Gateway"},
		{Group: "cert-manager.io", Kind: "Certificate", PerListener: true},
	},
	{Group: "gateway.networking.k8s.io", Kind: "HTTPRoute"}: {
		{Group: "gateway.networking.k8s.io", Kind: "HTTPRoute"},
		{Group: "", Kind: "Service", PerBackendRef: true},
		{Group: "discovery.k8s.io", Kind: "EndpointSlice", PerBackendRef: true},
		{Group: "gateway.networking.k8s.io", Kind: "BackendTLSPolicy", PerBackendRef: true},
	},
}

// wouldWrite reports whether a live owner of kind ownerKind named ownerName would write
// a hub object of kind gk named name, by writes. The listener names of an owner are
// not read: any name <owner>-<something> counts for a per-listener kind, which can only
// keep an anchor longer, and a claim that no reconcile resolves expires (ClaimPasses).
func wouldWrite(writes map[schema.GroupKind][]HubWrite, ownerKind schema.GroupKind, ownerName string, gk schema.GroupKind, name string) bool {
	for _, w := range writes[ownerKind] {
		if w.Group != gk.Group || w.Kind != gk.Kind {
			continue
		}
		if w.PerBackendRef {
			continue
		}
		if w.PerListener {
			if rest, ok := strings.CutPrefix(name, ownerName+"-"); ok && rest != "" {
				return true
			}
			continue
		}
		if name == ownerName {
			return true
		}
	}
	return false
}
