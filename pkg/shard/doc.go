// Package shard splits tenant projects between anchorage replicas so that at most one
// replica works on a project at any time. It is the manager's coordinator and gating
// provider, and gates every path to a project: engagement, each reconcile and resync
// step (Enter), and the clients' writes. The protocol and its reasoning are in
// docs/design.md (Sharding: the hand-over protocol; Gate and admission; Residual windows).
//
// # Files
//
// Open shard.go first: Options, New and Runnable show how the parts fit.
//
//   - membership.go: the member Lease (join, renew, lapse, rejoin),
//     validity, and how long a renew may take.
//   - observer.go, view.go: the Lease watch, and whether it is fresh enough to admit work.
//   - state.go, hash.go: the pure Lease states; weighted rendezvous hashing (Rank).
//   - coordinator_plan.go, coordinator.go, coordinator_work.go: the coordinator's pass as
//     a pure plan (PlanPass) and carried out; the election; EnterCoordinator.
//   - holder_plan.go, holder_sync.go: a holder's sync as a pure plan (PlanHolderSync)
//     and the loop that carries it out.
//   - holdings.go: the holding, its states (holdingMoves) and admission (Enter).
//   - claim.go, handover.go: claiming a project; the planned hand-over, and shutdown.
//   - provider.go: discovery (Engage), the gating provider and the guarded clients.
//   - plane_calls.go, kubeconfig_check.go: bounds and refusals on project planes.
//   - names.go, timing.go, metrics.go, rbac.go, members.go, record.go: names, timings,
//     metrics, RBAC, ValidMembers, records of admitted work; shard.go also sends the Events.
//
// # Words
//
//   - incarnation: one run of a replica's membership, "<pod>/<uid>", new at every
//     start and rejoin.
//   - validity: until the send time of the incarnation's last successful renew plus
//     RenewDeadline, on the local clock; when it lapses the replica rejoins.
//   - holding: one project held by one incarnation for one engagement (one build of the
//     project's cluster from one discovery of its Secret).
//   - assign: the coordinator's write of a holder into a project Lease; it never claims.
//   - claim: only the holder's write of its claim annotation "<incarnation>#<engagement>";
//     overdue past ClaimDeadline.
//   - admission: Enter's check before each unit of project work; open only after the claim.
//   - suspect: a member whose Lease this coordinator has seen unchanged for LeaseDuration;
//     it holds on to its projects until its Lease is cleared conditionally.
//   - draining: said of a member only: it is shutting down (AnnotationDraining).
//   - handing over: a project's planned hand-over; its wait for in-flight work is the
//     drain, bounded by DrainDeadline.
//   - fresh view: the Lease watch has shown one of this replica's own renews sent less
//     than ClaimDeadline/2 ago (view.go); a stale view pauses admission.
package shard
