package harness

import (
	"context"
	"fmt"
	"os"
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"anchorage/internal/app"
	"anchorage/pkg/config"
	"anchorage/pkg/shard"
)

// FastTimings are the shortened protocol timings every replica outside production runs
// with: the integration tests' in-process managers (WithTimings) and the demo's and
// bench's manager processes (SetTimings), so a hand-over takes seconds, not the
// production defaults' tens of seconds. The claim deadline leaves room for engaging a
// project's informers on a loaded 2-core machine running three replicas.
var FastTimings = func() shard.Timings {
	t := shard.NewTimings(3*time.Second, 2*time.Second, 400*time.Millisecond)
	t.ClaimDeadline = 8 * time.Second
	return t
}()

// WithTimings sets an in-process manager's protocol timings.
func WithTimings(t shard.Timings) func(*app.Options) {
	return func(o *app.Options) { o.Timings = t }
}

// WriteConfig writes a manager configuration file (pkg/config) to path for a manager
// process's --config: the defaults, as a deployed replica's file starts, changed by edit
// (nil changes nothing). The processes the demo and bench start take every setting the
// replicas share from this file, as deployed replicas do. A configuration Validate
// refuses is not written, so a mistake fails the caller, not a process whose log must be
// read.
func WriteConfig(path string, edit func(*config.ManagerConfiguration)) error {
	c := config.Default()
	if edit != nil {
		edit(&c)
	}
	if err := c.Validate(); err != nil {
		return fmt.Errorf("manager configuration for %s: %w", path, err)
	}
	data, err := yaml.Marshal(c)
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o600)
}

// SetTimings sets the four protocol timings of a configuration file (sharding.*) to t's,
// so a manager process runs the timings an in-process manager gets from WithTimings. A
// zero ClaimDeadline leaves the key out: 2 x leaseDuration, as in shard.Timings. The
// other timings take their defaults from these four in both.
func SetTimings(c *config.ManagerConfiguration, t shard.Timings) {
	c.Sharding.LeaseDuration = metav1.Duration{Duration: t.LeaseDuration}
	c.Sharding.RenewDeadline = metav1.Duration{Duration: t.RenewDeadline}
	c.Sharding.RetryPeriod = metav1.Duration{Duration: t.RetryPeriod}
	c.Sharding.ClaimDeadline = nil
	if t.ClaimDeadline != 0 {
		c.Sharding.ClaimDeadline = &metav1.Duration{Duration: t.ClaimDeadline}
	}
}

// projectLeaseRole is the LabelRole value of project Leases.
const projectLeaseRole = "project"

// ProjectOf returns the project a Lease coordinates, or "" when the Lease is no project
// Lease (a member or the coordinator Lease, or another program's).
func ProjectOf(l *coordinationv1.Lease) string {
	if l.Labels[shard.LabelRole] != projectLeaseRole {
		return ""
	}
	return l.Annotations[shard.AnnotationProject]
}

// ClaimedHolder returns the holder identity ("<pod>/<incarnation>") of a project Lease
// when that holder has also claimed the project, and "" otherwise. Holding is only the
// coordinator's assignment; the claim is the holder's word that it engaged the project
// and admits work for it, so the claimed holder is who owns the project. A holder that
// cannot reach the project never claims it, and the project moves on at the claim
// deadline.
func ClaimedHolder(l *coordinationv1.Lease) string {
	holder := ptr.Deref(l.Spec.HolderIdentity, "")
	if !shard.ClaimedBy(l.Annotations[shard.AnnotationClaim], holder) {
		return ""
	}
	return holder
}

// ProjectLeases lists the project Leases in the lease namespace, by project name.
func (e *Env) ProjectLeases(ctx context.Context) (map[string]coordinationv1.Lease, error) {
	var list coordinationv1.LeaseList
	if err := e.Hub.Client.List(ctx, &list, client.InNamespace(e.ProviderNamespace), client.MatchingLabels{shard.LabelRole: projectLeaseRole}); err != nil {
		return nil, fmt.Errorf("listing project Leases: %w", err)
	}
	out := map[string]coordinationv1.Lease{}
	for _, l := range list.Items {
		out[l.Annotations[shard.AnnotationProject]] = l
	}
	return out, nil
}

// ClaimedHolders maps each project with a Lease to its ClaimedHolder ("" while no
// holder has claimed it).
func (e *Env) ClaimedHolders(ctx context.Context) (map[string]string, error) {
	leases, err := e.ProjectLeases(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for p, l := range leases {
		out[p] = ClaimedHolder(&l)
	}
	return out, nil
}

// Incarnation implements app.Observer: it keeps m's incarnations.
func (m *Manager) Incarnation(inc shard.Incarnation) {
	m.life.Lock()
	defer m.life.Unlock()
	if n := len(m.incs); n > 0 && m.incs[n-1].Holder == inc.Holder {
		m.incs[n-1] = inc
		return
	}
	m.incs = append(m.incs, inc)
}

// Incarnations returns m's incarnations and the validity each reached, for checks that
// no write happened past validity.
func (m *Manager) Incarnations() []shard.Incarnation {
	m.life.Lock()
	defer m.life.Unlock()
	return append([]shard.Incarnation(nil), m.incs...)
}

// ControllersStopping implements app.Observer.
func (m *Manager) ControllersStopping() {
	m.life.Lock()
	defer m.life.Unlock()
	m.stopped = time.Now()
}

// StoppedServing is when Start stopped the controllers (zero while they run).
func (m *Manager) StoppedServing() time.Time {
	m.life.Lock()
	defer m.life.Unlock()
	return m.stopped
}

// Held lists the projects m's shard admits work for right now, sorted. It probes with
// Shard.Admits, so probing leaves no work record for the overlap checks to read.
func (m *Manager) Held(projects []string) []string {
	var out []string
	for _, p := range projects {
		if m.Replica.Shard.Admits(p) {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

// Gauge reads a gauge (or counter) from m's registry; label pairs select a series.
func (m *Manager) Gauge(name string, labels ...string) (float64, error) {
	return MetricValue(m.Registry, name, labels...)
}

// MetricValue reads the value of a gauge or counter from g; label pairs ("name",
// "value", ...) select a series. Tests read the metrics operators alert on, so a
// metric that changed name or labels fails a test instead of only a dashboard.
func MetricValue(g prometheus.Gatherer, name string, labels ...string) (float64, error) {
	families, err := g.Gather()
	if err != nil {
		return 0, err
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			have := map[string]string{}
			for _, lp := range m.GetLabel() {
				have[lp.GetName()] = lp.GetValue()
			}
			for i := 0; i+1 < len(labels); i += 2 {
				if have[labels[i]] != labels[i+1] {
					continue series
				}
			}
			if m.GetGauge() != nil {
				return m.GetGauge().GetValue(), nil
			}
			return m.GetCounter().GetValue(), nil
		}
	}
	return 0, fmt.Errorf("metric %s%v not found", name, labels)
}
