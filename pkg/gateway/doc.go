// Package gateway is the data path: HTTPProxy -> upstream Gateway and HTTPRoute in the
// project -> downstream copies on the hub, each hanging on its owner's anchor, and the
// finalizers that take all of it away again. The rules it keeps, and why, are in
// docs/design.md, Gateway path; the cut-over from the previous manager is in
// docs/operations.md.
//
// # Files
//
// Start with add.go, which wires the controllers and names every watch.
//
//   - add.go: SetupWithManager, Options, the controllers and their watches (For filters
//     that drop a reconcile's own writes, a finalizer's request first); Setup.Enqueue,
//     and hub objects mapped back to their upstream owners.
//   - config.go: Config and its defaults (pkg/config checks the values); the finalizer names.
//   - clusters.go: Clusters and Admission (what the shard provides), liveClient; the
//     reconcile runner admitAndRun, phases, admission refusals.
//   - httpproxy_reconciler.go: proxy -> upstream Gateway, HTTPRoute and Services.
//   - orphans.go: what a proxy gone without our finalizer still controls, deleted as a
//     garbage collector would (a plane without one).
//   - build_proxy.go: what a proxy produces, and the names it is given.
//   - backend_policy.go: the backend hosts a tenant may not aim at.
//   - gateway_reconciler.go: upstream Gateway -> downstream Gateway and Certificates.
//   - hostname_claims.go: hostname claims; only held hostnames reach the hub.
//   - build_downstream.go: the downstream Gateway, Certificates and HTTPRoute.
//   - hub_route_refs.go: the allow-list a hub route is built from; what it refuses and
//     the condition that says so.
//   - httproute_reconciler.go: upstream HTTPRoute -> downstream route and backends.
//   - build_backends.go: each backendRef's Service, EndpointSlice and BackendTLSPolicy.
//   - upstream.go: the scope and finalizer shared by the Gateway and route reconcilers;
//     finalizer and status patches on the project, mapped namespaces.
//   - hub.go: hubWriter, which writes and deletes downstream objects on the hub, and
//     WrittenObjects, the hub objects this replica wrote, per owner.
//   - guard.go: the live guard, and one create per guard on the wire.
//   - status.go: the Programmed signal, judged on the live read; Events bounded by
//     admission, messages by size.
//   - deferred_watch.go: watches a project starts only once it has proxies or Gateways.
//   - fair_share.go: per-project workers, hub writes and proxy cap.
//   - previous_manager.go: what is inherited from the previous manager;
//     EndpointSliceReconciler.
//   - metrics.go: counters and the anchorage_httpproxies gauge.
//
// # Glossary
//
//   - project, plane: a tenant's control plane, reached through Clusters.Project.
//   - hub: the shared cluster that holds the downstream copies (Clusters.Hub).
//   - upstream object: a Gateway, HTTPRoute or HTTPProxy on a project plane.
//   - downstream object: its copy (or backend object) on the hub.
//   - mapped namespace: ns-<upstream namespace UID>, the hub namespace of the copies.
//   - anchor: the empty ConfigMap anchor-<owner UID> every downstream object hangs on;
//     attaching sets that ownerReference (anchor.Attach).
//   - admission: the shard's per-project permission around every reconcile.
//   - live guard: the uncached read of the owners before anything is created.
//   - edge: the gateway controller that serves the hub's copies and writes their status.
//   - claim: a hub ConfigMap granting one Gateway one hostname.
//   - hands-off: a proxy with a backend this manager cannot program; left as it is.
//   - previous manager: the manager anchorage replaces; its wire format is kept.
package gateway
