package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/spf13/cobra"
	"go.uber.org/zap/zapcore"

	"anchorage/internal/version"
	"anchorage/pkg/gateway"
)

// errNotRun is what the test runners return when a command they did not expect ran.
var errNotRun = errors.New("this command was not expected to run")

// parsed is what a command line reached its runner with.
type parsed struct {
	command string
	common  *commonFlags
	replica *replicaFlags
	sweep   sweepConfig
}

// cli runs a command line in-process with runners that record what they were given
// instead of running a replica or a sweep.
func cli(args ...string) (stdout, stderr string, got parsed, err error) {
	r := runners{
		replica: func(cmd *cobra.Command, common *commonFlags, f *replicaFlags) error {
			got = parsed{command: cmd.CommandPath(), common: common, replica: f}
			return nil
		},
		sweep: func(cmd *cobra.Command, common *commonFlags, c sweepConfig) error {
			got = parsed{command: cmd.CommandPath(), common: common, sweep: c}
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
func parseReplica(args ...string) (replicaFlags, error) {
	_, _, got, err := cli(args...)
	if err != nil {
		return replicaFlags{}, err
	}
	if got.replica == nil {
		return replicaFlags{}, errNotRun
	}
	return *got.replica, nil
}

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
	_, _, got, err := cli("--kubeconfig=x", "sweep", "--once", "--provider-namespace=y")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.command).To(Equal("manager sweep"))
	g.Expect(got.common.kubeconfig).To(Equal("x"))
	g.Expect(got.common.providerNamespace).To(Equal("y"))

	_, _, got, err = cli("sweep", "--lease-namespace=l", "--once", "--kubeconfig", "z")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.common.kubeconfig).To(Equal("z"), "a common flag after the subcommand, value as the next argument")
	g.Expect(got.common.leaseNamespace).To(Equal("l"))

	for _, args := range [][]string{{"--identity=a"}, {"run", "--identity=a"}, {"--kubeconfig=x", "run", "--identity=a"}} {
		_, _, got, err = cli(args...)
		g.Expect(err).NotTo(HaveOccurred(), "%q", args)
		g.Expect(got.replica).NotTo(BeNil(), "%q did not run a replica", args)
		g.Expect(got.replica.identity).To(Equal("a"))
	}

	_, _, _, err = cli("--kubeconfig=x", "sweep", "--once", "--identity=a")
	g.Expect(err).To(MatchError(ContainSubstring("unknown flag: --identity")), "a replica flag is not the sweep's")
	_, _, _, err = cli("--identity=a", "extra")
	g.Expect(err).To(MatchError(ContainSubstring(`unknown command "extra"`)))
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

func TestBadFlagErrorsNameTheFlag(t *testing.T) {
	cases := []struct {
		reason string
		args   []string
		want   []string
	}{
		{"a duration without its unit", []string{"--lease-duration=15"}, []string{"--lease-duration", "15s"}},
		{"a sweep duration without its unit", []string{"sweep", "--once", "--confirm-after=30"}, []string{"--confirm-after", "30s"}},
		{"lease shorter than renew", []string{"--lease-duration=8s"}, []string{"--lease-duration (8s) must be greater than --renew-deadline (10s)"}},
		{"a negative lease", []string{"--lease-duration=-1s"}, []string{"--lease-duration must be positive, got -1s"}},
		{"a zero renew deadline", []string{"--renew-deadline=0s"}, []string{"--renew-deadline must be positive"}},
		{"renew too close to retry", []string{"--retry-period=9s"}, []string{"--renew-deadline (10s) must be greater than 1.2 x --retry-period (9s)"}},
		{"no retry period", []string{"--retry-period=0s"}, []string{"--retry-period must be positive"}},
		{"a negative claim deadline", []string{"--claim-deadline=-1s"}, []string{"--claim-deadline"}},
		{"a zero weight", []string{"--weight=0"}, []string{"--weight must be positive"}},
		{"a NaN weight", []string{"--weight=NaN"}, []string{"--weight must be positive and finite"}},
		{"an infinite weight", []string{"--weight=+Inf"}, []string{"--weight must be positive and finite"}},
		{"a bad gateway class", []string{"--gateway-class=Not_A_Name"}, []string{"--gateway-class:", "Not_A_Name"}},
		{"a bad downstream class", []string{"--downstream-gateway-class=-x"}, []string{"--downstream-gateway-class:"}},
		{"a bad issuer kind", []string{"--issuer-kind=Vault"}, []string{"--issuer-kind:", "Issuer or ClusterIssuer"}},
		{"a bad issuer group", []string{"--issuer-group=UPPER"}, []string{"--issuer-group:"}},
		{"a bad issuer name", []string{"--issuer-name=a/b"}, []string{"--issuer-name:"}},
		{"a controller name without a domain", []string{"--controller-name=gateway"}, []string{"--controller-name:", "domain-prefixed"}},
		{"no gateway worker", []string{"--gateway-workers=0"}, []string{"--gateway-workers must be at least 1, got 0"}},
		{"no project worker", []string{"--project-workers=0"}, []string{"--project-workers must be at least 1, got 0"}},
		{"no hub writes", []string{"--project-hub-writes-per-second=0"}, []string{"--project-hub-writes-per-second must be more than 0, got 0"}},
		{"no proxies", []string{"--proxies-per-project=0"}, []string{"--proxies-per-project must be at least 1, got 0"}},
	}
	for _, tc := range cases {
		_, _, _, err := cli(append([]string{"--identity=a"}, tc.args...)...)
		if tc.args[0] == "sweep" {
			_, _, _, err = cli(tc.args...)
		}
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

func TestGatewayFlagsSetTheGatewayConfig(t *testing.T) {
	g := NewWithT(t)
	f, err := parseReplica("--identity=a")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(f.gateway.WithDefaults()).To(Equal(gateway.Config{}.WithDefaults()), "the flags' defaults are pkg/gateway's")

	f, err = parseReplica("--identity=a", "--gateway-class=up", "--downstream-gateway-class=down", "--controller-name=example.com/gc",
		"--issuer-name=le", "--issuer-kind=Issuer", "--issuer-group=example.com", "--gateway-workers=2", "--hostname-claims-namespace=claims",
		"--project-workers=1", "--project-hub-writes-per-second=7.5", "--proxies-per-project=30")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(f.gateway).To(Equal(gateway.Config{
		GatewayClassName: "up", DownstreamGatewayClassName: "down", ControllerName: "example.com/gc",
		CertificateIssuer: gateway.IssuerRef{Name: "le", Kind: "Issuer", Group: "example.com"}, Workers: 2,
		ProjectWorkers: 1, ProjectHubWritesPerSecond: 7.5, ProxiesPerProject: 30,
		HostnameClaimsNamespace: "claims", BackendReservedDomains: gateway.DefaultBackendReservedDomains,
	}))
}

func TestMissingKubeconfigSaysWhatToDo(t *testing.T) {
	t.Setenv("KUBECONFIG", "")
	t.Setenv("HOME", t.TempDir())
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")
	_, err := (&commonFlags{}).hubConfig()
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
