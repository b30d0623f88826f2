// The edge and a request served: Envoy Gateway's translator reads the hub as an edge
// would and writes the status the proxies' Programmed follows; a proxy in front of a
// backend the demo runs on loopback, and what the edge makes of it.

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"anchorage/api/v1alpha"
	"anchorage/internal/harness"
	"anchorage/internal/testenv"
	"anchorage/pkg/gateway"
)

// edgeEvery is how often the demo's edge reads the hub.
const edgeEvery = time.Second

// startEdge starts the demo's edge over every mapped namespace holding a Gateway.
func (d *demo) startEdge() error {
	bin, err := testenv.EdgeTranslateBinary()
	if err != nil {
		return err
	}
	if d.edge, err = harness.NewEdge(d.hub.Client, gateway.DefaultConfig().DownstreamGatewayClassName); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		d.edge.Serve(ctx, harness.MappedNamespacesWithGateways(d.hub.Client), edgeEvery)
	}()
	d.stopEdge = func() { cancel(); <-done }
	d.say("an edge reads the hub: Envoy Gateway's translator (%s) writes the status of each", bin)
	d.say("downstream Gateway and HTTPRoute, as an edge's controller does; Programmed follows it")
	return nil
}

// serveRequest programs a proxy in front of a backend on loopback and shows the route
// the edge translated for it: the cluster, its TLS, the Host and path rewrite.
func (d *demo) serveRequest(ctx context.Context) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("starting the backend: %w", err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from the demo's backend: Host %s, path %s", r.Host, r.URL.Path)
	}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	p := d.projects[0]
	endpoint := fmt.Sprintf("http://%s:%d/greeting", backendHost, port)
	obj := &v1alpha.HTTPProxy{
		ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: p.namespace},
		Spec: v1alpha.HTTPProxySpec{
			Hostnames: []gatewayv1.Hostname{helloHost},
			Rules: []v1alpha.HTTPProxyRule{{
				Matches:  []gatewayv1.HTTPRouteMatch{{Path: &gatewayv1.HTTPPathMatch{Type: ptr.To(gatewayv1.PathMatchPathPrefix), Value: ptr.To("/hello")}}},
				Backends: []v1alpha.HTTPProxyBackend{{Endpoint: endpoint}},
			}},
		},
	}
	if err := p.plane.Client.Create(ctx, obj); err != nil {
		return fmt.Errorf("creating HTTPProxy hello: %w", err)
	}
	px := &proxy{project: p, name: "hello", host: helloHost}
	d.proxies = append(d.proxies, px)
	d.say("%-8s HTTPProxy %s/hello  %s/hello -> %s (a server of the demo's, on loopback, by a public name)", p.name, p.namespace, helloHost, endpoint)
	began := time.Now()
	if err := d.waitProgrammed(ctx, px); err != nil {
		return err
	}
	d.say("Programmed=True %.1fs later; what the edge translated it to:", time.Since(began).Seconds())
	v, err := d.edge.Translate(ctx, p.hubNamespace())
	if err != nil {
		return err
	}
	cluster, action, err := routeOf(v, p.hubNamespace(), "hello")
	if err != nil {
		return err
	}
	d.say("  cluster  %s  %s, endpoints %s, TLS: %s", cluster.Name, cluster.Type, strings.Join(cluster.Endpoints(), " "), tlsOf(cluster))
	d.say("  route    %s/hello -> Host rewritten to %s, prefix /hello replaced by %s", helloHost, action.HostRewriteLiteral, action.PrefixRewrite)
	if https, _, err := routeOf(v, p.hubNamespace(), d.proxies[0].name); err == nil {
		d.say("  and the https backend of %s: cluster %s, TLS: %s", d.proxies[0].name, https.Name, tlsOf(https))
	}

	// No Envoy comes from Debian's packages: send the request the route describes to
	// the endpoint of the cluster, as the edge's Envoy would forward it.
	eps := cluster.Endpoints()
	if len(eps) != 1 {
		return fmt.Errorf("cluster %s has endpoints %v, want one", cluster.Name, eps)
	}
	path := action.PrefixRewrite + "/world"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+eps[0]+path, nil)
	if err != nil {
		return err
	}
	req.Host = action.HostRewriteLiteral
	resp, err := loopbackClient.Do(req)
	if err != nil {
		return fmt.Errorf("sending the request the route describes: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	d.say("no Envoy in Debian's packages: GET %s/hello/world forwarded as the route says,", helloHost)
	d.say("  to %s%s with Host %s: %s %q", eps[0], path, req.Host, resp.Status, string(body))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("the backend answered %s", resp.Status)
	}
	canonical, err := d.showCanonicalName(ctx, px, v, cluster.Name)
	if err != nil {
		return err
	}
	d.say("  so GET http://%s/hello/world reaches the edge at that address and the same cluster %s", canonical, cluster.Name)
	return nil
}

// helloHost is the hostname of the proxy in front of the demo's backend: under acme's
// verified domain, so it is programmed at once.
const helloHost = "hello." + acmeDomain

// backendHost is the demo backend's name: a public DNS name, as every backend name must
// be (netpolicy.RefusedName), which the demo's client resolves to its server on
// loopback (loopbackClient), standing in for the public DNS an edge would ask.
const backendHost = "backend.demo.example.com"

// loopbackClient reaches backendHost on 127.0.0.1.
var loopbackClient = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
	DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		if host == backendHost {
			addr = net.JoinHostPort("127.0.0.1", port)
		}
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	},
}}

// routeOf returns the cluster of rule 0 of the proxy's route in v, and the route action
// sending traffic to it.
func routeOf(v *harness.EdgeVerdict, hubNS, name string) (harness.EnvoyCluster, harness.EnvoyRouteAction, error) {
	clusters, err := harness.Resources[harness.EnvoyCluster](v, harness.XDSCluster)
	if err != nil {
		return harness.EnvoyCluster{}, harness.EnvoyRouteAction{}, err
	}
	routes, err := harness.Resources[harness.EnvoyRouteConfig](v, harness.XDSRoutes)
	if err != nil {
		return harness.EnvoyCluster{}, harness.EnvoyRouteAction{}, err
	}
	prefix := fmt.Sprintf("httproute/%s/%s/rule/0", hubNS, name)
	for _, c := range clusters {
		if c.Name != prefix && !strings.HasPrefix(c.Name, prefix+"/") {
			continue
		}
		if acts := harness.RewritesTo(routes, c.Name); len(acts) > 0 {
			return c, acts[0], nil
		}
	}
	return harness.EnvoyCluster{}, harness.EnvoyRouteAction{}, errors.New("the edge has no route to a cluster of " + prefix)
}

// tlsOf says how the cluster connects to its backend.
func tlsOf(c harness.EnvoyCluster) string {
	snis, names := c.SNIAndNames()
	if len(snis) == 0 {
		return "none (an http backend)"
	}
	return fmt.Sprintf("SNI %s, certificate checked for %s", strings.Join(snis, " "), strings.Join(names, " "))
}
