package app

// The metrics endpoint checks every scrape against the hub: a TokenReview of its token
// and a SubjectAccessReview of get /metrics (MetricsServerOptions).
//
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// `manager sweep --cut-over-check` lists the hub's webhook configurations; its other hub
// reads are covered by the gateway path's and the shard's grants. The marker is here
// because hack/manifests.sh does not read internal/cutover.
//
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations;mutatingwebhookconfigurations,verbs=list
