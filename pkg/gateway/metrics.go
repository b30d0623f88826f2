package gateway

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	"anchorage/api/v1alpha"
)

// Label values; every combination is created at start, so dashboards show zeros.
const (
	kindGateway     = "Gateway"
	kindHTTPRoute   = "HTTPRoute"
	kindHTTPProxy   = "HTTPProxy"
	kindCertificate = "Certificate"

	resultCreated = "created"
	resultUpdated = "updated"
	resultDeleted = "deleted"
	resultOK      = "ok"
	resultError   = "error"
)

// Metrics are the gateway data path's counters (each Help, in NewMetrics, says what).
type Metrics struct {
	downstreamWrites *prometheus.CounterVec
	anchorDeletes    *prometheus.CounterVec
	guardRefusals    *prometheus.CounterVec
	queueDepth       *prometheus.GaugeVec
	hubWriteWaits    *prometheus.CounterVec
	reissues         prometheus.Counter
	// Proxies is the gauge of HTTPProxies by condition; it must be added to the manager
	// (SetupWithManager does) to follow the projects engaged.
	Proxies *ProxyConditions
}

// NewMetrics creates the counters and registers them with reg, reusing those already
// there (two replicas in one process).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		downstreamWrites: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "anchorage_downstream_writes_total",
			Help: "Writes of downstream objects (Gateway, HTTPRoute, Certificate, DNSEndpoint, and a backend's Service, EndpointSlice and BackendTLSPolicy) to the hub, by kind and result.",
		}, []string{"kind", "result"}),
		anchorDeletes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "anchorage_anchor_deletes_total",
			Help: "Finalizer calls that make sure an upstream object's anchor is gone from the hub, by upstream kind and result.",
		}, []string{"kind", "result"}),
		guardRefusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "anchorage_live_guard_refusals_total",
			Help: "Reconciles that wrote nothing because a live owner (the upstream Gateway or HTTPRoute, or the HTTPProxy controlling it) was gone, replaced, terminating or unfinalized, by the kind of that owner and reason.",
		}, []string{"kind", "reason"}),
		queueDepth: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "anchorage_gateway_queue_depth",
			Help: "Requests waiting in each gateway controller's queue, every project's together; the queue serves projects in turn.",
		}, []string{"controller"}),
		hubWriteWaits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "anchorage_project_hub_write_wait_seconds_total",
			Help: "Seconds the hub writes of a project waited for its share of hub writes (gateway.projectHubWritesPerSecond), by project: a project that keeps this rising writes more than its share.",
		}, []string{"project"}),
		reissues: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "anchorage_certificate_reissues_total",
			Help: "Failed Certificates deleted and written anew to start a fresh order (at most 3 per Certificate, 5 minutes after its failure); a rise means orders keep failing, often DNS not pointed at the edge.",
		}),
	}
	var err error
	m.reissues, err = register(reg, m.reissues, "gateway metrics", err)
	m.queueDepth, err = register(reg, m.queueDepth, "gateway metrics", err)
	m.hubWriteWaits, err = register(reg, m.hubWriteWaits, "gateway metrics", err)
	m.downstreamWrites, err = register(reg, m.downstreamWrites, "gateway metrics", err)
	m.anchorDeletes, err = register(reg, m.anchorDeletes, "gateway metrics", err)
	m.guardRefusals, err = register(reg, m.guardRefusals, "gateway metrics", err)
	proxies := &ProxyConditions{
		desc: prometheus.NewDesc("anchorage_httpproxies",
			"HTTPProxies of the projects this replica holds, by condition (Accepted, Programmed) and status (True, False, Unknown).",
			[]string{"project", "condition", "status"}, nil),
		projects: map[string]*engagedProject{},
	}
	if m.Proxies, err = register(reg, proxies, "the HTTPProxy condition gauge", err); err != nil {
		return nil, err
	}
	for _, kind := range []string{kindGateway, kindHTTPRoute, kindCertificate, kindDNSEndpoint, kindService, kindEndpointSlice, kindBackendTLSPolicy} {
		for _, result := range []string{resultCreated, resultUpdated, resultDeleted, resultError} {
			m.downstreamWrites.WithLabelValues(kind, result)
		}
	}
	for _, kind := range []string{kindGateway, kindHTTPRoute, kindHTTPProxy} {
		for _, result := range []string{resultOK, resultError} {
			m.anchorDeletes.WithLabelValues(kind, result)
		}
		for _, reason := range allGuardVerdicts {
			m.guardRefusals.WithLabelValues(kind, string(reason))
		}
	}
	return m, nil
}

