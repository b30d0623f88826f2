package gateway

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	"anchorage/api/v1alpha"
	"anchorage/pkg/anchor"
)

// upstream is what a reconcile of one upstream Gateway, HTTPRoute or EndpointSlice
// works on, besides the object itself.
type upstream struct {
	project string
	cluster cluster.Cluster
	hub     client.Client // live
	anchors anchor.NameIndex
	written *WrittenObjects
	owner   anchor.Owner
	log     logr.Logger
	events  events.EventRecorder
	// requeueAfter, when set, runs the reconcile again after it (requeued).
	requeueAfter time.Duration
}

// requeued is the finish step of the Gateway and HTTPRoute reconcilers.
func (u *upstream) requeued() reconcile.Result {
	return reconcile.Result{RequeueAfter: u.requeueAfter}
}

// guardedHub is the hub client for programming: every create first passes g.
func (u *upstream) guardedHub(g ownersGuard) client.Client {
	return createsGuarded{Client: u.hub, guard: g}
}

// loadUpstream reaches the project, reads obj (of kind, in the Gateway API group) from
// its cache, and reaches the hub. A nil result means the object is gone.
func loadUpstream(ctx context.Context, clusters Clusters, cfg Config, req mcreconcile.Request, obj client.Object, kind string) (*upstream, error) {
	project := string(req.ClusterName)
	cl, err := clusters.Project(ctx, project)
	if err != nil {
		return nil, fmt.Errorf("reaching project %q: %w", project, err)
	}
	if err := cl.GetClient().Get(ctx, req.NamespacedName, obj); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	hub, err := hubFor(ctx, clusters, project)
	if err != nil {
		return nil, err
	}
	return &upstream{
		project: project,
		cluster: cl,
		hub:     hub,
		owner:   anchor.OwnerOf(project, gatewayv1.SchemeGroupVersion.WithKind(kind), obj),
		log:     logf.FromContext(ctx).WithValues("project", project, strings.ToLower(kind), klog.KObj(obj)),
		events:  eventsWithin(ctx, cl.GetEventRecorder(cfg.EventSource)),
	}, nil
}

// finalizeUpstream is the finalize phase of an upstream object: once obj is terminating
// with finalizer, deleteDownstream clears its mapped namespace (if the upstream one is
// still there), then releaseAnchor. A terminating obj ends the reconcile here.
func (m *Metrics) finalizeUpstream(ctx context.Context, u *upstream, obj client.Object, kind, finalizer string, deleteDownstream func(context.Context, hubWriter) error) (bool, error) {
	if obj.GetDeletionTimestamp() == nil {
		return false, nil
	}
	if !controllerutil.ContainsFinalizer(obj, finalizer) {
		return true, nil
	}
	u.log.V(2).Info("Finalizing "+kind, "uid", obj.GetUID())
	hubNS, err := mappedNamespaceOf(ctx, u.cluster.GetAPIReader(), obj.GetNamespace())
	if err != nil {
		return true, err
	}
	if hubNS != "" {
		if err := mappedNamespaceIsProjects(ctx, u.hub, hubNS, u.project); err != nil {
			u.events.Eventf(obj, nil, corev1.EventTypeWarning, v1alpha.ReasonHubWriteFailed, "Finalizing", "Not finalizing on the hub: %v", err)
			return true, err
		}
		if err := deleteDownstream(ctx, u.hubWriter(u.hub, hubNS, m)); err != nil {
			return true, err
		}
	}
	return true, m.releaseAnchor(ctx, u, obj, finalizer, hubNS)
}

// releaseAnchor deletes the owner's anchor in hubNS ("" when the upstream namespace is
// gone: the anchor cache says where) with anchor.DeleteIndexed, then removes finalizer
// from obj. Nothing comes between the two, so a retry costs one GET.
func (m *Metrics) releaseAnchor(ctx context.Context, u *upstream, obj client.Object, finalizer, hubNS string) error {
	err := anchor.DeleteIndexed(ctx, u.hub, u.anchors, hubNS, u.owner)
	m.anchorDelete(u.owner.Kind, err)
	if err != nil {
		u.events.Eventf(obj, nil, corev1.EventTypeWarning, v1alpha.ReasonHubWriteFailed, "Finalizing", "Deleting the anchor of the %s failed: %v", u.owner.Kind, err)
		return fmt.Errorf("deleting the anchor of %s: %w", u.owner, err)
	}
	u.written.forgetOwner(u.owner.UID)
	return removeFinalizer(ctx, u.cluster.GetClient(), obj, finalizer)
}

// hubWriter is the writer of the owner's downstream objects in hubNS through hub.
func (u *upstream) hubWriter(hub client.Client, hubNS string, m *Metrics) hubWriter {
	return hubWriter{hub: hub, owner: u.owner, ns: hubNS, metrics: m, written: u.written}
}

// mappedNamespaceIsProjects returns an error wrapping anchor.ErrForeign when hubNS is
// labelled for another project than project: its name is a UID the plane reports, which
// a plane may forge. An unlabelled namespace, or one gone, passes.
func mappedNamespaceIsProjects(ctx context.Context, hub client.Client, hubNS, project string) error {
	ns := &corev1.Namespace{}
	if err := hub.Get(ctx, client.ObjectKey{Name: hubNS}, ns); err != nil {
		return client.IgnoreNotFound(err)
	}
	v, ok := ns.Labels[anchor.LabelClusterName]
	if !ok {
		return nil
	}
	if p, err := anchor.ProjectFromClusterName(v); err != nil || p != project {
		return fmt.Errorf("hub namespace %s is labelled %s=%q, not for project %q: %w", hubNS, anchor.LabelClusterName, v, project, anchor.ErrForeign)
	}
	return nil
}
