package resync

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

const (
	finalizer = "gateway.networking.datumapis.com/gateway-controller"
	anchorUID = types.UID("6f1c1f5e-2a39-4a55-9d49-3f3c4b1f0a01")
	otherUID  = types.UID("0b4f7d8e-5c1a-4c2e-8f6a-7d9e1b2c3a40")
)

var (
	now     = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	timings = Timing{MinAge: 5 * time.Minute, ConfirmAfter: 30 * time.Second, StuckAfter: time.Hour, ClaimPasses: 3}
)

// base are the facts of an old anchor on a verified plane, nothing read yet.
func base() Facts {
	return Facts{Now: now, AnchorUID: anchorUID, Created: now.Add(-24 * time.Hour), Plane: PlaneVerified, Finalizer: finalizer, Timing: timings}
}

func at(d time.Duration) *time.Time { t := now.Add(d); return &t }

// confirmed returns f with the live read proving absence by reason, first seen long
// enough ago.
func confirmed(f Facts, live Observation, proof Reason) Facts {
	f.Namespace = NamespaceMatches
	f.Live = live
	f.Earlier = Proof{Reason: proof, At: now.Add(-time.Minute)}
	return f
}

func TestDecide(t *testing.T) {
	present := Observation{State: Present, UID: anchorUID}
	absent := Observation{State: Absent}
	replaced := Observation{State: Present, UID: otherUID}
	terminatingOurs := Observation{State: Present, UID: anchorUID, Deleting: at(-time.Minute), Finalizers: []string{finalizer}}
	terminatingOthers := Observation{State: Present, UID: anchorUID, Deleting: at(-time.Minute), Finalizers: []string{"example.com/other"}}

	cases := []struct {
		reason string
		facts  func() Facts
		want   Verdict
	}{
		{"an anchor-named ConfigMap that is not an anchor is never judged", func() Facts {
			f := base()
			f.Malformed, f.Cache = true, present
			return f
		}, Verdict{Decision: Unknown, Reason: ReasonMalformed}},
		{"two anchors of one name: which one is the owner's cannot be told", func() Facts {
			f := confirmed(base(), absent, ReasonNotFound)
			f.Ambiguous = true
			return f
		}, Verdict{Decision: Unknown, Reason: ReasonAmbiguous}},
		{"a changed plane halts everything, even what its cache holds", func() Facts {
			f := base()
			f.Plane, f.Cache = PlaneChanged, present
			return f
		}, Verdict{Decision: Unknown, Reason: ReasonPlaneChanged}},
		{"owner in the cache with the anchor's UID: keep, without any read", func() Facts {
			f := base()
			f.Cache = present
			return f
		}, Verdict{Decision: Keep, Reason: ReasonInCache}},
		{"the cache alone keeps on an unverified plane", func() Facts {
			f := base()
			f.Plane, f.Cache = PlaneUnverified, present
			return f
		}, Verdict{Decision: Keep, Reason: ReasonInCache}},
		{"terminating with our finalizer: the live path finalizes it", func() Facts {
			f := base()
			f.Cache = terminatingOurs
			return f
		}, Verdict{Decision: Keep, Reason: ReasonFinalizing}},
		{"terminating with our finalizer for longer than the threshold is reported", func() Facts {
			f := base()
			f.Cache = terminatingOurs
			f.Cache.Deleting = at(-2 * time.Hour)
			return f
		}, Verdict{Decision: Unknown, Reason: ReasonFinalizerStuck}},
		{"terminating without our finalizer is a suspect to read live", func() Facts {
			f := base()
			f.Cache = terminatingOthers
			return f
		}, Verdict{Decision: Suspect, Reason: ReasonTerminatingUnfinalized, Need: NeedNamespace}},
		{"a cache miss starts with the namespace", func() Facts {
			return base()
		}, Verdict{Decision: Suspect, Reason: ReasonNotInCache, Need: NeedNamespace}},
		{"a cache that failed counts as a miss", func() Facts {
			f := base()
			f.Cache = Observation{State: Failed}
			return f
		}, Verdict{Decision: Suspect, Reason: ReasonNotInCache, Need: NeedNamespace}},
		{"another UID in the cache is a suspect", func() Facts {
			f := base()
			f.Cache = replaced
			return f
		}, Verdict{Decision: Suspect, Reason: ReasonUIDMismatch, Need: NeedNamespace}},
		{"a miss on an unverified plane proves nothing and reads nothing", func() Facts {
			f := base()
			f.Plane = PlaneUnverified
			return f
		}, Verdict{Decision: Unknown, Reason: ReasonPlaneUnverified}},
		{"namespace unchanged: read the owner live", func() Facts {
			f := base()
			f.Namespace = NamespaceMatches
			return f
		}, Verdict{Decision: Suspect, Reason: ReasonNotInCache, Need: NeedLive}},
		{"namespace unreadable: read the owner live anyway", func() Facts {
			f := base()
			f.Namespace = NamespaceUnknown
			return f
		}, Verdict{Decision: Suspect, Reason: ReasonNotInCache, Need: NeedLive}},
		{"cache lag or unwatched kind: found live with the anchor's UID", func() Facts {
			f := base()
			f.Cache, f.Namespace, f.Live = Observation{State: NotWatched}, NamespaceMatches, present
			return f
		}, Verdict{Decision: Keep, Reason: ReasonLive}},
		{"found live, terminating with our finalizer", func() Facts {
			f := base()
			f.Namespace, f.Live = NamespaceMatches, terminatingOurs
			return f
		}, Verdict{Decision: Keep, Reason: ReasonFinalizing}},
		{"found live, terminating without our finalizer: it still exists", func() Facts {
			f := base()
			f.Namespace, f.Live = NamespaceMatches, terminatingOthers
			return f
		}, Verdict{Decision: Suspect, Reason: ReasonTerminatingUnfinalized}},
		{"a kind the plane does not serve proves nothing", func() Facts {
			f := base()
			f.Namespace, f.Live = NamespaceMatches, Observation{State: NotServed}
			return f
		}, Verdict{Decision: Unknown, Reason: ReasonKindNotServed}},
		{"a failed live read proves nothing", func() Facts {
			f := base()
			f.Namespace, f.Live = NamespaceMatches, Observation{State: Failed}
			return f
		}, Verdict{Decision: Unknown, Reason: ReasonReadError}},
		{"a first NotFound naming the object waits for confirmation", func() Facts {
			f := base()
			f.Namespace, f.Live = NamespaceMatches, absent
			return f
		}, Verdict{Decision: Suspect, Reason: ReasonAwaitingConfirmation, Proof: ReasonNotFound}},
		{"a proof seen again too soon still waits", func() Facts {
			f := confirmed(base(), absent, ReasonNotFound)
			f.Earlier.At = now.Add(-10 * time.Second)
			return f
		}, Verdict{Decision: Suspect, Reason: ReasonAwaitingConfirmation, Proof: ReasonNotFound}},
		{"a different proof than before starts confirming again", func() Facts {
			return confirmed(base(), absent, ReasonReplaced)
		}, Verdict{Decision: Suspect, Reason: ReasonAwaitingConfirmation, Proof: ReasonNotFound}},
		{"confirmed, but the anchor is younger than the minimum age", func() Facts {
			f := confirmed(base(), absent, ReasonNotFound)
			f.Created = now.Add(-time.Minute)
			return f
		}, Verdict{Decision: Suspect, Reason: ReasonBelowMinimumAge, Proof: ReasonNotFound}},
		{"the local clock 60 s ahead does not age an anchor past the minimum", func() Facts {
			f := confirmed(base(), absent, ReasonNotFound)
			f.Created = now.Add(-f.MinAge - 30*time.Second) // 30 s over the minimum by the local clock
			f.HubNow = now.Add(-60 * time.Second)           // the hub's clock is 60 s behind
			return f
		}, Verdict{Decision: Suspect, Reason: ReasonBelowMinimumAge, Proof: ReasonNotFound}},
		{"the local clock 60 s behind does not hold an old anchor back", func() Facts {
			f := confirmed(base(), absent, ReasonNotFound)
			f.Created = now.Add(-f.MinAge + 30*time.Second) // 30 s short of the minimum by the local clock
			f.HubNow = now.Add(60 * time.Second)            // the hub's clock is 60 s ahead
			return f
		}, Verdict{Decision: Collect, Reason: ReasonNotFound, Proof: ReasonNotFound, Need: NeedDependents}},
		{"confirmed and old: a candidate whose dependents are read next", func() Facts {
			return confirmed(base(), absent, ReasonNotFound)
		}, Verdict{Decision: Collect, Reason: ReasonNotFound, Proof: ReasonNotFound, Need: NeedDependents}},
		{"confirmed, old, nothing hangs on it alone: collect", func() Facts {
			f := confirmed(base(), absent, ReasonNotFound)
			f.Dependents = &DependentsSummary{Total: 2}
			return f
		}, Verdict{Decision: Collect, Reason: ReasonNotFound, Proof: ReasonNotFound}},
		{"a live owner of the same name, confirmed: a candidate too", func() Facts {
			return confirmed(base(), replaced, ReasonReplaced)
		}, Verdict{Decision: Collect, Reason: ReasonReplaced, Proof: ReasonReplaced, Need: NeedDependents}},
		{"a dependent claimed by a live owner waits for its re-attachment", func() Facts {
			f := confirmed(base(), replaced, ReasonReplaced)
			f.Dependents = &DependentsSummary{Total: 1, Claimed: 1}
			return f
		}, Verdict{Decision: Suspect, Reason: ReasonAwaitingReattach, Proof: ReasonReplaced}},
		{"a claim still within its bound keeps waiting", func() Facts {
			f := confirmed(base(), replaced, ReasonReplaced)
			f.Dependents = &DependentsSummary{Total: 1, Claimed: 1}
			f.ClaimedPasses = 2
			return f
		}, Verdict{Decision: Suspect, Reason: ReasonAwaitingReattach, Proof: ReasonReplaced}},
		{"a claim no reconcile resolved in ClaimPasses passes is reported expired", func() Facts {
			f := confirmed(base(), replaced, ReasonReplaced)
			f.Dependents = &DependentsSummary{Total: 1, Claimed: 1}
			f.ClaimedPasses = 3
			return f
		}, Verdict{Decision: Suspect, Reason: ReasonClaimExpired, Proof: ReasonReplaced}},
		{"the pass after a claim expired: the dependent is the stale anchor's garbage", func() Facts {
			f := confirmed(base(), replaced, ReasonReplaced)
			f.Dependents = &DependentsSummary{Total: 1, Claimed: 1}
			f.ClaimedPasses = 4
			return f
		}, Verdict{Decision: Collect, Reason: ReasonReplaced, Proof: ReasonReplaced}},
		{"claims that never expire (ClaimPasses zero) keep waiting", func() Facts {
			f := confirmed(base(), replaced, ReasonReplaced)
			f.Dependents = &DependentsSummary{Total: 1, Claimed: 1}
			f.ClaimedPasses, f.ClaimPasses = 40, 0
			return f
		}, Verdict{Decision: Suspect, Reason: ReasonAwaitingReattach, Proof: ReasonReplaced}},
		{"a foreign dependent keeps the anchor even after a claim expired", func() Facts {
			f := confirmed(base(), replaced, ReasonReplaced)
			f.Dependents = &DependentsSummary{Total: 2, Claimed: 1, Foreign: 1}
			f.ClaimedPasses = 4
			return f
		}, Verdict{Decision: Unknown, Reason: ReasonForeignDependent, Proof: ReasonReplaced}},
		{"a kind the plane forbids the manager to read is unknown, not a read error", func() Facts {
			f := base()
			f.Namespace, f.Live = NamespaceMatches, Observation{State: Forbidden}
			return f
		}, Verdict{Decision: Unknown, Reason: ReasonForbidden}},
		{"a kind the resync is not configured to read is unknown, naming the configuration", func() Facts {
			f := base()
			f.Namespace, f.Live = NamespaceMatches, Observation{State: NotConfigured}
			return f
		}, Verdict{Decision: Unknown, Reason: ReasonKindNotConfigured}},
		{"a retired project: its absence is the proof, to be confirmed", func() Facts {
			f := base()
			f.Retired, f.Plane = true, PlaneUnverified
			return f
		}, Verdict{Decision: Suspect, Reason: ReasonAwaitingConfirmation, Proof: ReasonProjectRetired}},
		{"a retired project, confirmed: a candidate, whose dependents are read next", func() Facts {
			f := base()
			f.Retired, f.Plane = true, PlaneUnverified
			f.Earlier = Proof{Reason: ReasonProjectRetired, At: now.Add(-time.Minute)}
			return f
		}, Verdict{Decision: Collect, Reason: ReasonProjectRetired, Proof: ReasonProjectRetired, Need: NeedDependents}},
		{"a retired project's young anchor waits for the minimum age", func() Facts {
			f := base()
			f.Retired, f.Plane, f.Created = true, PlaneUnverified, now.Add(-time.Minute)
			f.Earlier = Proof{Reason: ReasonProjectRetired, At: now.Add(-time.Minute)}
			return f
		}, Verdict{Decision: Suspect, Reason: ReasonBelowMinimumAge, Proof: ReasonProjectRetired}},
		{"a dependent naming no owner of the project keeps the anchor", func() Facts {
			f := confirmed(base(), absent, ReasonNotFound)
			f.Dependents = &DependentsSummary{Total: 1, Foreign: 1}
			return f
		}, Verdict{Decision: Unknown, Reason: ReasonForeignDependent, Proof: ReasonNotFound}},
		{"dependents that cannot be read keep the anchor", func() Facts {
			f := confirmed(base(), absent, ReasonNotFound)
			f.Dependents = &DependentsSummary{Failed: true}
			return f
		}, Verdict{Decision: Unknown, Reason: ReasonDependentsError, Proof: ReasonNotFound}},
		{"a dependent naming an owner that cannot be read keeps the anchor", func() Facts {
			f := confirmed(base(), absent, ReasonNotFound)
			f.Dependents = &DependentsSummary{Total: 1, Unreadable: 1}
			return f
		}, Verdict{Decision: Unknown, Reason: ReasonDependentsError, Proof: ReasonNotFound}},
		{"a recreated namespace proves absence without reading the owner, whatever its kind", func() Facts {
			f := base()
			f.Namespace, f.Live = NamespaceRecreated, Observation{State: NotServed}
			f.Earlier = Proof{Reason: ReasonNamespaceRecreated, At: now.Add(-time.Minute)}
			return f
		}, Verdict{Decision: Collect, Reason: ReasonNamespaceRecreated, Proof: ReasonNamespaceRecreated, Need: NeedDependents}},
		{"a namespace that is gone proves absence, once confirmed", func() Facts {
			f := base()
			f.Namespace = NamespaceGone
			return f
		}, Verdict{Decision: Suspect, Reason: ReasonAwaitingConfirmation, Proof: ReasonNamespaceGone}},
		{"an owner kind without a finalizer of ours, terminating, is a suspect", func() Facts {
			f := base()
			f.Finalizer = ""
			f.Cache = terminatingOurs
			return f
		}, Verdict{Decision: Suspect, Reason: ReasonTerminatingUnfinalized, Need: NeedNamespace}},
	}
	for _, tc := range cases {
		t.Run(tc.reason, func(t *testing.T) {
			got := Decide(tc.facts())
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nDecide(): -want +got:\n%s", tc.reason, diff)
			}
			if !slices.Contains(ReasonsOf(got.Decision), got.Reason) {
				t.Errorf("%s: reason %q is not one of %s's", tc.reason, got.Reason, got.Decision)
			}
		})
	}
}

