package harness

import (
	"path/filepath"
	"testing"

	"anchorage/pkg/config"
)

// TestWriteConfigIsWhatTheManagerLoads: the file WriteConfig writes loads (strictly,
// as the manager's --config does) into the defaults with the edit applied, and
// SetTimings gives a manager process the timings WithTimings gives an in-process one.
func TestWriteConfigIsWhatTheManagerLoads(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	err := WriteConfig(path, func(c *config.ManagerConfiguration) {
		c.ProviderNamespace = "bench-1"
		c.Resync.Enabled = false
		SetTimings(c, FastTimings)
	})
	if err != nil {
		t.Fatal(err)
	}
	l, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if l.ProviderNamespace != "bench-1" || l.LeaseNamespaceOrProvider() != "bench-1" || l.Resync.Enabled {
		t.Errorf("the edit did not reach the file: providerNamespace %q, lease namespace %q, resync.enabled %v",
			l.ProviderNamespace, l.LeaseNamespaceOrProvider(), l.Resync.Enabled)
	}
	if got, want := l.Timings(), FastTimings; got != want {
		t.Errorf("timings: got %+v, want %+v", got, want)
	}
	if got, want := l.Gateway.BackendReservedDomains, config.Default().Gateway.BackendReservedDomains; len(got) != len(want) {
		t.Errorf("a key the edit left keeps its default: backendReservedDomains %v, want %v", got, want)
	}

	if err := WriteConfig(path, func(c *config.ManagerConfiguration) { c.Resync.Workers = 0 }); err == nil {
		t.Error("WriteConfig wrote a configuration the manager refuses (resync.workers 0)")
	}
}
