package gateway

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"anchorage/api/v1alpha"
	"anchorage/pkg/platform"
)

// invalidError says why a proxy cannot be programmed as written (no retry helps), and
// the reason its Accepted condition gives ("": Invalid).
type invalidError struct{ msg, reason string }

func (e *invalidError) Error() string { return e.msg }

func invalidf(format string, args ...any) error {
	return &invalidError{msg: fmt.Sprintf(format, args...)}
}

// proxyObjects are the upstream objects a proxy produces, named after and controlled by it.
type proxyObjects struct {
	Gateway  *gatewayv1.Gateway
	Route    *gatewayv1.HTTPRoute
	Services []*corev1.Service
	// Slices are the EndpointSlices of the backends named by an IP address.
	Slices []*discoveryv1.EndpointSlice
}

// buildProxyObjects returns what proxy produces. existing is its current Gateway, if
// any, whose listener names and platform hostname are kept. An *invalidError means it
// cannot be programmed.
func buildProxyObjects(proxy *v1alpha.HTTPProxy, existing *gatewayv1.Gateway, gatewayClass string, names platform.Settings) (*proxyObjects, error) {
	for _, h := range proxy.Spec.Hostnames {
		if net.ParseIP(string(h)) != nil {
			return nil, invalidf("hostname %s is an IP address: no certificate can be issued for it", h)
		}
		if names.Reserved(string(h), "") {
			return nil, &invalidError{reason: ReasonReservedHostname, msg: fmt.Sprintf("hostname %s is under the platform's domain %s: the proxy's platform hostname is given to it (status.canonicalHostname), no other can be asked for", h, strings.Join(names.Domains(), ", "))}
		}
	}
	gwSpec, canonical, err := buildGatewaySpec(proxy, existing, gatewayClass, names)
	if err != nil {
		return nil, err
	}
	routeSpec, services, ipSlices, err := buildRouteSpec(proxy)
	if err != nil {
		return nil, err
	}
	if canonical != "" {
		routeSpec.Hostnames = append(routeSpec.Hostnames, gatewayv1.Hostname(canonical))
	}
	owner := *metav1.NewControllerRef(proxy, v1alpha.GroupVersion.WithKind(kindHTTPProxy))
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: proxy.Namespace, OwnerReferences: []metav1.OwnerReference{owner}}
	}
	out := &proxyObjects{
		Gateway: &gatewayv1.Gateway{ObjectMeta: meta(proxy.Name), Spec: gwSpec},
		Route:   &gatewayv1.HTTPRoute{ObjectMeta: meta(proxy.Name), Spec: routeSpec},
	}
	for _, svc := range services {
		annotations := svc.Annotations
		svc.ObjectMeta = meta(svc.Name)
		svc.Annotations = annotations
		out.Services = append(out.Services, svc)
	}
	for _, slice := range ipSlices {
		m := meta(slice.Name)
		m.Labels, m.Annotations = slice.Labels, slice.Annotations
		slice.ObjectMeta = m
		out.Slices = append(out.Slices, slice)
	}
	return out, nil
}

