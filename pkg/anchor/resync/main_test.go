package resync

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"anchorage/internal/testenv"
)

// hub is an uncached client of the package's one envtest API server, which plays the
// hub. It is nil when no server was started (see TestMain). It can watch so that tests
// can wrap it with controller-runtime's interceptor.
var hub client.WithWatch

// hubConfig is the admin REST config of that API server (nil when none runs).
var hubConfig *rest.Config

// TestMain starts one API server for the whole package.
func TestMain(m *testing.M) {
	flag.Parse()
	// Deletes log through controller-runtime's logger, which complains when unset.
	ctrllog.SetLogger(logr.Discard())
	os.Exit(runWithHub(m))
}

func runWithHub(m *testing.M) int {
	return testenv.RunWithHub(m, func(cfg *rest.Config) error {
		hubConfig = cfg
		c, err := client.NewWithWatch(cfg, client.Options{})
		if err != nil {
			return fmt.Errorf("creating hub client: %w", err)
		}
		hub = c
		return nil
	})
}

// needHub returns the hub client, skipping the test when no API server runs.
func needHub(t *testing.T) client.WithWatch {
	t.Helper()
	if hub == nil {
		t.Skip("no API server in this process")
	}
	return hub
}
