package config

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

// The previous manager's document: network-services-operator's --server-config.
var previousGroupVersion = schema.GroupVersion{Group: "apiserver.config.datumapis.com", Version: "v1alpha1"}

const previousKind = "NetworkServicesOperator"

// Key is what one key of the previous manager's document became here.
type Key struct {
	// Path is the key in the previous manager's document, e.g. httpProxy.gatewayClassName.
	Path string `json:"path"`
	// Value is what the document wrote (JSON), or "" when it left the key out and the
	// previous manager's default applied.
	Value string `json:"value,omitempty"`
	// Became is this manager's key and value, or "" when the key is not served.
	Became string `json:"became,omitempty"`
	// Why says why a key is not served, and what replaces it.
	Why string `json:"why,omitempty"`
	// Lost: the previous manager did something here a tenant relies on that this manager
	// does not do (yet).
	Lost bool `json:"lost,omitempty"`
}

// previousRule is how one key of the previous manager's document is read.
type previousRule struct {
	key string
	// def is the previous manager's default (JSON), applied when the document leaves the
	// key out; "" for none.
	def string
	// apply sets this manager's settings from the key's JSON value and says what it
	// became; nil when the key is not served.
	apply func(l *Loaded, raw json.RawMessage) (string, error)
	why   string
	// lost marks a key whose behaviour this manager lacks, reported even when the
	// document leaves it out (its default is the behaviour).
	lost bool
	// issuer marks the two keys the certificate issuer is read from together (issuer).
	issuer bool
}

// Not served yet: the behaviour arrives with its own work (docs/operations.md,
// Configuration from the previous manager).
const notYet = "not served yet: "

