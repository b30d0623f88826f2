package config

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"anchorage/pkg/anchor/resync"
	"anchorage/pkg/gateway"
	"anchorage/pkg/shard"
)

// problem is how each problem in Validate's error begins.
var problem = regexp.MustCompile(`: (Invalid|Required|Unsupported) value`)

const head = "apiVersion: config.anchorage.datumapis.com/v1alpha1\nkind: ManagerConfiguration\n"

// load writes doc to a file and loads it.
func load(t *testing.T, doc string) (*Loaded, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	return Load(path)
}

func TestDefaultsAreTheComponentsDefaults(t *testing.T) {
	g := gomega.NewWithT(t)
	d := Default()
	g.Expect(d.Validate()).To(gomega.Succeed())
	g.Expect(d.Timings()).To(gomega.Equal(shard.DefaultTimings()))
	g.Expect(d.GatewayConfig()).To(gomega.Equal(gateway.DefaultConfig()))
	r := d.ResyncOptions()
	r.ExtraDependentKinds = nil // the default is none: an empty list here
	g.Expect(r).To(gomega.Equal(resync.DefaultOptions()))
	g.Expect(d.LeaseNamespaceOrProvider()).To(gomega.Equal("anchorage-system"))

	l, err := Load("")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(l.ManagerConfiguration).To(gomega.Equal(d), "no file is every default")
	l, err = load(t, head)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(l.ManagerConfiguration).To(gomega.Equal(d), "a file that sets nothing is every default")
}

// TestAbsentKeysKeepTheirDefaults: a file sets what it says and nothing else; the two
// derived defaults follow the key they derive from.
// TestAListReplacesTheDefaultList: a retry schedule the file sets is the file's, step
// by step; a step without maxElapsed does not inherit the default's.
func TestAListReplacesTheDefaultList(t *testing.T) {
	g := gomega.NewWithT(t)
	l, err := load(t, head+"domainVerification: {retryIntervals: [{interval: 1s}]}\n")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(l.DomainVerification.RetryIntervals).To(gomega.Equal([]RetryInterval{{Interval: metav1.Duration{Duration: time.Second}}}))
	l, err = load(t, head)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(l.DomainVerification.RetryIntervals).To(gomega.Equal(Default().DomainVerification.RetryIntervals), "absent: the default")
}

func TestAbsentKeysKeepTheirDefaults(t *testing.T) {
	g := gomega.NewWithT(t)
	l, err := load(t, head+"providerNamespace: tenants\nsharding: {leaseDuration: 20s}\nresync: {dryRun: true}\ngateway: {workers: 3}\n")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(l.LeaseNamespaceOrProvider()).To(gomega.Equal("tenants"))
	g.Expect(l.Timings().ClaimDeadline).To(gomega.Equal(40*time.Second), "2 x leaseDuration")
	g.Expect(l.Sharding.RenewDeadline.Duration).To(gomega.Equal(10 * time.Second))
	g.Expect(l.Resync.DryRun && l.Resync.Enabled).To(gomega.BeTrue())
	g.Expect(l.Gateway.Workers).To(gomega.Equal(3))
	g.Expect(l.Gateway.ProjectWorkers).To(gomega.Equal(gateway.DefaultConfig().ProjectWorkers))
	g.Expect(l.Keys).To(gomega.BeEmpty(), "only the previous manager's document has keys to report")
}

// The denied networks reach the gateway path as prefixes, each saying where it came from.
func TestBackendDeniedNetworks(t *testing.T) {
	g := gomega.NewWithT(t)
	l, err := load(t, head+"gateway: {backendDeniedNetworks: [203.0.113.0/24, \"2001:db8::/32\"]}\n")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	got := l.GatewayConfig().BackendDeniedNetworks
	g.Expect(got).To(gomega.HaveLen(2))
	g.Expect(got[0].Prefix.String()).To(gomega.Equal("203.0.113.0/24"))
	g.Expect(got[1].Prefix.String()).To(gomega.Equal("2001:db8::/32"))
	g.Expect(got[0].Why).To(gomega.Equal("listed in gateway.backendDeniedNetworks"))
	d := Default()
	g.Expect(d.GatewayConfig().BackendDeniedNetworks).To(gomega.BeNil(), "none by default")
}

