package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.uber.org/zap/zapcore"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"anchorage/internal/version"
	"anchorage/pkg/anchor/resync"
	"anchorage/pkg/config"
	"anchorage/pkg/gateway"
	"anchorage/pkg/shard"
)

// errNotRun is what the test runners return when a command they did not expect ran.
var errNotRun = errors.New("this command was not expected to run")

// parsed is what a command line reached its runner with.
type parsed struct {
	command string
	common  *commonFlags
	replica *replicaFlags
	loaded  *config.Loaded
	sweep   sweepConfig
}

// cli runs a command line in-process with runners that record what they were given
// instead of running a replica or a sweep.
func cli(args ...string) (stdout, stderr string, got parsed, err error) {
	r := runners{
		replica: func(cmd *cobra.Command, common *commonFlags, f *replicaFlags, l *config.Loaded) error {
			got = parsed{command: cmd.CommandPath(), common: common, replica: f, loaded: l}
			return nil
		},
		sweep: func(cmd *cobra.Command, common *commonFlags, c sweepConfig) error {
			got = parsed{command: cmd.CommandPath(), common: common, loaded: c.loaded, sweep: c}
			return nil
		},
	}
	var out, errOut bytes.Buffer
	root := newRootCommand(r)
	root.SetArgs(args)
	root.SetOut(&out)
	root.SetErr(&errOut)
	err = root.ExecuteContext(context.Background())
	return out.String(), errOut.String(), got, err
}

// parseReplica parses a replica command line (`manager ARGS`) without running it.
func parseReplica(args ...string) (parsed, error) {
	_, _, got, err := cli(args...)
	if err == nil && got.replica == nil {
		err = errNotRun
	}
	return got, err
}

// writeConfig writes a configuration file and returns its --config flag.
func writeConfig(t *testing.T, doc string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	return "--config=" + path
}

// ourConfig is the head of this manager's configuration document.
const ourConfig = "apiVersion: config.anchorage.datumapis.com/v1alpha1\nkind: ManagerConfiguration\n"

// parseSweep parses a sweep command line (`manager sweep ARGS`) without running it.
func parseSweep(args ...string) (sweepConfig, error) {
	_, _, got, err := cli(append([]string{"sweep"}, args...)...)
	if err == nil && got.command != "manager sweep" {
		err = errNotRun
	}
	return got.sweep, err
}

func TestHelpGoesToStdoutAndListsTheCommands(t *testing.T) {
	g := NewWithT(t)
	for _, args := range [][]string{{"-h"}, {"--help"}, {"help"}} {
		out, errOut, got, err := cli(args...)
		g.Expect(err).NotTo(HaveOccurred(), "%q", args)
		g.Expect(errOut).To(BeEmpty(), "%q: help on stderr", args)
		g.Expect(got.command).To(BeEmpty(), "%q ran a command", args)
		g.Expect(out).To(ContainSubstring("Usage:\n  manager [flags]\n  manager [command]"), "%q", args)
		for _, sub := range []string{"run", "sweep", "version"} {
			g.Expect(out).To(MatchRegexp(`(?m)^  `+sub+` +\S`), "%q: help does not list %s:\n%s", args, sub, out)
		}
	}
	out, _, _, err := cli("sweep", "--help")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(ContainSubstring("manager sweep --once [flags]"))
	g.Expect(out).To(ContainSubstring("--kubeconfig"), "the common flags are listed with the sweep's")
}

