// Verified domains: a hostname reaches the hub only while a Verified Domain in the
// proxy's namespace covers it. The demo's tenants prove they own their domains with a
// TXT record in the demo's DNS server (dns.go); a hostname under a domain another
// project proved stays off the hub.

package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"anchorage/api/v1alpha"
	"anchorage/pkg/gateway"
)

// The conditions a tenant reads on a proxy while a hostname is not verified
// (pkg/gateway hostname_claims.go).
const (
	conditionHostnamesVerified = "HostnamesVerified"
	hostnameConditionVerified  = "Verified"
)

// verifyWithin bounds a Domain's verification once its record is published: the
// replicas check a pending Domain every domainCheckEvery.
const verifyWithin = time.Minute

// domainCheckEvery is how often the replicas check a pending Domain in this demo, for
// its first two minutes (domainVerification.retryIntervals, replicas.go); the default
// schedule starts at 5s.
const domainCheckEvery = time.Second

// startDNSStep starts the tenants' DNS server; the replicas' configuration names it.
func (d *demo) startDNSStep(context.Context) error {
	var err error
	if d.dns, err = startDNS(acmeDomain, initechDomain); err != nil {
		return err
	}
	d.say("a nameserver of the demo's on %s (UDP and TCP), authoritative for %s and %s: it stands for the", d.dns.addr, acmeDomain, initechDomain)
	d.say("tenants' DNS providers, and answers only the TXT records the demo publishes in it, as the tenants would")
	d.say("the replicas ask it, and only it, for verification records (domainVerification.nameservers: [%q])", d.dns.addr)
	return nil
}

// createNamespaces creates each project's namespace for its proxies.
func (d *demo) createNamespaces(ctx context.Context) error {
	for _, p := range d.projects {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: p.namespace}}
		if err := p.plane.Client.Create(ctx, ns); err != nil {
			return fmt.Errorf("creating namespace %s in project %s: %w", p.namespace, p.name, err)
		}
		p.nsUID = ns.UID
	}
	return nil
}

// verifyDomain creates acme's first proxy, shows it held back until acme proves it owns
// the domain, publishes the TXT record the created Domain asks for, and waits for the
// Domain to be Verified and the proxy Programmed with its hostname on the hub.
func (d *demo) verifyDomain(ctx context.Context) error {
	if err := d.startEdge(); err != nil {
		return err
	}
	if err := d.createNamespaces(ctx); err != nil {
		return err
	}
	acme := d.projects[0]
	host := "shop." + acmeDomain
	px, err := d.createProxy(ctx, acme, "storefront", host)
	if err != nil {
		return err
	}
	created := time.Now()
	d.say("%-8s HTTPProxy %s/%s  %s -> %s; no Domain in namespace %s covers %s yet",
		acme.name, acme.namespace, px.name, px.host, originOf(px.host), acme.namespace, host)
	if err := d.showRefused(ctx, px, nil); err != nil {
		return err
	}

	// The Domain the manager created for the hostname, and the proof it asks for.
	dom, err := d.waitDomain(ctx, acme, acmeDomain, "the manager to issue the proof of Domain "+acmeDomain, func(dm *v1alpha.Domain) bool {
		return dm.Status.Verification != nil && dm.Status.Verification.DNSRecord.Content != ""
	})
	if err != nil {
		return err
	}
	v := dom.Status.Verification
	d.say("the manager created Domain %s/%s for it, named after the registrable domain of %s: %s;",
		acme.namespace, dom.Name, host, conditionBrief(dom.Status.Conditions, v1alpha.DomainConditionVerified))
	d.say("its status.verification asks for either proof:")
	d.say("  dnsRecord  %s %s %q", v.DNSRecord.Name, v.DNSRecord.Type, v.DNSRecord.Content)
	d.say("  httpToken  %s serving %q", v.HTTPToken.URL, v.HTTPToken.Body)
	record, token := v.DNSRecord.Name, v.DNSRecord.Content
	dom, err = d.waitDomain(ctx, acme, acmeDomain, "a first check of Domain "+acmeDomain, func(dm *v1alpha.Domain) bool {
		c := meta.FindStatusCondition(dm.Status.Conditions, v1alpha.DomainConditionVerifiedDNS)
		return c != nil && c.Reason == v1alpha.DomainReasonRecordNotFound
	})
	if err != nil {
		return err
	}
	d.say("a replica looked the record up at %s (the demo's nameserver): %s", d.dns.addr, conditionString(dom.Status.Conditions, v1alpha.DomainConditionVerifiedDNS))

	d.dns.publish(record, token)
	d.acmeRecord = record
	published := time.Now()
	d.say("acme publishes the record at its DNS provider (the demo's nameserver): %s TXT %q", record, token)
	dom, err = d.waitDomain(ctx, acme, acmeDomain, "Domain "+acmeDomain+" to be Verified", func(dm *v1alpha.Domain) bool {
		return meta.IsStatusConditionTrue(dm.Status.Conditions, v1alpha.DomainConditionVerified)
	})
	if err != nil {
		return err
	}
	d.say("%.1fs after the record was published (a pending Domain is checked every %s here; %d TXT lookups of it so far), Domain %s/%s is",
		time.Since(published).Seconds(), domainCheckEvery, d.dns.questions(record), acme.namespace, dom.Name)
	d.say("  %s", conditionString(dom.Status.Conditions, v1alpha.DomainConditionVerified))
	if err := d.waitProgrammed(ctx, px); err != nil {
		return err
	}
	obj, err := d.getProxy(ctx, px)
	if err != nil {
		return err
	}
	d.say("HTTPProxy %s/%s Programmed=True %.1fs after the record was published (%.1fs after the proxy was created):",
		acme.namespace, px.name, time.Since(published).Seconds(), time.Since(created).Seconds())
	d.say("  %s", conditionString(obj.Status.Conditions, conditionHostnamesVerified))
	on, reached, err := d.onHub(ctx, acme, px.name, host)
	if err != nil {
		return err
	}
	d.say("on the hub: %s", on)
	if !reached {
		return fmt.Errorf("the verified hostname %s is not on the hub: %s", host, on)
	}
	d.res.domainVerified = fmt.Sprintf("%s (project acme) verified by its TXT record %.1fs after it was published", acmeDomain, time.Since(published).Seconds())
	return nil
}

