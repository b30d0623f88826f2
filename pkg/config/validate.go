package config

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"anchorage/pkg/shard"
)

// Validate reports every problem of the configuration, each with its key's path, in one
// error ("; " between them). It is the one check of the settings: the field checks are
// here, and the rules between fields that the components enforce themselves
// (shard.Timings, resync.Options) are theirs, called here with the keys' paths.
func (c *ManagerConfiguration) Validate() error {
	var errs field.ErrorList
	namespace(&errs, field.NewPath("providerNamespace"), c.ProviderNamespace)
	if c.LeaseNamespace != nil {
		namespace(&errs, field.NewPath("leaseNamespace"), *c.LeaseNamespace)
	}
	positive(&errs, field.NewPath("hubTimeout"), c.HubTimeout)
	errs = append(errs, c.validateSharding(field.NewPath("sharding"))...)
	errs = append(errs, c.validateResync(field.NewPath("resync"))...)
	errs = append(errs, c.validateGateway(field.NewPath("gateway"))...)
	errs = append(errs, c.validateDomainVerification(field.NewPath("domainVerification"))...)
	if err := c.PlatformSettings().Validate(); err != nil {
		errs = append(errs, field.Invalid(field.NewPath("platform"), c.Platform, err.Error()))
	}
	if name := c.Platform.DefaultListenerTLSSecretName; name != "" {
		for _, msg := range validation.IsDNS1123Subdomain(name) {
			errs = append(errs, field.Invalid(field.NewPath("platform", "defaultListenerTLSSecretName"), name, msg))
		}
	}
	for _, client := range []struct {
		name string
		cc   ClientConnection
	}{{"hub", c.Clients.Hub}, {"project", c.Clients.Project}} {
		p, cc := field.NewPath("clients", client.name), client.cc
		if !(cc.QPS > 0) || math.IsInf(float64(cc.QPS), 0) {
			errs = append(errs, field.Invalid(p.Child("qps"), cc.QPS, "must be positive and finite"))
		}
		if cc.Burst < 1 {
			errs = append(errs, field.Invalid(p.Child("burst"), cc.Burst, "must be at least 1"))
		}
	}
	return joinErrors(errs)
}

func (c *ManagerConfiguration) validateSharding(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	s := c.Sharding
	positive(&errs, p.Child("leaseDuration"), s.LeaseDuration)
	positive(&errs, p.Child("renewDeadline"), s.RenewDeadline)
	positive(&errs, p.Child("retryPeriod"), s.RetryPeriod)
	positive(&errs, p.Child("projectCallTimeout"), s.ProjectCallTimeout)
	if s.ClaimDeadline != nil {
		positive(&errs, p.Child("claimDeadline"), *s.ClaimDeadline)
	}
	if len(errs) > 0 {
		return errs
	}
	key := func(k string) string { return p.Child(k).String() }
	err := c.Timings().ValidateNaming(shard.TimingNames{
		LeaseDuration: key("leaseDuration"), RenewDeadline: key("renewDeadline"), RetryPeriod: key("retryPeriod"),
		ClaimDeadline: key("claimDeadline"),
		CallTimeout:   "the call timeout (half of " + key("leaseDuration") + " - " + key("renewDeadline") + ")",
		DrainDeadline: "the drain deadline (2 x " + key("renewDeadline") + ")", ShutdownDeadline: "the shutdown deadline (4 x " + key("leaseDuration") + ")",
	})
	return between(p, err)
}

