package app

// `manager sweep --cut-over-check` lists the hub's webhook configurations; its other hub
// reads are covered by the gateway path's and the shard's grants. The marker is here
// because hack/manifests.sh does not read internal/cutover.
//
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations;mutatingwebhookconfigurations,verbs=list
