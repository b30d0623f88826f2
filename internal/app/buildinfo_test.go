package app

import (
	"runtime"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"anchorage/internal/version"
)

// TestBuildInfoIsOneLabelledWithTheBuild: anchorage_build_info is 1 with the version,
// commit and Go version the binary reports, and registering it twice in one registry
// (two replicas in one process) is not an error.
func TestBuildInfoIsOneLabelledWithTheBuild(t *testing.T) {
	saved := version.Version
	version.Version = "v9.9.9-test"
	defer func() { version.Version = saved }()
	reg := prometheus.NewRegistry()
	for i := 0; i < 2; i++ {
		if err := registerBuildInfo(reg); err != nil {
			t.Fatalf("registration %d: %v", i+1, err)
		}
	}
	info := version.Get()
	want := `
# HELP anchorage_build_info 1, labelled with the version, commit and Go version this replica was built from.
# TYPE anchorage_build_info gauge
anchorage_build_info{commit="` + info.Commit + `",go_version="` + runtime.Version() + `",version="v9.9.9-test"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), BuildInfoMetric); err != nil {
		t.Fatal(err)
	}
}