func (c *ManagerConfiguration) validateResync(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	r := c.Resync
	positive(&errs, p.Child("period"), r.Period)
	positive(&errs, p.Child("initialJitter"), r.InitialJitter)
	positive(&errs, p.Child("confirmAfter"), r.ConfirmAfter)
	positive(&errs, p.Child("minAge"), r.MinAge)
	if r.MaxDeletionsPerPass < 1 {
		errs = append(errs, field.Invalid(p.Child("maxDeletionsPerPass"), r.MaxDeletionsPerPass, "must be at least 1; to delete nothing set resync.dryRun (or the deletion switch, docs/recovery.md)"))
	}
	if r.HaltAbove < 1 {
		errs = append(errs, field.Invalid(p.Child("haltAbove"), r.HaltAbove, "must be at least 1; to delete nothing set resync.dryRun (or the deletion switch, docs/recovery.md)"))
	}
	if !(r.DeletionsPerSecond > 0) || math.IsInf(r.DeletionsPerSecond, 0) {
		errs = append(errs, field.Invalid(p.Child("deletionsPerSecond"), r.DeletionsPerSecond, "must be positive and finite; to delete nothing set resync.dryRun"))
	}
	if r.Workers < 1 {
		errs = append(errs, field.Invalid(p.Child("workers"), r.Workers, "must be at least 1"))
	}
	for _, list := range []struct {
		name  string
		kinds []string
	}{{"ownerKinds", r.OwnerKinds}, {"extraDependentKinds", r.ExtraDependentKinds}} {
		for i, k := range list.kinds {
			if _, err := parseKinds([]string{k}); err != nil {
				errs = append(errs, field.Invalid(p.Child(list.name).Index(i), k, err.Error()))
			}
		}
	}
	if len(errs) > 0 {
		return errs
	}
	return between(p, c.ResyncOptions().Validate())
}

func (c *ManagerConfiguration) validateGateway(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	g := c.Gateway
	for _, f := range []struct {
		key   *field.Path
		value string
	}{
		{p.Child("gatewayClassName"), g.GatewayClassName}, {p.Child("downstreamGatewayClassName"), g.DownstreamGatewayClassName},
		{p.Child("certificateIssuer", "name"), g.CertificateIssuer.Name}, {p.Child("certificateIssuer", "group"), g.CertificateIssuer.Group},
	} {
		for _, msg := range validation.IsDNS1123Subdomain(f.value) {
			errs = append(errs, field.Invalid(f.key, f.value, msg))
		}
	}
	namespace(&errs, p.Child("hostnameClaimsNamespace"), g.HostnameClaimsNamespace)
	if k := g.CertificateIssuer.Kind; k != "Issuer" && k != "ClusterIssuer" {
		errs = append(errs, field.NotSupported(p.Child("certificateIssuer", "kind"), k, []string{"ClusterIssuer", "Issuer"}))
	}
	// Gateway API's controller name: a domain-prefixed path.
	if domain, path, ok := strings.Cut(g.ControllerName, "/"); !ok || path == "" || len(validation.IsDNS1123Subdomain(domain)) > 0 {
		errs = append(errs, field.Invalid(p.Child("controllerName"), g.ControllerName, "want a domain-prefixed path such as example.com/gateway-controller"))
	}
	for _, f := range []struct {
		key   *field.Path
		value int
	}{{p.Child("workers"), g.Workers}, {p.Child("projectWorkers"), g.ProjectWorkers}, {p.Child("proxiesPerProject"), g.ProxiesPerProject},
		{p.Child("hostnamesPerProxy"), g.HostnamesPerProxy}, {p.Child("hostnamesPerGateway"), g.HostnamesPerGateway}} {
		if f.value < 1 {
			errs = append(errs, field.Invalid(f.key, f.value, "must be at least 1"))
		}
	}
	for i, c := range g.BackendDeniedNetworks {
		key := p.Child("backendDeniedNetworks").Index(i)
		switch prefix, err := netip.ParsePrefix(c); {
		case err != nil:
			errs = append(errs, field.Invalid(key, c, "want a CIDR such as 10.96.0.0/12 or 2001:db8::/64 (one address is /32 or /128)"))
		case prefix != prefix.Masked():
			errs = append(errs, field.Invalid(key, c, fmt.Sprintf("has bits set past its /%d: want %s", prefix.Bits(), prefix.Masked())))
		}
	}
	if !(g.ProjectHubWritesPerSecond > 0) || math.IsInf(g.ProjectHubWritesPerSecond, 0) {
		errs = append(errs, field.Invalid(p.Child("projectHubWritesPerSecond"), g.ProjectHubWritesPerSecond, "must be positive and finite"))
	}
	return errs
}

