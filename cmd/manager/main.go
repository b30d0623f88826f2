// Command manager runs one anchorage replica and, as `manager sweep`, one anchor resync
// pass or the cut-over check for an operator. It only parses flags and wires: the replica
// is assembled by internal/app, the sweep by pkg/anchor/resync (flags: docs/operations.md).
//
// Files: main.go (start here) runs a command line and the replica; root.go builds the
// commands; flags.go holds the common and replica flags and their checks; sweep.go the
// resync flags and the sweep; logging.go the logging flags and logger.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	ctrl "sigs.k8s.io/controller-runtime"

	"anchorage/internal/app"
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
func runReplica(cmd *cobra.Command, common *commonFlags, f *replicaFlags) error {
	log := setupLogging(&common.log, cmd.ErrOrStderr(), f.identity)
	hub, err := common.hubConfig()
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
	ctx := cmd.Context()
	replica, err := app.New(ctx, app.Options{
		Hub:                hub,
		ProviderNamespace:  common.providerNamespace,
		LeaseNamespace:     common.leaseNamespace,
		Identity:           f.identity,
		MetricsAddr:        f.metricsAddr,
		InsecureMetrics:    !f.metricsSecure,
		HealthAddr:         f.healthAddr,
		Logger:             log,
		HubCheckTimeout:    f.hubTimeout,
		ProjectCallTimeout: f.projectCallTimeout,
		Timings:            f.timings(),
		Weight:             f.weight,
		Resync:             f.resync.options(),
		Gateway:            f.gateway,
		Recorder:           recorder,
	})
	if err != nil {
		return err
	}
	if !f.metricsSecure && f.metricsAddr != "0" {
		log.Info("Serving /metrics in plain HTTP without authentication (--metrics-secure=false): for local runs only", "address", f.metricsAddr)
	}
	log.Info("Starting replica", "providerNamespace", common.providerNamespace, "hub", hub.Host)
	if err := replica.Start(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("running replica: %w", err)
	}
	return nil
}
