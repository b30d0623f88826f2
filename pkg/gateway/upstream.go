package gateway

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	"anchorage/api/v1alpha"
	"anchorage/pkg/anchor"
)

// upstream is what a reconcile of one upstream Gateway, HTTPRoute or EndpointSlice
// works on (the Gateway and route scopes add the object's typed pointer).
type upstream struct {
	project   string
	cluster   cluster.Cluster
	hub       client.Client // live
	anchors   anchor.NameIndex
	written   *WrittenObjects
	metrics   *Metrics
	obj       client.Object // the object reconciled
	finalizer string        // ours on obj
	owner     anchor.Owner
	log       logr.Logger
	events    events.EventRecorder
	// requeueAfter, when set, runs the reconcile again after it (requeued).
	requeueAfter time.Duration
}

// upstreamScope is the scope of a reconcile of an upstream object, which embeds upstream.
type upstreamScope interface{ base() *upstream }

func (u *upstream) base() *upstream { return u }

// requeued is the finish step of the Gateway and HTTPRoute reconcilers.
func (u *upstream) requeued() reconcile.Result {
	return reconcile.Result{RequeueAfter: u.requeueAfter}
}

// guard is the live guard of the object: it, then the HTTPProxy controlling it, if any.
func (u *upstream) guard() ownersGuard {
	owners := []guarded{{kind: u.owner.Kind, obj: u.obj, finalizer: u.finalizer}}
	if proxy := controllingProxy(u.obj); proxy != nil {
		owners = append(owners, guarded{kind: kindHTTPProxy, obj: proxy, finalizer: v1alpha.HTTPProxyFinalizer})
	}
	return ownersGuard{reader: u.cluster.GetAPIReader(), owners: owners, metrics: u.metrics}
}

// guardedHub is the hub client for programming: every create first passes the guard.
func (u *upstream) guardedHub() client.Client {
	return createsGuarded{Client: u.hub, guard: u.guard()}
}

// loadUpstream reaches the project, reads obj (of gvk, ours carrying finalizer) from
// its cache, and reaches the hub. A nil result means the object is gone.
func loadUpstream(ctx context.Context, clusters Clusters, cfg Config, req mcreconcile.Request, obj client.Object, gvk schema.GroupVersionKind, finalizer string) (*upstream, error) {
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
		project:   project,
		cluster:   cl,
		hub:       hub,
		obj:       obj,
		finalizer: finalizer,
		owner:     anchor.OwnerOf(project, gvk, obj),
		log:       logf.FromContext(ctx).WithValues("project", project, strings.ToLower(gvk.Kind), klog.KObj(obj)),
		events:    admittedEvents{ctx: ctx, next: cl.GetEventRecorder(eventSource)},
	}, nil
}

// skipHandsOff ends the reconcile for an object whose proxy is handsOff.
func skipHandsOff[S upstreamScope](ctx context.Context, s S) (bool, error) {
	u := s.base()
	off, err := handsOff(ctx, u.cluster.GetClient(), u.obj)
	if err != nil {
		return true, err
	}
	if off {
		u.log.V(4).Info("Leaving what is programmed for a proxy with a backend this manager cannot program")
	}
	return off, nil
}

// ensureFinalizer puts our finalizer on the object before anything is written for it.
func ensureFinalizer[S upstreamScope](ctx context.Context, s S) (bool, error) {
	u := s.base()
	if err := addFinalizer(ctx, u.cluster.GetClient(), u.obj, u.finalizer); err != nil {
		return true, client.IgnoreNotFound(err)
	}
	return false, nil
}

// guardLive is the live guard phase (guard.go): the object, and the HTTPProxy
// controlling it, must pass; the status is then built on the live read.
func guardLive[S upstreamScope](ctx context.Context, s S) (bool, error) {
	u := s.base()
	live, err := u.guard().checkLive(ctx)
	if err != nil {
		return endOnRefusal(u.log, err, &u.requeueAfter)
	}
	adoptLiveStatus(u.obj, live)
	return false, nil
}

// finalize ends the reconcile of a terminating object; with our finalizer on it,
// deleteDownstream clears its mapped namespace (if still mapped), then releaseAnchor.
func (u *upstream) finalize(ctx context.Context, deleteDownstream func(context.Context, hubWriter) error) (bool, error) {
	obj := u.obj
	if obj.GetDeletionTimestamp() == nil {
		return false, nil
	}
	if !controllerutil.ContainsFinalizer(obj, u.finalizer) {
		return true, nil
	}
	u.log.V(2).Info("Finalizing "+u.owner.Kind, "uid", obj.GetUID())
	hubNS, err := mappedNamespaceOf(ctx, u.cluster.GetAPIReader(), obj.GetNamespace())
	if err != nil {
		return true, err
	}
	if hubNS != "" {
		if err := mappedNamespaceIsProjects(ctx, u.hub, hubNS, u.project); err != nil {
			u.events.Eventf(obj, nil, corev1.EventTypeWarning, v1alpha.ReasonHubWriteFailed, "Finalizing", "Not finalizing on the hub: %v", err)
			return true, err
		}
		if err := deleteDownstream(ctx, u.hubWriter(u.hub, hubNS)); err != nil {
			return true, err
		}
	}
	return true, u.releaseAnchor(ctx, hubNS)
}