// register registers c, named what in an error, with reg, or returns the collector of
// the same description already there (two replicas in one process). After an earlier
// error (prev) it registers nothing and returns prev.
func register[C prometheus.Collector](reg prometheus.Registerer, c C, what string, prev error) (C, error) {
	if prev != nil {
		return c, prev
	}
	err := reg.Register(c)
	if err == nil {
		return c, nil
	}
	var already prometheus.AlreadyRegisteredError
	if errors.As(err, &already) {
		if existing, ok := already.ExistingCollector.(C); ok {
			return existing, nil
		}
	}
	return c, fmt.Errorf("registering %s: %w", what, err)
}

func (m *Metrics) certificateReissued() {
	if m != nil {
		m.reissues.Inc()
	}
}

func (m *Metrics) downstreamWrite(kind, result string) {
	m.downstreamWrites.WithLabelValues(kind, result).Inc()
}

func (m *Metrics) anchorDelete(kind string, err error) {
	result := resultOK
	if err != nil {
		result = resultError
	}
	m.anchorDeletes.WithLabelValues(kind, result).Inc()
}

func (m *Metrics) guardRefusal(kind string, v guardVerdict) {
	m.guardRefusals.WithLabelValues(kind, string(v)).Inc()
}

// proxyObserved records the status a reconcile wrote (or found) for a live proxy, and
// forgets one that is terminating.
func (m *Metrics) proxyObserved(project string, proxy *v1alpha.HTTPProxy) {
	if m == nil || m.Proxies == nil {
		return
	}
	if proxy.DeletionTimestamp != nil {
		m.Proxies.forget(project, client.ObjectKeyFromObject(proxy))
		return
	}
	m.Proxies.observe(project, proxy)
}

// proxyGone forgets a proxy that no longer exists.
func (m *Metrics) proxyGone(project string, key types.NamespacedName) {
	if m == nil || m.Proxies == nil {
		return
	}
	m.Proxies.forget(project, key)
}

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

// Describe implements prometheus.Collector.
func (p *ProxyConditions) Describe(ch chan<- *prometheus.Desc) { ch <- p.desc }

// Collect implements prometheus.Collector: every engaged project reports every
// condition and status, zeros included.
func (p *ProxyConditions) Collect(ch chan<- prometheus.Metric) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for project, e := range p.projects {
		for _, typ := range proxyConditionTypes {
			counts := map[metav1.ConditionStatus]int{}
			for _, conds := range e.proxies {
				st, ok := conds[typ]
				if !ok {
					st = metav1.ConditionUnknown
				}
				counts[st]++
			}
			for _, st := range conditionStatuses {
				ch <- prometheus.MustNewConstMetric(p.desc, prometheus.GaugeValue, float64(counts[st]), project, typ, string(st))
			}
		}
	}
}

// Engage implements multicluster.Aware: the project is counted until ctx ends. A
// re-engagement starts afresh; an older engagement's end leaves a newer one alone.
func (p *ProxyConditions) Engage(ctx context.Context, name multicluster.ClusterName, _ cluster.Cluster) error {
	project := string(name)
	e := &engagedProject{proxies: map[types.NamespacedName]map[string]metav1.ConditionStatus{}}
	p.mu.Lock()
	p.projects[project] = e
	p.mu.Unlock()
	context.AfterFunc(ctx, func() { p.disengaged(project, e) })
	return nil
}

// disengaged forgets project's engagement e, unless a newer one replaced it.
func (p *ProxyConditions) disengaged(project string, e *engagedProject) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.projects[project] == e {
		delete(p.projects, project)
	}
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
