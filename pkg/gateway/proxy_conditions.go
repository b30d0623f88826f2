package gateway

import (
	"context"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	"anchorage/api/v1alpha"
)

// proxyConditionTypes are the HTTPProxy conditions anchorage_httpproxies counts. A proxy
// that does not carry one yet counts as Unknown for it.
var proxyConditionTypes = []string{v1alpha.ConditionAccepted, v1alpha.ConditionProgrammed}

var conditionStatuses = []metav1.ConditionStatus{metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionUnknown}

// ProxyConditions is the gauge anchorage_httpproxies{project,condition,status}: the
// HTTPProxies of each engaged project by condition and status, as last reconciled. A
// project's series go when its engagement ends; gone or terminating proxies leave.
type ProxyConditions struct {
	desc *prometheus.Desc

	mu       sync.Mutex
	projects map[string]*engagedProject
}

// engagedProject is one engagement of a project and the last conditions of its proxies.
type engagedProject struct {
	proxies map[types.NamespacedName]map[string]metav1.ConditionStatus
}

// NewProxyConditions returns an empty gauge, not registered.
func NewProxyConditions() *ProxyConditions {
	return &ProxyConditions{
		desc: prometheus.NewDesc("anchorage_httpproxies",
			"HTTPProxies of the projects this replica holds, by condition (Accepted, Programmed) and status (True, False, Unknown).",
			[]string{"project", "condition", "status"}, nil),
		projects: map[string]*engagedProject{},
	}
}

// Describe implements prometheus.Collector.
func (p *ProxyConditions) Describe(ch chan<- *prometheus.Desc) { ch <- p.desc }

// Collect implements prometheus.Collector: every engaged project reports every
// condition and status, zeros included.
func (p *ProxyConditions) Collect(ch chan<- prometheus.Metric) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for project, e := range p.projects {
		for _, typ := range proxyConditionTypes {
			counts := e.countByStatus(typ)
			for _, st := range conditionStatuses {
				ch <- prometheus.MustNewConstMetric(p.desc, prometheus.GaugeValue, float64(counts[st]), project, typ, string(st))
			}
		}
	}
}

// countByStatus counts the project's proxies by the status of condition typ.
func (e *engagedProject) countByStatus(typ string) map[metav1.ConditionStatus]int {
	counts := map[metav1.ConditionStatus]int{}
	for _, conds := range e.proxies {
		st, ok := conds[typ]
		if !ok {
			st = metav1.ConditionUnknown
		}
		counts[st]++
	}
	return counts
}

// Engage implements multicluster.Aware: the project is counted until ctx ends. A
// re-engagement starts afresh; an older engagement's end leaves a newer one alone.
func (p *ProxyConditions) Engage(ctx context.Context, name multicluster.ClusterName, _ cluster.Cluster) error {
	project := string(name)
	e := &engagedProject{proxies: map[types.NamespacedName]map[string]metav1.ConditionStatus{}}
	p.mu.Lock()
	p.projects[project] = e
	p.mu.Unlock()
	go func() {
		<-ctx.Done()
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.projects[project] == e {
			delete(p.projects, project)
		}
	}()
	return nil
}

// Start implements manager.Runnable: the gauge needs nothing running.
func (p *ProxyConditions) Start(ctx context.Context) error {
	<-ctx.Done()
	return nil
}

// observe records a proxy's conditions; nothing for a project not engaged here.
func (p *ProxyConditions) observe(project string, proxy *v1alpha.HTTPProxy) {
	conds := map[string]metav1.ConditionStatus{}
	for _, typ := range proxyConditionTypes {
		if c := meta.FindStatusCondition(proxy.Status.Conditions, typ); c != nil {
			conds[typ] = c.Status
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if e, ok := p.projects[project]; ok {
		e.proxies[types.NamespacedName{Namespace: proxy.Namespace, Name: proxy.Name}] = conds
	}
}

// forget drops a proxy that is gone or terminating.
func (p *ProxyConditions) forget(project string, key types.NamespacedName) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e, ok := p.projects[project]; ok {
		delete(e.proxies, key)
	}
}
