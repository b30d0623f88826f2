package resync

// Hub permissions of the resync (the plane's are in internal/planerbac): ConfigMaps for
// the anchor cache, collection, plane identity records, tombstones and dependents; the
// lease namespace for the switch; list of the kinds DependentKindsOf(DefaultHubWrites)
// names (config/config_test.go checks them); Events. Secrets in the provider namespace
// come from the shard's namespaced Role.
//
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get
// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=gateways;httproutes,verbs=list
// +kubebuilder:rbac:groups=cert-manager.io,resources=certificates,verbs=list
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
