package resync

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/clock"
)

// DefaultFinalizers are the finalizers by owner kind that mean an owner terminating
// with one is being finalized (docs/design.md, Wire formats): pkg/gateway's own, the
// previous manager's on its backend EndpointSlices (pkg/gateway finalizes those too),
// and its replicator's on the kinds it mirrored to the hub. The replicator's finalizer
// on a kind other than HTTPProxy is removed by nobody after a cut-over: an owner stuck
// on it is reported (finalizer-stuck) after StuckAfter, never collected.
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

// PreviousReplicatedKinds are the kinds the previous manager's resource replicator
// mirrored to the hub by default, each copy hanging on an anchor of the upstream object
// (its internal/config/config.go, the replicator's default resources), less Secrets,
// which the resync never reads, and ConfigMaps, which it mirrored only when labelled
// networking.datumapis.com/gateway-sync: a get on every tenant ConfigMap is more than
// those few anchors are worth (an operator who has them adds ConfigMap to the owner
// kinds with its grant; until then they are reported kind-not-configured). HTTPProxy is
// already one of pkg/gateway's kinds.
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

// DefaultLiveOwnerKinds are the owner kinds the resync reads live on a project's
// plane by default: every kind that is anchored on the hub, by the live path or by the
// previous manager (DefaultFinalizers), so that no stranded anchor of the field is kept
// for want of a kind. The plane's ClusterRole (config/rbac/project-role.yaml) grants
// get on exactly these. A kind a plane does not serve reads as unknown (its 404 names
// no object), reported, never collected.
var DefaultLiveOwnerKinds = append([]schema.GroupKind{
	{Group: "networking.datumapis.com", Kind: "HTTPProxy"},
	{Group: "gateway.networking.k8s.io", Kind: "Gateway"},
	{Group: "gateway.networking.k8s.io", Kind: "HTTPRoute"},
	{Group: "discovery.k8s.io", Kind: "EndpointSlice"},
}, PreviousReplicatedKinds...)

// secretKind is never read live nor listed: reading it would need read access to a
// tenant's (or the hub's) credentials, which the manager must not hold.
var secretKind = schema.GroupKind{Group: "", Kind: "Secret"}

// Options are the resync's knobs. Zero values take the defaults stated on each
// field; Validate rejects combinations that would make the safety rules meaningless.
// The resync is on by default.
type Options struct {
	// Disabled turns the resync off entirely. Default false.
	Disabled bool
	// DryRun decides and reports everything and deletes nothing (and enqueues nothing;
	// a replica still records a project's plane identity, the sweep does not).
	DryRun bool
	// Period between two passes over one project. Default 10m.
	Period time.Duration
	// InitialJitter bounds the random delay of a project's first pass after this
	// replica comes to hold it, so a replica that gains many projects does not pass over all at once.
	// Default 30s.
	InitialJitter time.Duration
	// ConfirmAfter is how long after a first proof of absence the same proof must hold
	// again. A pass that records a proof schedules the next pass for then. Default 30s.
	ConfirmAfter time.Duration
	// MinAge: anchors younger than this are never collected. Default 5m.
	MinAge time.Duration
	// StuckAfter: an owner terminating with our finalizer for longer is reported
	// unknown (finalizer-stuck) instead of kept silently. Default 1h.
	StuckAfter time.Duration
	// MaxDeletionsPerPass caps the anchors one pass over one project collects; the
	// rest wait for the next pass. Default 50.
	MaxDeletionsPerPass int
	// HaltAbove is the hard ceiling: a pass in which more anchors of one project qualify
	// for collection deletes none and raises a Warning Event and a metric. Default 500.
	HaltAbove int
	// DeletionQPS and DeletionBurst rate-limit deletions across all projects of a
	// replica. Default 10 and 20.
	DeletionQPS   float32
	DeletionBurst int
	// LiveQPS and LiveBurst rate-limit live reads of one project's plane. Default 50
	// and 100.
	LiveQPS   float32
	LiveBurst int
	// DependentsQPS and DependentsBurst rate-limit the hub lists that read anchors'
	// dependents (each kind of DependentKindsOf, per namespace with candidates), across all
	// projects of a replica. Default 50 and 100.
	DependentsQPS   float32
	DependentsBurst int
	// LiveTimeout bounds each live read of a plane. Default 5s.
	LiveTimeout time.Duration
	// Workers bounds the passes that run at once on a replica. Default 4.
	Workers int
	// RememberedProjects bounds the projects whose last pass reports a replica keeps
	// (Reports, LastReport, Passes); the least recently passed is forgotten first. It
	// should exceed the projects one replica holds. Default 4096.
	RememberedProjects int
	// ReportHistory is how many reports per project a replica keeps for Reports, in
	// full. Zero (the default): only the latest, with lines only for the anchors it did
	// not keep (the kept ones are counted, PassReport.KeptUnlisted), dropped when the
	// replica loses the project, so that what a replica remembers follows its work. A
	// positive depth is an audit trail (tests): those reports outlive the project's
	// loss, within RememberedProjects.
	ReportHistory int
	// ClaimPasses bounds how many passes a dependent claimed by a live owner (one that
	// would write that kind and name) keeps a stale anchor: the pass after that reports
	// the claim expired (claim-expired), and the next one collects the anchor with the
	// dependent. Default 3.
	ClaimPasses int
	// Finalizers are our finalizers by owner kind. Default DefaultFinalizers.
	Finalizers map[schema.GroupKind]string
	// Writes are the hub objects the live path writes, by owner kind: only an owner
	// that would write a dependent's kind and name can claim it. Default
	// DefaultHubWrites.
	Writes map[schema.GroupKind][]HubWrite
	// LiveOwnerKinds are the owner kinds read live on a plane to prove them absent; an
	// anchor of another kind is unknown (kind-not-configured), with a detail naming the
	// permission it would need. Default DefaultLiveOwnerKinds. Never Secrets.
	LiveOwnerKinds []schema.GroupKind
	// ClaimsNamespace is the hub namespace of the hostname claims (pkg/gateway,
	// hostname_claims.go): a pass releases this project's claims whose Gateway a live
	// read proves absent (claims.go). Empty: claims are left to the Gateways'
	// finalizers.
	ClaimsNamespace string
	// ExtraDependentKinds are hub kinds the dependents scan lists besides anchors and
	// what the live path writes (DependentKindsOf): legacy dependents an operator knows
	// of. Default none. Never Secrets.
	ExtraDependentKinds []schema.GroupKind
	// Clock drives periods, ages and confirmation. Default the real clock. Rate limits
	// and timeouts always run on the real clock.
	Clock clock.WithTicker
}

