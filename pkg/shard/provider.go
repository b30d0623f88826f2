package shard

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
)

// AddAware implements mcmanager.Coordinator: controllers engage only with claimed projects.
func (s *Shard) AddAware(a multicluster.Aware) {
	s.mu.Lock()
	s.awares = append(s.awares, a)
	open := s.openHoldingsLocked()
	s.mu.Unlock()
	for _, h := range open {
		if err := a.Engage(h.ctx, multicluster.ClusterName(h.project), h.cluster); err != nil {
			s.log.Error(err, "Engaging a late controller with a held project", "project", h.project)
		}
	}
}

// Engage implements mcmanager.Coordinator: it records a discovery and reads its project name.
func (s *Shard) Engage(ctx context.Context, name multicluster.ClusterName, cl cluster.Cluster) error {
	s.mu.Lock()
	s.discoveries++
	s.found[string(name)] = discovered{config: rest.CopyConfig(cl.GetConfig()), ctx: ctx, gen: s.discoveries}
	s.mu.Unlock()
	context.AfterFunc(ctx, func() { s.discoveryEnded(ctx, string(name)) })
	project, err := s.readProjectName(ctx, string(name))
	if err == nil {
		s.resolveProject(ctx, string(name), project)
		return nil
	}
	s.log.Info("Project name not readable yet; the project waits for it", "secret", name, "error", err.Error())
	go s.resolveProjectLater(ctx, string(name))
	return nil
}

// readProjectName reads Secret name's project annotation; its own name when none.
func (s *Shard) readProjectName(ctx context.Context, name string) (string, error) {
	if s.hubReader == nil {
		return name, nil
	}
	cctx, cancel := context.WithTimeout(ctx, s.t.CallTimeout)
	defer cancel()
	var sec corev1.Secret
	if err := s.hubReader.Get(cctx, client.ObjectKey{Namespace: s.opts.SecretNamespace, Name: name}, &sec); err != nil {
		return "", err
	}
	if p := sec.Annotations[AnnotationProject]; p != "" {
		return p, nil
	}
	return name, nil
}

// maxNameRetry caps the doubling backoff of a failed project name read.
const maxNameRetry = 30 * time.Second

// resolveProjectLater retries readProjectName until it succeeds or the discovery ends.
func (s *Shard) resolveProjectLater(ctx context.Context, name string) {
	wait := s.t.RetryPeriod
	for {
		if !sleep(ctx, s.clock, wait) {
			return
		}
		project, err := s.readProjectName(ctx, name)
		if err == nil {
			s.resolveProject(ctx, name, project)
			return
		}
		s.log.V(1).Info("Reading the project name failed", "secret", name, "error", err.Error(), "retryIn", wait)
		wait = min(2*wait, maxNameRetry)
	}
}

// resolveProject names project the discovery of Secret name made under ctx, if current.
func (s *Shard) resolveProject(ctx context.Context, name, project string) {
	s.mu.Lock()
	d, ok := s.found[name]
	current := ok && d.ctx == ctx
	if current {
		d.project = project
		s.found[name] = d
	}
	s.mu.Unlock()
	if current {
		s.log.V(1).Info("Discovered project", "project", project, "secret", name)
		poke(s.observer.notify)
	}
}

// discoveryEnded forgets a discovery whose context ended, unless stopping; true if it did.
func (s *Shard) discoveryEnded(ctx context.Context, name string) bool {
	if s.draining.Load() {
		return false
	}
	s.mu.Lock()
	d, ok := s.found[name]
	forget := ok && d.ctx == ctx
	if forget {
		delete(s.found, name)
	}
	s.mu.Unlock()
	if forget {
		poke(s.observer.notify)
	}
	return forget
}

// Stopping tells the shard, before any runnable is cancelled, that the process stops.
func (s *Shard) Stopping() { s.draining.Store(true) }

// Get implements multicluster.Provider: a cluster only while held, claimed and valid.
func (s *Shard) Get(_ context.Context, name multicluster.ClusterName) (cluster.Cluster, error) {
	s.mu.Lock()
	h := s.holdings[string(name)]
	s.mu.Unlock()
	if h == nil || h.state() != holdingOpen || !s.member.valid(h.holder) {
		return nil, fmt.Errorf("project %q is not held by this replica: %w", name, multicluster.ErrClusterNotFound)
	}
	return h.cluster, nil
}

