package anchor

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

// TestMain starts one API server for the whole package. Fuzzing runs the test binary
// once per worker and needs no server, so it starts none, and the tests that need one
// skip.
func TestMain(m *testing.M) {
	flag.Parse()
	// Delete logs through controller-runtime's logger, which complains when unset.
	ctrllog.SetLogger(logr.Discard())
	if fuzzing() {
		os.Exit(m.Run())
	}
	os.Exit(runWithHub(m))
}

// fuzzing reports whether this process is a fuzzing coordinator or worker.
func fuzzing() bool {
	if f := flag.Lookup("test.fuzz"); f != nil && f.Value.String() != "" {
		return true
	}
	if f := flag.Lookup("test.fuzzworker"); f != nil && f.Value.String() == "true" {
		return true
	}
	return false
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
		t.Skip("no API server in this process (fuzzing)")
	}
	return hub
}