// buildGatewaySpec lays out the proxy's Gateway and returns its platform hostname ("":
// not known yet). First the platform hostname's listeners, default-http on 80 and
// default-https on 443 (platform.DefaultListeners); then per hostname an HTTP listener
// on 80 and an HTTPS one on 443 terminating with the Secret <gateway>-<listener>. No
// listener is hostname-less: on an edge that merges Gateways one would answer every
// Host (docs/design.md, Platform hostnames). The platform hostname is existing's
// (platform.Settings.Canonical); a Gateway not created yet has no UID to derive it from,
// so its default listeners carry none until the next write, and the hub never sees them
// without one (GatewayReconciler fills it in). A listener of existing serving a
// hostname the same way keeps its name (and Secret).
func buildGatewaySpec(proxy *v1alpha.HTTPProxy, existing *gatewayv1.Gateway, gatewayClass string, names platform.Settings) (gatewayv1.GatewaySpec, string, error) {
	canonical := ""
	if existing != nil {
		canonical = names.Canonical(existing)
	}
	var host *gatewayv1.Hostname
	if canonical != "" {
		host = ptr.To(gatewayv1.Hostname(canonical))
	}
	httpName, httpsName := platform.DefaultListeners[0], platform.DefaultListeners[1]
	listeners := []gatewayv1.Listener{
		{Name: httpName, Hostname: host, Port: HTTPPort, Protocol: gatewayv1.HTTPProtocolType, AllowedRoutes: sameNamespaceRoutes()},
		{Name: httpsName, Hostname: host, Port: HTTPSPort, Protocol: gatewayv1.HTTPSProtocolType, TLS: httpsTermination(proxy.Name, httpsName), AllowedRoutes: sameNamespaceRoutes()},
	}
	used := map[gatewayv1.SectionName]bool{httpName: true, httpsName: true}
	for _, host := range proxy.Spec.Hostnames {
		for _, kind := range []listenerKind{httpKind, httpsKind} {
			name, err := pickListenerName(proxy.Name, kind, host, existing, used)
			if err != nil {
				return gatewayv1.GatewaySpec{}, "", err
			}
			used[name] = true
			l := gatewayv1.Listener{Name: name, Hostname: ptr.To(host), Port: kind.port, Protocol: kind.protocol, AllowedRoutes: sameNamespaceRoutes()}
			if kind.protocol == gatewayv1.HTTPSProtocolType {
				l.TLS = httpsTermination(proxy.Name, name)
			}
			listeners = append(listeners, l)
		}
	}
	return gatewayv1.GatewaySpec{GatewayClassName: gatewayv1.ObjectName(gatewayClass), Listeners: listeners}, canonical, nil
}

// listenerKind is one of the two listeners a hostname gets.
type listenerKind struct {
	protocol gatewayv1.ProtocolType
	port     gatewayv1.PortNumber
	prefix   string
}

var (
	httpKind  = listenerKind{gatewayv1.HTTPProtocolType, HTTPPort, "http-"}
	httpsKind = listenerKind{gatewayv1.HTTPSProtocolType, HTTPSPort, httpsListenerPrefix}
)

// httpsTermination terminates TLS with the Secret <gateway>-<listener>.
func httpsTermination(gateway string, listener gatewayv1.SectionName) *gatewayv1.ListenerTLSConfig {
	return &gatewayv1.ListenerTLSConfig{
		Mode: ptr.To(gatewayv1.TLSModeTerminate),
		CertificateRefs: []gatewayv1.SecretObjectReference{{
			Group: ptr.To(gatewayv1.Group("")),
			Kind:  ptr.To(gatewayv1.Kind("Secret")),
			Name:  gatewayv1.ObjectName(CertificateName(gateway, listener)),
		}},
	}
}

// pickListenerName returns the name of host's listener of kind: existing's for it if
// there is one and it is free (the previous manager's http-hostname-<n> and
// https-hostname-<n> kept so), else "<prefix><host>", else the prefix and host's digest:
// derived from host alone, so removing a hostname renames no other listener (nor its
// Certificate). An HTTPS listener's name must also give a valid Certificate name.
func pickListenerName(gateway string, kind listenerKind, host gatewayv1.Hostname, existing *gatewayv1.Gateway, used map[gatewayv1.SectionName]bool) (gatewayv1.SectionName, error) {
	var candidates []gatewayv1.SectionName
	if l := findListener(existing, kind.protocol, kind.port, &host); l != nil && !slices.Contains(platform.DefaultListeners, l.Name) {
		candidates = append(candidates, l.Name)
	}
	candidates = append(candidates, gatewayv1.SectionName(kind.prefix+string(host)), gatewayv1.SectionName(kind.prefix+digest(string(host), 16)))
	for _, c := range candidates {
		if used[c] || len(validation.IsDNS1123Subdomain(string(c))) > 0 {
			continue
		}
		if kind.protocol == gatewayv1.HTTPSProtocolType && len(validation.IsDNS1123Subdomain(CertificateName(gateway, c))) > 0 {
			continue
		}
		return c, nil
	}
	return "", invalidf("no listener name for hostname %s gives a valid certificate name with gateway name %q (%d characters): shorten the proxy's name", host, gateway, len(gateway))
}