// WithDefaults returns o with every zero field set to its default.
func (o Options) WithDefaults() Options {
	setDur := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	setInt := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	setQPS := func(v *float32, d float32) {
		if *v == 0 {
			*v = d
		}
	}
	setDur(&o.Period, 10*time.Minute)
	setDur(&o.InitialJitter, 30*time.Second)
	setDur(&o.ConfirmAfter, 30*time.Second)
	setDur(&o.MinAge, 5*time.Minute)
	setDur(&o.StuckAfter, time.Hour)
	setDur(&o.LiveTimeout, 5*time.Second)
	setInt(&o.MaxDeletionsPerPass, 50)
	setInt(&o.HaltAbove, 500)
	setInt(&o.DeletionBurst, 20)
	setInt(&o.LiveBurst, 100)
	setInt(&o.Workers, 4)
	setInt(&o.DependentsBurst, 100)
	setInt(&o.RememberedProjects, 4096)
	setInt(&o.ClaimPasses, 3)
	setQPS(&o.DependentsQPS, 50)
	setQPS(&o.DeletionQPS, 10)
	setQPS(&o.LiveQPS, 50)
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
	case o.Period < 0, o.InitialJitter < 0, o.ConfirmAfter < 0, o.MinAge < 0, o.StuckAfter < 0, o.LiveTimeout < 0:
		return errors.New("resync durations must not be negative")
	case o.MaxDeletionsPerPass < 0, o.HaltAbove < 0, o.DeletionBurst < 0, o.LiveBurst < 0, o.Workers < 0, o.RememberedProjects < 0, o.ReportHistory < 0, o.ClaimPasses < 0, o.DeletionQPS < 0, o.LiveQPS < 0, o.DependentsQPS < 0, o.DependentsBurst < 0:
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

// validKinds refuses a kind without a name, a wildcard and Secrets: each kind listed
// becomes a grant in the manager's RBAC, and none of these may.
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

// ParseGroupKinds parses a comma-separated list of group/Kind (Kind alone for the core
// group), as the flags take them. Empty is none.
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
		if gk.Group == "" {
			parts = append(parts, gk.Kind)
			continue
		}
		parts = append(parts, gk.Group+"/"+gk.Kind)
	}
	return strings.Join(parts, ",")
}

func (o Options) timing() Timing {
	return Timing{MinAge: o.MinAge, ConfirmAfter: o.ConfirmAfter, StuckAfter: o.StuckAfter, ClaimPasses: o.ClaimPasses}
}
