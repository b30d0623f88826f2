package harness

import (
	"context"
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// WaitFor polls check until it returns nil, and gives up when ctx ends, with check's
// last error, or at once when one of exited (a process doing the work: its Exited
// method) reports its process gone: the reason is in its log, not in a timeout.
func WaitFor(ctx context.Context, what string, check func(context.Context) error, exited ...func() error) error {
	for {
		last := check(ctx)
		if last == nil {
			return nil
		}
		for _, gone := range exited {
			if err := gone(); err != nil {
				return fmt.Errorf("waiting for %s: %w", what, err)
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, errors.Join(ctx.Err(), last))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// WaitForReady polls the object gvk/key until its status holds the condition Ready=True,
// and returns it; it gives up as WaitFor does, with the conditions it saw last.
func WaitForReady(ctx context.Context, c client.Client, gvk schema.GroupVersionKind, key client.ObjectKey, exited ...func() error) (*unstructured.Unstructured, error) {
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(gvk)
	err := WaitFor(ctx, gvk.Kind+" "+key.String()+" Ready", func(ctx context.Context) error {
		if err := c.Get(ctx, key, obj); err != nil {
			return err
		}
		if !conditionTrue(obj, "Ready") {
			conds, _, _ := unstructured.NestedFieldNoCopy(obj.Object, "status", "conditions")
			return fmt.Errorf("conditions %v", conds)
		}
		return nil
	}, exited...)
	if err != nil {
		return nil, err
	}
	return obj, nil
}

// conditionTrue says whether obj's status.conditions holds typ with status True.
func conditionTrue(obj *unstructured.Unstructured, typ string) bool {
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if ok && m["type"] == typ && m["status"] == string(metav1.ConditionTrue) {
			return true
		}
	}
	return false
}