// TestValidate: every setting the three layers of checks refused before this file
// existed (the flags' own checks, the shard's timing names, the components'
// constructors) is refused here once, with the key's path and the same words.
func TestValidate(t *testing.T) {
	cases := []struct {
		reason string
		doc    string
		want   []string
	}{
		{"lease shorter than renew", "sharding: {leaseDuration: 8s}", []string{"sharding.leaseDuration (8s) must be greater than sharding.renewDeadline (10s)"}},
		{"a negative lease", "sharding: {leaseDuration: -1s}", []string{"sharding.leaseDuration: Invalid value: \"-1s\": must be positive"}},
		{"a zero renew deadline", "sharding: {renewDeadline: 0s}", []string{"sharding.renewDeadline: Invalid value: \"0s\": must be positive"}},
		{"renew too close to retry", "sharding: {retryPeriod: 9s}", []string{"sharding.renewDeadline (10s) must be greater than 1.2 x sharding.retryPeriod (9s)"}},
		{"no retry period", "sharding: {retryPeriod: 0s}", []string{"sharding.retryPeriod: Invalid value: \"0s\": must be positive"}},
		{"a negative claim deadline", "sharding: {claimDeadline: -1s}", []string{"sharding.claimDeadline: Invalid value: \"-1s\": must be positive"}},
		{"a zero claim deadline is not 2 x lease", "sharding: {claimDeadline: 0s}", []string{"sharding.claimDeadline: Invalid value: \"0s\""}},
		{"no call budget left", "sharding: {leaseDuration: 10000000001ns}", []string{"the call timeout (half of sharding.leaseDuration - sharding.renewDeadline)"}},
		{"no plane call deadline", "sharding: {projectCallTimeout: 0s}", []string{"sharding.projectCallTimeout: Invalid value: \"0s\""}},
		{"no hub wait", "hubTimeout: 0s", []string{"hubTimeout: Invalid value: \"0s\""}},
		{"a bad provider namespace", "providerNamespace: Not_A_Namespace", []string{"providerNamespace: Invalid value: \"Not_A_Namespace\""}},
		{"an empty lease namespace is not the provider's", "leaseNamespace: \"\"", []string{"leaseNamespace: Invalid value: \"\""}},
		{"a bad gateway class", "gateway: {gatewayClassName: Not_A_Name}", []string{`gateway.gatewayClassName: Invalid value: "Not_A_Name": a lowercase RFC 1123 subdomain`}},
		{"an empty class is not the default", "gateway: {gatewayClassName: \"\"}", []string{`gateway.gatewayClassName: Invalid value: ""`}},
		{"a bad downstream class", "gateway: {downstreamGatewayClassName: -x}", []string{`gateway.downstreamGatewayClassName: Invalid value: "-x"`}},
		{"a bad issuer kind", "gateway: {certificateIssuer: {kind: Vault}}", []string{`gateway.certificateIssuer.kind: Unsupported value: "Vault": supported values: "ClusterIssuer", "Issuer"`}},
		{"a bad issuer group", "gateway: {certificateIssuer: {group: UPPER}}", []string{`gateway.certificateIssuer.group: Invalid value: "UPPER"`}},
		{"a bad issuer name", "gateway: {certificateIssuer: {name: a/b}}", []string{`gateway.certificateIssuer.name: Invalid value: "a/b"`}},
		{"a controller name without a domain", "gateway: {controllerName: gateway}", []string{`gateway.controllerName: Invalid value: "gateway": want a domain-prefixed path`}},
		{"a bad claims namespace", "gateway: {hostnameClaimsNamespace: A}", []string{`gateway.hostnameClaimsNamespace: Invalid value: "A"`}},
		{"no gateway worker", "gateway: {workers: 0}", []string{"gateway.workers: Invalid value: 0: must be at least 1"}},
		{"no project worker", "gateway: {projectWorkers: 0}", []string{"gateway.projectWorkers: Invalid value: 0: must be at least 1"}},
		{"no hub writes", "gateway: {projectHubWritesPerSecond: 0}", []string{"gateway.projectHubWritesPerSecond: Invalid value: 0: must be positive"}},
		{"no proxies", "gateway: {proxiesPerProject: 0}", []string{"gateway.proxiesPerProject: Invalid value: 0: must be at least 1"}},
		{"no hostname per proxy", "gateway: {hostnamesPerProxy: 0}", []string{"gateway.hostnamesPerProxy: Invalid value: 0: must be at least 1"}},
		{"no hostname per Gateway", "gateway: {hostnamesPerGateway: -1}", []string{"gateway.hostnamesPerGateway: Invalid value: -1: must be at least 1"}},
		{"a denied network that is no CIDR", "gateway: {backendDeniedNetworks: [10.96.0.0/12, 203.0.113.7]}", []string{`gateway.backendDeniedNetworks[1]: Invalid value: "203.0.113.7": want a CIDR`}},
		{"a denied network with host bits", "gateway: {backendDeniedNetworks: [\"2001:db8::1/64\"]}", []string{`gateway.backendDeniedNetworks[0]: Invalid value: "2001:db8::1/64": has bits set past its /64: want 2001:db8::/64`}},
		// A zero safety limit must not mean "the default": an operator who writes 0 to mean
		// "delete nothing" is told how to say that.
		{"a zero cap", "resync: {maxDeletionsPerPass: 0}", []string{"resync.maxDeletionsPerPass: Invalid value: 0", "set resync.dryRun"}},
		{"a zero ceiling", "resync: {haltAbove: 0}", []string{"resync.haltAbove: Invalid value: 0", "set resync.dryRun"}},
		{"a zero deletion rate", "resync: {deletionsPerSecond: 0}", []string{"resync.deletionsPerSecond: Invalid value: 0", "set resync.dryRun"}},
		{"negative limits", "resync: {workers: -1}", []string{"resync.workers: Invalid value: -1"}},
		{"a cap above the ceiling", "resync: {maxDeletionsPerPass: 10, haltAbove: 5}", []string{"resync: Invalid value:", "ceiling (5) must not be below the per-pass cap (10)"}},
		{"confirmation past the period", "resync: {confirmAfter: 20m}", []string{"confirmation delay (20m0s) must be shorter than the resync period (10m0s)"}},
		{"a zero minimum age", "resync: {minAge: 0s}", []string{"resync.minAge: Invalid value: \"0s\""}},
		{"a negative period", "resync: {period: -1m}", []string{"resync.period: Invalid value: \"-1m0s\""}},
		{"Secrets as owners", "resync: {ownerKinds: [Secret]}", []string{"resync: Invalid value: live owner kinds: Secrets are never read"}},
		{"a wildcard dependent", "resync: {extraDependentKinds: [\"example.com/*\"]}", []string{`resync: Invalid value: extra dependent kinds: "*.example.com": no wildcards`}},
		{"a kind that is no kind", "resync: {ownerKinds: [a/b/c]}", []string{"resync.ownerKinds[0]: Invalid value: \"a/b/c\""}},
		{"no hub rate", "clients: {hub: {qps: 0}}", []string{"clients.hub.qps: Invalid value: 0: must be positive"}},
		{"no project burst", "clients: {project: {burst: 0}}", []string{"clients.project.burst: Invalid value: 0: must be at least 1"}},
	}
	for _, tc := range cases {
		_, err := load(t, head+tc.doc+"\n")
		if err == nil {
			t.Errorf("%s: %q accepted", tc.reason, tc.doc)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not say %q", tc.reason, err, w)
			}
		}
		if n := len(problem.FindAllString(err.Error(), -1)); n != 1 {
			t.Errorf("%s: %d problems reported for one: %q", tc.reason, n, err)
		}
	}
}

