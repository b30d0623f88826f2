package resync

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/clock"
)

// DefaultFinalizers are, by owner kind, the finalizers that mean a terminating owner is
// being finalized: pkg/gateway's, and the previous replicator's (docs/design.md, Finalizers).
var DefaultFinalizers = func() map[schema.GroupKind]string {
	m := map[schema.GroupKind]string{
		{Group: "networking.datumapis.com", Kind: "HTTPProxy"}:  "networking.datumapis.com/httpproxy-cleanup",
		{Group: "gateway.networking.k8s.io", Kind: "Gateway"}:   "gateway.networking.datumapis.com/gateway-controller",
		{Group: "gateway.networking.k8s.io", Kind: "HTTPRoute"}: "gateway.networking.datumapis.com/gateway-controller-gc",
		{Group: "discovery.k8s.io", Kind: "EndpointSlice"}:      "gateway.networking.datumapis.com/gateway-controller-gc",
	}
	for _, gk := range PreviousReplicatedKinds {
		m[gk] = PreviousReplicatorFinalizer
	}
	return m
}()

// PreviousReplicatorFinalizer is the finalizer of the previous manager's resource
// replicator, on every upstream object it mirrored to the hub.
const PreviousReplicatorFinalizer = "gateway.networking.datumapis.com/gateway-resource-replicator"

// PreviousReplicatedKinds are the kinds the previous manager's replicator mirrored by
// default, less HTTPProxy (pkg/gateway's), Secrets and ConfigMaps (docs/design.md).
var PreviousReplicatedKinds = []schema.GroupKind{
	{Group: "gateway.envoyproxy.io", Kind: "Backend"},
	{Group: "gateway.envoyproxy.io", Kind: "BackendTrafficPolicy"},
	{Group: "gateway.envoyproxy.io", Kind: "SecurityPolicy"},
	{Group: "gateway.envoyproxy.io", Kind: "HTTPRouteFilter"},
	{Group: "gateway.networking.k8s.io", Kind: "BackendTLSPolicy"},
	{Group: "networking.datumapis.com", Kind: "TrafficProtectionPolicy"},
	{Group: "networking.datumapis.com", Kind: "NetworkContext"},
	{Group: "networking.datumapis.com", Kind: "Subnet"},
	{Group: "networking.datumapis.com", Kind: "Connector"},
}

// DefaultLiveOwnerKinds are the owner kinds read live by default, every kind anchored on
// the hub: config/rbac/project-role.yaml grants get on exactly these.
var DefaultLiveOwnerKinds = append([]schema.GroupKind{
	{Group: "networking.datumapis.com", Kind: "HTTPProxy"},
	{Group: "gateway.networking.k8s.io", Kind: "Gateway"},
	{Group: "gateway.networking.k8s.io", Kind: "HTTPRoute"},
	{Group: "discovery.k8s.io", Kind: "EndpointSlice"},
}, PreviousReplicatedKinds...)

// secretKind is never read live nor listed: the manager holds no one's credentials.
var secretKind = schema.GroupKind{Group: "", Kind: "Secret"}

// The resync's bounds no operator turns: their defaults are what a fleet wants, and no
// flag sets them (docs/design.md, Throttle, not halt).
const (
	deletionBurst                  = 20              // deletions a replica may make at once, beside DeletionQPS
	liveQPS, liveBurst             = 50, 100         // pace the live reads of one plane
	dependentsQPS, dependentsBurst = 50, 100         // pace the hub lists of anchors' dependents
	liveTimeout                    = 5 * time.Second // bounds each live read of a plane
	listPage                       = 500             // bounds each page of a paged list (anchors, owners, dependents)
)

