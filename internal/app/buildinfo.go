package app

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"anchorage/internal/version"
)

// BuildInfoMetric is the name of the gauge that is 1 and labelled with the build's
// identity: dashboards and alerts join on it to tell which release a replica runs.
const BuildInfoMetric = "anchorage_build_info"

// newBuildInfo returns anchorage_build_info{version,commit,go_version} = 1 for info.
func newBuildInfo(info version.Info) prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        BuildInfoMetric,
		Help:        "1, labelled with the version, commit and Go version this replica was built from.",
		ConstLabels: prometheus.Labels{"version": info.Version, "commit": info.Commit, "go_version": info.GoVersion},
	})
	g.Set(1)
	return g
}

// registerBuildInfo registers the build info gauge with reg; one already there (a
// second replica in one process sharing the registry) is the same build and is kept.
func registerBuildInfo(reg prometheus.Registerer) error {
	err := reg.Register(newBuildInfo(version.Get()))
	var already prometheus.AlreadyRegisteredError
	if err == nil || errors.As(err, &already) {
		return nil
	}
	return fmt.Errorf("registering %s: %w", BuildInfoMetric, err)
}
