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
	"github.com/go-logr/logr/funcr"
	. "github.com/onsi/gomega"
	"github.com/spf13/cobra"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/multicluster-runtime/providers/kubeconfig"

	"anchorage/internal/app"
	"anchorage/internal/cutover"
	"anchorage/internal/testenv"
	"anchorage/pkg/gateway"
	"anchorage/pkg/shard"
)

// previousConfig is the previous manager's configuration file, as it runs today.
var previousConfig = func() string {
	b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "pkg", "config", "testdata", "network-services-operator.yaml"))
	if err != nil {
		panic(err)
	}
	return string(b)
}()

func TestCutOverCheckFlags(t *testing.T) {
	g := NewWithT(t)

	c, err := parseSweep("--cut-over-check")
	g.Expect(err).NotTo(HaveOccurred(), "--cut-over-check implies --once")
	g.Expect(c.cutOver).NotTo(BeNil())
	g.Expect(*c.cutOver).To(Equal(cutover.Options{
		GatewayClass: gateway.DefaultConfig().GatewayClassName, IssuerName: gateway.DefaultConfig().CertificateIssuer.Name, DownstreamGatewayClass: gateway.DefaultConfig().DownstreamGatewayClassName,
		BackendReservedDomains: gateway.DefaultConfig().BackendReservedDomains,
	}), "the defaults are the replicas'")
	g.Expect(c.output).To(Equal(outputTable))
	// The package's own defaults, for callers that leave the options empty, agree.
	g.Expect(cutover.Options{}.WithDefaults()).To(Equal(cutover.Options{
		GatewayClass: gateway.DefaultConfig().GatewayClassName, IssuerName: gateway.DefaultConfig().CertificateIssuer.Name, DownstreamGatewayClass: gateway.DefaultConfig().DownstreamGatewayClassName, Workers: 4,
	}))

	c, err = parseSweep("--once", "--cut-over-check", "-o", "json", "--project=a,b", "--dry-run", writeConfig(t, ourConfig+`
gateway: {gatewayClassName: datum-external-global-proxy, certificateIssuer: {name: letsencrypt}, downstreamGatewayClassName: edge}
`))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(*c.cutOver).To(Equal(cutover.Options{GatewayClass: "datum-external-global-proxy", IssuerName: "letsencrypt", DownstreamGatewayClass: "edge", Projects: []string{"a", "b"}, BackendReservedDomains: []string{}}))
	g.Expect(c.output).To(Equal(outputJSON))

	// The previous manager's own file: the check compares with what its keys became.
	c, err = parseSweep("--cut-over-check", writeConfig(t, previousConfig))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(*c.cutOver).To(Equal(cutover.Options{GatewayClass: "datum-external-global-proxy", IssuerName: "letsencrypt-prod", DownstreamGatewayClass: "datum-downstream-gateway", BackendReservedDomains: []string{}}))

	c, err = parseSweep("--once")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.cutOver).To(BeNil(), "a plain sweep runs a pass")

	for _, tc := range []struct {
		reason string
		args   []string
		want   string
	}{
		{"the check deletes nothing", []string{"--cut-over-check", "--delete"}, "--cut-over-check and --delete exclude each other"},
		{"with --once too", []string{"--once", "--cut-over-check", "--delete", "--force"}, "--cut-over-check and --delete exclude each other"},
		{"an unknown output", []string{"--cut-over-check", "-o", "yaml"}, `--output "yaml"`},
		{"an empty project", []string{"--cut-over-check", "--project=a,,b"}, "--project: an empty project name"},
		{"a class the replicas would refuse", []string{"--cut-over-check", writeConfig(t, ourConfig+"gateway: {gatewayClassName: Not_A_Class}\n")}, `gateway.gatewayClassName: Invalid value: "Not_A_Class"`},
		{"the replicas' flags are the file's", []string{"--cut-over-check", "--gateway-class=x"}, "unknown flag: --gateway-class"},
	} {
		_, err := parseSweep(tc.args...)
		g.Expect(err).To(MatchError(ContainSubstring(tc.want)), "%s: %q", tc.reason, tc.args)
	}
}