// IndexField implements multicluster.Provider for every holding's cluster, now and later.
func (s *Shard) IndexField(ctx context.Context, obj client.Object, field string, extract client.IndexerFunc) error {
	s.mu.Lock()
	s.indexers = append(s.indexers, fieldIndex{obj: obj, field: field, extract: extract})
	var clusters []cluster.Cluster
	for _, h := range s.holdings {
		if h.cluster != nil { // else its claim indexes it with s.indexers
			clusters = append(clusters, h.cluster)
		}
	}
	s.mu.Unlock()
	for _, cl := range clusters {
		if err := cl.GetFieldIndexer().IndexField(ctx, obj, field, extract); err != nil {
			return fmt.Errorf("indexing %s on a held project: %w", field, err)
		}
	}
	return nil
}

// Project returns a held project's cluster (the reconcilers' seam).
func (s *Shard) Project(ctx context.Context, project string) (cluster.Cluster, error) {
	return s.Get(ctx, multicluster.ClusterName(project))
}

// Hub returns the validity-guarded hub writer and uncached reader for a held project.
func (s *Shard) Hub(ctx context.Context, project string) (client.Client, client.Reader, error) {
	if _, err := s.Get(ctx, multicluster.ClusterName(project)); err != nil {
		return nil, nil, err
	}
	return s.hubClients()
}

// hubClients returns the hub clients SetHubClients gave.
func (s *Shard) hubClients() (client.Client, client.Reader, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hubWriter == nil {
		return nil, nil, errors.New("hub clients not set")
	}
	return s.hubWriter, s.hubReader, nil
}

// writeMargin is the validity a write must have left to be sent (design.md, Residual windows).
const writeMargin = 50 * time.Millisecond

// checkValid refuses a guarded client's write once less than writeMargin of validity is left.
func (s *Shard) checkValid() error {
	if h, until := s.member.current(); h == "" || !s.clock.Now().Add(writeMargin).Before(until) {
		s.m.rejections.WithLabelValues(rejectInvalid).Inc()
		return ErrValidityEnded
	}
	return nil
}

// guarded sends write only when check passes.
func guarded(check func() error, write func() error) error {
	if err := check(); err != nil {
		return err
	}
	return write()
}

// guardedClient refuses writes when check fails; reads pass through.
type guardedClient struct {
	client.Client
	check func() error
}

func (g guardedClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	return guarded(g.check, func() error { return g.Client.Create(ctx, obj, opts...) })
}

func (g guardedClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	return guarded(g.check, func() error { return g.Client.Update(ctx, obj, opts...) })
}

func (g guardedClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	return guarded(g.check, func() error { return g.Client.Patch(ctx, obj, patch, opts...) })
}

func (g guardedClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	return guarded(g.check, func() error { return g.Client.Delete(ctx, obj, opts...) })
}

func (g guardedClient) DeleteAllOf(ctx context.Context, obj client.Object, opts ...client.DeleteAllOfOption) error {
	return guarded(g.check, func() error { return g.Client.DeleteAllOf(ctx, obj, opts...) })
}

func (g guardedClient) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	return guarded(g.check, func() error { return g.Client.Apply(ctx, obj, opts...) })
}

func (g guardedClient) Status() client.SubResourceWriter { return g.SubResource("status") }

func (g guardedClient) SubResource(sub string) client.SubResourceClient {
	return guardedSubResource{SubResourceClient: g.Client.SubResource(sub), check: g.check}
}

type guardedSubResource struct {
	client.SubResourceClient
	check func() error
}

func (g guardedSubResource) Create(ctx context.Context, obj, sub client.Object, opts ...client.SubResourceCreateOption) error {
	return guarded(g.check, func() error { return g.SubResourceClient.Create(ctx, obj, sub, opts...) })
}

func (g guardedSubResource) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	return guarded(g.check, func() error { return g.SubResourceClient.Update(ctx, obj, opts...) })
}

func (g guardedSubResource) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	return guarded(g.check, func() error { return g.SubResourceClient.Patch(ctx, obj, patch, opts...) })
}

func (g guardedSubResource) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.SubResourceApplyOption) error {
	return guarded(g.check, func() error { return g.SubResourceClient.Apply(ctx, obj, opts...) })
}
