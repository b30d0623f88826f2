// Command manager runs one anchorage replica and, as `manager sweep`, one anchor resync
// pass or the cut-over check for an operator. It only parses flags, reads the
// configuration file (pkg/config) and wires: the replica is assembled by internal/app,
// the sweep by pkg/anchor/resync (flags and keys: docs/operations.md).
//
// Files: main.go (start here) runs a command line and the replica; root.go builds the
// commands; flags.go holds the common and replica flags; sweep.go the sweep's flags and
// the sweep; logging.go the logging flags and logger. Every setting the replicas share
// is in the configuration file (--config, pkg/config).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"

	"anchorage/internal/app"
	"anchorage/pkg/config"
	"anchorage/pkg/shard"
)

func main() {
	os.Exit(execute(ctrl.SetupSignalHandler(), os.Args[1:], os.Stdout, os.Stderr, defaultRunners))
}

// execute runs one command line and returns the exit code. Help and output go to out; a
// failure is one line on errOut, `<command path>: <error>`, and exit code 1 or an
// exitError's code.
func execute(ctx context.Context, args []string, out, errOut io.Writer, r runners) int {
	root := newRootCommand(r)
	root.SetArgs(args)
	root.SetOut(out)
	root.SetErr(errOut)
	cmd, err := root.ExecuteContextC(ctx)
	if err != nil {
		fmt.Fprintf(errOut, "%s: %v\n", cmd.CommandPath(), err)
		var exit *exitError
		if errors.As(err, &exit) {
			return exit.code
		}
		return 1
	}
	return 0
}

// exitError ends the process with its own exit code rather than 1.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// runReplica runs one replica until ctx ends.
func runReplica(cmd *cobra.Command, common *commonFlags, f *replicaFlags, l *config.Loaded) error {
	log := setupLogging(&common.log, cmd.ErrOrStderr(), f.identity)
	hub, err := common.hubConfig(l)
	if err != nil {
		return err
	}
	var recorder shard.Recorder
	if f.recordFile != "" {
		fr, err := shard.NewFileRecorder(f.recordFile)
		if err != nil {
			return err
		}
		defer fr.Close()
		recorder = fr
	}
	logKeys(log, l)
	ctx := cmd.Context()
	opts, err := replicaOptions(f, l, hub, log, recorder)
	if err != nil {
		return err
	}
	replica, err := app.New(ctx, opts)
	if err != nil {
		return err
	}
	if !f.metricsSecure && f.metricsAddr != "0" {
		log.Info("Serving /metrics in plain HTTP without authentication (--metrics-secure=false): for local runs only", "address", f.metricsAddr)
	}
	log.Info("Starting replica", "config", l.Path, "providerNamespace", l.ProviderNamespace, "hub", hub.Host)
	if err := replica.Start(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("running replica: %w", err)
	}
	return nil
}

// replicaOptions are the replica's options from its command line and configuration.
func replicaOptions(f *replicaFlags, l *config.Loaded, hub *rest.Config, log logr.Logger, recorder shard.Recorder) (app.Options, error) {
	project := l.Clients.Project
	settings, checker, err := l.DomainSettings()
	if err != nil {
		return app.Options{}, err
	}
	return app.Options{
		Hub:                hub,
		ProviderNamespace:  l.ProviderNamespace,
		LeaseNamespace:     l.LeaseNamespaceOrProvider(),
		Identity:           f.identity,
		MetricsAddr:        f.metricsAddr,
		InsecureMetrics:    !f.metricsSecure,
		HealthAddr:         f.healthAddr,
		Logger:             log,
		HubCheckTimeout:    l.HubTimeout.Duration,
		ProjectCallTimeout: l.Sharding.ProjectCallTimeout.Duration,
		ProjectRESTOptions: []func(*rest.Config) error{func(c *rest.Config) error { c.QPS, c.Burst = project.QPS, project.Burst; return nil }},
		Timings:            l.Timings(),
		Weight:             f.weight,
		Resync:             l.ResyncOptions(),
		Gateway:            l.GatewayConfig(),
		Domains:            app.Domains{Settings: settings, Checker: checker, Workers: l.DomainVerification.Workers},
		Recorder:           recorder,
	}, nil
}

// logKeys says once, at start, what each key of a previous manager's configuration
// became, and which are not served: none is ignored silently.
func logKeys(log logr.Logger, l *config.Loaded) {
	for _, k := range l.Keys {
		switch {
		case k.Became != "":
			log.Info("Configuration key of the previous manager mapped", "key", k.Path, "became", k.Became)
		case k.Lost:
			log.Info("WARNING: configuration key of the previous manager not served: tenants lose what it did", "key", k.Path, "value", k.Value, "why", k.Why)
		default:
			log.Info("Configuration key of the previous manager not served by this manager", "key", k.Path, "value", k.Value, "why", k.Why)
		}
	}
}
