package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"anchorage/pkg/config"
	"anchorage/pkg/shard"
)

// commonFlags are persistent on the root command: the replica and the sweep both take them.
type commonFlags struct {
	kubeconfig, config string
	log                logFlags
}

func (c *commonFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&c.kubeconfig, "kubeconfig", "", "kubeconfig of the hub cluster (default: $KUBECONFIG, or in-cluster)")
	fs.StringVar(&c.config, "config", "", "the configuration file: a ManagerConfiguration, or the previous manager's NetworkServicesOperator (docs/operations.md, Configuration); every replica reads the same file. Default: every key's default")
	c.log.register(fs)
}

// load reads the configuration file --config names.
func (c *commonFlags) load() (*config.Loaded, error) {
	l, err := config.Load(c.config)
	if err != nil {
		return nil, fmt.Errorf("--config %w", err)
	}
	return l, nil
}

// hubConfig loads the hub's REST config from --kubeconfig, the previous manager's
// downstream kubeconfig, $KUBECONFIG or the pod's service account, and says which to
// give when none is there. Its rate is the configuration's clients.hub.
func (c *commonFlags) hubConfig(l *config.Loaded) (*rest.Config, error) {
	loading := clientcmd.NewDefaultClientConfigLoadingRules()
	loading.ExplicitPath = c.kubeconfig // "" is the rules' own default
	if c.kubeconfig == "" {
		loading.ExplicitPath = l.HubKubeconfig
	}
	hub, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(loading, &clientcmd.ConfigOverrides{}).ClientConfig()
	if clientcmd.IsEmptyConfig(err) {
		return nil, errors.New("no hub kubeconfig: pass --kubeconfig, set $KUBECONFIG, or run in a cluster")
	}
	if err != nil {
		return nil, fmt.Errorf("loading hub kubeconfig: %w", err)
	}
	hub.QPS, hub.Burst = l.Clients.Hub.QPS, l.Clients.Hub.Burst
	return hub, nil
}

// replicaFlags is a parsed replica command line (`manager` or `manager run`): what
// differs per process. What every replica shares is in the configuration file.
type replicaFlags struct {
	identity, metricsAddr, healthAddr, recordFile string
	weight                                        float64
	metricsSecure                                 bool
}

func (f *replicaFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.identity, "identity", os.Getenv("POD_NAME"), "this replica's name, normally the pod name (the Deployment passes it through the downward API)")
	// Show where the default comes from, not this shell's value.
	fs.Lookup("identity").DefValue = "$POD_NAME"
	fs.StringVar(&f.metricsAddr, "metrics-bind-address", ":8443", "address serving /metrics; 0 turns it off")
	fs.BoolVar(&f.metricsSecure, "metrics-secure", true, "serve /metrics over HTTPS to callers whose token the hub authorizes for get on /metrics; false serves plain HTTP to anyone, for local runs only")
	fs.StringVar(&f.healthAddr, "health-probe-bind-address", ":8081", "address serving /healthz and /readyz; 0 turns it off")
	fs.Float64Var(&f.weight, "weight", 1, "this replica's share of projects relative to others")
	fs.StringVar(&f.recordFile, "record-file", "", "append a JSON line per admitted unit of project work (replica, project, start, end, claim) to this file, for audits and bench/")
}

// check validates a parsed replica command line; every error names its flag.
func (f *replicaFlags) check() error {
	if f.identity == "" {
		return errors.New("--identity is required when $POD_NAME is not set")
	}
	if !shard.ValidWeight(f.weight) {
		return fmt.Errorf("--weight must be positive and finite, got %g", f.weight)
	}
	return nil
}
