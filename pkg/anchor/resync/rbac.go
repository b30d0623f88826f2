package resync

// Hub permissions of the resync (the plane's: internal/planerbac; Secrets: the shard's
// Role). Lists of DependentKindsOf(DefaultHubWrites) are checked by config/config_test.go.
//
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get
// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=gateways;httproutes,verbs=list
// +kubebuilder:rbac:groups=cert-manager.io,resources=certificates,verbs=list
// +kubebuilder:rbac:groups=externaldns.k8s.io,resources=dnsendpoints,verbs=list
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