// TestValidateReportsEveryProblem: a file with several mistakes names each of them.
func TestValidateReportsEveryProblem(t *testing.T) {
	g := gomega.NewWithT(t)
	_, err := load(t, head+"sharding: {leaseDuration: 0s, retryPeriod: -1s}\nresync: {haltAbove: 0}\ngateway: {workers: 0, proxiesPerProject: 0}\nclients: {hub: {burst: 0}}\n")
	g.Expect(err).To(gomega.HaveOccurred())
	for _, key := range []string{"sharding.leaseDuration", "sharding.retryPeriod", "resync.haltAbove", "gateway.workers", "gateway.proxiesPerProject", "clients.hub.burst"} {
		g.Expect(err.Error()).To(gomega.ContainSubstring(key+": "), "every problem is named")
	}
}

// TestLoadIsStrict: a misspelled or repeated key, a value of the wrong type, or another
// document is an error that names it; nothing is dropped silently.
func TestLoadIsStrict(t *testing.T) {
	cases := []struct {
		reason, doc string
		want        []string
	}{
		{"a misspelled key", head + "sharding:\n  leaseDuraton: 20s\n", []string{`unknown key "leaseDuraton"`}},
		{"a key at the wrong level", head + "leaseDuration: 20s\n", []string{`unknown key "leaseDuration"`}},
		{"a repeated key", head + "hubTimeout: 1s\nhubTimeout: 2s\n", []string{`"hubTimeout" already set`}},
		{"a duration without a unit", head + "resync: {period: 10}\n", []string{"resync.period: want a string (a duration such as 15s"}},
		{"a count as text", head + "gateway: {workers: four}\n", []string{"gateway.workers: want a int, got a string"}},
		{"a duration that is none", head + "resync: {period: soon}\n", []string{`invalid duration "soon"`}},
		{"another kind", "apiVersion: v1\nkind: ConfigMap\n", []string{`apiVersion "v1" kind "ConfigMap"`, "config.anchorage.datumapis.com/v1alpha1 ManagerConfiguration", "NetworkServicesOperator"}},
		{"no kind at all", "hubTimeout: 1s\n", []string{`apiVersion "" kind ""`}},
		{"not YAML", head + "gateway: [\n", []string{"yaml"}},
		{"the previous manager's unknown section", strings.Replace(previousDoc(t), "redis:", "redys:", 1), []string{`unknown key "redys" in the previous manager's document`}},
		{"the previous manager's unknown key", strings.Replace(previousDoc(t), "  targetDomain:", "  targetDomian:", 1), []string{`unknown key "gateway.targetDomian"`}},
	}
	for _, tc := range cases {
		_, err := load(t, tc.doc)
		if err == nil {
			t.Errorf("%s: accepted", tc.reason)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not say %q", tc.reason, err, w)
			}
		}
	}
	if _, err := Load(filepath.Join(t.TempDir(), "none.yaml")); err == nil || !strings.Contains(err.Error(), "none.yaml") {
		t.Errorf("a missing file: %v", err)
	}
}