// TestDecideNeverCollectsWithoutProof walks every combination of reads and checks the
// rules no table row can break: Collect only on a verified plane, with a confirmed
// proof, on an old anchor, and never when the owner was seen with the anchor's UID.
func TestDecideNeverCollectsWithoutProof(t *testing.T) {
	observations := []Observation{
		{State: NotRead}, {State: Present, UID: anchorUID}, {State: Present, UID: otherUID}, {State: Absent},
		{State: NotWatched}, {State: NotServed}, {State: Failed},
		{State: Present, UID: anchorUID, Deleting: at(-time.Minute), Finalizers: []string{finalizer}},
		{State: Present, UID: anchorUID, Deleting: at(-time.Minute)}, {State: Forbidden}, {State: NotConfigured},
	}
	namespaces := []NamespaceState{NamespaceNotRead, NamespaceMatches, NamespaceRecreated, NamespaceGone, NamespaceUnknown}
	planes := []PlaneState{PlaneVerified, PlaneChanged, PlaneUnverified}
	earlier := []Proof{{}, {Reason: ReasonNotFound, At: now.Add(-time.Minute)}, {Reason: ReasonNotFound, At: now}}
	created := []time.Time{now.Add(-time.Hour), now.Add(-time.Minute)}
	deps := []*DependentsSummary{nil, {}, {Claimed: 1}}
	claimed := []int{0, 3, 4}
	n := 0
	for _, cache := range observations {
		for _, live := range observations {
			for _, ns := range namespaces {
				for _, plane := range planes {
					for _, e := range earlier {
						for _, c := range created {
							for _, d := range deps {
								for _, cp := range claimed {
									f := base()
									f.Cache, f.Live, f.Namespace, f.Plane, f.Earlier, f.Created, f.Dependents, f.ClaimedPasses = cache, live, ns, plane, e, c, d, cp
									v := Decide(f)
									n++
									if !slices.Contains(ReasonsOf(v.Decision), v.Reason) {
										t.Fatalf("reason %q is not one of %s's (facts %+v)", v.Reason, v.Decision, f)
									}
									if v.Decision != Collect {
										continue
									}
									switch {
									case plane != PlaneVerified:
										t.Fatalf("collect on a %s plane: %+v", plane, f)
									case v.Proof == "" || e.Reason != v.Proof || now.Sub(e.At) < timings.ConfirmAfter:
										t.Fatalf("collect without a confirmed proof: %+v -> %+v", f, v)
									case now.Sub(c) < timings.MinAge:
										t.Fatalf("collect of a young anchor: %+v", f)
									case cache.State == Present && cache.UID == anchorUID && (cache.Deleting == nil || slices.Contains(cache.Finalizers, finalizer)):
										t.Fatalf("collect of an anchor whose owner is in the cache, live or finalizing: %+v", f)
									case d != nil && d.Claimed > 0 && cp <= timings.ClaimPasses:
										t.Fatalf("collect while a claimed dependent hangs on it, before the claim expired and was reported: %+v", f)
									}
								}
							}
						}
					}
				}
			}
		}
	}
	t.Logf("%d combinations checked", n)
}

