package gateway

import (
	"fmt"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// CertificateGVK is cert-manager's Certificate. The hub serves it; this module does not
// depend on cert-manager's Go types, so Certificates are written as unstructured objects.
var CertificateGVK = schema.GroupVersionKind{Group: "cert-manager.io", Version: "v1", Kind: "Certificate"}

// downstreamGateway returns the hub copy of up in hubNS: the same name, the
// downstream class, and of each listener only what an edge needs and a tenant may ask
// for (an allow-list, not a copy: docs/design.md, Threat model): its name, hostname,
// port and protocol, TLS mode and the certificate references into up's own namespace
// (made local, since the Secrets live beside the copy), and routes from the Gateway's
// own namespace only. Gateway addresses, infrastructure, TLS options, cross-namespace
// certificate references and wider allowedRoutes are not written. Labels and the anchor
// reference are added by anchor.Attach.
func downstreamGateway(up *gatewayv1.Gateway, hubNS, class string) *gatewayv1.Gateway {
	spec := gatewayv1.GatewaySpec{GatewayClassName: gatewayv1.ObjectName(class)}
	for _, l := range up.Spec.Listeners {
		down := gatewayv1.Listener{Name: l.Name, Port: l.Port, Protocol: l.Protocol, AllowedRoutes: sameNamespaceRoutes()}
		if l.Hostname != nil {
			down.Hostname = ptr.To(*l.Hostname)
		}
		if l.TLS != nil {
			down.TLS = &gatewayv1.ListenerTLSConfig{}
			if l.TLS.Mode != nil {
				down.TLS.Mode = ptr.To(*l.TLS.Mode)
			}
			for _, ref := range l.TLS.CertificateRefs {
				if ref.Namespace != nil && string(*ref.Namespace) != up.Namespace {
					continue
				}
				local := *ref.DeepCopy()
				local.Namespace = nil
				down.TLS.CertificateRefs = append(down.TLS.CertificateRefs, local)
			}
		}
		spec.Listeners = append(spec.Listeners, down)
	}
	return &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Name: up.Name, Namespace: hubNS}, Spec: spec}
}

// certificateListeners returns the listeners of up that get a Certificate: HTTPS
// listeners terminating TLS for a hostname. A listener without a hostname has no name
// to certify and is skipped.
func certificateListeners(up *gatewayv1.Gateway) []gatewayv1.Listener {
	var out []gatewayv1.Listener
	for _, l := range up.Spec.Listeners {
		if l.Protocol != gatewayv1.HTTPSProtocolType || l.Hostname == nil || *l.Hostname == "" {
			continue
		}
		if l.TLS != nil && ptr.Deref(l.TLS.Mode, gatewayv1.TLSModeTerminate) != gatewayv1.TLSModeTerminate {
			continue
		}
		out = append(out, l)
	}
	return out
}

// downstreamCertificates returns one Certificate per certificate listener of up, named
// and writing the Secret <gateway>-<listener>, in hubNS. A name that is not a valid
// object name is an error: no Certificate can be written for it.
func downstreamCertificates(up *gatewayv1.Gateway, hubNS string, issuer IssuerRef) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, l := range certificateListeners(up) {
		name := CertificateName(up.Name, l.Name)
		if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
			return nil, fmt.Errorf("certificate name %q for listener %s: %s", name, l.Name, strings.Join(errs, "; "))
		}
		out = append(out, newCertificate(name, hubNS, string(*l.Hostname), issuer))
	}
	return out, nil
}

// newCertificate returns a cert-manager Certificate for dnsName writing the Secret name.
func newCertificate(name, namespace, dnsName string, issuer IssuerRef) *unstructured.Unstructured {
	c := &unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{
			"dnsNames":   []any{dnsName},
			"secretName": name,
			"issuerRef": map[string]any{
				"name":  issuer.Name,
				"kind":  issuer.Kind,
				"group": issuer.Group,
			},
		},
	}}
	c.SetGroupVersionKind(CertificateGVK)
	c.SetName(name)
	c.SetNamespace(namespace)
	return c
}

// certificateRef is the Certificate named name in namespace, with nothing else set: what
// a read or a delete by key needs.
func certificateRef(name, namespace string) *unstructured.Unstructured {
	c := &unstructured.Unstructured{}
	c.SetGroupVersionKind(CertificateGVK)
	c.SetName(name)
	c.SetNamespace(namespace)
	return c
}

// setCertificateSpec copies the fields this manager owns (dnsNames, secretName,
// issuerRef) from src into dst and leaves the rest of dst's spec alone, so fields a
// previous manager or an operator set survive a take-over.
func setCertificateSpec(dst, src *unstructured.Unstructured) error {
	for _, field := range []string{"dnsNames", "secretName", "issuerRef"} {
		v, ok, err := unstructured.NestedFieldCopy(src.Object, "spec", field)
		if err != nil || !ok {
			return fmt.Errorf("certificate %s: spec.%s missing in the desired object", src.GetName(), field)
		}
		if err := unstructured.SetNestedField(dst.Object, v, "spec", field); err != nil {
			return fmt.Errorf("certificate %s: setting spec.%s: %w", dst.GetName(), field, err)
		}
	}
	return nil
}

// isGatewayParent reports whether ref points at a Gateway (group and kind defaulted as
// the API server defaults them).
func isGatewayParent(ref gatewayv1.ParentReference) bool {
	return string(ptr.Deref(ref.Group, gatewayv1.GroupName)) == gatewayv1.GroupName &&
		string(ptr.Deref(ref.Kind, kindGateway)) == kindGateway
}

// parentNamespace returns the namespace ref points into from a route in routeNS.
func parentNamespace(ref gatewayv1.ParentReference, routeNS string) string {
	if ref.Namespace == nil || *ref.Namespace == "" {
		return routeNS
	}
	return string(*ref.Namespace)
}

// downstreamRoute returns the hub copy of up in hubNS, attached only to parents (up's
// parent references to this manager's Gateways). hubNamespaces maps an upstream
// namespace other than up's own to its hub namespace; a parent in up's namespace
// becomes a local reference to the downstream Gateway of the same name.
func downstreamRoute(up *gatewayv1.HTTPRoute, hubNS string, parents []gatewayv1.ParentReference, hubNamespaces map[string]string) (*gatewayv1.HTTPRoute, error) {
	spec := up.Spec.DeepCopy()
	spec.ParentRefs = nil
	for _, p := range parents {
		ref := *p.DeepCopy()
		if ns := parentNamespace(p, up.Namespace); ns == up.Namespace {
			ref.Namespace = nil
		} else {
			mapped, ok := hubNamespaces[ns]
			if !ok {
				return nil, fmt.Errorf("no hub namespace known for parent namespace %s", ns)
			}
			ref.Namespace = ptr.To(gatewayv1.Namespace(mapped))
		}
		spec.ParentRefs = append(spec.ParentRefs, ref)
	}
	return &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Name: up.Name, Namespace: hubNS}, Spec: *spec}, nil
}

// sortedKeys returns m's keys in order, for stable messages.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// objectMeta returns metadata naming name in namespace.
func objectMeta(name, namespace string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: namespace}
}
