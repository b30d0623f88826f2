package gateway

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// CertificateGVK is cert-manager's Certificate, written as an unstructured object.
var CertificateGVK = schema.GroupVersionKind{Group: "cert-manager.io", Version: "v1", Kind: "Certificate"}

// downstreamGateway returns the hub copy of up in hubNS, of class, with an allow-list of
// each listener (docs/design.md, Threat model): name, hostname, port, protocol, TLS
// mode, same-namespace routes. A terminating HTTPS listener's certificate is the Secret
// its Certificate writes (certificates.secretOf), whatever up names: the hub holds no
// other Secret for it, and a listener that terminates without one is refused by the
// Gateway API's experimental-channel schema.
func downstreamGateway(up *gatewayv1.Gateway, hubNS, class string, certificates listenerCertificates) *gatewayv1.Gateway {
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
		}
		if terminates(l) {
			down.TLS = &gatewayv1.ListenerTLSConfig{Mode: ptr.To(gatewayv1.TLSModeTerminate), CertificateRefs: []gatewayv1.SecretObjectReference{{
				Group: ptr.To(gatewayv1.Group("")), Kind: ptr.To(gatewayv1.Kind("Secret")),
				Name: gatewayv1.ObjectName(certificates.secretOf(up.Name, l)),
			}}}
		}
		spec.Listeners = append(spec.Listeners, down)
	}
	return &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Name: up.Name, Namespace: hubNS}, Spec: spec}
}

// terminates reports whether l is an HTTPS listener with a hostname terminating TLS
// (the mode the API server defaults), the listeners that get a certificate.
func terminates(l gatewayv1.Listener) bool {
	if l.Protocol != gatewayv1.HTTPSProtocolType || l.Hostname == nil || *l.Hostname == "" {
		return false
	}
	return l.TLS == nil || ptr.Deref(l.TLS.Mode, gatewayv1.TLSModeTerminate) == gatewayv1.TLSModeTerminate
}

// listenerCertificates says where a Gateway's terminating listeners get their
// certificates: the platform hostnames' listeners from the shared Secret when one is
// configured (platform.defaultListenerTLSSecretName, the previous manager's
// defaultListenerTLSSecretName: no ACME order per Gateway for them), every other one
// from a Certificate of its own, <gateway>-<listener>, writing the Secret of that name.
type listenerCertificates struct {
	platformHosts []string
	shared        string
}

// secretOf names the Secret l of gateway terminates with.
func (c listenerCertificates) secretOf(gateway string, l gatewayv1.Listener) string {
	if c.sharedFor(l) {
		return c.shared
	}
	return CertificateName(gateway, l.Name)
}

// sharedFor reports whether l uses the shared Secret (and gets no Certificate).
func (c listenerCertificates) sharedFor(l gatewayv1.Listener) bool {
	return c.shared != "" && l.Hostname != nil && slices.Contains(c.platformHosts, string(*l.Hostname))
}

// certificateListeners returns the listeners of up that get a Certificate: HTTPS
// listeners with a hostname terminating TLS, but those on the shared Secret.
func certificateListeners(up *gatewayv1.Gateway, certificates listenerCertificates) []gatewayv1.Listener {
	var out []gatewayv1.Listener
	for _, l := range up.Spec.Listeners {
		if terminates(l) && !certificates.sharedFor(l) {
			out = append(out, l)
		}
	}
	return out
}

// downstreamCertificates returns one Certificate per certificate listener of up in
// hubNS, named and writing the Secret <gateway>-<listener>, from the issuer the
// listener names (issuers); an invalid name is an error.
func downstreamCertificates(up *gatewayv1.Gateway, hubNS string, issuers issuers, certificates listenerCertificates) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, l := range certificateListeners(up, certificates) {
		name := CertificateName(up.Name, l.Name)
		if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
			return nil, fmt.Errorf("certificate name %q for listener %s: %s", name, l.Name, strings.Join(errs, "; "))
		}
		issuer, _ := issuers.of(l) // issuers.refusals has refused a listener naming one not mapped
		out = append(out, newCertificate(name, hubNS, string(*l.Hostname), issuer))
	}
	return out, nil
}

// newCertificate returns a cert-manager Certificate for dnsName writing the Secret name.
func newCertificate(name, namespace, dnsName string, issuer IssuerRef) *unstructured.Unstructured {
	c := certificateRef(name, namespace)
	c.Object["spec"] = map[string]any{
		"dnsNames":   []any{dnsName},
		"secretName": name,
		"issuerRef": map[string]any{
			"name":  issuer.Name,
			"kind":  issuer.Kind,
			"group": issuer.Group,
		},
	}
	return c
}

// certificateRef is the Certificate named name in namespace, nothing else set.
func certificateRef(name, namespace string) *unstructured.Unstructured {
	c := &unstructured.Unstructured{}
	c.SetGroupVersionKind(CertificateGVK)
	c.SetName(name)
	c.SetNamespace(namespace)
	return c
}

// setCertificateSpec copies the fields this manager owns (dnsNames, secretName,
// issuerRef) from src into dst, both Certificates, leaving the rest of dst's spec alone.
func setCertificateSpec(dst, src client.Object) error {
	d, s := dst.(*unstructured.Unstructured), src.(*unstructured.Unstructured)
	for _, field := range []string{"dnsNames", "secretName", "issuerRef"} {
		v, ok, err := unstructured.NestedFieldCopy(s.Object, "spec", field)
		if err != nil || !ok {
			return fmt.Errorf("certificate %s: spec.%s missing in the desired object", src.GetName(), field)
		}
		if err := unstructured.SetNestedField(d.Object, v, "spec", field); err != nil {
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

// downstreamRoute returns the hub copy of up in hubNS, built from the allow-list
// (hubRules): up's hostnames and rules, attached only to parents; a parent in up's
// namespace becomes local, others go to hubNamespaces[namespace].
func downstreamRoute(up *gatewayv1.HTTPRoute, hubNS string, parents []gatewayv1.ParentReference, hubNamespaces map[string]string) (*gatewayv1.HTTPRoute, error) {
	spec := &gatewayv1.HTTPRouteSpec{Hostnames: slices.Clone(up.Spec.Hostnames), Rules: hubRules(up, hubNS)}
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