func previousDoc(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "network-services-operator.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestPreviousManagersDocument: the previous manager's file, read as it is, becomes this
// manager's settings key by key, and every key it has is reported: mapped (with what it
// became), or not served (with why, and whether a tenant loses something).
func TestPreviousManagersDocument(t *testing.T) {
	g := gomega.NewWithT(t)
	l, err := load(t, previousDoc(t))
	g.Expect(err).NotTo(gomega.HaveOccurred())
	want := Default()
	want.Gateway.GatewayClassName = "datum-external-global-proxy"
	want.Gateway.ControllerName = "gateway.networking.datumapis.com/external-global-proxy-controller"
	want.Gateway.DownstreamGatewayClassName = "datum-downstream-gateway"
	want.Gateway.HostnameClaimsNamespace = "datum-downstream-gateway-hostnames"
	want.Gateway.CertificateIssuer = Issuer{Name: "letsencrypt-prod", Kind: "ClusterIssuer", Group: "cert-manager.io"}
	want.Gateway.ClusterIssuers = map[string]string{"auto": "letsencrypt-prod", "staging": "letsencrypt-staging"}
	want.Sharding.LeaseDuration = metav1.Duration{Duration: 30 * time.Second}
	want.Sharding.RenewDeadline = metav1.Duration{Duration: 20 * time.Second}
	want.Sharding.RetryPeriod = metav1.Duration{Duration: 4 * time.Second}
	want.Clients = Clients{Hub: ClientConnection{QPS: 80, Burst: 160}, Project: ClientConnection{QPS: 25, Burst: 100}}
	want.Platform.TargetDomain, want.Platform.LegacyTargetDomains = "prism.global.datum-dns.net", []string{"datumproxy.net"}
	want.DomainVerification.RetryIntervals = []RetryInterval{
		{Interval: metav1.Duration{Duration: 5 * time.Second}, MaxElapsed: &metav1.Duration{Duration: 5 * time.Minute}},
		{Interval: metav1.Duration{Duration: 5 * time.Minute}},
	}
	g.Expect(l.ManagerConfiguration).To(gomega.Equal(want))
	g.Expect(l.HubKubeconfig).To(gomega.Equal("/etc/downstream/kubeconfig"))

	byPath := map[string]Key{}
	for _, k := range l.Keys {
		g.Expect(byPath).NotTo(gomega.HaveKey(k.Path), "one row per key")
		byPath[k.Path] = k
		g.Expect(k.Became != "" || k.Why != "").To(gomega.BeTrue(), "%s: neither mapped nor explained", k.Path)
	}
	g.Expect(byPath["httpProxy.gatewayClassName"].Became).To(gomega.Equal("gateway.gatewayClassName: datum-external-global-proxy"))
	g.Expect(byPath["leaderElection.leaseDuration"].Became).To(gomega.Equal("sharding.leaseDuration: 30s"))
	g.Expect(byPath["gateway.targetDomain"].Became).To(gomega.Equal("platform.targetDomain: prism.global.datum-dns.net"))
	g.Expect(byPath["gateway.legacyTargetDomains"].Became).To(gomega.Equal("platform.legacyTargetDomains: [datumproxy.net]"))
	g.Expect(byPath["gateway.ipFamilies"].Became).To(gomega.Equal("platform.ipFamilies: [IPv4 IPv6]"))
	g.Expect(byPath["projectClient.burst"]).To(gomega.Equal(Key{Path: "projectClient.burst", Became: "clients.project.burst: 100"}), "absent: its default, said as such")
	g.Expect(byPath["gateway.clusterIssuerMap[gateway.listenerTLSOptions.gateway.networking.datumapis.com/certificate-issuer]"].Became).To(gomega.Equal("gateway.certificateIssuer: ClusterIssuer letsencrypt-prod"))
	for _, unserved := range []string{"metricsServer", "webhookServer", "discovery", "redis", "connector", "ipam",
		"gateway.coraza", "gateway.resourceReplicator",
		"gateway.maxConcurrentReconciles", "httpProxy.maxConcurrentReconciles", "gateway.enableDownstreamCertificateSolver"} {
		g.Expect(byPath).To(gomega.HaveKey(unserved), "%s is not reported", unserved)
		g.Expect(byPath[unserved].Became).To(gomega.BeEmpty(), unserved)
	}
	// Hostname verification: on unless the previous manager had it off.
	g.Expect(byPath["gateway.disableHostnameVerification"]).To(gomega.Equal(Key{Path: "gateway.disableHostnameVerification", Became: "domainVerification.enabled: true"}))
	g.Expect(byPath["domainVerificationConfig.retryIntervals"].Became).To(gomega.Equal("domainVerification.retryIntervals: [{\"interval\":\"5s\",\"maxElapsed\":\"5m\"},{\"interval\":\"5m\"}]"))
	// What a tenant loses is said even when the file leaves the key out (its default).
	g.Expect(byPath["gateway.coraza"].Lost).To(gomega.BeTrue())
	g.Expect(byPath).NotTo(gomega.HaveKey("gateway.errorPage"), "a key the file leaves out and that loses nothing is not reported")
	l, err = load(t, strings.Replace(previousDoc(t), "  listenerTLSOptions:\n", "  listenerTLSOptions:\n    gateway.networking.datumapis.com/min-tls-version: \"1.3\"\n", 1))
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(l.Keys).To(gomega.ContainElement(Key{Path: "gateway.listenerTLSOptions.gateway.networking.datumapis.com/min-tls-version", Value: "1.3",
		Why: "only the certificate-issuer option is read: a listener's other TLS options are not programmed"}), "another listener option is reported, not dropped")
	g.Expect(l.Gateway.CertificateIssuer.Name).To(gomega.Equal("letsencrypt-prod"))

	// Switched off in the previous manager too: nothing is lost.
	off := strings.Replace(previousDoc(t), "  coraza:\n", "  coraza:\n    disabled: true\n", 1)
	l, err = load(t, strings.Replace(off, "\ngateway:\n", "\ngateway:\n  disableHostnameVerification: true\n", 1))
	g.Expect(err).NotTo(gomega.HaveOccurred())
	for _, k := range l.Keys {
		g.Expect(k.Lost && k.Path == "gateway.coraza").To(gomega.BeFalse(), "%s switched off is not lost", k.Path)
	}
	g.Expect(l.DomainVerification.Enabled).To(gomega.BeFalse(), "disableHostnameVerification: true turns verification off here too")

	// The previous manager's own rules still hold here: a value this manager refuses is
	// refused with this manager's key.
	_, err = load(t, strings.Replace(previousDoc(t), "leaseDuration: 30s", "leaseDuration: 5s", 1))
	g.Expect(err).To(gomega.MatchError(gomega.ContainSubstring("sharding.leaseDuration (5s) must be greater than sharding.renewDeadline (20s)")))
}

func ruleFor(t *testing.T, key string) previousRule {
	for _, r := range previousRules {
		if r.key == key {
			return r
		}
	}
	t.Fatalf("no rule for %s", key)
	return previousRule{}
}
