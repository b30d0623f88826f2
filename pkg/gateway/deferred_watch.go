package gateway

import (
	"context"
	"sync"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"
	mcsource "sigs.k8s.io/multicluster-runtime/pkg/source"
)

// projectGates holds one gate per engaged project: the deferred watches of a project
// start once an HTTPProxy or one of our Gateways is reconciled there (docs/design.md,
// Gateway path: An idle project costs three watches). mu guards the gates too.
type projectGates struct {
	mu    sync.Mutex
	gates map[multicluster.ClusterName]*gate
}

func newProjectGates() *projectGates {
	return &projectGates{gates: map[multicluster.ClusterName]*gate{}}
}

// gate starts the deferred watches of one project's engagement once opened.
type gate struct {
	open    bool
	pending []func()
}

// engaged returns the gate of project, creating a closed one for a new engagement.
func (p *projectGates) engaged(project multicluster.ClusterName) *gate {
	p.mu.Lock()
	defer p.mu.Unlock()
	g := p.gates[project]
	if g == nil {
		g = &gate{}
		p.gates[project] = g
	}
	return g
}

// disengaged forgets project's gate g (a later engagement starts closed again).
func (p *projectGates) disengaged(project multicluster.ClusterName, g *gate) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.gates[project] == g {
		delete(p.gates, project)
	}
}

// open opens project's gate, if the project is engaged, and starts its deferred watches.
func (p *projectGates) open(project multicluster.ClusterName) {
	var pending []func()
	p.mu.Lock()
	if g := p.gates[project]; g != nil {
		pending = g.pending // none once open: whenOpen keeps nothing then
		g.open, g.pending = true, nil
	}
	p.mu.Unlock()
	for _, start := range pending {
		// Starting a watch waits for its informer to sync: not on the reconcile's time.
		go start()
	}
}

// isOpen reports whether project's deferred watches have been started.
func (p *projectGates) isOpen(project multicluster.ClusterName) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	g := p.gates[project]
	return g != nil && g.open
}

// whenOpen reports whether g is open; if not, it keeps start for the opening.
func (p *projectGates) whenOpen(g *gate, start func()) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if g.open {
		return true
	}
	g.pending = append(g.pending, start)
	return false
}

// deferredSource is a multicluster source of one or more kinds whose per-project
// sources start once the project's gate opens. One per controller keeps the goroutines
// multicluster-runtime spends on each engaged source to one.
type deferredSource struct {
	inners []mcsource.TypedSource[client.Object, mcreconcile.Request]
	gates  *projectGates
}

var _ mcsource.TypedSource[client.Object, mcreconcile.Request] = deferredSource{}

// ForCluster implements mcsource.TypedSource.
func (d deferredSource) ForCluster(name multicluster.ClusterName, cl cluster.Cluster) (source.TypedSource[mcreconcile.Request], bool, error) {
	var inners []source.TypedSource[mcreconcile.Request]
	for _, in := range d.inners {
		src, engage, err := in.ForCluster(name, cl)
		if err != nil {
			return nil, false, err
		}
		if engage {
			inners = append(inners, src)
		}
	}
	if len(inners) == 0 {
		return source.TypedFunc[mcreconcile.Request](func(context.Context, workqueue.TypedRateLimitingInterface[mcreconcile.Request]) error { return nil }), false, nil
	}
	return &gatedSource{inners: inners, project: name, gates: d.gates, gate: d.gates.engaged(name)}, true, nil
}

// gatedSource is one project's deferred sources.
type gatedSource struct {
	inners  []source.TypedSource[mcreconcile.Request]
	project multicluster.ClusterName
	gates   *projectGates
	gate    *gate
}

// Start starts the inner sources now if the gate is open, else when it opens (unless
// the engagement ended by then).
func (s *gatedSource) Start(ctx context.Context, q workqueue.TypedRateLimitingInterface[mcreconcile.Request]) error {
	context.AfterFunc(ctx, func() { s.gates.disengaged(s.project, s.gate) })
	deferred := func() {
		if ctx.Err() != nil {
			return
		}
		if err := s.startInners(ctx, q); err != nil {
			ctrllog.FromContext(ctx).Error(err, "Starting a deferred watch", "project", s.project)
		}
	}
	if s.gates.whenOpen(s.gate, deferred) {
		return s.startInners(ctx, q)
	}
	return nil
}

func (s *gatedSource) startInners(ctx context.Context, q workqueue.TypedRateLimitingInterface[mcreconcile.Request]) error {
	for _, in := range s.inners {
		if err := in.Start(ctx, q); err != nil {
			return err
		}
	}
	return nil
}

// opening is a reconciler that opens the project's gate before reconciling.
type opening struct {
	gates *projectGates
	reconcile.TypedReconciler[mcreconcile.Request]
}

// Reconcile implements reconcile.TypedReconciler.
func (o opening) Reconcile(ctx context.Context, req mcreconcile.Request) (reconcile.Result, error) {
	o.gates.open(req.ClusterName)
	return o.TypedReconciler.Reconcile(ctx, req)
}
