package app

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"anchorage/internal/version"
)

// BuildInfoMetric is the gauge that is 1, labelled with the build's version, commit
// and Go version.
const BuildInfoMetric = "anchorage_build_info"

// registerBuildInfo registers the BuildInfoMetric gauge with reg; one already registered
// is the same build and is kept.
func registerBuildInfo(reg prometheus.Registerer) error {
	info := version.Get()
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        BuildInfoMetric,
		Help:        "1, labelled with the version, commit and Go version this replica was built from.",
		ConstLabels: prometheus.Labels{"version": info.Version, "commit": info.Commit, "go_version": info.GoVersion},
	})
	g.Set(1)
	err := reg.Register(g)
	var already prometheus.AlreadyRegisteredError
	if err == nil || errors.As(err, &already) {
		return nil
	}
	return fmt.Errorf("registering %s: %w", BuildInfoMetric, err)
}
