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

// AddAware implements mcmanager.Coordinator: controllers are engaged only with projects
// this replica holds and has claimed.
func (s *Shard) AddAware(a multicluster.Aware) {
	s.mu.Lock()
	s.awares = append(s.awares, a)
	open := s.openHoldingsLocked()
	s.mu.Unlock()
	for _, h := range open {
		if err := a.Engage(h.ctx, h.clusterName(), h.cluster); err != nil {
			s.log.Error(err, "Engaging a late controller with a held project", "project", h.project)
		}
	}
}

// Engage implements mcmanager.Coordinator: the inner kubeconfig provider calls it for
// every project Secret, and it only records the discovery (the cluster is built on a
// claim). The project name is read live from the Secret; until a read succeeds the
// discovery is not offered (docs/design.md, Differences from the intended design).
func (s *Shard) Engage(ctx context.Context, name multicluster.ClusterName, cl cluster.Cluster) error {
	s.mu.Lock()
	s.discoveries++
	s.found[string(name)] = discovered{config: rest.CopyConfig(cl.GetConfig()), ctx: ctx, gen: s.discoveries}
	s.mu.Unlock()
	// No goroutine waits per discovered project: a replica discovers every project.
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

// readProjectName reads the project name of the Secret name: its project annotation, or
// its own name when it has none.
func (s *Shard) readProjectName(ctx context.Context, name string) (string, error) {
	if s.hubReader == nil {
		return name, nil
	}
	cctx, cancel := context.WithTimeout(ctx, s.t.CallTimeout)
	defer cancel()
	var sec corev1.Secret
	if err := s.hubReader.Get(cctx, client.ObjectKey{Namespace: s.secretNamespace(), Name: name}, &sec); err != nil {
		return "", err
	}
	if p := sec.Annotations[AnnotationProject]; p != "" {
		return p, nil
	}
	return name, nil
}

// maxNameRetry caps the backoff of a failed project name read, which starts at the
// retry period and doubles.
const maxNameRetry = 30 * time.Second

// resolveProjectLater retries readProjectName until it succeeds or the discovery ends.
func (s *Shard) resolveProjectLater(ctx context.Context, name string) {
	wait := s.t.RetryPeriod
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.clock.After(wait):
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

// resolveProject names project the discovery of Secret name made under ctx (if still
// current): from now on it is offered and can be claimed.
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
		s.observer.poke()
	}
}

// discoveryEnded forgets a discovery whose context ended (the provider's report of a
// removed or replaced Secret) and reports whether it did; never while stopping.
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
		s.observer.poke()
	}
	return forget
}

// Stopping tells the shard the process is stopping; call it before the manager cancels
// any runnable, so discoveries the provider ends are not read as removed Secrets
// (docs/design.md, Graceful shutdown). No claim starts from now on.
func (s *Shard) Stopping() { s.draining.Store(true) }

func (s *Shard) secretNamespace() string { return s.opts.SecretNamespace }

// Get implements multicluster.Provider: a project's cluster only while this
// incarnation holds it, has claimed it and is valid. Anything else is
// multicluster.ErrClusterNotFound, which ends queued and requeued requests quietly.
func (s *Shard) Get(_ context.Context, name multicluster.ClusterName) (cluster.Cluster, error) {
	s.mu.Lock()
	h := s.holdings[string(name)]
	s.mu.Unlock()
	if h == nil || h.state() != holdingOpen || !s.member.valid(h.holder) {
		return nil, fmt.Errorf("project %q is not held by this replica: %w", name, multicluster.ErrClusterNotFound)
	}
	return h.cluster, nil
}

// IndexField implements multicluster.Provider: indexes are applied to every holding's
// cluster, current and future.
func (s *Shard) IndexField(ctx context.Context, obj client.Object, field string, extract client.IndexerFunc) error {
	s.mu.Lock()
	s.indexers = append(s.indexers, fieldIndex{obj: obj, field: field, extract: extract})
	var clusters []cluster.Cluster
	for _, h := range s.holdings {
		clusters = append(clusters, h.cluster)
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

// Hub returns the hub client for writes made on behalf of project (refused once
// validity ended) and an uncached hub reader. It refuses projects not held.
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

// validityGuarded wraps c so that every write is refused with ErrValidityEnded once
// less than writeMargin of this replica's validity is left.
func (s *Shard) validityGuarded(c client.Client) client.Client {
	return guardedClient{Client: c, check: s.checkValid}
}

// writeMargin is how much validity a write must have left to be sent
// (docs/design.md, Residual windows).
const writeMargin = 50 * time.Millisecond

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
