package gateway

import (
	"context"
	"fmt"
	"reflect"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// guardVerdict is the live guard's answer about an upstream object, read uncached just
// before anything is created on the hub for it.
type guardVerdict string

const (
	// guardPass: the object exists with the UID the reconcile is about, is not being
	// deleted and carries our finalizer, so whatever is created for it will be
	// finalized.
	guardPass guardVerdict = ""
	// guardGone: the object no longer exists. The reconcile ran on a stale cache after
	// a finalized deletion: creating anything now would leak an anchor nobody deletes.
	guardGone guardVerdict = "gone"
	// guardReplaced: an object of the same name with another UID exists. Its own
	// reconcile (with its own UID) does the work.
	guardReplaced guardVerdict = "replaced"
	// guardTerminating: the object is being deleted; only the finalizer may act.
	guardTerminating guardVerdict = "terminating"
	// guardUnfinalized: our finalizer is absent, so nothing would delete what we create.
	guardUnfinalized guardVerdict = "unfinalized"
)

var allGuardVerdicts = []guardVerdict{guardGone, guardReplaced, guardTerminating, guardUnfinalized}

// judgeLive decides the live guard from the live object (nil when the API server said
// NotFound), the UID the reconcile is about and our finalizer.
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

// liveGuard reads cached's object through reader (which must not be a cache) and
// judges it. Any error other than NotFound is returned: not knowing is not passing.
func liveGuard(ctx context.Context, reader client.Reader, cached client.Object, finalizer string) (guardVerdict, error) {
	live := newEmptyLike(cached)
	err := reader.Get(ctx, client.ObjectKeyFromObject(cached), live)
	if apierrors.IsNotFound(err) {
		return judgeLive(nil, cached.GetUID(), finalizer), nil
	}
	if err != nil {
		return "", fmt.Errorf("reading %s live for the live guard: %w", client.ObjectKeyFromObject(cached), err)
	}
	return judgeLive(live, cached.GetUID(), finalizer), nil
}

// newEmptyLike returns an empty object of obj's type (and, for unstructured objects,
// its kind). Decoding into a used object merges maps and keeps absent fields, so every
// read gets a fresh one.
func newEmptyLike(obj client.Object) client.Object {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		fresh := &unstructured.Unstructured{}
		fresh.SetGroupVersionKind(u.GroupVersionKind())
		return fresh
	}
	return reflect.New(reflect.TypeOf(obj).Elem()).Interface().(client.Object)
}