func TestCommandsAndWhereFlagsGo(t *testing.T) {
	g := NewWithT(t)
	cfg := writeConfig(t, ourConfig+"providerNamespace: provider-y\nleaseNamespace: leases-l\n")
	_, _, got, err := cli("--kubeconfig=x", "sweep", "--once", cfg)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.command).To(Equal("manager sweep"))
	g.Expect(got.common.kubeconfig).To(Equal("x"))
	g.Expect(got.loaded.ProviderNamespace).To(Equal("provider-y"), "the sweep reads the replicas' file")
	g.Expect(got.loaded.LeaseNamespaceOrProvider()).To(Equal("leases-l"))

	_, _, got, err = cli(cfg, "sweep", "--once", "--kubeconfig", "z")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.common.kubeconfig).To(Equal("z"), "a common flag after the subcommand, value as the next argument")
	g.Expect(got.loaded.ProviderNamespace).To(Equal("provider-y"), "--config before the subcommand")

	for _, args := range [][]string{{"--identity=a"}, {"run", "--identity=a"}, {"--kubeconfig=x", "run", "--identity=a"}} {
		_, _, got, err = cli(args...)
		g.Expect(err).NotTo(HaveOccurred(), "%q", args)
		g.Expect(got.replica).NotTo(BeNil(), "%q did not run a replica", args)
		g.Expect(got.replica.identity).To(Equal("a"))
		g.Expect(got.loaded.ManagerConfiguration).To(Equal(config.Default()), "%q: no --config is every default", args)
	}

	_, _, _, err = cli("--kubeconfig=x", "sweep", "--once", "--identity=a")
	g.Expect(err).To(MatchError(ContainSubstring("unknown flag: --identity")), "a replica flag is not the sweep's")
	_, _, _, err = cli("--identity=a", "extra")
	g.Expect(err).To(MatchError(ContainSubstring(`unknown command "extra"`)))
	// A flag that became a key is gone, not an override.
	for _, gone := range []string{"--lease-duration=20s", "--provider-namespace=x", "--gateway-class=x", "--resync-dry-run", "--proxies-per-project=3"} {
		_, _, _, err = cli("--identity=a", gone)
		g.Expect(err).To(MatchError(ContainSubstring("unknown flag")), gone)
	}
}