// findListener returns gw's listener with protocol, port and host (nil: none), or nil.
func findListener(gw *gatewayv1.Gateway, protocol gatewayv1.ProtocolType, port gatewayv1.PortNumber, host *gatewayv1.Hostname) *gatewayv1.Listener {
	if gw == nil {
		return nil
	}
	for i := range gw.Spec.Listeners {
		l := &gw.Spec.Listeners[i]
		if l.Protocol == protocol && l.Port == port && ptr.Equal(l.Hostname, host) {
			return l
		}
	}
	return nil
}

// sameNamespaceRoutes is the API server's default allowedRoutes, written out.
func sameNamespaceRoutes() *gatewayv1.AllowedRoutes {
	return &gatewayv1.AllowedRoutes{Namespaces: &gatewayv1.RouteNamespaces{From: ptr.To(gatewayv1.NamespacesFromSame)}}
}

// buildRouteSpec turns the proxy's rules into route rules and each backend's Service,
// or EndpointSlice for a backend named by an IP address.
func buildRouteSpec(proxy *v1alpha.HTTPProxy) (gatewayv1.HTTPRouteSpec, []*corev1.Service, []*discoveryv1.EndpointSlice, error) {
	spec := gatewayv1.HTTPRouteSpec{
		CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{
			Group: ptr.To(gatewayv1.Group(gatewayv1.GroupName)),
			Kind:  ptr.To(gatewayv1.Kind(kindGateway)),
			Name:  gatewayv1.ObjectName(proxy.Name),
		}}},
		Hostnames: append([]gatewayv1.Hostname(nil), proxy.Spec.Hostnames...),
	}
	var services []*corev1.Service
	var slices []*discoveryv1.EndpointSlice
	for i, r := range proxy.Spec.Rules {
		rule := gatewayv1.HTTPRouteRule{
			Name:    r.Name,
			Matches: withMatchDefaults(r.Matches),
			Filters: deepCopyFilters(r.Filters),
		}
		for _, b := range r.Backends {
			target, err := parseEndpoint(b.Endpoint)
			if err == nil {
				err = target.withTLS(b.TLS)
			}
			if err != nil {
				return spec, nil, nil, invalidf("rule %d: backend %q cannot be programmed: %v", i, b.Endpoint, err)
			}
			rewrite, err := backendRewrite(rule, b.Filters, target)
			if err != nil {
				return spec, nil, nil, invalidf("rule %d: backend %q cannot be programmed: %v", i, b.Endpoint, err)
			}
			if rewrite != nil {
				rule.Filters = append(rule.Filters, *rewrite)
			}
			ref := gatewayv1.BackendObjectReference{Group: ptr.To(gatewayv1.Group("")), Kind: ptr.To(gatewayv1.Kind("Service")), Port: ptr.To(target.Port)}
			if target.Addr.IsValid() {
				slice := backendSlice(backendServiceName(proxy.Name, i), target)
				slices = append(slices, slice)
				ref.Group, ref.Kind, ref.Name = ptr.To(gatewayv1.Group(discoveryv1.GroupName)), ptr.To(gatewayv1.Kind(kindEndpointSlice)), gatewayv1.ObjectName(slice.Name)
			} else {
				svc := backendService(backendServiceName(proxy.Name, i), target, b.TLS)
				services = append(services, svc)
				ref.Name = gatewayv1.ObjectName(svc.Name)
			}
			rule.BackendRefs = append(rule.BackendRefs, gatewayv1.HTTPBackendRef{
				BackendRef: gatewayv1.BackendRef{
					BackendObjectReference: ref,
					Weight:                 ptr.To[int32](1),
				},
				Filters: deepCopyFilters(b.Filters),
			})
		}
		spec.Rules = append(spec.Rules, rule)
	}
	return spec, services, slices, nil
}