// refuseUnverified has initech ask for a hostname under acme's domain and shows what
// initech sees: the hostname stays off the hub, and initech's own Domain for it cannot
// be verified by the record acme published.
func (d *demo) refuseUnverified(ctx context.Context) error {
	initech := d.projects[1]
	host := "login." + acmeDomain
	obj := proxyObject(initech, "lookalike", host, originOf(host))
	if err := initech.plane.Client.Create(ctx, obj); err != nil {
		return fmt.Errorf("creating HTTPProxy lookalike in project %s: %w", initech.name, err)
	}
	px := &proxy{project: initech, name: "lookalike", host: host}
	d.refused = px
	d.say("%-8s HTTPProxy %s/%s  %s: a hostname under %s, which acme verified in its own namespace, not initech",
		initech.name, initech.namespace, px.name, host, acmeDomain)
	dom, err := d.waitDomain(ctx, initech, acmeDomain, "a check of initech's Domain "+acmeDomain, func(dm *v1alpha.Domain) bool {
		c := meta.FindStatusCondition(dm.Status.Conditions, v1alpha.DomainConditionVerifiedDNS)
		return c != nil && c.Reason == v1alpha.DomainReasonContentMismatch
	})
	if err != nil {
		return err
	}
	if err := d.showRefused(ctx, px, dom); err != nil {
		return err
	}
	d.say("Domain %s/%s, created for initech, asks for a token of its own; the record holds acme's:", initech.namespace, dom.Name)
	d.say("  %s", conditionString(dom.Status.Conditions, v1alpha.DomainConditionVerifiedDNS))
	d.say("  %s", conditionBrief(dom.Status.Conditions, v1alpha.DomainConditionVerified))
	d.say("verifying a Domain in one namespace verifies nothing in another: only who controls %s's DNS can publish initech's token", acmeDomain)
	d.res.hostnameRefused = fmt.Sprintf("%s (project initech) refused: Domain %s is not verified in namespace %s", host, acmeDomain, initech.namespace)
	return nil
}

