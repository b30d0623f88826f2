package shard

// RBAC of the sharding protocol: Leases in the lease namespace, kubeconfig Secrets in the
// provider namespace (both anchorage-system, rewritten by kustomize), and Events.
//
// +kubebuilder:rbac:groups=coordination.k8s.io,namespace=anchorage-system,resources=leases,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",namespace=anchorage-system,resources=secrets,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