// TestOnlyPerProcessFlags: the command line holds what differs per process or per run;
// every setting the replicas share is a key of the configuration file, not a flag too.
func TestOnlyPerProcessFlags(t *testing.T) {
	g := NewWithT(t)
	root := newRootCommand(defaultRunners)
	names := func(cmd *cobra.Command) []string {
		var out []string
		for _, fs := range []*pflag.FlagSet{cmd.LocalFlags(), cmd.InheritedFlags()} {
			fs.VisitAll(func(f *pflag.Flag) {
				if f.Name != "help" && f.Name != "version" {
					out = append(out, f.Name)
				}
			})
		}
		return out
	}
	logging := []string{"log-level", "zap-devel", "zap-encoder", "zap-log-level", "zap-stacktrace-level", "zap-time-encoding"}
	g.Expect(names(root)).To(ConsistOf(append([]string{"config", "kubeconfig", "identity", "weight", "metrics-bind-address", "metrics-secure",
		"health-probe-bind-address", "record-file"}, logging...)))
	sweep, _, err := root.Find([]string{"sweep"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(names(sweep)).To(ConsistOf(append([]string{"config", "kubeconfig", "once", "delete", "dry-run", "force", "project", "output",
		"cut-over-check"}, logging...)))
}

func TestVersion(t *testing.T) {
	g := NewWithT(t)
	want := version.Get().String() + "\n"
	for _, args := range [][]string{{"version"}, {"--version"}} {
		out, _, got, err := cli(args...)
		g.Expect(err).NotTo(HaveOccurred(), "%q", args)
		g.Expect(out).To(Equal(want), "%q", args)
		g.Expect(got.command).To(BeEmpty(), "%q ran a replica", args)
	}
	out, _, _, err := cli("version", "-o", "json")
	g.Expect(err).NotTo(HaveOccurred())
	var info version.Info
	g.Expect(json.Unmarshal([]byte(out), &info)).To(Succeed(), out)
	g.Expect(info).To(Equal(version.Get()))
	_, _, _, err = cli("version", "-o", "yaml")
	g.Expect(err).To(MatchError(ContainSubstring(`--output "yaml"`)))
}

func TestLogLevelFlags(t *testing.T) {
	g := NewWithT(t)
	enabled := func(args ...string) (debug, info, warn bool) {
		t.Helper()
		_, _, got, err := cli(append([]string{"--identity=a"}, args...)...)
		g.Expect(err).NotTo(HaveOccurred(), "%q", args)
		o := got.common.log.options()
		if o.Level == nil {
			return false, true, true // the production default: info
		}
		return o.Level.Enabled(zapcore.DebugLevel), o.Level.Enabled(zapcore.InfoLevel), o.Level.Enabled(zapcore.WarnLevel)
	}
	for _, args := range [][]string{{"--zap-log-level=warn"}, {"--log-level=warn"}, {"--log-level=debug", "--zap-log-level=warn"}, {"--zap-log-level=debug", "--log-level=warn"}} {
		debug, info, warn := enabled(args...)
		g.Expect([]bool{debug, info, warn}).To(Equal([]bool{false, false, true}), "%q: want warn and above (the later flag wins)", args)
	}
	debug, info, _ := enabled("--log-level=4")
	g.Expect(debug && info).To(BeTrue(), "a verbosity enables debug lines")
	debug, info, _ = enabled()
	g.Expect(!debug && info).To(BeTrue(), "the default is info")

	_, _, _, err := cli("--identity=a", "--zap-log-level=loud")
	g.Expect(err).To(MatchError(ContainSubstring(`"--zap-log-level"`)))
	_, _, _, err = cli("--identity=a", "--zap-encoder=console", "--zap-devel", "--zap-time-encoding=iso8601", "--zap-stacktrace-level=panic")
	g.Expect(err).NotTo(HaveOccurred(), "controller-runtime's zap flags are accepted")
}

// TestBadFlagErrorsNameTheFlag: what is wrong on the command line or in the file is
// named (the file's checks themselves: pkg/config's TestValidate).
func TestBadFlagErrorsNameTheFlag(t *testing.T) {
	cases := []struct {
		reason string
		args   []string
		want   []string
	}{
		{"a zero weight", []string{"--weight=0"}, []string{"--weight must be positive"}},
		{"a NaN weight", []string{"--weight=NaN"}, []string{"--weight must be positive and finite"}},
		{"an infinite weight", []string{"--weight=+Inf"}, []string{"--weight must be positive and finite"}},
		{"no such file", []string{"--config=/nonexistent/config.yaml"}, []string{"--config", "/nonexistent/config.yaml"}},
		{"a key the file may not have", []string{writeConfig(t, ourConfig+"sharding:\n  leaseDuraton: 20s\n")}, []string{"--config", `unknown key "leaseDuraton"`}},
		{"a duration without its unit", []string{writeConfig(t, ourConfig+"sharding:\n  leaseDuration: 15\n")}, []string{"--config", "sharding.leaseDuration: want a string (a duration such as 15s"}},
		{"lease shorter than renew", []string{writeConfig(t, ourConfig+"sharding:\n  leaseDuration: 8s\n")}, []string{"sharding.leaseDuration (8s) must be greater than sharding.renewDeadline (10s)"}},
		{"the sweep reads the same file", []string{"sweep", "--once", writeConfig(t, ourConfig+"resync:\n  haltAbove: 0\n")}, []string{"resync.haltAbove", "resync.dryRun"}},
	}
	for _, tc := range cases {
		args := append([]string{"--identity=a"}, tc.args...)
		if tc.args[0] == "sweep" {
			args = tc.args
		}
		_, _, _, err := cli(args...)
		if err == nil {
			t.Errorf("%s: %q accepted", tc.reason, tc.args)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not say %q", tc.reason, err, w)
			}
		}
	}
}

// TestConfigReachesTheReplica: each key of the file reaches the option of the component
// it configures.
func TestConfigReachesTheReplica(t *testing.T) {
	g := NewWithT(t)
	got, err := parseReplica("--identity=a", "--weight=2", writeConfig(t, ourConfig+`
providerNamespace: p
leaseNamespace: l
hubTimeout: 3s
sharding: {leaseDuration: 30s, renewDeadline: 20s, retryPeriod: 4s, claimDeadline: 90s, projectCallTimeout: 7s}
resync: {enabled: true, dryRun: true, period: 20m, minAge: 10m, maxDeletionsPerPass: 5, haltAbove: 9, deletionsPerSecond: 2.5, workers: 3, ownerKinds: [networking.datumapis.com/HTTPProxy, ConfigMap], extraDependentKinds: []}
gateway:
  gatewayClassName: up
  downstreamGatewayClassName: down
  controllerName: example.com/gc
  certificateIssuer: {name: le, kind: Issuer, group: example.com}
  hostnameClaimsNamespace: claims
  assumeWrittenIsProgrammed: true
  backendReservedDomains: []
  workers: 2
  projectWorkers: 1
  projectHubWritesPerSecond: 7.5
  proxiesPerProject: 30
clients: {hub: {qps: 11, burst: 12}, project: {qps: 13, burst: 14}}
`))
	g.Expect(err).NotTo(HaveOccurred())
	hub := &rest.Config{Host: "https://hub"}
	o, err := replicaOptions(got.replica, got.loaded, hub, logr.Discard(), nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(o.Weight).To(Equal(2.0))
	g.Expect([]string{o.ProviderNamespace, o.LeaseNamespace}).To(Equal([]string{"p", "l"}))
	g.Expect(o.HubCheckTimeout).To(Equal(3 * time.Second))
	g.Expect(o.ProjectCallTimeout).To(Equal(7 * time.Second))
	timings := shard.NewTimings(30*time.Second, 20*time.Second, 4*time.Second)
	timings.ClaimDeadline = 90 * time.Second
	g.Expect(o.Timings).To(Equal(timings))
	g.Expect(o.Gateway).To(Equal(gateway.Config{
		GatewayClassName: "up", DownstreamGatewayClassName: "down", ControllerName: "example.com/gc",
		CertificateIssuer: gateway.IssuerRef{Name: "le", Kind: "Issuer", Group: "example.com"}, ClusterIssuers: map[string]string{}, Workers: 2,
		ProjectWorkers: 1, ProjectHubWritesPerSecond: 7.5, ProxiesPerProject: 30, AssumeWrittenIsProgrammed: true,
		HostnamesPerProxy: 16, HostnamesPerGateway: 16,
		HostnameClaimsNamespace: "claims", BackendReservedDomains: []string{}, VerifyHostnames: true,
		Platform: gateway.DefaultConfig().Platform, DNSEndpoints: true,
	}))
	g.Expect(o.Domains.Settings.DNSRecordPrefix).To(Equal("datum-custom-hostname"), "the Domain verification's settings reach the replica")
	g.Expect(o.Resync).To(Equal(resync.Options{
		DryRun: true, Period: 20 * time.Minute, InitialJitter: 30 * time.Second, ConfirmAfter: 30 * time.Second, MinAge: 10 * time.Minute,
		MaxDeletionsPerPass: 5, HaltAbove: 9, DeletionQPS: 2.5, Workers: 3,
		LiveOwnerKinds:      []schema.GroupKind{{Group: "networking.datumapis.com", Kind: "HTTPProxy"}, {Kind: "ConfigMap"}},
		ExtraDependentKinds: []schema.GroupKind{},
		// No key sets these: the resync's own defaults.
		StuckAfter: time.Hour, ClaimPasses: 3, Finalizers: resync.DefaultFinalizers, Writes: resync.DefaultHubWrites,
	}))
	project := &rest.Config{}
	for _, opt := range o.ProjectRESTOptions {
		g.Expect(opt(project)).To(Succeed())
	}
	g.Expect([]any{project.QPS, project.Burst}).To(Equal([]any{float32(13), 14}))
	t.Setenv("KUBECONFIG", "")
	hubFile := writeKubeconfig(t, &rest.Config{Host: "https://hub.example:6443", BearerToken: "x"})
	hub, err = got.common.hubConfig(got.loaded)
	g.Expect(err).To(HaveOccurred(), "no --kubeconfig and none in the file")
	got.common.kubeconfig = hubFile
	hub, err = got.common.hubConfig(got.loaded)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect([]any{hub.Host, hub.QPS, hub.Burst}).To(Equal([]any{"https://hub.example:6443", float32(11), 12}))

	got, err = parseReplica("--identity=a", writeConfig(t, ourConfig+"resync: {enabled: false}\n"))
	g.Expect(err).NotTo(HaveOccurred())
	o2, err := replicaOptions(got.replica, got.loaded, hub, logr.Discard(), nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(o2.Resync.Disabled).To(BeTrue())
}

func TestMissingKubeconfigSaysWhatToDo(t *testing.T) {
	t.Setenv("KUBECONFIG", "")
	t.Setenv("HOME", t.TempDir())
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")
	_, err := (&commonFlags{}).hubConfig(&config.Loaded{ManagerConfiguration: config.Default()})
	if err == nil {
		t.Fatal("no kubeconfig anywhere, and still a hub config")
	}
	for _, want := range []string{"--kubeconfig", "$KUBECONFIG", "run in a cluster"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "KUBERNETES_MASTER") {
		t.Errorf("error %q suggests KUBERNETES_MASTER, which the manager does not read", err)
	}
}

func TestSweepProjectsAndOutputFlags(t *testing.T) {
	g := NewWithT(t)
	c, err := parseSweep("--once", "--project=a,b", "--project", "c", "-o", "json")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.projects).To(Equal([]string{"a", "b", "c"}))
	g.Expect(c.output).To(Equal(outputJSON))

	c, err = parseSweep("--once")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.projects).To(BeEmpty())
	g.Expect(c.output).To(Equal(outputTable))
	g.Expect(c.force).To(BeFalse())

	c, err = parseSweep("--once", "--delete", "--force")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.force).To(BeTrue())

	_, err = parseSweep("--once", "--output=yaml")
	g.Expect(err).To(MatchError(ContainSubstring(`--output "yaml": want table or json`)))
	_, err = parseSweep("--once", "--project=a,,b")
	g.Expect(err).To(MatchError(ContainSubstring("--project")))
}
