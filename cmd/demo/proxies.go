// Proxies: created in the projects, Programmed, and the anchors and objects they produce on the hub.

package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"anchorage/api/v1alpha"
	"anchorage/pkg/anchor"
)

// createProxies creates the other proxies: acme's under its verified domain, initech's
// once initech has verified its own; it waits until each is Programmed and shows what
// they produced on the hub.
func (d *demo) createProxies(ctx context.Context) error {
	acme, initech := d.projects[0], d.projects[1]
	if err := d.verifyAhead(ctx, initech, initechDomain); err != nil {
		return err
	}
	hosts := map[*project][][2]string{
		acme:    {{"checkout", "pay." + acmeDomain}},
		initech: {{"blog", "blog." + initechDomain}, {"feeds", "feeds." + initechDomain}},
	}
	for _, p := range d.projects {
		for _, h := range hosts[p] {
			px, err := d.createProxy(ctx, p, h[0], h[1])
			if err != nil {
				return err
			}
			d.say("%-8s HTTPProxy %s/%s  %s -> %s", p.name, p.namespace, px.name, px.host, originOf(px.host))
		}
	}
	began := time.Now()
	for _, px := range d.proxies {
		if err := d.waitProgrammed(ctx, px); err != nil {
			return err
		}
	}
	d.say("all %d Programmed=True %.1fs after the last was created (their hostnames under Verified Domains); on the hub:", len(d.proxies), time.Since(began).Seconds())
	return d.showHub(ctx)
}

// originOf is the backend of the proxy serving host: the tenant's origin by a public
// name (pay.acme.example serves from https://pay.acme.example.com), since a backend's
// name must be a public DNS name (netpolicy.RefusedName) and .example is no public
// suffix. The tenants' hostnames stay under .example: the demo's nameserver verifies
// them, and no one else can.
func originOf(host string) string {
	return "https://" + strings.TrimSuffix(host, ".example") + ".example.com"
}

// proxyObject is an HTTPProxy in p's namespace serving host from endpoint.
func proxyObject(p *project, name, host, endpoint string) *v1alpha.HTTPProxy {
	return &v1alpha.HTTPProxy{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: p.namespace},
		Spec: v1alpha.HTTPProxySpec{
			Hostnames: []gatewayv1.Hostname{gatewayv1.Hostname(host)},
			Rules: []v1alpha.HTTPProxyRule{{
				Matches: []gatewayv1.HTTPRouteMatch{{Path: &gatewayv1.HTTPPathMatch{
					Type: ptr.To(gatewayv1.PathMatchPathPrefix), Value: ptr.To("/"),
				}}},
				Backends: []v1alpha.HTTPProxyBackend{{Endpoint: endpoint}},
			}},
		},
	}
}

// createProxy creates a proxy serving host and remembers it.
func (d *demo) createProxy(ctx context.Context, p *project, name, host string) (*proxy, error) {
	obj := proxyObject(p, name, host, originOf(host))
	if err := p.plane.Client.Create(ctx, obj); err != nil {
		return nil, fmt.Errorf("creating HTTPProxy %s in project %s: %w", name, p.name, err)
	}
	px := &proxy{project: p, name: name, host: host}
	d.proxies = append(d.proxies, px)
	return px, nil
}

// waitProgrammed waits for the proxy's Programmed condition and records the anchors
// of its upstream Gateway and HTTPRoute with what hangs on them.
func (d *demo) waitProgrammed(ctx context.Context, px *proxy) error {
	c := px.project.plane.Client
	key := client.ObjectKey{Namespace: px.project.namespace, Name: px.name}
	return poll(ctx, programmedWithin, px.String()+" to be Programmed", func(ctx context.Context) (bool, error) {
		obj := &v1alpha.HTTPProxy{}
		if err := c.Get(ctx, key, obj); err != nil {
			return false, err
		}
		cond := meta.FindStatusCondition(obj.Status.Conditions, v1alpha.ConditionProgrammed)
		if cond == nil || cond.Status != metav1.ConditionTrue || cond.ObservedGeneration != obj.Generation {
			return false, nil
		}
		gw, route := &gatewayv1.Gateway{}, &gatewayv1.HTTPRoute{}
		if err := c.Get(ctx, key, gw); err != nil {
			return false, err
		}
		if err := c.Get(ctx, key, route); err != nil {
			return false, err
		}
		views, err := anchorsIn(ctx, d.hub.Client, px.project.hubNamespace())
		if err != nil {
			return false, err
		}
		px.anchors = nil
		for _, v := range views {
			if v.anchor.name == anchor.Name(gw.UID) || v.anchor.name == anchor.Name(route.UID) {
				if len(v.dependents) == 0 {
					return false, nil
				}
				px.anchors = append(px.anchors, v)
			}
		}
		return len(px.anchors) == 2, nil
	})
}

// showHub prints every mapped namespace on the hub with its anchors and their
// dependents.
func (d *demo) showHub(ctx context.Context) error {
	namespaces, err := mappedNamespaces(ctx, d.hub.Client)
	if err != nil {
		return err
	}
	for _, ns := range namespaces {
		upstream := "labels: none (an older namespace)"
		if v, ok := ns.Labels[anchor.LabelNamespace]; ok {
			upstream = fmt.Sprintf("mirrors namespace %s of %s", v, ns.Labels[anchor.LabelClusterName])
		}
		d.say("Namespace %s  %s", ns.Name, upstream)
		views, err := anchorsIn(ctx, d.hub.Client, ns.Name)
		if err != nil {
			return err
		}
		for _, v := range views {
			d.say("  ConfigMap %s  anchor of %s", v.anchor.name, v.owner())
			var deps []string
			for _, o := range v.dependents {
				deps = append(deps, o.String())
			}
			d.say("    holds %s", strings.Join(deps, ", "))
		}
	}
	return nil
}

// liveCount returns how many hub objects of the live proxies the demo expects, and how
// many are there with the UIDs they had.
func (d *demo) liveCount(ctx context.Context) (int, int, error) {
	var objs []hubObject
	for _, px := range d.proxies {
		objs = append(objs, px.objects()...)
	}
	n, err := countPresent(ctx, d.hub.Client, objs)
	return len(objs), n, err
}
