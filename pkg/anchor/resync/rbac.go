package resync

// Hub permissions of the resync (the plane's are in internal/planerbac):
//
//   - ConfigMaps: list and watch for the metadata-only anchor cache, delete for
//     collection; get, create and update for the plane identity records in the lease
//     namespace (update notes the Secret a record was verified with and honours an
//     operator's acknowledgement), delete for a retired project's record; list for the
//     tombstones of retired projects and for the anchors among an anchor's dependents.
//   - Namespaces: get, for the deletion switch on the lease namespace.
//   - Secrets: get and list in the provider namespace, to find a project's kubeconfig
//     Secret (metadata only); the shard's namespaced Role grants them, nothing else does.
//   - The dependents scan: list, metadata only, of exactly the kinds the live path writes
//     on the hub (DependentKindsOf(DefaultHubWrites): Gateways, HTTPRoutes,
//     cert-manager Certificates) besides anchors. config/config_test.go checks the
//     generated role grants list on each. Kinds an operator adds with
//     --resync-extra-dependent-kinds need a grant of their own (docs/operations.md).
//   - Events: create and patch, for collections and halts.
//
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get
// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=gateways;httproutes,verbs=list
// +kubebuilder:rbac:groups=cert-manager.io,resources=certificates,verbs=list
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