// previousRules are the keys of the sections this manager reads key by key.
var previousRules = []previousRule{
	{key: "httpProxy.gatewayClassName", def: `"datum-external-global-proxy"`, apply: set("gateway.gatewayClassName", func(l *Loaded) *string { return &l.Gateway.GatewayClassName })},
	{key: "httpProxy.maxConcurrentReconciles", why: "gateway.workers and gateway.projectWorkers (per-project fair share) replace it"},
	{key: "gateway.controllerName", def: `"gateway.networking.datumapis.com/external-global-proxy-controller"`, apply: set("gateway.controllerName", func(l *Loaded) *string { return &l.Gateway.ControllerName })},
	{key: "gateway.downstreamGatewayClassName", apply: set("gateway.downstreamGatewayClassName", func(l *Loaded) *string { return &l.Gateway.DownstreamGatewayClassName })},
	{key: "gateway.downstreamHostnameAccountingNamespace", def: `"datum-downstream-gateway-hostnames"`, apply: set("gateway.hostnameClaimsNamespace", func(l *Loaded) *string { return &l.Gateway.HostnameClaimsNamespace })},
	{key: "gateway.listenerTLSOptions", issuer: true},
	{key: "gateway.clusterIssuerMap", issuer: true},
	{key: "gateway.maxConcurrentReconciles", why: "gateway.workers and gateway.projectWorkers (per-project fair share) replace it"},
	{key: "gateway.targetDomain", apply: set("platform.targetDomain", func(l *Loaded) *string { return &l.Platform.TargetDomain })},
	{key: "gateway.legacyTargetDomains", apply: set("platform.legacyTargetDomains", func(l *Loaded) *[]string { return &l.Platform.LegacyTargetDomains })},
	{key: "gateway.ipFamilies", def: `["IPv4","IPv6"]`, apply: set("platform.ipFamilies", func(l *Loaded) *[]string { return &l.Platform.IPFamilies })},
	{key: "gateway.disableHostnameVerification", def: `false`, apply: func(l *Loaded, raw json.RawMessage) (string, error) {
		var off bool
		if err := json.Unmarshal(raw, &off); err != nil {
			return "", err
		}
		l.DomainVerification.Enabled = !off
		return fmt.Sprintf("domainVerification.enabled: %t", !off), nil
	}},
	{key: "gateway.defaultListenerTLSSecretName", apply: set("platform.defaultListenerTLSSecretName", func(l *Loaded) *string { return &l.Platform.DefaultListenerTLSSecretName })},
	{key: "gateway.certificateReissuance", why: notYet + "cert-manager's own backoff applies to a failed Certificate"},
	{key: "gateway.coraza", why: notYet + "the WAF (TrafficProtectionPolicy) does not reach the edge", lost: true},
	{key: "gateway.enableDNSIntegration", why: notYet + "DNS records for Gateway hostnames"},
	{key: "gateway.downstreamGatewayNamespace", why: "this manager writes nothing there: every downstream object lives in ns-<upstream namespace UID>"},
	{key: "gateway.permittedTLSOptions", why: "tenants' Gateways are not admitted here: this manager programs only the Gateways its proxies control"},
	{key: "gateway.validPortNumbers", why: "tenants' Gateways are not admitted here: this manager programs only the Gateways its proxies control"},
	{key: "gateway.validProtocolTypes", why: "tenants' Gateways are not admitted here: this manager programs only the Gateways its proxies control"},
	{key: "gateway.httpRoutes", why: "tenants' HTTPRoutes are not admitted here: this manager programs only the routes its proxies control"},
	{key: "gateway.extensionAPIValidationOptions", why: notYet + "edge policies (BackendTrafficPolicy, SecurityPolicy, HTTPRouteFilter) are not replicated"},
	{key: "gateway.resourceReplicator", why: notYet + "the replicator's kinds are not mirrored; their stranded anchors are collected (resync.ownerKinds)"},
	{key: "gateway.connectorInternalListenerName", why: "connector backends are not programmed here (Accepted=False, UnsupportedBackend)"},
	{key: "gateway.errorPage", why: "served by the previous manager's Envoy extension server, which keeps running"},
	{key: "gateway.eppEmissionEnabled", why: "served by the previous manager's Envoy extension server, which keeps running"},
	{key: "gateway.enableDownstreamCertificateSolver", why: "the hub is read directly by its edges; no federation solver routes are written"},
	{key: "gateway.deleteErroredChallenges", why: "cert-manager's own retry applies to an errored challenge"},
	{key: "gateway.certificateService", why: "certificates are ordered from cert-manager on the hub (gateway.certificateIssuer)"},
	{key: "domainVerificationConfig.dnsVerificationRecordPrefix", def: `"datum-custom-hostname"`, apply: set("domainVerification.dnsRecordPrefix", func(l *Loaded) *string { return &l.DomainVerification.DNSRecordPrefix })},
	{key: "domainVerificationConfig.httpVerificationTokenPath", def: `".well-known/datum-custom-hostname-challenge"`, apply: set("domainVerification.httpTokenPath", func(l *Loaded) *string { return &l.DomainVerification.HTTPTokenPath })},
	{key: "domainVerificationConfig.retryJitterMaxFactor", def: `0.25`, apply: set("domainVerification.retryJitter", func(l *Loaded) *float64 { return &l.DomainVerification.RetryJitter })},
	{key: "domainVerificationConfig.maxConcurrentVerifications", def: `20`, apply: set("domainVerification.workers", func(l *Loaded) *int { return &l.DomainVerification.Workers })},
	{key: "domainVerificationConfig.retryIntervals", def: `[{"interval":"5s","maxElapsed":"5m"},{"interval":"1m","maxElapsed":"15m"},{"interval":"5m"}]`, apply: func(l *Loaded, raw json.RawMessage) (string, error) {
		l.DomainVerification.RetryIntervals = nil // the same shape as ours
		if err := json.Unmarshal(raw, &l.DomainVerification.RetryIntervals); err != nil {
			return "", err
		}
		return "domainVerification.retryIntervals: " + compact(raw), nil
	}},
	{key: "leaderElection.leaseDuration", def: `"15s"`, apply: set("sharding.leaseDuration", func(l *Loaded) *metav1.Duration { return &l.Sharding.LeaseDuration })},
	{key: "leaderElection.renewDeadline", def: `"10s"`, apply: set("sharding.renewDeadline", func(l *Loaded) *metav1.Duration { return &l.Sharding.RenewDeadline })},
	{key: "leaderElection.retryPeriod", def: `"2s"`, apply: set("sharding.retryPeriod", func(l *Loaded) *metav1.Duration { return &l.Sharding.RetryPeriod })},
	{key: "downstreamClient.qps", def: `50`, apply: set("clients.hub.qps", func(l *Loaded) *float32 { return &l.Clients.Hub.QPS })},
	{key: "downstreamClient.burst", def: `100`, apply: set("clients.hub.burst", func(l *Loaded) *int { return &l.Clients.Hub.Burst })},
	{key: "projectClient.qps", def: `50`, apply: set("clients.project.qps", func(l *Loaded) *float32 { return &l.Clients.Project.QPS })},
	{key: "projectClient.burst", def: `100`, apply: set("clients.project.burst", func(l *Loaded) *int { return &l.Clients.Project.Burst })},
	{key: "downstreamResourceManagement.kubeconfigPath", apply: func(l *Loaded, raw json.RawMessage) (string, error) {
		if err := json.Unmarshal(raw, &l.HubKubeconfig); err != nil {
			return "", err
		}
		return "the hub's kubeconfig when --kubeconfig is not given: " + l.HubKubeconfig, nil
	}},
}

