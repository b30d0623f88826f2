package app

// The metrics endpoint checks every scrape against the hub: a TokenReview of its token
// and a SubjectAccessReview of get /metrics (MetricsServerOptions).
//
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create
