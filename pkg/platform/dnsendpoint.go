package platform

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// DNSEndpointGVK is external-dns's DNSEndpoint, written as an unstructured object so
// this module does not depend on external-dns's.
var DNSEndpointGVK = schema.GroupVersionKind{Group: "externaldns.k8s.io", Version: "v1alpha1", Kind: "DNSEndpoint"}

// DNSEndpoint returns the DNSEndpoint named name in namespace holding records.
func DNSEndpoint(name, namespace string, records []Record) *unstructured.Unstructured {
	obj := DNSEndpointRef(name, namespace)
	endpoints := make([]any, 0, len(records))
	for _, r := range records {
		targets := make([]any, 0, len(r.Targets))
		for _, t := range r.Targets {
			targets = append(targets, t)
		}
		endpoints = append(endpoints, map[string]any{
			"dnsName":    r.Name,
			"recordType": r.Type,
			"recordTTL":  int64(TTL),
			"targets":    targets,
		})
	}
	obj.Object["spec"] = map[string]any{"endpoints": endpoints}
	return obj
}

// DNSEndpointRef is the DNSEndpoint named name in namespace, nothing else set.
func DNSEndpointRef(name, namespace string) *unstructured.Unstructured {
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(DNSEndpointGVK)
	obj.SetName(name)
	obj.SetNamespace(namespace)
	return obj
}

// RecordsObserved reports whether external-dns has acted on obj's current spec: its
// status.observedGeneration is its generation.
func RecordsObserved(obj *unstructured.Unstructured) bool {
	g, ok, err := unstructured.NestedInt64(obj.Object, "status", "observedGeneration")
	return err == nil && ok && g == obj.GetGeneration()
}

// CopySpec copies src's spec, the only field this manager owns, into dst.
func CopySpec(dst, src *unstructured.Unstructured) error {
	spec, ok, err := unstructured.NestedFieldCopy(src.Object, "spec")
	if err != nil || !ok {
		return fmt.Errorf("DNSEndpoint %s: no spec in the desired object", src.GetName())
	}
	return unstructured.SetNestedField(dst.Object, spec, "spec")
}
