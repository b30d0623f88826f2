package shard

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clocktesting "k8s.io/utils/clock/testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// TestGuardedClientRefusesEveryWrite: past validity, every write method of the client and
// of its subresource clients is refused before anything is sent, Apply included; reads
// still pass. The lists of methods tried are checked against controller-runtime's Writer
// and SubResourceWriter interfaces, so a write method added by a new version fails this
// test until it is guarded.
func TestGuardedClientRefusesEveryWrite(t *testing.T) {
	sent := 0
	count := func() error { sent++; return nil }
	base := interceptor.NewClient(fake.NewClientBuilder().Build(), interceptor.Funcs{
		Create: func(context.Context, client.WithWatch, client.Object, ...client.CreateOption) error { return count() },
		Update: func(context.Context, client.WithWatch, client.Object, ...client.UpdateOption) error { return count() },
		Patch: func(context.Context, client.WithWatch, client.Object, client.Patch, ...client.PatchOption) error {
			return count()
		},
		Apply: func(context.Context, client.WithWatch, runtime.ApplyConfiguration, ...client.ApplyOption) error {
			return count()
		},
		Delete: func(context.Context, client.WithWatch, client.Object, ...client.DeleteOption) error { return count() },
		DeleteAllOf: func(context.Context, client.WithWatch, client.Object, ...client.DeleteAllOfOption) error {
			return count()
		},
		SubResourceCreate: func(context.Context, client.Client, string, client.Object, client.Object, ...client.SubResourceCreateOption) error {
			return count()
		},
		SubResourceUpdate: func(context.Context, client.Client, string, client.Object, ...client.SubResourceUpdateOption) error {
			return count()
		},
		SubResourcePatch: func(context.Context, client.Client, string, client.Object, client.Patch, ...client.SubResourcePatchOption) error {
			return count()
		},
		SubResourceApply: func(context.Context, client.Client, string, runtime.ApplyConfiguration, ...client.SubResourceApplyOption) error {
			return count()
		},
	})
	ended := errors.New("validity ended")
	g := guardedClient{Client: base, check: func() error { return ended }}
	ctx := context.Background()
	cm := func() *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "x"}}
	}
	ac := corev1ac.ConfigMap("x", "ns")
	writes := map[string]func() error{
		"Create":      func() error { return g.Create(ctx, cm()) },
		"Update":      func() error { return g.Update(ctx, cm()) },
		"Patch":       func() error { return g.Patch(ctx, cm(), client.Merge) },
		"Apply":       func() error { return g.Apply(ctx, ac) },
		"Delete":      func() error { return g.Delete(ctx, cm()) },
		"DeleteAllOf": func() error { return g.DeleteAllOf(ctx, cm(), client.InNamespace("ns")) },
	}
	subWrites := map[string]func(client.SubResourceWriter) error{
		"Create": func(w client.SubResourceWriter) error { return w.Create(ctx, cm(), cm()) },
		"Update": func(w client.SubResourceWriter) error { return w.Update(ctx, cm()) },
		"Patch":  func(w client.SubResourceWriter) error { return w.Patch(ctx, cm(), client.Merge) },
		"Apply":  func(w client.SubResourceWriter) error { return w.Apply(ctx, ac) },
	}
	if n := reflect.TypeFor[client.Writer]().NumMethod(); n != len(writes) {
		t.Errorf("client.Writer has %d methods, %d are tried here: guard and try the new one", n, len(writes))
	}
	if n := reflect.TypeFor[client.SubResourceWriter]().NumMethod(); n != len(subWrites) {
		t.Errorf("client.SubResourceWriter has %d methods, %d are tried here: guard and try the new one", n, len(subWrites))
	}
	for name, write := range writes {
		if err := write(); !errors.Is(err, ended) {
			t.Errorf("%s past validity: %v, want the validity error", name, err)
		}
	}
	for _, sub := range []struct {
		name string
		w    client.SubResourceWriter
	}{{"Status()", g.Status()}, {`SubResource("scale")`, g.SubResource("scale")}} {
		for name, write := range subWrites {
			if err := write(sub.w); !errors.Is(err, ended) {
				t.Errorf("%s.%s past validity: %v, want the validity error", sub.name, name, err)
			}
		}
	}
	if sent != 0 {
		t.Errorf("%d writes reached the API past validity", sent)
	}
	if err := g.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "x"}, cm()); err == nil || errors.Is(err, ended) {
		t.Errorf("a read past validity: %v, want it to reach the API (NotFound)", err)
	}
}

// TestHubWritesStopAMarginBeforeValidityEnds: the hub writer refuses a write once less
// than writeMargin of validity is left, so that a write sent in validity's last instant
// does not reach the API server after it.
func TestHubWritesStopAMarginBeforeValidityEnds(t *testing.T) {
	now := time.Date(2026, 12, 2, 2, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name     string
		holder   string
		validFor time.Duration
		refused  bool
	}{
		{"valid for a second", "pod/1", time.Second, false},
		{"valid for just over the margin", "pod/1", writeMargin + time.Millisecond, false},
		{"valid for exactly the margin", "pod/1", writeMargin, true},
		{"valid for less than the margin", "pod/1", writeMargin / 2, true},
		{"validity over", "pod/1", 0, true},
		{"not a member", "", time.Second, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(now)
			s := &Shard{clock: clk, m: newMetrics(prometheus.NewRegistry())}
			s.member = &membership{clock: clk, holder: tc.holder, validUntil: now.Add(tc.validFor)}
			err := s.checkValid()
			if refused := errors.Is(err, ErrValidityEnded); refused != tc.refused || (err != nil && !refused) {
				t.Errorf("checkValid() = %v, want refused %t", err, tc.refused)
			}
		})
	}
}