// backendTarget is a backend endpoint URL taken apart.
type backendTarget struct {
	// Scheme is http or https.
	Scheme string
	// Host is a lowercase DNS name, or Addr in its canonical form.
	Host string
	// Addr is the IP address the URL names, if it names one (judged by
	// netpolicy.Refused, not here).
	Addr netip.Addr
	// CertHostname is the name an https backend's certificate must be valid for:
	// tls.hostname, else Host (withTLS).
	CertHostname string
	// Port is the URL's port or the scheme's default.
	Port gatewayv1.PortNumber
	// Path is the URL's path without a trailing slash; empty for none or "/".
	Path string
}

// parseEndpoint parses a backend URL, refusing what the objects cannot express: user
// information, a query or fragment, a single-label host, a bad port. A host that is an
// IP address is kept as one (Addr) for netpolicy.Refused to judge.
func parseEndpoint(endpoint string) (backendTarget, error) {
	u, err := url.Parse(endpoint)
	if err != nil {
		return backendTarget{}, fmt.Errorf("not a URL: %w", err)
	}
	t := backendTarget{Scheme: strings.ToLower(u.Scheme), Host: strings.ToLower(u.Hostname())}
	switch {
	case t.Scheme != "http" && t.Scheme != "https":
		return t, fmt.Errorf("scheme %q: want http or https", u.Scheme)
	case u.User != nil:
		return t, fmt.Errorf("user information in the URL is not supported")
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return t, fmt.Errorf("a query or fragment in the URL is not supported")
	case t.Host == "":
		return t, fmt.Errorf("no host")
	}
	if addr, err := netip.ParseAddr(t.Host); err == nil {
		t.Addr, t.Host = addr, addr.String()
	} else if errs := validation.IsDNS1123Subdomain(t.Host); len(errs) > 0 {
		return t, fmt.Errorf("host %q is not a DNS name: %s", t.Host, strings.Join(errs, "; "))
	} else if !strings.Contains(t.Host, ".") {
		return t, fmt.Errorf("host %q is a single DNS label; the edge reaches a backend through an FQDN EndpointSlice, which needs at least two", t.Host)
	}
	t.Port = 80
	if t.Scheme == "https" {
		t.Port = 443
	}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return t, fmt.Errorf("port %q out of range", p)
		}
		t.Port = gatewayv1.PortNumber(n)
	}
	t.Path = strings.TrimRight(u.Path, "/")
	return t, nil
}

// withTLS sets CertHostname for an https backend: tls.hostname, else the host. One named
// by an IP address needs tls.hostname (the previous manager's rule), a DNS name: the
// name its certificate is checked against, and the SNI and Host the edge sends.
func (t *backendTarget) withTLS(tls *v1alpha.HTTPProxyBackendTLS) error {
	if t.Scheme != "https" {
		return nil
	}
	name := t.Host
	if tls != nil && tls.Hostname != nil && *tls.Hostname != "" {
		name = *tls.Hostname
	} else if t.Addr.IsValid() {
		return fmt.Errorf("https to the IP address %s needs tls.hostname, the DNS name the backend's certificate is valid for (the edge sends it as SNI and Host)", t.Host)
	}
	if t.Addr.IsValid() {
		if isIPLiteral(name) || len(validation.IsDNS1123Subdomain(name)) > 0 {
			return fmt.Errorf("tls.hostname %q is not a lowercase DNS name: a certificate for an https backend named by an IP address is checked against a DNS name", name)
		}
	}
	t.CertHostname = name
	return nil
}

