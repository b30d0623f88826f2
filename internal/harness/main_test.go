package harness

import (
	"context"
	"os"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"anchorage/internal/testenv"
)

// TestMain gives controller-runtime a logger (ANCHORAGE_TEST_LOG's, silent by default):
// envtest logs through it, and unset it prints a stack trace into a run that takes
// longer than 30 seconds.
func TestMain(m *testing.M) {
	ctrllog.SetLogger(LoggerFromEnv())
	os.Exit(m.Run())
}

// testHub starts an API server serving the hub's CRDs for one test (skipped under
// -short) and returns a context bounded by within, the server's config and a client.
func testHub(t *testing.T, within time.Duration) (context.Context, *rest.Config, client.Client) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts an API server")
	}
	ctx, cancel := context.WithTimeout(t.Context(), within)
	t.Cleanup(cancel)
	crds, err := testenv.HubCRDs()
	if err != nil {
		t.Fatal(err)
	}
	cfg := testenv.StartAPIServer(t, crds...)
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return ctx, cfg, c
}
