package harness

import (
	"os"
	"testing"

	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// TestMain gives controller-runtime a logger (ANCHORAGE_TEST_LOG's, silent by default):
// envtest logs through it, and unset it prints a stack trace into a run that takes
// longer than 30 seconds.
func TestMain(m *testing.M) {
	ctrllog.SetLogger(LoggerFromEnv())
	os.Exit(m.Run())
}