// verifyAhead has initech verify its domain before its proxies exist: it creates the
// Domain itself, publishes the TXT record its status asks for and waits for Verified.
func (d *demo) verifyAhead(ctx context.Context, p *project, domainName string) error {
	dom := &v1alpha.Domain{ObjectMeta: metav1.ObjectMeta{Namespace: p.namespace, Name: domainName}, Spec: v1alpha.DomainSpec{DomainName: domainName}}
	if err := p.plane.Client.Create(ctx, dom); err != nil {
		return fmt.Errorf("creating Domain %s in project %s: %w", domainName, p.name, err)
	}
	began := time.Now()
	dom, err := d.waitDomain(ctx, p, domainName, "the manager to issue the proof of Domain "+domainName, func(dm *v1alpha.Domain) bool {
		return dm.Status.Verification != nil && dm.Status.Verification.DNSRecord.Content != ""
	})
	if err != nil {
		return err
	}
	v := dom.Status.Verification
	d.dns.publish(v.DNSRecord.Name, v.DNSRecord.Content)
	d.say("%-8s created Domain %s/%s itself, ahead of its proxies, and published the record its status asked for: %s TXT %q",
		p.name, p.namespace, domainName, v.DNSRecord.Name, v.DNSRecord.Content)
	dom, err = d.waitDomain(ctx, p, domainName, "Domain "+domainName+" to be Verified", func(dm *v1alpha.Domain) bool {
		return meta.IsStatusConditionTrue(dm.Status.Conditions, v1alpha.DomainConditionVerified)
	})
	if err != nil {
		return err
	}
	d.say("%-8s Domain %s/%s %s, %.1fs after it was created", p.name, p.namespace, domainName,
		conditionBrief(dom.Status.Conditions, v1alpha.DomainConditionVerified), time.Since(began).Seconds())
	return nil
}

// showRefused waits until the proxy reports its hostname unverified, prints what the
// tenant sees, and shows that the hub holds no listener, Certificate or claim for it.
// dom, when set, is the pending Domain whose token the message must name.
func (d *demo) showRefused(ctx context.Context, px *proxy, dom *v1alpha.Domain) error {
	var obj *v1alpha.HTTPProxy
	err := poll(ctx, programmedWithin, px.String()+" to report "+px.host+" unverified", func(ctx context.Context) (bool, error) {
		var err error
		if obj, err = d.getProxy(ctx, px); err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(obj.Status.Conditions, conditionHostnamesVerified)
		if c == nil || c.Status != metav1.ConditionFalse || c.ObservedGeneration != obj.Generation {
			return false, nil
		}
		hc := hostnameCondition(obj, px.host, hostnameConditionVerified)
		if hc == nil || hc.Status != metav1.ConditionFalse {
			return false, nil
		}
		// The message names the token once the Domain has one.
		return dom == nil || dom.Status.Verification == nil || strings.Contains(hc.Message, dom.Status.Verification.DNSRecord.Content), nil
	})
	if err != nil {
		return err
	}
	d.say("what the tenant sees on HTTPProxy %s/%s:", px.project.namespace, px.name)
	for _, typ := range []string{v1alpha.ConditionProgrammed, conditionHostnamesVerified} {
		d.say("  %s", conditionString(obj.Status.Conditions, typ))
	}
	d.say("  status.hostnameStatuses[%s]:", px.host)
	verified := hostnameCondition(obj, px.host, hostnameConditionVerified)
	d.say("    %s", conditionString([]metav1.Condition{*verified}, hostnameConditionVerified))
	if c := hostnameCondition(obj, px.host, "Available"); c != nil {
		if c.Message == verified.Message {
			d.say("    %s, the same message", conditionBrief([]metav1.Condition{*c}, "Available"))
		} else {
			d.say("    %s", conditionString([]metav1.Condition{*c}, "Available"))
		}
	}
	on, reached, err := d.onHub(ctx, px.project, px.name, px.host)
	if err != nil {
		return err
	}
	d.say("on the hub: %s", on)
	if reached {
		return fmt.Errorf("the unverified hostname %s reached the hub: %s", px.host, on)
	}
	return nil
}

