package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"anchorage/api/v1alpha"
)

// guardVerdict is the live guard's answer about one owner read uncached
// (docs/design.md, Gateway path: Live guard).
type guardVerdict string

const (
	// guardPass: live, with the reconcile's UID, not terminating, carrying our finalizer.
	guardPass guardVerdict = ""
	// guardGone: the object no longer exists (the cache was stale).
	guardGone guardVerdict = "gone"
	// guardReplaced: an object of the same name has another UID; its own reconcile acts.
	guardReplaced guardVerdict = "replaced"
	// guardTerminating: the object is being deleted; only the finalizer may act.
	guardTerminating guardVerdict = "terminating"
	// guardUnfinalized: our finalizer is absent, so nothing would delete what we create.
	guardUnfinalized guardVerdict = "unfinalized"
)

var allGuardVerdicts = []guardVerdict{guardGone, guardReplaced, guardTerminating, guardUnfinalized}

// judgeLive judges the live object (nil: NotFound) against uid and our finalizer.
func judgeLive(live client.Object, uid types.UID, finalizer string) guardVerdict {
	switch {
	case live == nil:
		return guardGone
	case live.GetUID() != uid:
		return guardReplaced
	case live.GetDeletionTimestamp() != nil:
		return guardTerminating
	case !controllerutil.ContainsFinalizer(live, finalizer):
		return guardUnfinalized
	}
	return guardPass
}

// newEmptyLike returns an empty object of obj's type (and kind, for unstructured).
func newEmptyLike(obj client.Object) client.Object {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		fresh := &unstructured.Unstructured{}
		fresh.SetGroupVersionKind(u.GroupVersionKind())
		return fresh
	}
	return reflect.New(reflect.TypeOf(obj).Elem()).Interface().(client.Object)
}

// unfinalizedRecheck is when a reconcile refused for a missing finalizer looks again:
// nothing brings a Gateway or HTTPRoute back when its proxy gets its finalizer.
const unfinalizedRecheck = 2 * time.Second

// guarded is one owner the live guard reads: kind, object (key and UID) and finalizer.
type guarded struct {
	kind      string
	obj       client.Object
	finalizer string
}

// ownersGuard is the live guard of one reconcile: the owners that must all pass, in
// the order read (the object itself, then the HTTPProxy controlling it, if any).
type ownersGuard struct {
	reader  client.Reader // uncached
	owners  []guarded
	metrics *Metrics
}

// guardRefusal is the live guard's refusal (which owner, why): not a failure.
type guardRefusal struct {
	kind    string
	key     client.ObjectKey
	verdict guardVerdict
}

func (r *guardRefusal) Error() string {
	return fmt.Sprintf("live guard: %s %s is %s", r.kind, r.key, r.verdict)
}

// checkLive reads every owner live, in order: a counted *guardRefusal for the first
// that fails, the read error (not knowing is not passing), or, when every owner
// passes, the first one as read.
func (g ownersGuard) checkLive(ctx context.Context) (client.Object, error) {
	var first client.Object
	for i, o := range g.owners {
		key := client.ObjectKeyFromObject(o.obj)
		live := newEmptyLike(o.obj)
		if err := g.reader.Get(ctx, key, live); apierrors.IsNotFound(err) {
			live = nil
		} else if err != nil {
			return nil, fmt.Errorf("reading %s live for the live guard: %w", key, err)
		}
		if v := judgeLive(live, o.obj.GetUID(), o.finalizer); v != guardPass {
			g.metrics.guardRefusal(o.kind, v)
			return nil, &guardRefusal{kind: o.kind, key: key, verdict: v}
		}
		if i == 0 {
			first = live
		}
	}
	return first, nil
}

// isGuardRefusal reports whether err is (or wraps) the live guard's refusal.
func isGuardRefusal(err error) bool {
	var refused *guardRefusal
	return errors.As(err, &refused)
}

// endOnRefusal ends a phase on the live guard's answer: nil goes on; a refusal ends
// the reconcile quietly, requeued only when unfinalized; any other error is returned.
func endOnRefusal(log logr.Logger, err error, requeueAfter *time.Duration) (bool, error) {
	var refused *guardRefusal
	if !errors.As(err, &refused) {
		return err != nil, err
	}
	log.V(2).Info("Writing nothing: the live guard refused", "owner", refused.kind, "object", refused.key.String(), "verdict", string(refused.verdict))
	if refused.verdict == guardUnfinalized {
		*requeueAfter = unfinalizedRecheck
	}
	return true, nil
}

// controllingProxy returns the HTTPProxy obj's controller reference names, or nil.
func controllingProxy(obj client.Object) *v1alpha.HTTPProxy {
	ref := metav1.GetControllerOf(obj)
	if ref == nil || ref.Kind != kindHTTPProxy {
		return nil
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil || gv.Group != v1alpha.GroupVersion.Group {
		return nil
	}
	return &v1alpha.HTTPProxy{ObjectMeta: metav1.ObjectMeta{Namespace: obj.GetNamespace(), Name: ref.Name, UID: ref.UID}}
}

// createsGuarded is a client whose every Create first passes the live guard again
// (docs/design.md, Residual windows, 4). Other calls pass straight through.
type createsGuarded struct {
	client.Client
	guard ownersGuard
}

func (c createsGuarded) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	if _, err := c.guard.checkLive(ctx); err != nil {
		return fmt.Errorf("creating %T %s: %w", obj, client.ObjectKeyFromObject(obj), err)
	}
	return c.Client.Create(ctx, obj, opts...)
}

// SendCreatesOnce wraps the hub client's transport (rest.Config.Wrap) so a create reaches
// the hub at most once per live guard: it strips Retry-After from a create's 429 or 5xx
// (docs/design.md, Residual windows, 4). Other verbs keep client-go's retry.
func SendCreatesOnce(rt http.RoundTripper) http.RoundTripper {
	return createsOnceTransport{next: rt}
}

type createsOnceTransport struct{ next http.RoundTripper }

func (t createsOnceTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(r)
	// client-go resends a 429 or 5xx that carries Retry-After.
	if err == nil && r.Method == http.MethodPost && (resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= http.StatusInternalServerError) {
		resp.Header = resp.Header.Clone()
		resp.Header.Del("Retry-After")
	}
	return resp, err
}

// WrappedRoundTripper lets client-go reach the real transport to cancel requests.
func (t createsOnceTransport) WrappedRoundTripper() http.RoundTripper { return t.next }
