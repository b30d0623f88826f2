package planerbac

// `manager sweep --cut-over-check` (internal/cutover) reads, on each plane, the webhook
// configurations, to report those that would refuse what the manager writes once the
// previous manager's webhook service is gone. It also lists HTTPProxies, Gateways,
// HTTPRoutes and EndpointSlices, which the grants of the gateway path cover.
//
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations;mutatingwebhookconfigurations,verbs=list
