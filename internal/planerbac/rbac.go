// Package planerbac holds, as +kubebuilder:rbac markers, what the manager may do on each
// project's control plane: the user in every project's kubeconfig Secret is bound to
// the ClusterRole generated from them, config/rbac/project-role.yaml (anchorage-project).
// It is generated apart from the hub's role (hack/manifests.sh), because the two are
// bound on different clusters and the hub must never receive a plane's grants.
//
// Nothing here reads or lists a Secret: a tenant's plane holds the tenant's credentials.
package planerbac

// The gateway path (pkg/gateway): HTTPProxies are watched, finalized and their status
// written; the Gateway and HTTPRoute a proxy controls are written, and those of our
// class watched, finalized and their status written; a proxy's backend Services are
// written and watched; upstream Namespaces are read live to map them to hub
// namespaces; Events are recorded on the objects.
//
// +kubebuilder:rbac:groups=networking.datumapis.com,resources=httpproxies,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=networking.datumapis.com,resources=httpproxies/status,verbs=get;patch
// +kubebuilder:rbac:groups=networking.datumapis.com,resources=httpproxies/finalizers,verbs=update
// +kubebuilder:rbac:groups=networking.datumapis.com,resources=domains,verbs=get;list;watch;create
// +kubebuilder:rbac:groups=networking.datumapis.com,resources=domains/status,verbs=get;patch
// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=gateways;httproutes,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=gateways/status;httproutes/status,verbs=get;patch
// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=gateways/finalizers;httproutes/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get
//
// Backend EndpointSlices: a proxy's backend named by an IP address is one, written
// (create, update) and watched; the previous manager's (pkg/gateway
// previous_manager.go) are named by an upstream route it wrote (read, watched), carry
// its finalizer, which this manager removes (patch); a deleted proxy's are deleted with it.
//
// +kubebuilder:rbac:groups=discovery.k8s.io,resources=endpointslices,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// The resync (pkg/anchor/resync) reads, live: the plane's "default" Namespace (the
// plane's identity) and upstream Namespaces (namespaces proofs), both covered above, and
// owners of the kinds it is configured to read (resync.DefaultLiveOwnerKinds:
// HTTPProxy, Gateway, HTTPRoute and EndpointSlice, covered above, and the kinds the
// previous manager's replicator anchored, get only, below; Secrets and ConfigMaps
// never). An operator
// who adds a kind to resync.ownerKinds grants get on it in a role of their own
// (docs/operations.md).
//
// +kubebuilder:rbac:groups=gateway.envoyproxy.io,resources=backends;backendtrafficpolicies;securitypolicies;httproutefilters,verbs=get
// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=backendtlspolicies,verbs=get
// +kubebuilder:rbac:groups=networking.datumapis.com,resources=trafficprotectionpolicies;networkcontexts;subnets;connectors,verbs=get
