package app

// The metrics endpoint authenticates and authorizes every scrape against the hub
// (controller-runtime's filters.WithAuthenticationAndAuthorization): a TokenReview for
// the bearer token, a SubjectAccessReview for get on the /metrics URL. The scraper's
// own grant is config/rbac/metrics_reader_role.yaml.
//
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create
