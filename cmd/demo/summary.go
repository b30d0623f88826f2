// The end: the final check of the hub, the summary and, with --keep, how to look around.

package main

import (
	"context"
	"fmt"
	"net"
	"strings"

	"anchorage/pkg/anchor"
)

// check reads the final state of the hub: stranded anchors left, live objects lost.
func (d *demo) check(ctx context.Context) error {
	var stranded []hubObject
	for _, s := range d.stranded {
		if s.planted.anchor.name != "" {
			stranded = append(stranded, s.planted.anchor)
		}
	}
	left, err := countPresent(ctx, d.hub.Client, stranded)
	if err != nil {
		return err
	}
	live, kept, err := d.liveCount(ctx)
	if err != nil {
		return err
	}
	if d.res.owners, err = d.owners(ctx); err != nil {
		return err
	}
	d.res.strandedLeft, d.res.collected = left, len(stranded)-left
	d.res.liveLost, d.res.liveKept = live-kept, kept
	d.res.checked = true
	return nil
}

// explore prints how to look around while --keep holds everything up.
func (d *demo) explore() {
	fmt.Fprintf(d.out, "\n%s Everything keeps running until you interrupt the demo (Ctrl-C). To look around:\n", d.elapsed())
	d.say("export KUBECONFIG=%s   # the hub", d.hubKubeconfig)
	d.say("kubectl get leases -n %s", providerNamespace)
	d.say("kubectl get namespaces,configmaps,gateways,httproutes,certificates -A -l %s", anchor.LabelClusterName)
	for _, p := range d.projects {
		d.say("kubectl --kubeconfig=%s get httpproxies,gateways,httproutes,domains -n %s   # project %s", p.kubeconfig, p.namespace, p.name)
	}
	if d.dns != nil && d.acmeRecord != "" {
		host, port, _ := net.SplitHostPort(d.dns.addr)
		d.say("dig @%s -p %s TXT %s   # the tenants' nameserver", host, port, d.acmeRecord)
	}
	for _, r := range d.replicas {
		if r.running() {
			d.say("%s: metrics http://%s/metrics, log %s", r.name, r.metrics, r.logPath)
		}
	}
}

// summary prints the outcome; its last line is machine-readable.
func (d *demo) summary() {
	r := d.res
	fmt.Fprintf(d.out, "\n%s Summary\n", d.elapsed())
	var owned []string
	for _, p := range d.projects {
		if o := r.owners[p.name]; o != "" {
			owned = append(owned, p.name+" owned by "+o)
		} else {
			owned = append(owned, p.name+" unowned")
		}
	}
	d.say("projects   %d: %s", r.projects, strings.Join(owned, ", "))
	killed := "none killed"
	if r.killed != "" {
		killed = r.killed + " killed"
	}
	d.say("replicas   %d started, %s", r.replicas, killed)
	d.say("anchors    live: %d objects kept, %d lost; stranded: %d collected, %d left; %d deleted with their proxy",
		r.liveKept, r.liveLost, r.collected, r.strandedLeft, r.deletedWithProxy)
	if r.domainVerified != "" {
		d.say("domains    %s", r.domainVerified)
	}
	if r.hostnameRefused != "" {
		d.say("           %s", r.hostnameRefused)
	}
	if len(r.handovers) == 0 {
		d.say("hand-over  none measured")
	}
	for _, h := range r.handovers {
		d.say("hand-over  %s", h)
	}
	fmt.Fprintf(d.out, "summary: projects=%d replicas=%d stranded_left=%d live_lost=%d handover_s=%.2f\n",
		r.projects, r.replicas, r.strandedLeft, r.liveLost, r.handover.Seconds())
}