func TestEveryReasonBelongsToOneDecision(t *testing.T) {
	owner := map[Reason]Decision{}
	for _, d := range Decisions {
		for _, r := range ReasonsOf(d) {
			if prev, ok := owner[r]; ok {
				t.Errorf("reason %q belongs to %s and %s", r, prev, d)
			}
			owner[r] = d
		}
	}
}

// Only failures that are the plane's count toward "unreachable".
func TestUnreachable(t *testing.T) {
	gr := schema.GroupResource{Group: "gateway.networking.k8s.io", Resource: "gateways"}
	cases := []struct {
		reason string
		err    error
		want   bool
	}{
		{"forbidden: a permission of one kind", apierrors.NewForbidden(gr, "edge", errors.New("no")), false},
		{"not found", apierrors.NewNotFound(gr, "edge"), false},
		{"too many requests", apierrors.NewTooManyRequests("slow down", 1), false},
		{"conflict", apierrors.NewConflict(gr, "edge", errors.New("no")), false},
		{"a kind not served", &meta.NoKindMatchError{GroupKind: schema.GroupKind{Kind: "Widget"}}, false},
		{"unauthorized: the Secret's credentials no longer work", apierrors.NewUnauthorized("expired"), true},
		{"internal error", apierrors.NewInternalError(errors.New("boom")), true},
		{"service unavailable", apierrors.NewServiceUnavailable("down"), true},
		{"server timeout", apierrors.NewServerTimeout(gr, "get", 1), true},
		{"gateway timeout", apierrors.NewTimeoutError("slow", 1), true},
		{"a context deadline", fmt.Errorf("reading: %w", context.DeadlineExceeded), true},
		{"connection refused", &url.Error{Op: "Get", URL: "https://plane", Err: &net.OpError{Op: "dial", Err: errors.New("connection refused")}}, true},
	}
	for _, tc := range cases {
		if got := unreachable(tc.err); got != tc.want {
			t.Errorf("%s: unreachable() = %t, want %t", tc.reason, got, tc.want)
		}
	}
}