// previousSections are the previous manager's sections this manager does not serve at
// all, with what replaces each.
var previousSections = map[string]string{
	"metricsServer":      "the --metrics-bind-address and --metrics-secure flags",
	"webhookServer":      "no admission webhook runs: the HTTPProxy CRD's rules and the Accepted condition take over",
	"connector":          "connectors are not served here (connector backends are Accepted=False, UnsupportedBackend)",
	"discovery":          "projects are the kubeconfig Secrets in providerNamespace",
	"redis":              "no cache is shared between replicas: each project has one owner (its Lease)",
	"controlPlaneClient": "Leases are on the hub: clients.hub",
	"domainRegistration": "registration data (RDAP, WHOIS) is not read: status.registration keeps what the previous manager stored",
	"ipam":               "networks and IPAM are the previous manager's other controllers, not replaced here",
	"networkInterface":   "network interfaces are the cell manager's, not replaced here",
	"networkPresence":    "networks are the previous manager's other controllers, not replaced here",
	"locationPublisher":  "locations are the previous manager's other controllers, not replaced here",
}

// switchedOff reports whether a lost key's value turned the behaviour off in the
// previous manager too (coraza's disabled: true).
func switchedOff(raw json.RawMessage) bool {
	var v any
	_ = json.Unmarshal(raw, &v)
	m, _ := v.(map[string]any)
	return v == true || m["disabled"] == true
}

// issuerOption is the listener TLS option that names the issuer to map.
const issuerOption = "gateway.networking.datumapis.com/certificate-issuer"