// positive refuses a duration that is not above zero.
func positive(errs *field.ErrorList, p *field.Path, d metav1.Duration) {
	if d.Duration <= 0 {
		*errs = append(*errs, field.Invalid(p, d.Duration.String(), "must be positive (a duration such as 15s, 1m30s or 500ms)"))
	}
}

// namespace refuses what is not a namespace name.
func namespace(errs *field.ErrorList, p *field.Path, ns string) {
	for _, msg := range validation.IsDNS1123Label(ns) {
		*errs = append(*errs, field.Invalid(p, ns, msg))
	}
}

// between is a component's rule between fields, reported on the section's path; the
// component's message names the keys.
func between(p *field.Path, err error) field.ErrorList {
	if err == nil {
		return nil
	}
	var out field.ErrorList
	for _, e := range unjoin(err) {
		out = append(out, &field.Error{Type: field.ErrorTypeInvalid, Field: p.String(), BadValue: field.OmitValueType{}, Detail: e.Error()})
	}
	return out
}

// unjoin splits an errors.Join into its errors.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// joinErrors makes one error of errs, each problem with its key.
func joinErrors(errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	msgs := make([]string, 0, len(errs))
	for _, e := range errs {
		msgs = append(msgs, e.Error())
	}
	return errors.New("invalid configuration: " + strings.Join(msgs, "; "))
}

func (c *ManagerConfiguration) validateDomainVerification(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	v := c.DomainVerification
	for _, msg := range validation.IsDNS1123Label(strings.TrimPrefix(v.DNSRecordPrefix, "_")) {
		errs = append(errs, field.Invalid(p.Child("dnsRecordPrefix"), v.DNSRecordPrefix, "must be one DNS label (a leading _ allowed): "+msg))
	}
	if strings.Trim(v.HTTPTokenPath, "/") == "" || strings.ContainsAny(v.HTTPTokenPath, "?# ") {
		errs = append(errs, field.Invalid(p.Child("httpTokenPath"), v.HTTPTokenPath, "must be a URL path, without query or fragment"))
	}
	if len(v.RetryIntervals) == 0 {
		errs = append(errs, field.Required(p.Child("retryIntervals"), "at least one step"))
	}
	var last time.Duration
	for i, r := range v.RetryIntervals {
		ip := p.Child("retryIntervals").Index(i)
		positive(&errs, ip.Child("interval"), r.Interval)
		switch {
		case r.MaxElapsed == nil && i < len(v.RetryIntervals)-1:
			errs = append(errs, field.Required(ip.Child("maxElapsed"), "only the last step may leave it out"))
		case r.MaxElapsed != nil && i == len(v.RetryIntervals)-1:
			errs = append(errs, field.Invalid(ip.Child("maxElapsed"), r.MaxElapsed.Duration.String(), "the last step applies without bound: leave it out"))
		case r.MaxElapsed != nil && r.MaxElapsed.Duration <= last:
			errs = append(errs, field.Invalid(ip.Child("maxElapsed"), r.MaxElapsed.Duration.String(), "must be positive and grow from step to step"))
		case r.MaxElapsed != nil:
			last = r.MaxElapsed.Duration
		}
	}
	if !(v.RetryJitter >= 0 && v.RetryJitter <= 1) {
		errs = append(errs, field.Invalid(p.Child("retryJitter"), v.RetryJitter, "must be between 0 and 1"))
	}
	if v.Workers < 1 {
		errs = append(errs, field.Invalid(p.Child("workers"), v.Workers, "must be at least 1"))
	}
	for i, ns := range v.Nameservers {
		if host, port, err := net.SplitHostPort(ns); err != nil || host == "" || port == "" {
			errs = append(errs, field.Invalid(p.Child("nameservers").Index(i), ns, "must be host:port (for example 10.0.0.10:53)"))
		}
	}
	positive(&errs, p.Child("timeout"), v.Timeout)
	if v.HTTPPort < 1 || v.HTTPPort > 65535 {
		errs = append(errs, field.Invalid(p.Child("httpPort"), v.HTTPPort, "must be a port, 1 to 65535"))
	}
	return errs
}
