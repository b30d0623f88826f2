// Package gateway is the data path: HTTPProxy -> upstream Gateway and HTTPRoute in the
// project -> downstream copies on the hub, each hanging on its owner's anchor, and the
// finalizers that take all of it away again (docs/design.md, Gateway path).
//
// # Controllers
//
// Three multicluster controllers, set up by SetupWithManager (add.go), each a short
// list of phases (see each Reconcile):
//
//   - HTTPProxyReconciler: proxy -> upstream Gateway, HTTPRoute and backend Services,
//     all named after the proxy and controlled by it; status Accepted and Programmed.
//   - GatewayReconciler: upstream Gateway of our class -> downstream Gateway and one
//     cert-manager Certificate per HTTPS listener in ns-<namespace UID> on the hub.
//   - HTTPRouteReconciler: upstream HTTPRoute attached to one of our Gateways ->
//     downstream HTTPRoute whose parentRefs name the downstream Gateways, and each
//     backend's Service, EndpointSlice and BackendTLSPolicy.
//
// A reconciler reaches a project plane or the hub only through Clusters, and every
// reconcile first enters Admission for its project (the sharding layer implements both;
// ManagerClusters and OpenAdmission are the single-replica defaults). A refusal wrapping
// multicluster.ErrClusterNotFound ends the request quietly. Admission is entered at the
// top of every reconcile, queued and requeued ones included, because a delayed request
// can run after the project was handed over.
//
// # Safety rules
//
//   - Live guard (guard.go): before anything is created on the hub for an upstream
//     Gateway or HTTPRoute, the object is read with the project's uncached reader; it
//     must exist with the UID of the cached object, carry no deletionTimestamp and carry
//     our finalizer. When an HTTPProxy controls it, the proxy must pass the same check
//     (with the proxy's finalizer): a proxy whose deletion was requested gets nothing
//     new on the hub. The proxy reconciler reads the proxy the same way before it
//     writes the upstream Gateway, HTTPRoute and Services. The check runs as a phase and
//     again just before every create, so only the time between that read and the create
//     is left open. Otherwise nothing is written: gone, replaced or terminating ends the
//     reconcile quietly, unfinalized looks again shortly. This closes the
//     recreate-after-finalize path (a reconcile on a stale cache after another replica
//     finalized the object) and the create-after-delete path (a Gateway reconciled
//     between its proxy's delete request and its own deletion).
//   - Every reconcile re-attaches the downstream objects (anchor.Attach), so an object
//     reused by a recreated owner of the same name hangs on the current anchor.
//   - Finalizers delete a downstream object only when it hangs on the finalized owner's
//     anchor (one re-attached to a newer owner is left alone), with UID and
//     resourceVersion preconditions, and then delete the anchor with a GET in its mapped
//     namespace and a DELETE conditional on what it returned, the ambiguity check served
//     by the hub's anchor cache (anchor.DeleteIndexed): no list of the hub's ConfigMaps,
//     whether or not the downstream objects or the upstream namespace still exist.
//   - Hub decisions are made on live reads (liveClient); the hub cache serves only the
//     watches that map downstream objects back to their owners, and the anchor cache
//     only the finalizers' ambiguity check.
//   - Nothing is overwritten that carries another owner's labels (hub) or another
//     controller's reference (project); such conflicts are reported, never resolved by
//     deleting.
//
// # Taking over
//
// The finalizer names, the ns-<uid> namespaces, the anchors and the downstream names
// are the previous manager's wire format. Objects are only created when absent and only
// updated when different, fields this manager does not own are kept, and the HTTPS
// listener names of an existing Gateway are kept (buildGatewaySpec), so Certificates
// named <gateway>-<listener> by the previous manager are adopted rather than replaced.
// Reconciling state the previous manager left creates no hub object and deletes
// nothing live. What it did beyond the shared format is in previous_manager.go: the
// replicator's finalizer on proxies and the gc finalizer on its backend EndpointSlices
// are honoured (EndpointSliceReconciler), a route naming those slices resolves to the
// same hub objects and adopts its backend slices, the canonical-hostname listeners
// (default-http, default-https) are kept, hostname claims are released with the
// Gateway, and a proxy with a connector or instance backend is left exactly as it is
// (Accepted=False, UnsupportedBackend) until it is deleted.
//
// # Backends
//
// Each proxy rule's backend URL becomes an ExternalName Service named
// <proxy>-backend-<rule index> (controlled by the proxy) with one port: the URL's port
// or the scheme's default, named after the scheme and with the scheme as appProtocol;
// an https one carries BackendCertHostnameAnnotation (tls.hostname, else the URL's
// host). The HTTPRoute rule references it with a backendRef, and the rule gets a
// URLRewrite filter that sets the Host header to the backend's host and, for a URL with
// a path, replaces the matched prefix with that path (on the rule, not the backendRef:
// edges apply a backendRef's URLRewrite only in part). What cannot be expressed that
// way is refused with Accepted=False, reason Invalid, and an Event, and nothing already
// programmed is touched: an IP address or a single-label host (the hub's EndpointSlice
// needs an FQDN of two labels or more), user information, a query or fragment, a path
// together with a URLRewrite filter of the proxy's own, or a path on a rule without
// exactly one PathPrefix match.
//
// On the hub each backendRef of an upstream route gets what an edge resolves it
// through (build_backends.go): a headless Service, an FQDN EndpointSlice and, for https,
// a BackendTLSPolicy, named route-<route UID>-rule-<n>-backendref-<m> and hanging on the
// route's anchor; the downstream route's backendRefs name them. Only an ExternalName
// Service in the route's namespace resolves; any other backendRef is ResolvedRefs=False.
//
// # The Programmed signal
//
// Programmed is the edge's verdict (status.go): the Gateway and HTTPRoute reconcilers
// mirror what the edge's gateway controller wrote on the downstream copies' status, for
// their current generation (the Gateway's Accepted, Programmed and listeners; the
// route's Accepted per parent), and compute ResolvedRefs; until the edge has spoken,
// Programmed is False with reason Pending, unless Config.AssumeWrittenIsProgrammed says
// no edge controller ever will. The proxy is Programmed=True when its Gateway and every
// listener are programmed and its route is accepted with its references resolved, each
// for its current generation; a refusal's reason (HubWriteFailed, BackendNotFound, the
// edge's own) passes through to the proxy with its message. The hub watches of the
// downstream copies and the backend objects bring the owner back on every status write
// and every hand-made change. Owning the Gateway and route brings the proxy back on
// every status change. An object's own status changes do not bring it back: each
// controller's For watch drops updates that change only status or bookkeeping, and its
// own finalizer added alone (own_changes.go), and every status is judged on the live
// guard's read rather than the cache (live_status.go), so a lagging cache cannot leave
// a stale status that only such an update would have corrected.
//
// # Events
//
// Events are written with the project cluster's recorder (events.k8s.io), beside the
// object they are about, so `kubectl describe` in the project shows them; the hub holds
// no object they could refer to.
package gateway
