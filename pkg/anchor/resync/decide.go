package resync

import (
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Decision is what the resync concludes about one anchor in one pass (docs/design.md,
// The four decisions). A pass acts on nothing but Collect.
type Decision int

const (
	Keep    Decision = iota // the owner exists with the anchor's UID, not going away without our finalizer
	Suspect                 // the owner may be gone, but nothing is proven yet; kept and looked at again
	Collect                 // absence proven and confirmed, the anchor old enough, nothing live on it alone
	Unknown                 // nothing can be concluded; kept, counted and reported
)

var decisionNames = [...]string{Keep: "keep", Suspect: "suspect", Collect: "collect", Unknown: "unknown"}

// Decisions lists every Decision in order.
var Decisions = []Decision{Keep, Suspect, Collect, Unknown}

func (d Decision) String() string {
	if d < 0 || int(d) >= len(decisionNames) {
		return "invalid"
	}
	return decisionNames[d]
}

// Reason says why a Decision was reached; each belongs to one decision.
type Reason string

// Reasons for Keep.
const (
	ReasonInCache    Reason = "in-cache"   // the owner's cache holds it with the anchor's UID, not terminating
	ReasonLive       Reason = "live"       // a live read found it with the anchor's UID, not terminating
	ReasonFinalizing Reason = "finalizing" // terminating with our finalizer, not yet for StuckAfter
)

// Reasons for Suspect.
const (
	ReasonNotInCache             Reason = "not-in-cache"                  // not in the cache, not read live yet (only in a pass ended early)
	ReasonUIDMismatch            Reason = "uid-mismatch"                  // cached under another UID, not read live yet (likewise)
	ReasonTerminatingUnfinalized Reason = "terminating-without-finalizer" // the owner is terminating without our finalizer
	ReasonAwaitingConfirmation   Reason = "awaiting-confirmation"         // a proof held once; it must hold again ConfirmAfter later
	ReasonBelowMinimumAge        Reason = "below-minimum-age"             // confirmed, but the anchor is younger than MinAge
	ReasonAwaitingReattach       Reason = "awaiting-reattach"             // a live owner claims a dependent; it is enqueued to re-attach
	ReasonClaimExpired           Reason = "claim-expired"                 // claimed for ClaimPasses passes; the next pass collects
)

// Reasons for Collect: the proof of absence.
const (
	ReasonNotFound           Reason = "not-found"           // a live GET answered NotFound with details naming the object
	ReasonReplaced           Reason = "replaced"            // a live GET found an object of that name with another UID
	ReasonNamespaceRecreated Reason = "namespace-recreated" // the upstream namespace exists under another UID
	ReasonNamespaceGone      Reason = "namespace-gone"      // the upstream namespace is NotFound (details naming it)
	ReasonProjectRetired     Reason = "project-retired"     // no kubeconfig Secret, and a tombstone retires the project
)

// Reasons for Unknown.
const (
	ReasonMalformed            Reason = "malformed"             // anchor-named, in a mapped namespace, but not an anchor
	ReasonAmbiguous            Reason = "ambiguous"             // another anchor of the same name exists on the hub
	ReasonKindNotServed        Reason = "kind-not-served"       // no REST mapping for the owner's kind, or a 404 not naming it
	ReasonReadError            Reason = "read-error"            // a read failed (timeout, server error, unreachable)
	ReasonForbidden            Reason = "forbidden"             // a 403 on the owner's kind, unknown for the rest of the pass
	ReasonKindNotConfigured    Reason = "kind-not-configured"   // the owner's kind is not in Options.LiveOwnerKinds
	ReasonPlaneChanged         Reason = "plane-changed"         // the plane's identity differs from the record; deletion halts
	ReasonPlaneUnverified      Reason = "plane-unverified"      // the plane's identity could not be verified
	ReasonFinalizerStuck       Reason = "finalizer-stuck"       // terminating with our finalizer for longer than StuckAfter
	ReasonForeignDependent     Reason = "foreign-dependent"     // a dependent hanging on it alone is another project's
	ReasonDependentsError      Reason = "dependents-error"      // the dependents could not be read or judged
	ReasonNotHeld              Reason = "not-held"              // this replica may not work on the project, or lost it in the pass
	ReasonNoProjectSecret      Reason = "no-project-secret"     // the anchor's project matches no kubeconfig Secret
	ReasonUnreadableKubeconfig Reason = "unreadable-kubeconfig" // the project's Secret gives no client (the sweep)
)

var reasonsByDecision = map[Decision][]Reason{
	Keep:    {ReasonInCache, ReasonLive, ReasonFinalizing},
	Suspect: {ReasonNotInCache, ReasonUIDMismatch, ReasonTerminatingUnfinalized, ReasonAwaitingConfirmation, ReasonBelowMinimumAge, ReasonAwaitingReattach, ReasonClaimExpired},
	Collect: {ReasonNotFound, ReasonReplaced, ReasonNamespaceRecreated, ReasonNamespaceGone, ReasonProjectRetired},
	Unknown: {ReasonMalformed, ReasonAmbiguous, ReasonKindNotServed, ReasonReadError, ReasonForbidden, ReasonKindNotConfigured, ReasonPlaneChanged, ReasonPlaneUnverified,
		ReasonFinalizerStuck, ReasonForeignDependent, ReasonDependentsError, ReasonNotHeld, ReasonNoProjectSecret, ReasonUnreadableKubeconfig},
}

// PlaneState is what a pass knows of the project plane's identity.
type PlaneState int

const (
	PlaneVerified   PlaneState = iota // the identity read now is the recorded one (or was just recorded)
	PlaneChanged                      // the identity read now differs from the recorded one
	PlaneUnverified                   // the identity could not be read or compared
)

func (p PlaneState) String() string {
	switch p {
	case PlaneVerified:
		return "verified"
	case PlaneChanged:
		return "changed"
	default:
		return "unverified"
	}
}

// ObjectState is what one read said about the upstream owner.
type ObjectState int

const (
	NotRead       ObjectState = iota // no read was made (yet)
	Present                          // the object exists; see Observation's UID, deletion and finalizers
	Absent                           // a cache miss, or a live NotFound whose details name the object
	NotWatched                       // the cache does not watch the kind (cache reads only)
	NotServed                        // no REST mapping, or a 404 not naming the object (live reads only)
	Failed                           // the read failed (timeout, server error, unreachable)
	Forbidden                        // the plane refused the read (403)
	NotConfigured                    // the kind is not in Options.LiveOwnerKinds; no read was made
)

// Observation is the outcome of one read of the upstream owner.
type Observation struct {
	State ObjectState
	// UID, Deleting and Finalizers describe a Present object.
	UID        types.UID
	Deleting   *time.Time
	Finalizers []string
}

// NamespaceState is what a live read of the upstream namespace said of the anchor's.
type NamespaceState int

const (
	NamespaceNotRead   NamespaceState = iota // not read (yet)
	NamespaceMatches                         // the upstream namespace's UID is the hub namespace's suffix
	NamespaceRecreated                       // the upstream namespace exists with another UID
	NamespaceGone                            // NotFound, with details naming the namespace
	NamespaceUnknown                         // the read failed or proved nothing; the owner is read instead
)

// Proof is an earlier proof of absence of one anchor's owner, kept between passes.
type Proof struct {
	Reason Reason
	At     time.Time
}

// DependentsSummary is what the live read of an anchor's dependents found. Claimed,
// Foreign and Unreadable count only dependents that hang on the anchor alone.
type DependentsSummary struct {
	Failed     bool // the dependents could not be read
	Total      int  // dependents holding an ownerReference to the anchor's UID
	Claimed    int  // by a live owner that would write them and must re-attach them first
	Foreign    int  // labelled for an owner in another project
	Unreadable int  // labelled for an owner whose state could not be read
}

// Timing holds the durations a decision depends on.
type Timing struct {
	MinAge       time.Duration // anchors younger than this are never collected
	ConfirmAfter time.Duration // a proof of absence must hold again this long after it was first seen
	StuckAfter   time.Duration // an owner terminating with our finalizer for longer is reported unknown
	ClaimPasses  int           // passes a claim keeps a stale anchor before it expires; 0: never
}

// age is the anchor's age on the hub's clock when known, else on the local one.
func (f Facts) age() time.Duration {
	now := f.Now
	if !f.HubNow.IsZero() {
		now = f.HubNow
	}
	return now.Sub(f.Created)
}

// Facts is everything a decision about one anchor depends on. Reads not made yet are
// NotRead (or nil); Decide says which one it needs next.
type Facts struct {
	Now       time.Time
	AnchorUID types.UID // the owner UID the anchor is named after
	Created   time.Time // the anchor's creation time (the hub's clock)
	HubNow    time.Time // the hub's clock at Now (HubClock); zero when not known (Now stands in)
	Malformed bool      // anchor-named, in a mapped namespace, but not an anchor
	Ambiguous bool      // another anchor of the same name exists
	Plane     PlaneState
	Retired   bool   // a tombstone retires the project (proof project-retired); no plane is read
	Finalizer string // our finalizer for the owner's kind ("" when we have none for it)
	// Cache is the read of the owner's cache; Namespace and Live are live reads.
	Cache         Observation
	Namespace     NamespaceState
	Live          Observation
	Earlier       Proof              // the proof of absence recorded in an earlier pass (zero if none)
	Dependents    *DependentsSummary // nil until they have been read
	ClaimedPasses int                // counts the earlier passes in a row that found a claimed dependent
	Timing
}

// Need is the read Decide asks for before it can go further.
type Need int

const (
	NeedNothing    Need = iota // the verdict is final for this pass
	NeedNamespace              // read the upstream namespace live
	NeedLive                   // read the owner live
	NeedDependents             // read the anchor's dependents on the hub (just before deleting)
)

// Verdict is the outcome of Decide.
type Verdict struct {
	Decision Decision
	Reason   Reason
	Proof    Reason // the proof of absence held now ("" if none), for the caller to remember
	Need     Need   // the read to make before deciding again
}

// Decide applies the resync's rules (docs/design.md, Anchor resync) to what is known of
// one anchor. It is pure: callers gather what Need asks for and call it again. A Collect
// that still needs the dependents is a candidate, final only once they are judged.
func Decide(f Facts) Verdict {
	if f.Malformed {
		return Verdict{Decision: Unknown, Reason: ReasonMalformed}
	}
	if f.Ambiguous {
		return Verdict{Decision: Unknown, Reason: ReasonAmbiguous}
	}
	proof := Reason("")
	if f.Retired {
		proof = ReasonProjectRetired
	} else {
		v, p, done := decidePlane(f)
		if done {
			return v
		}
		proof = p
	}

	if f.Earlier.Reason != proof || f.Earlier.At.IsZero() || f.Now.Sub(f.Earlier.At) < f.ConfirmAfter {
		return Verdict{Decision: Suspect, Reason: ReasonAwaitingConfirmation, Proof: proof}
	}
	if f.age() < f.MinAge {
		return Verdict{Decision: Suspect, Reason: ReasonBelowMinimumAge, Proof: proof}
	}

	d := f.Dependents
	switch {
	case d == nil:
		return Verdict{Decision: Collect, Reason: proof, Proof: proof, Need: NeedDependents}
	case d.Failed || d.Unreadable > 0:
		return Verdict{Decision: Unknown, Reason: ReasonDependentsError, Proof: proof}
	case d.Foreign > 0:
		return Verdict{Decision: Unknown, Reason: ReasonForeignDependent, Proof: proof}
	case d.Claimed > 0 && (f.ClaimPasses <= 0 || f.ClaimedPasses < f.ClaimPasses):
		return Verdict{Decision: Suspect, Reason: ReasonAwaitingReattach, Proof: proof}
	case d.Claimed > 0 && f.ClaimedPasses == f.ClaimPasses:
		return Verdict{Decision: Suspect, Reason: ReasonClaimExpired, Proof: proof}
	}
	// Nothing claimed, or a claim expired a pass ago: the rest is garbage.
	return Verdict{Decision: Collect, Reason: proof, Proof: proof}
}

// decidePlane applies the rules that read the project's plane: the owner's cache, the
// upstream namespace and the owner read live. It returns the proof of absence found,
// or, with done, a verdict that ends the decision.
func decidePlane(f Facts) (v Verdict, proof Reason, done bool) {
	if f.Plane == PlaneChanged {
		return Verdict{Decision: Unknown, Reason: ReasonPlaneChanged}, "", true
	}

	suspectReason := ReasonNotInCache
	switch f.Cache.State {
	case Present:
		if f.Cache.UID != f.AnchorUID {
			suspectReason = ReasonUIDMismatch
			break
		}
		if v, ok := judgeExisting(f, f.Cache, ReasonInCache); ok {
			return v, "", true
		}
		suspectReason = ReasonTerminatingUnfinalized
	case Failed:
		// A cache that cannot answer is the same as a miss: read live.
	}

	// Nothing below may be concluded from a plane whose identity is unknown.
	if f.Plane != PlaneVerified {
		return Verdict{Decision: Unknown, Reason: ReasonPlaneUnverified}, "", true
	}

	switch f.Namespace {
	case NamespaceNotRead:
		return Verdict{Decision: Suspect, Reason: suspectReason, Need: NeedNamespace}, "", true
	case NamespaceRecreated:
		proof = ReasonNamespaceRecreated
	case NamespaceGone:
		proof = ReasonNamespaceGone
	}

	if proof == "" {
		switch f.Live.State {
		case NotRead:
			return Verdict{Decision: Suspect, Reason: suspectReason, Need: NeedLive}, "", true
		case Present:
			if f.Live.UID != f.AnchorUID {
				proof = ReasonReplaced
				break
			}
			if v, ok := judgeExisting(f, f.Live, ReasonLive); ok {
				return v, "", true
			}
			return Verdict{Decision: Suspect, Reason: ReasonTerminatingUnfinalized}, "", true
		case Absent:
			proof = ReasonNotFound
		case NotServed, NotWatched:
			return Verdict{Decision: Unknown, Reason: ReasonKindNotServed}, "", true
		case Forbidden:
			return Verdict{Decision: Unknown, Reason: ReasonForbidden}, "", true
		case NotConfigured:
			return Verdict{Decision: Unknown, Reason: ReasonKindNotConfigured}, "", true
		default:
			return Verdict{Decision: Unknown, Reason: ReasonReadError}, "", true
		}
	}
	return Verdict{}, proof, false
}

// judgeExisting decides about an owner read with the anchor's UID: Keep (keepReason)
// when not terminating, finalizing or finalizer-stuck with our finalizer; ok is false
// when it is terminating without it, which proves nothing.
func judgeExisting(f Facts, o Observation, keepReason Reason) (Verdict, bool) {
	if o.Deleting == nil {
		return Verdict{Decision: Keep, Reason: keepReason}, true
	}
	if f.Finalizer == "" || !slices.Contains(o.Finalizers, f.Finalizer) {
		return Verdict{}, false
	}
	if f.StuckAfter > 0 && f.Now.Sub(*o.Deleting) > f.StuckAfter {
		return Verdict{Decision: Unknown, Reason: ReasonFinalizerStuck}, true
	}
	return Verdict{Decision: Keep, Reason: ReasonFinalizing}, true
}
