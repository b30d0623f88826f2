// Package shard splits tenant projects between anchorage replicas so that at most one
// replica works on a project at any time. It replaces multicluster-runtime's sharded
// coordinator (through mcmanager.WithCoordinator and a gating provider) and gates every
// path to a project: the provider, engagement, each reconcile and resync step (Enter),
// and the clients' writes. The protocol and its reasoning are in docs/design.md
// (Sharding: the hand-over protocol; Gate and admission; Residual windows).
//
// # Files
//
// Open shard.go first: Options, New and Runnable show how the parts fit.
//
//   - membership.go: the member Lease (join, renew, lapse, rejoin) and validity.
//   - renew_timeout.go: how long a renew may take.
//   - observer.go: the Lease watch every replica runs, with local change times.
//   - view.go: whether the Lease watch is fresh enough to admit work.
//   - state.go: the pure member and project Lease states.
//   - hash.go: weighted rendezvous hashing (Rank).
//   - coordinator_plan.go: the coordinator's pass as a pure plan (PlanPass).
//   - coordinator.go: the election, carrying a pass out, protocolCall.
//   - coordinator_work.go: admission of coordinator-only work (EnterCoordinator).
//   - holder_plan.go: a holder's sync as a pure plan (PlanHolderSync).
//   - holder_sync.go: the holdings loop that carries it out, and the gauges.
//   - holdings.go: the holding, its states (holdingMoves) and admission (Enter).
//   - claim.go: building, engaging and claiming a project.
//   - handover.go: the planned hand-over from both sides, and graceful shutdown.
//   - provider.go: discovery (Engage), the gating provider (Get, Hub) and the
//     validity-guarded clients.
//   - plane_calls.go, kubeconfig_check.go: bounds and refusals on project planes.
//   - names.go, timing.go, metrics.go, events.go, rbac.go: names, timings, metrics,
//     Events, RBAC markers.
//   - members.go: ValidMembers, for one-shot operator checks.
//   - record.go: records of admitted work, for tests and benchmarks.
//
// # Words
//
//   - incarnation: one run of a replica's membership, "<pod>/<uid>", new at every
//     start and rejoin.
//   - validity: until the send time of the incarnation's last successful renew plus
//     RenewDeadline, on the local clock. It lapses when that passes or the Lease is
//     taken; the replica then rejoins as a new incarnation.
//   - holding: one project held by one incarnation for one engagement (one build of the
//     project's cluster from one discovery of its Secret).
//   - assign: the coordinator's write of a holder into a project Lease; it never claims.
//   - claim: only the holder's write of its claim annotation "<incarnation>#<engagement>".
//     A holding is claiming until it succeeds; a claim is overdue past ClaimDeadline.
//   - admission: Enter's check before each unit of project work; open only after the claim.
//   - suspect: a member whose Lease this coordinator has seen unchanged for LeaseDuration;
//     it holds on to its projects until its Lease is cleared conditionally. A member also
//     holds on for LeaseDuration after its Lease vanished.
//   - draining: said of a member only: it is shutting down (AnnotationDraining).
//   - handing over: a project's planned hand-over (holdingHandingOver); its wait for
//     in-flight work is the drain, bounded by DrainDeadline.
//   - fresh view: the Lease watch has shown one of this replica's own renews sent less
//     than ClaimDeadline/2 ago (view.go); a stale view pauses admission.
package shard