// hostHeader is the Host the edge sends the backend: the DNS name it is named by; for
// one named by an IP address, tls.hostname over https, else none (the client's Host
// passes, as under the previous manager).
func (t backendTarget) hostHeader() string {
	switch {
	case !t.Addr.IsValid():
		return t.Host
	case t.Scheme == "https":
		return t.CertHostname
	}
	return ""
}

// backendRewrite returns the rule's URLRewrite: Host set to the backend's, the matched
// prefix replaced by the endpoint's path (one PathPrefix match needed). The proxy's own
// URLRewrite wins (nil), but not with an endpoint path (docs/design.md).
func backendRewrite(rule gatewayv1.HTTPRouteRule, own []gatewayv1.HTTPRouteFilter, t backendTarget) (*gatewayv1.HTTPRouteFilter, error) {
	if hasFilter(rule.Filters, gatewayv1.HTTPRouteFilterURLRewrite) || hasFilter(own, gatewayv1.HTTPRouteFilterURLRewrite) {
		if t.Path != "" {
			return nil, fmt.Errorf("the endpoint path %s cannot be combined with a URLRewrite filter", t.Path)
		}
		return nil, nil
	}
	rewrite := &gatewayv1.HTTPURLRewriteFilter{}
	if host := t.hostHeader(); host != "" {
		rewrite.Hostname = ptr.To(gatewayv1.PreciseHostname(host))
	}
	if t.Path != "" {
		if len(rule.Matches) != 1 || rule.Matches[0].Path == nil || ptr.Deref(rule.Matches[0].Path.Type, "") != gatewayv1.PathMatchPathPrefix {
			return nil, fmt.Errorf("the endpoint path %s needs the rule to have exactly one PathPrefix match", t.Path)
		}
		rewrite.Path = &gatewayv1.HTTPPathModifier{Type: gatewayv1.PrefixMatchHTTPPathModifier, ReplacePrefixMatch: ptr.To(t.Path)}
	}
	if rewrite.Hostname == nil && rewrite.Path == nil {
		return nil, nil
	}
	return &gatewayv1.HTTPRouteFilter{Type: gatewayv1.HTTPRouteFilterURLRewrite, URLRewrite: rewrite}, nil
}

func hasFilter(filters []gatewayv1.HTTPRouteFilter, typ gatewayv1.HTTPRouteFilterType) bool {
	return slices.ContainsFunc(filters, func(f gatewayv1.HTTPRouteFilter) bool { return f.Type == typ })
}

func deepCopyFilters(in []gatewayv1.HTTPRouteFilter) []gatewayv1.HTTPRouteFilter {
	if len(in) == 0 {
		return nil
	}
	out := make([]gatewayv1.HTTPRouteFilter, len(in))
	for i := range in {
		in[i].DeepCopyInto(&out[i])
	}
	return out
}

// withMatchDefaults returns matches with the API server's defaults written out (a
// PathPrefix "/" path, Exact header and query matches), so the rule compares equal when
// read back and backendRewrite sees what the server will.
func withMatchDefaults(in []gatewayv1.HTTPRouteMatch) []gatewayv1.HTTPRouteMatch {
	if len(in) == 0 {
		return []gatewayv1.HTTPRouteMatch{{Path: rootPrefix()}}
	}
	out := make([]gatewayv1.HTTPRouteMatch, len(in))
	for i := range in {
		m := in[i].DeepCopy()
		if m.Path == nil {
			m.Path = rootPrefix()
		}
		if m.Path.Type == nil {
			m.Path.Type = ptr.To(gatewayv1.PathMatchPathPrefix)
		}
		if m.Path.Value == nil {
			m.Path.Value = ptr.To("/")
		}
		for j := range m.Headers {
			if m.Headers[j].Type == nil {
				m.Headers[j].Type = ptr.To(gatewayv1.HeaderMatchExact)
			}
		}
		for j := range m.QueryParams {
			if m.QueryParams[j].Type == nil {
				m.QueryParams[j].Type = ptr.To(gatewayv1.QueryParamMatchExact)
			}
		}
		out[i] = *m
	}
	return out
}