// Options are the resync's knobs (docs/design.md, Throttle, not halt): DefaultOptions'
// values, or the configuration file's (pkg/config). Validate refuses a zero that means
// nothing and unsafe combinations.
type Options struct {
	Disabled            bool                            // turns the resync off entirely
	DryRun              bool                            // decides, reports; deletes, enqueues nothing (a replica still records plane identities)
	Period              time.Duration                   // between two passes over one project
	InitialJitter       time.Duration                   // bounds the random delay of a project's first pass
	ConfirmAfter        time.Duration                   // a proof must hold again this long after it was first seen
	MinAge              time.Duration                   // anchors younger than this are never collected
	StuckAfter          time.Duration                   // an owner finalizing longer is reported finalizer-stuck
	MaxDeletionsPerPass int                             // caps one pass's deletions in one project
	HaltAbove           int                             // a pass with more collectable anchors deletes none
	DeletionQPS         float32                         // rate-limits a replica's deletions (burst deletionBurst)
	Workers             int                             // bounds the passes that run at once on a replica
	ClaimPasses         int                             // see Timing.ClaimPasses
	Finalizers          map[schema.GroupKind]string     // our finalizers by owner kind
	Writes              map[schema.GroupKind][]HubWrite // what the live path writes, by owner kind
	LiveOwnerKinds      []schema.GroupKind              // the owner kinds read live
	ClaimsNamespace     string                          // holds the hostname claims (claims.go). Empty: none released
	ExtraDependentKinds []schema.GroupKind              // legacy kinds the dependents scan lists too. Never Secrets
	Clock               clock.WithTicker                // drives periods, ages and confirmation (not rate limits, timeouts). Nil: the real clock
}

// DefaultOptions are the resync's defaults, pkg/config's for a file that sets none.
func DefaultOptions() Options {
	return Options{
		Period: 10 * time.Minute, InitialJitter: 30 * time.Second, ConfirmAfter: 30 * time.Second, MinAge: 5 * time.Minute, StuckAfter: time.Hour,
		MaxDeletionsPerPass: 50, HaltAbove: 500, DeletionQPS: 10, Workers: 4, ClaimPasses: 3,
		Finalizers: DefaultFinalizers, Writes: DefaultHubWrites, LiveOwnerKinds: DefaultLiveOwnerKinds,
	}
}

// Validate reports the first knob that breaks a safety rule.
func (o Options) Validate() error {
	switch {
	case o.Period <= 0, o.InitialJitter <= 0, o.ConfirmAfter <= 0, o.MinAge <= 0, o.StuckAfter <= 0:
		return errors.New("resync durations must be positive")
	case o.MaxDeletionsPerPass <= 0, o.HaltAbove <= 0, o.Workers <= 0, o.ClaimPasses <= 0, !(o.DeletionQPS > 0):
		return errors.New("resync limits must be positive")
	case o.HaltAbove < o.MaxDeletionsPerPass:
		return fmt.Errorf("the per-pass ceiling (%d) must not be below the per-pass cap (%d): the cap alone would never be reached", o.HaltAbove, o.MaxDeletionsPerPass)
	case o.ConfirmAfter >= o.Period:
		return fmt.Errorf("the confirmation delay (%s) must be shorter than the resync period (%s)", o.ConfirmAfter, o.Period)
	}
	if err := validKinds("live owner kinds", o.LiveOwnerKinds); err != nil {
		return err
	}
	return validKinds("extra dependent kinds", o.ExtraDependentKinds)
}

// validKinds refuses a nameless kind, a wildcard and Secrets: each is an RBAC grant.
func validKinds(what string, kinds []schema.GroupKind) error {
	for _, gk := range kinds {
		switch {
		case gk.Kind == "":
			return fmt.Errorf("%s: %q names no kind (want group/Kind, or Kind for the core group)", what, gk.String())
		case strings.Contains(gk.Group, "*") || strings.Contains(gk.Kind, "*"):
			return fmt.Errorf("%s: %q: no wildcards", what, gk.String())
		case gk == secretKind:
			return fmt.Errorf("%s: Secrets are never read: the manager holds no access to Secrets outside its provider namespace", what)
		}
	}
	return nil
}

// ParseGroupKinds parses the flags' comma-separated group/Kind (Kind for the core group).
func ParseGroupKinds(s string) ([]schema.GroupKind, error) {
	var out []schema.GroupKind
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		gk := schema.GroupKind{Kind: item}
		if group, kind, ok := strings.Cut(item, "/"); ok {
			gk = schema.GroupKind{Group: group, Kind: kind}
		}
		if gk.Kind == "" || strings.Contains(gk.Kind, "/") {
			return nil, fmt.Errorf("%q: want group/Kind, or Kind for the core group", item)
		}
		out = append(out, gk)
	}
	return out, nil
}

// FormatGroupKinds is ParseGroupKinds' inverse.
func FormatGroupKinds(kinds []schema.GroupKind) string {
	var parts []string
	for _, gk := range kinds {
		parts = append(parts, strings.TrimPrefix(gk.Group+"/"+gk.Kind, "/"))
	}
	return strings.Join(parts, ",")
}
