package resync

import (
	"cmp"
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

// Options are the resync's knobs (docs/design.md, Throttle, not halt). Zero values take
// the defaults stated on each field; Validate rejects unsafe combinations.
type Options struct {
	Disabled            bool                            // turns the resync off entirely. Default false
	DryRun              bool                            // decides, reports; deletes, enqueues nothing (a replica still records plane identities)
	Period              time.Duration                   // between two passes over one project. Default 10m
	InitialJitter       time.Duration                   // bounds the random delay of a project's first pass. Default 30s
	ConfirmAfter        time.Duration                   // a proof must hold again this long after it was first seen. Default 30s
	MinAge              time.Duration                   // anchors younger than this are never collected. Default 5m
	StuckAfter          time.Duration                   // an owner finalizing longer is reported finalizer-stuck. Default 1h
	MaxDeletionsPerPass int                             // caps one pass's deletions in one project. Default 50
	HaltAbove           int                             // a pass with more collectable anchors deletes none. Default 500
	DeletionQPS         float32                         // rate-limits a replica's deletions (burst deletionBurst). Default 10
	Workers             int                             // bounds the passes that run at once on a replica. Default 4
	ClaimPasses         int                             // see Timing.ClaimPasses. Default 3
	Finalizers          map[schema.GroupKind]string     // our finalizers by owner kind. Default DefaultFinalizers
	Writes              map[schema.GroupKind][]HubWrite // what the live path writes, by owner kind. Default DefaultHubWrites
	LiveOwnerKinds      []schema.GroupKind              // the owner kinds read live. Default DefaultLiveOwnerKinds
	ClaimsNamespace     string                          // holds the hostname claims (claims.go). Empty: none released
	ExtraDependentKinds []schema.GroupKind              // legacy kinds the dependents scan lists too. Never Secrets
	Clock               clock.WithTicker                // drives periods, ages and confirmation (not rate limits, timeouts). Default real
}

// WithDefaults returns o with every zero field set to its default.
func (o Options) WithDefaults() Options {
	o.Period = cmp.Or(o.Period, 10*time.Minute)
	o.InitialJitter = cmp.Or(o.InitialJitter, 30*time.Second)
	o.ConfirmAfter = cmp.Or(o.ConfirmAfter, 30*time.Second)
	o.MinAge = cmp.Or(o.MinAge, 5*time.Minute)
	o.StuckAfter = cmp.Or(o.StuckAfter, time.Hour)
	o.MaxDeletionsPerPass = cmp.Or(o.MaxDeletionsPerPass, 50)
	o.HaltAbove = cmp.Or(o.HaltAbove, 500)
	o.Workers = cmp.Or(o.Workers, 4)
	o.ClaimPasses = cmp.Or(o.ClaimPasses, 3)
	o.DeletionQPS = cmp.Or(o.DeletionQPS, 10)
	if o.Finalizers == nil {
		o.Finalizers = DefaultFinalizers
	}
	if o.Writes == nil {
		o.Writes = DefaultHubWrites
	}
	if o.LiveOwnerKinds == nil {
		o.LiveOwnerKinds = DefaultLiveOwnerKinds
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	return o
}

// Validate reports the first knob, after defaulting, that breaks a safety rule.
func (o Options) Validate() error {
	o = o.WithDefaults()
	switch {
	case o.Period < 0, o.InitialJitter < 0, o.ConfirmAfter < 0, o.MinAge < 0, o.StuckAfter < 0:
		return errors.New("resync durations must not be negative")
	case o.MaxDeletionsPerPass < 0, o.HaltAbove < 0, o.Workers < 0, o.ClaimPasses < 0, o.DeletionQPS < 0:
		return errors.New("resync limits must not be negative")
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