func rootPrefix() *gatewayv1.HTTPPathMatch {
	return &gatewayv1.HTTPPathMatch{Type: ptr.To(gatewayv1.PathMatchPathPrefix), Value: ptr.To("/")}
}

// backendService is the ExternalName Service a backend is reached through: its port's
// appProtocol is the scheme, and an https one carries BackendCertHostnameAnnotation
// (tls.hostname, else the endpoint's host).
func backendService(name string, t backendTarget, tls *v1alpha.HTTPProxyBackendTLS) *corev1.Service {
	var annotations map[string]string
	if t.Scheme == "https" {
		host := t.Host
		if tls != nil && tls.Hostname != nil && *tls.Hostname != "" {
			host = *tls.Hostname
		}
		annotations = map[string]string{BackendCertHostnameAnnotation: host}
	}
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations},
		Spec: corev1.ServiceSpec{
			Type:         corev1.ServiceTypeExternalName,
			ExternalName: t.Host,
			Ports: []corev1.ServicePort{{
				Name:        t.Scheme,
				Protocol:    corev1.ProtocolTCP,
				Port:        t.Port,
				TargetPort:  intstr.FromInt32(t.Port),
				AppProtocol: ptr.To(t.Scheme),
			}},
		},
	}
}

// backendSlice is the EndpointSlice a backend named by an IP address is reached through
// (an ExternalName Service cannot hold an IPv6 address; the previous manager's form):
// the one address, of its family, and the port named and typed by the scheme; an https
// one carries BackendCertHostnameAnnotation. Labelled managed by this manager, which
// prunes only such slices.
func backendSlice(name string, t backendTarget) *discoveryv1.EndpointSlice {
	addressType := discoveryv1.AddressTypeIPv4
	if !t.Addr.Is4() {
		addressType = discoveryv1.AddressTypeIPv6
	}
	var annotations map[string]string
	if t.Scheme == "https" {
		annotations = map[string]string{BackendCertHostnameAnnotation: t.CertHostname}
	}
	return &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: name, Labels: map[string]string{discoveryv1.LabelManagedBy: endpointSliceManagedBy}, Annotations: annotations},
		AddressType: addressType,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{t.Host}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		Ports: []discoveryv1.EndpointPort{{
			Name:        ptr.To(t.Scheme),
			Protocol:    ptr.To(corev1.ProtocolTCP),
			Port:        ptr.To(int32(t.Port)),
			AppProtocol: ptr.To(t.Scheme),
		}},
	}
}

// Listener layout of the Gateway an HTTPProxy produces.
const (
	// HTTPPort is the port of the HTTP listeners, one per hostname.
	HTTPPort gatewayv1.PortNumber = 80
	// HTTPSPort is the port of the HTTPS listeners, one per hostname.
	HTTPSPort gatewayv1.PortNumber = 443

	httpsListenerPrefix = "https-"
	backendInfix        = "-backend-"
)

// CertificateName names the downstream Certificate of a Gateway's HTTPS listener and
// the Secret it writes (wire format: <gateway>-<listener>).
func CertificateName(gateway string, listener gatewayv1.SectionName) string {
	return gateway + "-" + string(listener)
}

// backendServiceName names the Service of the backend of the proxy's rule at index rule:
// "<proxy>-backend-<rule>" when a valid Service name, else "backend-<digest>-<rule>".
func backendServiceName(proxy string, rule int) string {
	readable := proxy + backendInfix + strconv.Itoa(rule)
	if len(validation.IsDNS1035Label(readable)) == 0 {
		return readable
	}
	return "backend-" + digest(proxy, 12) + "-" + strconv.Itoa(rule)
}

// digest returns the first n hex digits of s's SHA-256.
func digest(s string, n int) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])[:n]
}