// Nearly every mapped namespace gone or recreated is a changed plane.
func TestNamespaceLoss(t *testing.T) {
	states := func(matches, recreated, gone, unknown int) map[string]NamespaceState {
		m := map[string]NamespaceState{}
		add := func(n int, st NamespaceState) {
			for i := range n {
				m[fmt.Sprintf("%d/%d", st, i)] = st
			}
		}
		add(matches, NamespaceMatches)
		add(recreated, NamespaceRecreated)
		add(gone, NamespaceGone)
		add(unknown, NamespaceUnknown)
		return m
	}
	cases := []struct {
		reason string
		states map[string]NamespaceState
		mass   bool
	}{
		{"nothing read", states(0, 0, 0, 0), false},
		{"two of two gone: too few to tell", states(0, 1, 1, 0), false},
		{"three of three gone", states(0, 1, 2, 0), true},
		{"nine of ten gone", states(1, 5, 4, 0), true},
		{"eight of ten gone", states(2, 4, 4, 0), false},
		{"unreadable namespaces are not counted", states(0, 3, 0, 5), true},
		{"all present", states(5, 0, 0, 0), false},
	}
	for _, tc := range cases {
		if _, _, mass := namespaceLoss(tc.states); mass != tc.mass {
			t.Errorf("%s: mass loss %t, want %t", tc.reason, mass, tc.mass)
		}
	}
}

// ReasonsOf lists the reasons that lead to d.
func ReasonsOf(d Decision) []Reason { return slices.Clone(reasonsByDecision[d]) }