// releaseAnchor deletes the owner's anchor in hubNS ("" when the upstream namespace is
// gone: the anchor cache says where) with anchor.DeleteIndexed, then removes our
// finalizer. Nothing comes between the two, so a retry costs one GET.
func (u *upstream) releaseAnchor(ctx context.Context, hubNS string) error {
	err := anchor.DeleteIndexed(ctx, u.hub, u.anchors, hubNS, u.owner)
	u.metrics.anchorDelete(u.owner.Kind, err)
	if err != nil {
		u.events.Eventf(u.obj, nil, corev1.EventTypeWarning, v1alpha.ReasonHubWriteFailed, "Finalizing", "Deleting the anchor of the %s failed: %v", u.owner.Kind, err)
		return fmt.Errorf("deleting the anchor of %s: %w", u.owner, err)
	}
	u.written.forgetOwner(u.owner.UID)
	return removeFinalizer(ctx, u.cluster.GetClient(), u.obj, u.finalizer)
}

// ensureMappedNamespace ensures the hub namespace of the object's upstream namespace,
// read live, and returns its name.
func (u *upstream) ensureMappedNamespace(ctx context.Context, hub client.Client) (string, error) {
	ns := &corev1.Namespace{}
	if err := u.cluster.GetAPIReader().Get(ctx, client.ObjectKey{Name: u.obj.GetNamespace()}, ns); err != nil {
		return "", fmt.Errorf("reading upstream namespace %s: %w", u.obj.GetNamespace(), err)
	}
	return anchor.EnsureMappedNamespace(ctx, hub, u.project, ns)
}

// hubWriter is the writer of the owner's downstream objects in hubNS through hub.
func (u *upstream) hubWriter(hub client.Client, hubNS string) hubWriter {
	return hubWriter{hub: hub, owner: u.owner, ns: hubNS, metrics: u.metrics, written: u.written}
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

// mappedNamespaceOf returns the hub namespace of the upstream namespace name, read
// live, or "" when that namespace no longer exists.
func mappedNamespaceOf(ctx context.Context, project client.Reader, name string) (string, error) {
	ns := &corev1.Namespace{}
	err := project.Get(ctx, client.ObjectKey{Name: name}, ns)
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("reading upstream namespace %s: %w", name, err)
	}
	return anchor.MappedNamespace(ns.UID), nil
}

// addFinalizer adds finalizer to obj with a patch conditional on the resourceVersion
// read.
func addFinalizer(ctx context.Context, c client.Client, obj client.Object, finalizer string) error {
	if controllerutil.ContainsFinalizer(obj, finalizer) {
		return nil
	}
	orig := obj.DeepCopyObject().(client.Object)
	controllerutil.AddFinalizer(obj, finalizer)
	if err := c.Patch(ctx, obj, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("adding finalizer %s to %s: %w", finalizer, client.ObjectKeyFromObject(obj), err)
	}
	return nil
}

// removeFinalizer removes finalizers from obj in one patch, conditional on the
// resourceVersion read. Only a NotFound that proves obj gone is success (one naming its
// namespace is not).
func removeFinalizer(ctx context.Context, c client.Client, obj client.Object, finalizers ...string) error {
	orig := obj.DeepCopyObject().(client.Object)
	removed := false
	for _, f := range finalizers {
		removed = controllerutil.RemoveFinalizer(obj, f) || removed
	}
	if !removed {
		return nil
	}
	err := c.Patch(ctx, obj, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
	if err != nil && !isNotFoundOf(c, err, obj) {
		return fmt.Errorf("removing finalizers %v from %s: %w", finalizers, client.ObjectKeyFromObject(obj), err)
	}
	return nil
}

// isNotFoundOf reports whether err proves obj itself absent
// (anchor.NotFoundProvesAbsence); an unresolvable resource proves nothing.
func isNotFoundOf(c client.Client, err error, obj client.Object) bool {
	if !apierrors.IsNotFound(err) {
		return false
	}
	gvk, gvkErr := c.GroupVersionKindFor(obj)
	if gvkErr != nil {
		return false
	}
	mapping, mapErr := c.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
	if mapErr != nil {
		return false
	}
	return anchor.NotFoundProvesAbsence(err, mapping.Resource.GroupResource(), obj.GetName())
}

// patchStatus writes after's status when it differs from before's, conditional on the
// resourceVersion read.
func patchStatus(ctx context.Context, c client.Client, before, after client.Object) error {
	if equality.Semantic.DeepEqual(before, after) {
		return nil
	}
	err := c.Status().Patch(ctx, after, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("writing status of %s: %w", client.ObjectKeyFromObject(after), err)
	}
	return nil
}
