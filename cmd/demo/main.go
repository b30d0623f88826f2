// Command demo runs anchorage's whole story on one machine and narrates it: a hub (with
// its garbage collector) and two project control planes started from the binaries
// hack/build-k8s.sh builds, three replicas of the real manager binary as separate
// processes, proxies programmed onto the hub, stranded anchors collected by the resync,
// a proxy deleted, and the owner of a project killed so that another replica takes it
// over. `make demo` builds what it needs and runs it.
//
// The last line it prints is machine-readable:
//
//	summary: projects=N replicas=N stranded_left=N live_lost=N handover_s=F
//
// It exits 0 when no stranded anchor is left, no live anchor or hub object was lost and
// a project moved after its owner was killed, and 1 otherwise; either way it stops every
// process it started. With --keep (or DEMO_KEEP=1) it leaves everything running until
// interrupted and prints the kubeconfigs to explore it with kubectl.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"
)

// config is what the flags say.
type config struct {
	// manager is the manager binary the replicas run.
	manager string
	// dir holds kubeconfigs and replica logs; empty means a fresh temporary directory,
	// removed at the end unless the demo failed or --keep is set.
	dir string
	// keep leaves everything running after the summary until interrupted.
	keep bool
	// timeout bounds the whole story (not the --keep wait).
	timeout time.Duration
	// logLevel is the replicas' --log-level.
	logLevel string
	// admin runs the replicas as cluster admins instead of config/default's
	// ServiceAccount and RBAC.
	admin bool
}

func parseFlags(args []string, errOut io.Writer) (config, error) {
	var c config
	keepDefault, _ := strconv.ParseBool(os.Getenv("DEMO_KEEP"))
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(errOut)
	fs.StringVar(&c.manager, "manager", "bin/manager", "the manager binary the three replicas run (make build writes bin/manager)")
	fs.StringVar(&c.dir, "dir", "", "directory for kubeconfigs and replica logs, kept afterwards (default: a temporary directory, removed after a successful run)")
	fs.BoolVar(&c.keep, "keep", keepDefault, "leave the hub, the projects and the replicas running after the summary, until interrupted (default $DEMO_KEEP)")
	fs.DurationVar(&c.timeout, "timeout", 8*time.Minute, "give up on the story after this long")
	fs.StringVar(&c.logLevel, "log-level", "info", "the replicas' --log-level (their logs go to files in --dir)")
	fs.BoolVar(&c.admin, "admin", false, "run the replicas as hub admins (system:masters) instead of config/default's ServiceAccount and RBAC")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	abs, err := filepath.Abs(c.manager)
	if err != nil {
		return c, err
	}
	c.manager = abs
	if _, err := os.Stat(c.manager); err != nil {
		return c, fmt.Errorf("manager binary: %w (run `make build`, or `make demo` which does)", err)
	}
	return c, nil
}

func main() {
	cfg, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "demo: %v\n", err)
		os.Exit(2)
	}
	// envtest and the clients log through controller-runtime; the story is told on
	// stdout and the replicas log to files.
	ctrl.SetLogger(logr.Discard())

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ok, err := run(ctx, cfg, os.Stdout)
	if err != nil {
		fmt.Fprintf(os.Stderr, "demo: %v\n", err)
	}
	if err != nil || !ok {
		os.Exit(1)
	}
}