// onHub says what the hub holds for host in the project's mapped namespace: the
// downstream Gateways' listeners for it (and those of the proxy's Gateway, gatewayName), its Certificate and its hostname claim; reached
// reports whether any of them is there.
func (d *demo) onHub(ctx context.Context, p *project, gatewayName, host string) (on string, reached bool, err error) {
	c := d.hub.Client
	var parts []string
	gws := &gatewayv1.GatewayList{}
	if err = c.List(ctx, gws, client.InNamespace(p.hubNamespace())); err != nil {
		return "", false, fmt.Errorf("listing the hub's Gateways: %w", err)
	}
	listeners := 0
	for _, gw := range gws.Items {
		for _, l := range gw.Spec.Listeners {
			if ptr.Deref(l.Hostname, "") == gatewayv1.Hostname(host) {
				listeners++
				parts = append(parts, fmt.Sprintf("Gateway %s listener %s", gw.Name, l.Name))
			}
		}
	}
	if listeners == 0 {
		s := fmt.Sprintf("no Gateway listener for %s in %s", host, shortName(p.hubNamespace()))
		for _, gw := range gws.Items {
			if gw.Name == gatewayName {
				var names []string
				for _, l := range gw.Spec.Listeners {
					names = append(names, string(l.Name))
				}
				s += fmt.Sprintf(" (Gateway %s is there, with listeners [%s])", gw.Name, strings.Join(names, " "))
			}
		}
		parts = append(parts, s)
	}
	certs := &unstructured.UnstructuredList{}
	certs.SetGroupVersionKind(gateway.CertificateGVK.GroupVersion().WithKind(gateway.CertificateGVK.Kind + "List"))
	if err = c.List(ctx, certs, client.InNamespace(p.hubNamespace())); err != nil {
		return "", false, fmt.Errorf("listing the hub's Certificates: %w", err)
	}
	var certNames []string
	for _, cert := range certs.Items {
		names, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
		if slices.Contains(names, host) {
			certNames = append(certNames, cert.GetName())
		}
	}
	if len(certNames) == 0 {
		parts = append(parts, "no Certificate")
	} else {
		parts = append(parts, "Certificate "+strings.Join(certNames, ", "))
	}
	claimNS := gateway.DefaultConfig().HostnameClaimsNamespace
	claim := &corev1.ConfigMap{}
	switch err = c.Get(ctx, client.ObjectKey{Namespace: claimNS, Name: host}, claim); {
	case apierrors.IsNotFound(err):
		parts = append(parts, fmt.Sprintf("no hostname claim (ConfigMap %s/%s)", claimNS, host))
	case err != nil:
		return "", false, fmt.Errorf("reading the claim of %s: %w", host, err)
	default:
		reached = true
		parts = append(parts, fmt.Sprintf("hostname claim ConfigMap %s/%s held by %s", claimNS, host, claim.Data["owner"]))
	}
	return strings.Join(parts, "; "), reached || listeners > 0 || len(certNames) > 0, nil
}

// waitDomain waits for the Domain name in p's proxy namespace to exist and satisfy ok.
func (d *demo) waitDomain(ctx context.Context, p *project, name, what string, ok func(*v1alpha.Domain) bool) (*v1alpha.Domain, error) {
	var dom *v1alpha.Domain
	err := poll(ctx, verifyWithin, what, func(ctx context.Context) (bool, error) {
		dom = &v1alpha.Domain{}
		if err := p.plane.Client.Get(ctx, client.ObjectKey{Namespace: p.namespace, Name: name}, dom); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return ok(dom), nil
	})
	return dom, err
}

// getProxy reads the proxy from its project.
func (d *demo) getProxy(ctx context.Context, px *proxy) (*v1alpha.HTTPProxy, error) {
	obj := &v1alpha.HTTPProxy{}
	err := px.project.plane.Client.Get(ctx, client.ObjectKey{Namespace: px.project.namespace, Name: px.name}, obj)
	return obj, err
}

// hostnameCondition returns the condition typ of host's entry in the proxy's
// status.hostnameStatuses, nil if none.
func hostnameCondition(obj *v1alpha.HTTPProxy, host, typ string) *metav1.Condition {
	for _, st := range obj.Status.HostnameStatuses {
		if st.Hostname == host {
			return meta.FindStatusCondition(st.Conditions, typ)
		}
	}
	return nil
}

// conditionBrief renders a condition without its message: Type=Status (Reason).
func conditionBrief(conds []metav1.Condition, typ string) string {
	c := meta.FindStatusCondition(conds, typ)
	if c == nil {
		return typ + " not reported"
	}
	return fmt.Sprintf("%s=%s (%s)", c.Type, c.Status, c.Reason)
}

// conditionString renders a condition as a tenant reads it: Type=Status (Reason): message.
func conditionString(conds []metav1.Condition, typ string) string {
	c := meta.FindStatusCondition(conds, typ)
	if c == nil {
		return typ + " not reported"
	}
	s := fmt.Sprintf("%s=%s (%s)", c.Type, c.Status, c.Reason)
	if c.Message != "" {
		s += ": " + c.Message
	}
	return s
}
