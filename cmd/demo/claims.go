// Replicas: started, ready and claiming the projects; who owns what, as the Leases say.

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"text/tabwriter"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"anchorage/internal/harness"
	"anchorage/pkg/shard"
)

// startReplicas starts three manager processes, waits until each is ready (its member
// Lease is valid) and every project is claimed.
func (d *demo) startReplicas(ctx context.Context) error {
	began := time.Now()
	saKubeconfig, err := serviceAccountKubeconfig(ctx, d.hub.Config)
	if err != nil {
		return err
	}
	if d.cfg.admin {
		d.say("they run as hub admins (--admin)")
	} else {
		d.say("they run as ServiceAccount %s/%s, bound only to config/default's ClusterRole and Role, as in a cluster", providerNamespace, serviceAccount)
	}
	configPath := filepath.Join(d.dir, configFile)
	if err := writeConfig(configPath, d.dns.addr); err != nil {
		return err
	}
	for _, name := range []string{"replica-a", "replica-b", "replica-c"} {
		kc := saKubeconfig
		if d.cfg.admin {
			if _, kc, err = d.hub.User("anchorage-"+name, "system:masters"); err != nil {
				return err
			}
		}
		path := filepath.Join(d.dir, name+".kubeconfig")
		if err := os.WriteFile(path, kc, 0o600); err != nil {
			return err
		}
		r, err := startReplica(d.cfg.manager, d.dir, configPath, name, path, d.cfg.logLevel)
		if err != nil {
			return err
		}
		d.replicas = append(d.replicas, r)
		d.say("%s  pid %d, metrics http://%s/metrics, log %s", name, r.proc.Pid(), r.metrics, r.logPath)
	}
	d.res.replicas = len(d.replicas)
	d.say("each runs: %s --config=%s --kubeconfig=<hub> --identity=<name>; the file holds the namespace %s, short resync and Lease timings,",
		filepath.Base(d.cfg.manager), configPath, providerNamespace)
	d.say("and domainVerification, on as by default: nameservers [%q], a pending Domain checked every %s for its first 2 minutes (by default every 5s, then 1m, then 5m)", d.dns.addr, domainCheckEvery)
	err = poll(ctx, claimWithin, "the replicas to become ready", func(ctx context.Context) (bool, error) {
		for _, r := range d.replicas {
			if !r.running() {
				return false, permanent(fmt.Errorf("%s exited; its log: %s", r.name, r.logPath))
			}
			if !r.ready(ctx) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return err
	}
	d.say("all three ready (member Leases valid) after %.1fs", time.Since(began).Seconds())
	err = poll(ctx, claimWithin, "every project to be claimed", func(ctx context.Context) (bool, error) {
		owners, err := d.owners(ctx)
		if err != nil {
			return false, err
		}
		for _, p := range d.projects {
			if owners[p.name] == "" {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return err
	}
	owners, err := d.owners(ctx)
	if err != nil {
		return err
	}
	for _, p := range d.projects {
		d.say("project %s claimed by %s", p.name, owners[p.name])
	}
	d.say("every project claimed %.1fs after the replicas started (a new coordinator first watches the Leases for one lease duration)", time.Since(began).Seconds())
	return nil
}

// owners maps each project to the pod that holds and has claimed it ("" otherwise).
func (d *demo) owners(ctx context.Context) (map[string]string, error) {
	leases, err := d.leases(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for i := range leases {
		if project := harness.ProjectOf(&leases[i]); project != "" {
			out[project] = shard.PodOf(harness.ClaimedHolder(&leases[i]))
		}
	}
	return out, nil
}

func (d *demo) leases(ctx context.Context) ([]coordinationv1.Lease, error) {
	var list coordinationv1.LeaseList
	if err := d.hub.Client.List(ctx, &list, client.InNamespace(providerNamespace)); err != nil {
		return nil, fmt.Errorf("listing Leases: %w", err)
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	return list.Items, nil
}

// showLeases prints the Leases as kubectl get leases does, then (with legend, what
// each Lease is and) who owns what.
func (d *demo) showLeases(ctx context.Context, legend bool) error {
	leases, err := d.leases(ctx)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(d.out, 0, 0, 3, ' ', 0)
	fmt.Fprintln(tw, "         NAME\tHOLDER\tAGE")
	for _, l := range leases {
		age := duration.HumanDuration(time.Since(l.CreationTimestamp.Time))
		fmt.Fprintf(tw, "         %s\t%s\t%s\n", l.Name, ptr.Deref(l.Spec.HolderIdentity, ""), age)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if legend {
		d.say("anchorage-member-<pod>: each replica's membership, held as <pod>/<incarnation> and renewed every %s", harness.FastTimings.RetryPeriod)
		d.say("anchorage-coordinator: the elected coordinator, which writes the project Leases")
		d.say("anchorage-project-<name>-<hash>: the project's owner (not renewed: valid while its holder's member Lease is)")
	}
	owners, err := d.owners(ctx)
	if err != nil {
		return err
	}
	for _, p := range d.projects {
		d.say("project %s is owned by %s", p.name, owners[p.name])
	}
	return nil
}
