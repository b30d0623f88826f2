// Package shard splits tenant projects between anchorage replicas so that at most one
// replica works on a project at any time, and writes down how that is achieved.
//
// # Why not the sharded coordinator of multicluster-runtime
//
// It gates only watches: GetCluster, queued and requeued requests and hub sources keep
// running on every replica; it releases a project in a goroutine without waiting for
// in-flight reconciles; and it judges lease expiry from the remote renew time against
// the local clock. Two replicas on one project is the second cause of leaked anchors
// (one finalizes a Gateway while another recreates its downstream copy), so this
// package replaces it through mcmanager.WithCoordinator and a gating provider.
//
// # Objects (all in the lease namespace on the hub)
//
//   - member Lease "anchorage-member-<pod>": holderIdentity "<pod>/<incarnation>", renewed
//     by its replica. The incarnation is a fresh UID per process start and per rejoin.
//   - coordinator Lease "anchorage-coordinator": client-go leader election among
//     incarnations.
//   - project Lease "anchorage-project-<dns-safe name>-<hash>": holderIdentity is the
//     owning incarnation, leaseTransitions counts hand-overs, the real project name is in
//     an annotation and a label-safe form in a label, and the holder's claim is an
//     annotation "<incarnation>#<engagement>". Project Leases are never renewed: their
//     validity is their holder's.
//
// # Membership and validity
//
// A replica renews its member Lease every RetryPeriod with an update conditional on the
// resourceVersion it last wrote. Validity runs from the moment the last successful renew
// was sent plus RenewDeadline (never from the server's renewTime: remote clocks are not
// compared with the local one). Every call made for a project carries a context deadline
// at the end of validity, and project writes go through clients that refuse once
// validity has passed. When validity ends the replica stops all project work at once,
// voids every holding, and rejoins under a new incarnation; like client-go acquiring a
// lock, it takes its member Lease only after seeing it unchanged for LeaseDuration. A
// renew that conflicts means the Lease was written since: a read (in a call of its own)
// shows whether someone else took it (the coordinator declaring it expired), which ends
// validity, or whether it still names this incarnation. A renew that committed but whose
// answer came after the call timeout shows as its own renewTime on the Lease: it counts
// like a seen renew, validity running from when it was sent.
//
// # Coordinator
//
// Elected with client-go leaderelection. Every replica watches member and project Leases
// from process start and records the local time of each change it sees. A new
// coordinator assigns nothing until its process has watched for LeaseDuration. A member
// is declared expired only after a direct read shows its Lease unchanged (same
// resourceVersion) for at least LeaseDuration since the last change seen; the
// coordinator then clears that Lease's holder with an update conditional on the
// resourceVersion it read, so a late renew by the old incarnation conflicts. A member
// Lease whose holder changes to a new incarnation proves the old incarnation's validity
// ended (the rejoin waited LeaseDuration > RenewDeadline), so its projects move at once.
// A suspect member (no change seen for LeaseDuration, which a stalled watch shows as well
// as a dead member) keeps its projects until that conditional clear succeeds; a member
// whose Lease was deleted keeps them for LeaseDuration after the deletion was seen, and
// its holder lapses at its next renew, which finds no Lease. The observer takes a Lease
// version older than the stored one from the watch (resourceVersions went back: an etcd
// restore), except while the watch may still trail this process's own write.
// Work that belongs to no project (the resync's passes over retired projects) runs only
// inside EnterCoordinator: admitted while this incarnation leads and is valid, with a
// context that ends at the end of validity or when leadership ends.
//
// Each pass is planned by PlanPass (coordinator_plan.go), a pure function of the view,
// and carried out with confirmations first and the project writes in bounded parallel.
// Assignment is weighted rendezvous hashing of projects over live members, written into
// the project Lease with updates conditional on the resourceVersion read. Only the
// coordinator writes holders of an expired member's projects. A project left unclaimed
// past ClaimDeadline moves to the best-ranked other member, and the member that failed
// is left out of that project's ranking for a time that doubles with each failure
// (claimFailures): a claim that keeps failing does not flap, and a project no member can
// claim stays unclaimed and is reported. Two Secrets naming one project: neither is
// assigned, and the condition is reported. A project Secret whose project name cannot be
// read is not offered until a retried read succeeds. A project whose Secret is gone has
// its Lease deleted with a resourceVersion precondition once no member holds on to it.
//
// # Claim and admission
//
// A replica that reads itself as holder at resourceVersion r builds the project's
// cluster (informers, field indexes) under a context bounded by ClaimDeadline, waits for
// its caches, engages the controllers, then writes its claim conditional on r, and opens
// admission only after that write succeeds. Each engagement claims again. A reconcile or
// resync step for a project runs only inside Enter: this incarnation holds and has
// claimed the project, admission is open, validity has not ended; an in-flight count per
// project lets a release wait for zero (a plain RWMutex would park shared workers behind
// a waiting writer). The gating provider's Get returns multicluster.ErrClusterNotFound
// for projects not held, which ends queued and requeued requests quietly. A holder that
// sees its project Lease deleted or naming someone else closes admission at once.
//
// A holder also stops admitting when it cannot know whether its Lease changed (view.go).
// Its Lease watch may stall while its project Lease is deleted and created again naming
// it without its claim (an etcd restore, a hand edit); the coordinator then moves the
// unclaimed Lease after ClaimDeadline. The observer watches every Lease of the namespace
// in one watch, in resourceVersion order, so once the watch (never the replica's own
// record of its writes) has delivered this replica's member-Lease renew sent at s, every
// Lease change committed before s has been delivered. Admission therefore ends, and
// admitted contexts end, at the latest such s plus ClaimDeadline/2: the coordinator
// cannot move an unseen change before s + ClaimDeadline, and the other half is margin for
// in-flight work to stop. A healthy watch shows each renew within milliseconds, so
// validity stays the binding limit; a stalled one pauses admission (logged, refusals
// counted as view_stale) until it resumes.
//
// # Planned hand-over, rebalancing and graceful shutdown
//
// When rendezvous hashing over the eligible members (live, not draining) names another
// owner for a claimed project, the coordinator annotates the project Lease with the
// next holder (AnnotationNextHolder), at most MaxHandoversInFlight at a time, one per
// project. The owner closes admission, waits for in-flight work (DrainDeadline; past it
// the process exits and the project goes through failure hand-over), stops the
// project's cluster, and writes the next holder conditional on the resourceVersion it
// read when the drain began (handover.go states the retry rules). The announced next
// holder starts its informers as soon as it sees the annotation, so its claim follows
// the write closely. A replica stopping gracefully marks its member Lease draining, so
// the coordinator moves all its projects this way; it waits until they are claimed by
// their new holders (ShutdownDeadline), releases its member Lease, and releases the
// coordinator Lease last so a successor is elected at once. The process marks the shard
// stopping (Shard.Stopping) before the manager cancels any runnable: the kubeconfig
// provider ends every discovery as it stops, and a discovery ending is otherwise how a
// removed project Secret is seen.
//
// # Words
//
// A *claim* is the holder's write of its claim annotation ("<incarnation>#<engagement>")
// into the project Lease that names it, and nothing else: a holding is *claiming* until
// that write succeeds, a claim is *overdue* when it has not come within ClaimDeadline of
// the assignment, and the coordinator's claim failures are overdue claims. The
// coordinator *assigns*; it never claims. *Draining* is said of a member only: a replica
// shutting down marks its member Lease draining (AnnotationDraining) and gets no new
// project. A project's planned hand-over is *handing over* (holdingHandingOver); its first
// step, waiting for in-flight work, is the *drain*, bounded by DrainDeadline.
//
// # Files
//
// holdings.go: the holding, its state machine (holdingMoves) and admission (Enter).
// holder_plan.go: a holder's sync as a pure plan (PlanHolderSync); holder_sync.go carries
// it out. claim.go: the claim lifecycle. handover.go: the planned hand-over from both
// sides (the coordinator's request, the owner, the next holder) and graceful shutdown.
// coordinator_plan.go: the coordinator's pass as a pure plan (PlanPass); coordinator.go
// carries it out. membership.go: the member Lease and validity. observer.go: the Lease
// watch.
//
// # Residual windows (what this does not guarantee)
//
// A Lease is not a fence. A write sent just before validity ends can commit after it.
// A paused former coordinator may still send writes; they are harmless only because
// every coordinator write is conditional on a resourceVersion. A frozen VM stops the
// monotonic clock, so a replica resumed from a freeze may believe it is still valid
// until its next renew conflicts. The live guard in pkg/gateway and the anchor resync
// repair what slips through these windows.
//
// # Timings
//
// Defaults are client-go's: LeaseDuration 15s, RenewDeadline 10s, RetryPeriod 2s, with
// RenewDeadline > 1.2 x RetryPeriod and LeaseDuration > RenewDeadline; API call timeouts
// stay below LeaseDuration - RenewDeadline. Expected time from a crash to the new
// owner's first reconcile: about LeaseDuration plus a retry period or two; up to about
// 1.6 x LeaseDuration when the crashed replica was the coordinator.
package shard
