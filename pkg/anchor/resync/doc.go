// Package resync collects anchors whose upstream owner is gone: the periodic resync
// each replica runs over the projects it holds, and the one-off sweep (`manager sweep`).
// Anchor identity, attaching and the precondition delete are package anchor's.
//
// Resync (resync.go) is engaged by the shard with every project this replica holds
// and runs one loop per engagement: a first pass after a random delay below
// InitialJitter, then one every Period, and one as soon as a proof of absence can be
// confirmed. A pass is a short list of phases (pass.go: examine; prove.go: prove and
// remember; collect.go: collect); every request it makes runs in its own admission step
// (the shard's Enter), so a pass stops at the next request once the project is lost or
// validity ends, and no step outlasts one validity window:
//
//  1. examine: find the project's kubeconfig Secret (two naming one project is an error;
//     none: the pass ends, unless a tombstone retires the project, see below), read the
//     plane identity (the UID of the plane's "default" Namespace) and compare it with the
//     record in the lease namespace (ConfigMap PlaneIdentityName, which belongs to the
//     project: no ownerReference; it notes the Secret UID it was verified with, so a
//     Secret deleted and created again must match it). A changed plane halts the
//     project (HaltPlaneChanged) until an operator acknowledges it with
//     AnnotationAcknowledgePlane on the record, which the pass honours by rewriting the
//     record, logging and eventing it. Then read the project's anchors from the
//     metadata-only hub cache (AnchorCache) and decide each from the owner's cache, read
//     in a mode that never starts an informer (StrictCacheOption). An owner found there
//     is kept with no API call.
//  2. prove: for suspects, read the upstream namespace (once per pass and namespace)
//     and, unless its UID already proves the owner gone, the owner itself, live and
//     rate-limited: with one quorum list per owner kind and namespace when several
//     suspects share them (owners.go; GETs if the plane refuses the list). A 403 makes that kind unknown (ReasonForbidden) for the rest of the
//     pass; only transport errors, timeouts, 5xx and 401 count toward the three failed
//     reads in a row that make the plane unreachable for the rest of the pass. A pass
//     that finds nearly every mapped namespace read gone or recreated halts as a changed
//     plane.
//  3. remember: a proof of absence is recorded with the time first seen; it must hold
//     again ConfirmAfter later (a later pass) before anything is collected.
//  4. collect: anchors already terminating are skipped (ActionAlreadyTerminating). Above
//     HaltAbove candidates, their dependents are judged first and only the collectable
//     ones count; above the ceiling still, halt (Warning Event, metric). Otherwise,
//     oldest first and namespace by namespace, read the namespace's objects live (anchors
//     and the kinds the live path writes, DependentKindsOf), judge the candidates' dependents (unlabelled and
//     own-owner dependents are the anchor's garbage; one is claimed only by a live owner
//     that would write its kind and name, Options.Writes, for at most ClaimPasses passes;
//     a dependent labelled for the anchor's own owner has that owner read live again just
//     before the delete, and a sibling anchor of the owner claims it), enqueue live
//     owners that claim one, read the runtime switch (once per pass, again after 5 s),
//     and delete what is still Collect,
//     at most MaxDeletionsPerPass, rate-limited, with UID and resourceVersion
//     preconditions, through the shard's validity-guarded writer, forgetting each anchor
//     in the dependents index as it goes; each deletion is logged and evented with the
//     anchor's labels, UID and dependents.
//
// Decide (decide.go) holds every rule and is pure. What the resync does not guarantee:
// a delete sent just before validity ends can commit after it (the UID precondition
// still pins the exact anchor that was judged); proofs and claim counts are kept in
// memory, so a project that changes hands starts confirming again (which only delays);
// a plane repointed before the project was ever held is recorded as it is then.
// Anchors of a project with no Secret are reported (anchorage_resync_unowned_anchors,
// the sweep) and never deleted without a tombstone. With a tombstone (LabelTombstone),
// the project is retired: no shard holds it, so the coordinator replica passes over it
// every Period under the shard's coordinator admission (retired.go; Config.
// RetiredAdmission and RetiredHub, CoordinatorAccess) and collects its anchors (proof
// project-retired, confirmed on two passes) under the replica's throttle and dry-run,
// and drops the project's plane record, the only path that deletes a record. The sweep
// collects them the same way.
//
// The operator's controls, none of which needs a restart, are described in
// docs/recovery.md: the AnnotationDeletion switch on the lease namespace, the
// AnnotationExclude annotation on a project's Secret, dry-run, and `manager sweep`.
package resync
