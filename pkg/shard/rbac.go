package shard

// The sharding protocol writes member, coordinator and project Leases in the lease
// namespace, reads kubeconfig Secrets in the provider namespace (the manager's Secret
// cache is scoped to it, so a namespaced Role suffices), and records Events. Both
// namespaces default to anchorage-system; kustomize rewrites them with the deployment's
// namespace.
//
// +kubebuilder:rbac:groups=coordination.k8s.io,namespace=anchorage-system,resources=leases,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",namespace=anchorage-system,resources=secrets,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
