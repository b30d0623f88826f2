// Package anchorcache starts the hub's anchor cache for tests that run without a
// manager (a manager starts it as one of its runnables).
package anchorcache

import (
	"context"
	"testing"

	"k8s.io/client-go/rest"

	"anchorage/pkg/anchor/resync"
)

// Start runs the anchor cache on cfg (its own connection) until t ends, and returns it
// once synced; a cache that does not sync, or whose Start fails, fails t.
func Start(t testing.TB, ctx context.Context, cfg *rest.Config) *resync.AnchorCache {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	c, err := resync.NewAnchorCache(ctx, cfg, nil, nil)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("anchor cache: %v", err)
		}
	})
	if !c.WaitForCacheSync(ctx) {
		t.Fatal("the anchor cache did not sync")
	}
	return c
}
