// Command manager runs one anchorage replica. It only parses flags and wires; the
// replica is assembled by internal/app.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/go-logr/zapr"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"

	"anchorage/internal/app"
	"anchorage/pkg/shard"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "sweep" {
		if err := runSweep(os.Args[2:], os.Stdout, os.Stderr); err != nil {
			fmt.Fprintf(os.Stderr, "manager: sweep: %v\n", err)
			os.Exit(1)
		}
		return
	}
	if err := run(os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "manager: %v\n", err)
		os.Exit(1)
	}
}

type flags struct {
	kubeconfig, providerNamespace, leaseNamespace, identity string
	metricsAddr, healthAddr, logLevel                       string
	recordFile                                              string
	leaseDuration, renewDeadline, retryPeriod, hubTimeout   time.Duration
	claimDeadline                                           time.Duration
	weight                                                  float64
	metricsSecure                                           bool
	resync                                                  resyncFlags
}

func parseFlags(args []string, out io.Writer) (flags, error) {
	var f flags
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	// Errors come back as one line through main; usage is printed only for -h.
	fs.SetOutput(io.Discard)
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig of the hub cluster (default: in-cluster or $KUBECONFIG)")
	fs.StringVar(&f.providerNamespace, "provider-namespace", "anchorage-system", "hub namespace holding the projects' kubeconfig Secrets")
	fs.StringVar(&f.leaseNamespace, "lease-namespace", "", "hub namespace holding member and project Leases (default: --provider-namespace)")
	fs.StringVar(&f.identity, "identity", os.Getenv("POD_NAME"), "this replica's name, normally the pod name (default $POD_NAME)")
	fs.StringVar(&f.metricsAddr, "metrics-bind-address", ":8443", "address serving /metrics; 0 turns it off")
	fs.BoolVar(&f.metricsSecure, "metrics-secure", true, "serve /metrics over HTTPS to callers whose token the hub authorizes for get on /metrics; false serves plain HTTP to anyone, for local runs only")
	fs.StringVar(&f.healthAddr, "health-probe-bind-address", ":8081", "address serving /healthz and /readyz; 0 turns it off")
	fs.StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, error, or a number (higher is more verbose)")
	fs.DurationVar(&f.leaseDuration, "lease-duration", 15*time.Second, "member Lease duration")
	fs.DurationVar(&f.renewDeadline, "renew-deadline", 10*time.Second, "member Lease renew deadline (validity after a renew is sent)")
	fs.DurationVar(&f.retryPeriod, "retry-period", 2*time.Second, "member Lease retry period")
	fs.DurationVar(&f.claimDeadline, "claim-deadline", 0, "how long an assigned project may stay unclaimed before it moves on (default 2 x --lease-duration)")
	fs.Float64Var(&f.weight, "weight", 1, "this replica's share of projects relative to others")
	fs.StringVar(&f.recordFile, "record-file", "", "append a JSON line per admitted unit of project work (replica, project, start, end) to this file, for audits and bench/")
	fs.DurationVar(&f.hubTimeout, "hub-timeout", 10*time.Second, "how long to wait for the hub at start-up")
	f.resync.register(fs, true)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(out)
			fs.PrintDefaults()
		}
		return f, err
	}
	if fs.NArg() > 0 {
		return f, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if f.identity == "" {
		return f, errors.New("--identity is required when $POD_NAME is not set")
	}
	if err := f.timings().WithDefaults().Validate(); err != nil {
		return f, fmt.Errorf("lease timings: %w", err)
	}
	if f.weight <= 0 {
		return f, fmt.Errorf("--weight must be positive, got %g", f.weight)
	}
	if err := f.resync.refuseZeroLimits(); err != nil {
		return f, err
	}
	if err := f.resync.options().Validate(); err != nil {
		return f, fmt.Errorf("resync: %w", err)
	}
	return f, nil
}

func (f flags) timings() shard.Timings {
	return shard.Timings{LeaseDuration: f.leaseDuration, RenewDeadline: f.renewDeadline, RetryPeriod: f.retryPeriod, ClaimDeadline: f.claimDeadline}
}

func zapLevel(s string) (zapcore.Level, error) {
	switch strings.ToLower(s) {
	case "debug":
		return zapcore.DebugLevel, nil
	case "info":
		return zapcore.InfoLevel, nil
	case "error":
		return zapcore.ErrorLevel, nil
	}
	var n int
	if _, err := fmt.Sscanf(s, "%d", &n); err != nil || n < 0 || n > 10 {
		return 0, fmt.Errorf("--log-level %q: want debug, info, error or 0-10", s)
	}
	// logr verbosity V(n) maps to zap level -n.
	return zapcore.Level(-n), nil
}

func run(args []string, out io.Writer) error {
	f, err := parseFlags(args, out)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	level, err := zapLevel(f.logLevel)
	if err != nil {
		return err
	}
	zcfg := zap.NewProductionConfig()
	zcfg.Level = zap.NewAtomicLevelAt(level)
	zcfg.Sampling = nil
	zl, err := zcfg.Build()
	if err != nil {
		return fmt.Errorf("building logger: %w", err)
	}
	log := zapr.NewLogger(zl).WithValues("replica", f.identity)
	ctrl.SetLogger(log)

	loading := clientcmd.NewDefaultClientConfigLoadingRules()
	if f.kubeconfig != "" {
		loading.ExplicitPath = f.kubeconfig
	}
	hub, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(loading, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return fmt.Errorf("loading hub kubeconfig: %w", err)
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

	ctx := ctrl.SetupSignalHandler()
	replica, err := app.New(ctx, app.Options{
		Hub:               hub,
		ProviderNamespace: f.providerNamespace,
		LeaseNamespace:    f.leaseNamespace,
		Identity:          f.identity,
		MetricsAddr:       f.metricsAddr,
		InsecureMetrics:   !f.metricsSecure,
		HealthAddr:        f.healthAddr,
		Logger:            log,
		HubCheckTimeout:   f.hubTimeout,
		Timings:           f.timings(),
		Weight:            f.weight,
		Resync:            f.resync.options(),
		Recorder:          recorder,
	})
	if err != nil {
		return err
	}
	if !f.metricsSecure && f.metricsAddr != "0" {
		log.Info("Serving /metrics in plain HTTP without authentication (--metrics-secure=false): for local runs only", "address", f.metricsAddr)
	}
	log.Info("Starting replica", "providerNamespace", f.providerNamespace, "hub", hub.Host)
	if err := replica.Start(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("running replica: %w", err)
	}
	return nil
}