// TestPreviousManagersConfigReachesTheReplica: the previous manager's file, read as it
// is, sets each setting it shares with this manager on the component it configures,
// and every key it has that this manager does not serve is reported, none dropped.
func TestPreviousManagersConfigReachesTheReplica(t *testing.T) {
	g := NewWithT(t)
	got, err := parseReplica("--identity=a", writeConfig(t, previousConfig))
	g.Expect(err).NotTo(HaveOccurred())
	o, err := replicaOptions(got.replica, got.loaded, &rest.Config{}, logr.Discard(), nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(o.Gateway.GatewayClassName).To(Equal("datum-external-global-proxy"), "httpProxy.gatewayClassName")
	g.Expect(o.Gateway.ControllerName).To(Equal("gateway.networking.datumapis.com/external-global-proxy-controller"), "gateway.controllerName")
	g.Expect(o.Gateway.DownstreamGatewayClassName).To(Equal("datum-downstream-gateway"), "gateway.downstreamGatewayClassName")
	g.Expect(o.Gateway.HostnameClaimsNamespace).To(Equal("datum-downstream-gateway-hostnames"), "gateway.downstreamHostnameAccountingNamespace")
	g.Expect(o.Gateway.CertificateIssuer).To(Equal(gateway.IssuerRef{Name: "letsencrypt-prod", Kind: "ClusterIssuer", Group: "cert-manager.io"}), "clusterIssuerMap[auto]")
	g.Expect(o.Timings).To(Equal(shard.NewTimings(30*time.Second, 20*time.Second, 4*time.Second)), "leaderElection")
	project := &rest.Config{}
	for _, opt := range o.ProjectRESTOptions {
		g.Expect(opt(project)).To(Succeed())
	}
	g.Expect([]any{project.QPS, project.Burst}).To(Equal([]any{float32(25), 100}), "projectClient, its burst defaulted as the previous manager did")

	// downstreamResourceManagement.kubeconfigPath is the hub when --kubeconfig is not given.
	hubFile := writeKubeconfig(t, &rest.Config{Host: "https://downstream.example:6443", BearerToken: "x"})
	got.loaded.HubKubeconfig = hubFile // the document's path, on this machine
	hub, err := got.common.hubConfig(got.loaded)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect([]any{hub.Host, hub.QPS, hub.Burst}).To(Equal([]any{"https://downstream.example:6443", float32(80), 160}), "downstreamClient")

	// Logged once at start: every key, what it became or why it is not served.
	var log bytes.Buffer
	logKeys(funcr.New(func(prefix, args string) { log.WriteString(args + "\n") }, funcr.Options{}), got.loaded)
	for _, key := range []string{"metricsServer", "webhookServer", "discovery", "redis", "connector", "ipam", "domainVerificationConfig.retryIntervals",
		"gateway.targetDomain", "gateway.coraza", "gateway.disableHostnameVerification", "gateway.resourceReplicator", "httpProxy.maxConcurrentReconciles"} {
		g.Expect(log.String()).To(ContainSubstring(`"key"="`+key+`"`), "%s is not reported", key)
	}
	g.Expect(log.String()).To(ContainSubstring(`WARNING`), "a tenant loses the WAF: said as a warning")
}

// TestCutOverCheckExitCode: a blocked row ends the process with exit code 3 and one
// summary line on stderr, after the rows on stdout; no blocked row is exit code 0.
func TestCutOverCheckExitCode(t *testing.T) {
	g := NewWithT(t)
	rows := []cutover.Row{
		{Verdict: cutover.Changed, Project: "acme", Kind: "Gateway", Namespace: "shop", Name: "p", Detail: "class"},
		{Verdict: cutover.Blocked, Kind: "ValidatingWebhookConfiguration", Name: "nso", Detail: "webhook"},
	}
	run := func(rows []cutover.Row) (int, string, string) {
		var out, errOut bytes.Buffer
		code := execute(context.Background(), []string{"sweep", "--cut-over-check", "-o", "json"}, &out, &errOut, runners{
			sweep: func(cmd *cobra.Command, _ *commonFlags, c sweepConfig) error {
				return writeCutOver(cmd.OutOrStdout(), rows, c.output)
			},
		})
		return code, out.String(), errOut.String()
	}
	code, out, errOut := run(rows)
	g.Expect(code).To(Equal(exitCutOverBlocked))
	g.Expect(exitCutOverBlocked).To(Equal(3))
	g.Expect(errOut).To(Equal("manager sweep: cut-over blocked: 1 of 2 rows are blocked (printed first); resolve them before anchorage starts\n"))
	g.Expect(strings.Split(strings.TrimSpace(out), "\n")).To(HaveLen(2))
	g.Expect(out).To(HavePrefix(`{"verdict":"blocked"`), "sorted: blocked first")

	code, out, errOut = run([]cutover.Row{{Verdict: cutover.Changed, Project: "acme", Kind: "Gateway", Namespace: "shop", Name: "p", Detail: "class"}})
	g.Expect(code).To(Equal(0))
	g.Expect(errOut).To(BeEmpty())
	g.Expect(out).To(HavePrefix(`{"verdict":"changed"`))

	// Other failures stay exit code 1.
	var out2, errOut2 bytes.Buffer
	code = execute(context.Background(), []string{"sweep", "--cut-over-check"}, &out2, &errOut2, runners{
		sweep: func(*cobra.Command, *commonFlags, sweepConfig) error {
			return errors.New("listing kubeconfig Secrets: forbidden")
		},
	})
	g.Expect(code).To(Equal(1))
}

// TestCutOverCheckOnAnAPIServer runs `manager sweep --cut-over-check` in-process
// against a real API server that is both the hub and the one project's plane (its
// kubeconfig Secret points back at it): the previous manager's webhook, on both, is
// blocked (exit code 3); its proxy Gateway changes class and listeners; once the
// webhook is removed the check passes (exit code 0) and has changed nothing.
func TestCutOverCheckOnAnAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an API server")
	}
	g := NewWithT(t)
	crds, err := testenv.HubCRDs()
	g.Expect(err).NotTo(HaveOccurred())
	cfg := testenv.StartAPIServer(t, crds...)
	c, err := client.New(cfg, client.Options{Scheme: app.Scheme()})
	g.Expect(err).NotTo(HaveOccurred())
	ctx := t.Context()
	const provider = "anchorage-system" // the default: the previous manager's file has no such key
	for _, ns := range []string{provider, "shop"} {
		g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	}
	hubKubeconfig := writeKubeconfig(t, cfg)
	kc, err := os.ReadFile(hubKubeconfig)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: provider, Name: "acme", Labels: map[string]string{kubeconfig.DefaultKubeconfigSecretLabel: "true"}},
		Data:       map[string][]byte{"kubeconfig": kc},
	})).To(Succeed())
	gw := &gatewayv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "p", OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "networking.datumapis.com/v1alpha", Kind: "HTTPProxy", Name: "p", UID: "0b5e2a8c-4d4f-4a57-9c55-2f0c8c6a1e11", Controller: ptr.To(true),
		}}},
		Spec: gatewayv1.GatewaySpec{GatewayClassName: "datum-external-global-proxy", Listeners: []gatewayv1.Listener{
			{Name: "default-http", Port: 80, Protocol: gatewayv1.HTTPProtocolType},
			{Name: "http-hostname-0", Port: 80, Protocol: gatewayv1.HTTPProtocolType, Hostname: ptr.To(gatewayv1.Hostname("app.example.com"))},
		}},
	}
	g.Expect(c.Create(ctx, gw)).To(Succeed())
	// Last: from now on a write of a Gateway fails, the service being absent.
	webhooks := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "network-services-operator-validating-webhook-configuration"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: "vgateway-v1.kb.io", SideEffects: ptr.To(admissionregistrationv1.SideEffectClassNone), AdmissionReviewVersions: []string{"v1"},
			ClientConfig: admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{
				Namespace: "network-services-operator-system", Name: "network-services-operator-webhook-service", Path: ptr.To("/validate-gateway-networking-k8s-io-v1-gateway")}},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{"gateway.networking.k8s.io"}, APIVersions: []string{"v1"}, Resources: []string{"gateways"}},
			}},
		}},
	}
	g.Expect(c.Create(ctx, webhooks)).To(Succeed())

	check := func(extra ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		args := append([]string{"--kubeconfig=" + hubKubeconfig, "sweep", "--cut-over-check"}, extra...)
		code := execute(ctx, args, &out, &errOut, defaultRunners)
		return code, out.String(), errOut.String()
	}
	code, out, errOut := check("-o", "json")
	g.Expect(code).To(Equal(exitCutOverBlocked), "stdout:\n%s\nstderr:\n%s", out, errOut)
	t.Logf("the check, blocked:\n%s\nstderr:\n%s", out, errOut)
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var r cutover.Row
		g.Expect(json.Unmarshal([]byte(line), &r)).To(Succeed(), line)
		got = append(got, strings.Join([]string{string(r.Verdict), r.Project, r.Kind, r.Namespace, r.Name}, " "))
	}
	g.Expect(got).To(Equal([]string{
		"blocked  ValidatingWebhookConfiguration  " + webhooks.Name,
		"blocked acme ValidatingWebhookConfiguration  " + webhooks.Name,
		"changed acme Gateway shop p",
		"changed acme Gateway shop p",
	}), out)
	lines := strings.Split(strings.TrimSpace(errOut), "\n")
	g.Expect(lines[len(lines)-1]).To(Equal("manager sweep: cut-over blocked: 2 of 4 rows are blocked (printed first); resolve them before anchorage starts"))

	g.Expect(c.Delete(ctx, webhooks)).To(Succeed())
	// The previous manager's own file: its class is the Gateway's, so only the listeners
	// change; each of its keys is a row.
	code, out, errOut = check("-o", "json", writeConfig(t, previousConfig))
	g.Expect(code).To(Equal(0), "stderr:\n%s", errOut)
	got = nil
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var r cutover.Row
		g.Expect(json.Unmarshal([]byte(line), &r)).To(Succeed(), line)
		got = append(got, strings.Join([]string{string(r.Verdict), r.Project, r.Kind, r.Namespace, r.Name}, " "))
	}
	g.Expect(got).To(ContainElements(
		"changed acme Gateway shop p",
		"changed  ConfigKey  gateway.coraza",
		"adopted  ConfigKey  gateway.disableHostnameVerification",
		"adopted  ConfigKey  httpProxy.gatewayClassName",
		"left  ConfigKey  webhookServer",
	), out)
	g.Expect(strings.Count(out, `"kind":"Gateway"`)).To(Equal(1), "the class is the previous manager's: only the listeners change\n%s", out)

	code, out, errOut = check()
	g.Expect(code).To(Equal(0), "stderr:\n%s", errOut)
	t.Logf("the check, passing:\n%s", out)
	g.Expect(out).To(HavePrefix("VERDICT  PROJECT  KIND"))
	g.Expect(out).To(ContainSubstring(`listener http-hostname-0 becomes the one listener "http"`))

	after := &gatewayv1.Gateway{}
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(gw), after)).To(Succeed())
	g.Expect(after.ResourceVersion).To(Equal(gw.ResourceVersion), "the check changed the Gateway")
}
