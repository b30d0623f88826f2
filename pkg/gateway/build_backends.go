package gateway

import (
	"cmp"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// BackendCertHostnameAnnotation on a backend's upstream Service names the hostname the
// backend's certificate must be valid for (the previous manager's key).
const BackendCertHostnameAnnotation = "networking.datumapis.com/backend-cert-hostname"

// endpointSliceManagedBy keeps the hub's EndpointSlice controllers off our slices.
const endpointSliceManagedBy = "anchorage.datumapis.com"

// Hub kinds of the backend objects, as Metrics and WrittenObjects name them.
const (
	kindService          = "Service"
	kindEndpointSlice    = "EndpointSlice"
	kindBackendTLSPolicy = "BackendTLSPolicy"
)

// BackendObjectName names the hub objects of backendRef ref of rule rule of the route
// with UID route (docs/design.md, What the hub holds for one proxy).
func BackendObjectName(route types.UID, rule, ref int) string {
	return fmt.Sprintf("route-%s-rule-%d-backendref-%d", route, rule, ref)
}

// hubBackend is what the hub holds for one resolved backendRef.
type hubBackend struct {
	Service *corev1.Service
	Slice   *discoveryv1.EndpointSlice
	// Policy is nil for a backend reached over plain HTTP.
	Policy *gatewayv1.BackendTLSPolicy
}

// backendObject is one hub object of a backend, its kind and its copyContent.
type backendObject struct {
	kind string
	obj  client.Object
	copy func(dst, src client.Object) error
}

// objects returns the backend's hub objects, the policy last.
func (b hubBackend) objects() []backendObject {
	out := []backendObject{{kindService, b.Service, copyHubServiceSpec}, {kindEndpointSlice, b.Slice, copyEndpointSlice}}
	if b.Policy != nil {
		out = append(out, backendObject{kindBackendTLSPolicy, b.Policy, copyBackendTLSPolicySpec})
	}
	return out
}

// unresolvedError says why a backendRef has nothing on the hub (a ResolvedRefs reason).
type unresolvedError struct {
	reason gatewayv1.RouteConditionReason
	msg    string
}

func (e *unresolvedError) Error() string { return e.msg }

// buildHubBackend returns the hub objects, in hubNS under name, for a backendRef to
// port of the upstream Service svc (nil: none). Only an ExternalName Service resolves:
// any other names endpoints an edge cannot reach.
func buildHubBackend(svc *corev1.Service, port gatewayv1.PortNumber, name, hubNS string) (hubBackend, error) {
	if svc == nil {
		return hubBackend{}, &unresolvedError{gatewayv1.RouteReasonBackendNotFound, "Service not found"}
	}
	if svc.Spec.Type != corev1.ServiceTypeExternalName || svc.Spec.ExternalName == "" {
		return hubBackend{}, &unresolvedError{gatewayv1.RouteReasonBackendNotFound,
			fmt.Sprintf("Service %s is of type %s: only an ExternalName Service names an endpoint an edge can reach", svc.Name, svc.Spec.Type)}
	}
	var sp *corev1.ServicePort
	for i := range svc.Spec.Ports {
		if svc.Spec.Ports[i].Port == int32(port) {
			sp = &svc.Spec.Ports[i]
		}
	}
	if sp == nil {
		return hubBackend{}, &unresolvedError{gatewayv1.RouteReasonBackendNotFound, fmt.Sprintf("Service %s has no port %d", svc.Name, port)}
	}
	return buildHubBackendAt(svc.Annotations, sp, discoveryv1.AddressTypeFQDN, svc.Spec.ExternalName, name, hubNS)
}

// buildHubBackendAt returns the hub objects, in hubNS under name, of a backend at
// address (of addressType) on the port sp, annotated with annotations. An https backend
// gets a BackendTLSPolicy for BackendCertHostnameAnnotation, else for a DNS address
// itself; one at an IP address without that annotation is refused: a certificate is
// checked against a DNS name.
func buildHubBackendAt(annotations map[string]string, sp *corev1.ServicePort, addressType discoveryv1.AddressType, address, name, hubNS string) (hubBackend, error) {
	https := ptr.Deref(sp.AppProtocol, "") == "https"
	hostname := annotations[BackendCertHostnameAnnotation]
	if addressType == discoveryv1.AddressTypeFQDN {
		hostname = cmp.Or(hostname, address)
	} else if https && hostname == "" {
		return hubBackend{}, &unresolvedError{gatewayv1.RouteReasonUnsupportedProtocol,
			fmt.Sprintf("https to the IP address %s needs the %s annotation naming the DNS name its certificate is valid for (an HTTPProxy's tls.hostname)", address, BackendCertHostnameAnnotation)}
	}
	portName := cmp.Or(sp.Name, fmt.Sprintf("port-%d", sp.Port))
	meta := metav1.ObjectMeta{Name: name, Namespace: hubNS}
	b := hubBackend{
		Service: &corev1.Service{ObjectMeta: meta, Spec: corev1.ServiceSpec{
			Type:      corev1.ServiceTypeClusterIP,
			ClusterIP: corev1.ClusterIPNone,
			Ports:     []corev1.ServicePort{{Name: portName, Protocol: corev1.ProtocolTCP, Port: sp.Port, AppProtocol: sp.AppProtocol}},
		}},
		Slice: &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: hubNS, Labels: map[string]string{
				discoveryv1.LabelServiceName: name,
				discoveryv1.LabelManagedBy:   endpointSliceManagedBy,
			}},
			AddressType: addressType,
			Endpoints: []discoveryv1.Endpoint{{
				Addresses:  []string{address},
				Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
			}},
			Ports: []discoveryv1.EndpointPort{{Name: ptr.To(portName), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(sp.Port), AppProtocol: sp.AppProtocol}},
		},
	}
	if https {
		b.Policy = &gatewayv1.BackendTLSPolicy{ObjectMeta: meta, Spec: gatewayv1.BackendTLSPolicySpec{
			TargetRefs: []gatewayv1.LocalPolicyTargetReferenceWithSectionName{{
				LocalPolicyTargetReference: gatewayv1.LocalPolicyTargetReference{Group: "", Kind: kindService, Name: gatewayv1.ObjectName(name)},
				SectionName:                ptr.To(gatewayv1.SectionName(portName)),
			}},
			Validation: gatewayv1.BackendTLSPolicyValidation{
				WellKnownCACertificates: ptr.To(gatewayv1.WellKnownCACertificatesSystem),
				Hostname:                gatewayv1.PreciseHostname(hostname),
			},
		}}
	}
	return b, nil
}