// fromPrevious reads the previous manager's document onto l, key by key: every key is
// mapped, reported as not served, or refused as unknown.
func (l *Loaded) fromPrevious(data []byte) error {
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return err
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(js, &doc); err != nil {
		return err
	}
	present := map[string]json.RawMessage{}
	for _, section := range slices.Sorted(maps.Keys(doc)) {
		raw := doc[section]
		switch _, whole := previousSections[section]; {
		case section == "apiVersion" || section == "kind":
		case whole:
			l.Keys = append(l.Keys, Key{Path: section, Value: compact(raw), Why: previousSections[section]})
		case slices.ContainsFunc(previousRules, func(r previousRule) bool { return strings.HasPrefix(r.key, section+".") }):
			var keys map[string]json.RawMessage
			if err := json.Unmarshal(raw, &keys); err != nil {
				return fmt.Errorf("%s: %w", section, err)
			}
			for k, v := range keys {
				present[section+"."+k] = v
			}
		default:
			return fmt.Errorf("unknown key %q in the previous manager's document", section)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(present)) {
		if !slices.ContainsFunc(previousRules, func(r previousRule) bool { return r.key == k }) {
			return fmt.Errorf("unknown key %q in the previous manager's document", k)
		}
	}
	for _, r := range previousRules {
		raw, ok := present[r.key]
		key := Key{Path: r.key, Value: compact(raw), Why: r.why, Lost: r.lost && !switchedOff(raw)}
		switch {
		case r.issuer:
			continue
		case r.apply == nil && (ok || r.lost):
			l.Keys = append(l.Keys, key)
			continue
		case r.apply == nil, !ok && r.def == "":
			continue
		case !ok:
			raw = json.RawMessage(r.def)
		}
		became, err := r.apply(l, raw)
		if err != nil {
			return fmt.Errorf("%s: %w", r.key, err)
		}
		key.Became = became
		l.Keys = append(l.Keys, key)
	}
	issuer, err := l.issuer(present)
	l.Keys = append(l.Keys, issuer...)
	return err
}

// issuer sets the certificate issuer as the previous manager chose it: the listener TLS
// option names an issuer ("auto" when absent), clusterIssuerMap maps it to a
// ClusterIssuer (or it is used as it is). The listener's other TLS options are not served.
func (l *Loaded) issuer(present map[string]json.RawMessage) ([]Key, error) {
	var options, byName map[string]string
	for key, into := range map[string]*map[string]string{"gateway.listenerTLSOptions": &options, "gateway.clusterIssuerMap": &byName} {
		if raw, ok := present[key]; ok {
			if err := json.Unmarshal(raw, into); err != nil {
				return nil, fmt.Errorf("%s: %w", key, err)
			}
		}
	}
	name := cmp.Or(options[issuerOption], "auto")
	if mapped, ok := byName[name]; ok {
		name = mapped
	}
	l.Gateway.CertificateIssuer = Issuer{Name: name, Kind: "ClusterIssuer", Group: "cert-manager.io"}
	keys := []Key{{Path: "gateway.clusterIssuerMap[gateway.listenerTLSOptions." + issuerOption + "]",
		Value: compact(present["gateway.clusterIssuerMap"]), Became: "gateway.certificateIssuer: ClusterIssuer " + name}}
	if len(byName) > 0 {
		// A Gateway's listener may name another issuer of the map in its own option.
		l.Gateway.ClusterIssuers = byName
		keys = append(keys, Key{Path: "gateway.clusterIssuerMap", Value: compact(present["gateway.clusterIssuerMap"]),
			Became: "gateway.clusterIssuers: " + compact(present["gateway.clusterIssuerMap"])})
	}
	for _, option := range slices.Sorted(maps.Keys(options)) {
		if option != issuerOption {
			keys = append(keys, Key{Path: "gateway.listenerTLSOptions." + option, Value: options[option],
				Why: "only the certificate-issuer option is read: a listener's other TLS options are not programmed"})
		}
	}
	return keys, nil
}

// set reads a key's value into the field at and says what it became: to's key and value.
func set[T any](to string, at func(*Loaded) *T) func(*Loaded, json.RawMessage) (string, error) {
	return func(l *Loaded, raw json.RawMessage) (string, error) {
		if err := json.Unmarshal(raw, at(l)); err != nil {
			return "", err
		}
		v := any(*at(l))
		if d, ok := v.(metav1.Duration); ok {
			v = d.Duration
		}
		return fmt.Sprintf("%s: %v", to, v), nil
	}
}

// compact is raw as one short line, "" for none.
func compact(raw json.RawMessage) string {
	s := strings.Join(strings.Fields(string(raw)), " ")
	if len(s) > 120 {
		s = s[:117] + "..."
	}
	return s
}
