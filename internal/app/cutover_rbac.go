package app

// `manager sweep --cut-over-check` (internal/cutover, which hack/manifests.sh does not
// read) lists, on the hub, the webhook configurations, to report those that would refuse
// what the manager writes once the previous manager's webhook service is gone. Its other
// hub reads (Gateways, Certificates, EndpointSlices, the kubeconfig Secrets) are covered
// by the gateway path's and the shard's grants.
//
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations;mutatingwebhookconfigurations,verbs=list