// hubBackendRef is ref pointed at the hub Service named name in hubNS, keeping only its
// port and weight (the caller sets its filters). A reference written without a port (to
// another kind, refused) gets the http port: it names nothing, and the hub's schema
// wants a port on a Service reference.
func hubBackendRef(ref gatewayv1.HTTPBackendRef, name, hubNS string) gatewayv1.HTTPBackendRef {
	return gatewayv1.HTTPBackendRef{BackendRef: gatewayv1.BackendRef{
		BackendObjectReference: gatewayv1.BackendObjectReference{
			Group:     ptr.To(gatewayv1.Group("")),
			Kind:      ptr.To(gatewayv1.Kind(kindService)),
			Namespace: ptr.To(gatewayv1.Namespace(hubNS)),
			Name:      gatewayv1.ObjectName(name),
			Port:      ptr.To(ptr.Deref(ref.Port, HTTPPort)),
		},
		Weight: copyWeight(ref.Weight),
	}}
}

func copyWeight(w *int32) *int32 {
	if w == nil {
		return nil
	}
	return ptr.To(*w)
}

// copyHubServiceSpec brings the hub Service dst to src's type and ports, merged by name
// so defaulted fields stay; clusterIP (immutable) is set only on create.
func copyHubServiceSpec(dst, src client.Object) error {
	d, s := dst.(*corev1.Service), src.(*corev1.Service)
	d.Spec.Type = s.Spec.Type
	d.Spec.ClusterIP = cmp.Or(d.Spec.ClusterIP, s.Spec.ClusterIP)
	var ports []corev1.ServicePort
	for _, want := range s.Spec.Ports {
		p := want
		for _, have := range d.Spec.Ports {
			if have.Name == want.Name {
				p = have
				p.Port, p.Protocol, p.AppProtocol = want.Port, want.Protocol, want.AppProtocol
			}
		}
		ports = append(ports, p)
	}
	d.Spec.Ports = ports
	return nil
}

// copyEndpointSlice brings the hub EndpointSlice dst to src's endpoints, ports and
// labels; another addressType (immutable) is an *addressTypeChangedError, on which
// hubWriter.apply deletes the slice and writes it anew.
func copyEndpointSlice(dst, src client.Object) error {
	d, s := dst.(*discoveryv1.EndpointSlice), src.(*discoveryv1.EndpointSlice)
	if d.AddressType != s.AddressType {
		return &addressTypeChangedError{existing: d.DeepCopy()}
	}
	d.Endpoints = append([]discoveryv1.Endpoint(nil), s.Endpoints...)
	d.Ports = append([]discoveryv1.EndpointPort(nil), s.Ports...)
	if d.Labels == nil {
		d.Labels = map[string]string{}
	}
	maps.Copy(d.Labels, s.Labels)
	return nil
}

// copyBackendTLSPolicySpec brings the hub policy dst to src's spec.
func copyBackendTLSPolicySpec(dst, src client.Object) error {
	dst.(*gatewayv1.BackendTLSPolicy).Spec = *src.(*gatewayv1.BackendTLSPolicy).Spec.DeepCopy()
	return nil
}
