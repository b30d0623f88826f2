// Package resync collects anchors whose upstream owner is gone: the periodic resync each
// replica runs over the projects it holds, and the one-off sweep (`manager sweep`). The
// rules and their reasons are in docs/design.md, Anchor resync; the operator's controls
// in docs/recovery.md. Anchor identity and the precondition delete are package anchor's.
//
// Open decide.go first: Decide is pure and holds every rule. A pass gathers facts
// (examine, prove), decides each anchor, then acts (remember, collect, release claims):
//
//   - pass.go: one pass over one project, its phases, its state by phase, and examine
//   - prove.go: the prove and remember phases (live reads, unreachable planes, proofs kept)
//   - owners.go: batched live lists of owners, one per kind and upstream namespace
//   - collect.go: the collect phase (ceiling, cap, dependents, switch, delete)
//   - dependents.go: listing and judging the hub objects that hang on an anchor
//   - writes.go: what the live path writes on the hub, which decides claims
//   - claims.go: releasing the hostname claims of Gateways proven absent
//
// What a pass reads and writes besides anchors:
//
//   - gates.go: operator switches, kubeconfig Secrets, tombstones
//   - plane_identity.go: the plane identity record: read, written, acknowledged, compared
//   - live.go: Plane, reads of a project's owner cache and API server
//   - anchor_source.go: AnchorSource, and the sweep's one list of the hub's anchors
//   - anchor_cache.go, cached_anchor.go: the metadata-only hub anchor cache
//   - strict_cache.go: StrictCacheOption and StrictReader, a project cluster's cache
//   - hubclock.go: the hub's time, from the Date headers of its responses
//
// What a pass tells, who runs passes, and their knobs:
//
//   - report.go: pass reports
//   - calls.go: the client wrappers that count a pass's API calls
//   - events.go: the Events a pass raises (on the Secret, on anchors), while admitted
//   - table.go: the operator's table of pass reports (the sweep's JSON is cmd/manager's)
//   - resync.go: Resync and Config, the per-project loop, the report of unowned anchors
//   - retired.go: passes over retired projects under the coordinator's admission
//   - sweep.go: Sweep, one pass over every project without sharding
//   - options.go, metrics.go, rbac.go: knobs, metrics, hub RBAC markers
//
// Glossary:
//
//   - owner: the upstream object, on the project's plane, an anchor is named after.
//   - plane: a project's control plane. Its identity is the UID of its "default"
//     Namespace, recorded on the hub (PlaneIdentityName); verified, changed or unverified.
//   - pass: one run of the phases over one project; each request in its own admission step.
//   - proof: a proof of absence of the owner (a Collect Reason). It is acted on only once
//     confirmed: the same proof held again ConfirmAfter later.
//   - candidate: an anchor decided Collect whose dependents are still to be judged.
//   - dependent: a hub object with an ownerReference to an anchor: shared, orphan,
//     claimed (a live owner would write it, and re-attaches it), foreign or unreadable.
//   - halt: a pass that deletes nothing of its project (HaltCeiling, HaltPlaneChanged).
//   - tombstone: an operator's ConfigMap that retires a project with no Secret.
//   - unowned: an anchor whose project matches no kubeconfig Secret.
package resync
