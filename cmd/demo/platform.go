// The platform's own parts, as the field runs them beside the hub: cert-manager's
// controller with a CA ClusterIssuer (every Certificate the manager orders becomes a
// Secret the edge serves), a Knot DNS server authoritative for the platform's target
// domain, and external-dns writing each hub Gateway's DNSEndpoint into it.

package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/miekg/dns"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"anchorage/api/v1alpha"
	"anchorage/internal/harness"
	"anchorage/pkg/gateway"
)

// startPlatform starts cert-manager, Knot and external-dns against the hub, in the
// demo's session (stopped by stopAll).
func (d *demo) startPlatform(ctx context.Context) error {
	session, err := harness.NewSession("demo", d.out)
	if err != nil {
		return err
	}
	d.session = session
	cfg := gateway.DefaultConfig()
	return session.Run(func() {
		began := time.Now()
		cm := harness.StartCertManager(ctx, session, d.hub.Config, harness.CertManagerOptions{})
		if _, err := harness.CreateCAClusterIssuer(ctx, d.hub.Client, cfg.CertificateIssuer.Name, cm.ClusterResourceNamespace); err != nil {
			session.Fatal(err)
		}
		d.say("cert-manager's controller against the hub, ClusterIssuer %s (a CA): every Certificate the manager orders becomes a Secret (%.1fs)",
			cfg.CertificateIssuer.Name, time.Since(began).Seconds())
		d.zone = harness.StartDNSServer(session, cfg.Platform.TargetDomain)
		harness.StartExternalDNS(ctx, session, d.hub.Config, d.zone, harness.ExternalDNSOptions{})
		d.say("Knot DNS at %s, authoritative for %s, the platform's domain; external-dns writes every hub", d.zone.Addr, cfg.Platform.TargetDomain)
		d.say("Gateway's DNSEndpoint into it")
	})
}

// showCanonicalName narrates px's platform name: status.canonicalHostname, the A record
// external-dns published for it, and the edge's virtual hosts for it, which must send
// traffic to cluster like its own hostname's. It returns the name.
func (d *demo) showCanonicalName(ctx context.Context, px *proxy, v *harness.EdgeVerdict, cluster string) (string, error) {
	obj := &v1alpha.HTTPProxy{}
	if err := px.project.plane.Client.Get(ctx, client.ObjectKey{Namespace: px.project.namespace, Name: px.name}, obj); err != nil {
		return "", err
	}
	name := obj.Status.CanonicalHostname
	if name == "" {
		return "", fmt.Errorf("%s has no status.canonicalHostname", px)
	}
	var answer []string
	err := poll(ctx, programmedWithin, name+" to resolve", func(ctx context.Context) (bool, error) {
		m, err := d.zone.Query(ctx, name, dns.TypeA)
		if err != nil {
			return false, err
		}
		answer = answer[:0]
		for _, rr := range m.Answer {
			if a, ok := rr.(*dns.A); ok {
				answer = append(answer, a.A.String())
			}
		}
		return len(answer) > 0, nil
	})
	if err != nil {
		return "", err
	}
	routes, err := harness.Resources[harness.EnvoyRouteConfig](v, harness.XDSRoutes)
	if err != nil {
		return "", err
	}
	d.say("  its platform name, status.canonicalHostname: %s", name)
	d.say("  dig @%s %s A: %v (the edge's address, published by external-dns)", d.zone.Addr, name, answer)
	d.say("  the edge serves it on %d virtual hosts (HTTP and HTTPS, a Certificate from cert-manager)", harness.VirtualHostsFor(routes, name))
	if len(answer) != 1 || answer[0] != d.edge.Address {
		return "", fmt.Errorf("%s resolves to %v, want the edge's %s", name, answer, d.edge.Address)
	}
	if !routesTo(routes, name, cluster) {
		return "", fmt.Errorf("the edge's virtual hosts for %s send nothing to cluster %s", name, cluster)
	}
	return name, nil
}

// routesTo reports whether a virtual host of host sends traffic to cluster.
func routesTo(routes []harness.EnvoyRouteConfig, host, cluster string) bool {
	for _, rc := range routes {
		for _, vh := range rc.VirtualHosts {
			if !slices.Contains(vh.Domains, host) {
				continue
			}
			for _, r := range vh.Routes {
				if r.Route != nil && r.Route.Cluster == cluster {
					return true
				}
			}
		}
	}
	return false
}
