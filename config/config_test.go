// Package config_test checks the deployment manifests: config/default renders with
// kustomize and passes server-side dry-run on a real API server, its RBAC keeps the
// least-privilege promises, its Deployment's flags and the configuration file it mounts
// are ones the manager accepts, the generated RBAC is fresh, and the alert component
// renders into rules whose metrics the manager exports.
package config_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"anchorage/internal/app"
	"anchorage/internal/testenv"
	"anchorage/pkg/anchor/resync"
	managerconfig "anchorage/pkg/config"
)

// deployNamespace is where config/default puts everything namespaced.
const deployNamespace = "anchorage-system"

// hubConfig is the admin config of the API server started in TestMain (nil in -short).
var hubConfig *rest.Config

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	flag.Parse()
	if !testing.Short() {
		bins, err := testenv.BinaryDir()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		// The hub's CRDs: a replica's controllers are built against them.
		crds, err := testenv.HubCRDs()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		env := &envtest.Environment{BinaryAssetsDirectory: bins, CRDs: crds, ErrorIfCRDPathMissing: true}
		if hubConfig, err = env.Start(); err != nil {
			fmt.Fprintln(os.Stderr, "starting the API server:", err)
			return 1
		}
		defer func() { _ = env.Stop() }()
	}
	code := m.Run()
	if managerPath != "" {
		_ = os.RemoveAll(filepath.Dir(managerPath))
	}
	return code
}

func needAPIServer(t *testing.T) {
	t.Helper()
	if hubConfig == nil {
		t.Skip("needs an API server; skipped in -short mode")
	}
}

// render runs kustomize on dir, as `kubectl kustomize dir` does, and returns the
// objects in order.
func render(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	resMap, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	out, err := resMap.AsYaml()
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	var objs []*unstructured.Unstructured
	for _, doc := range bytes.Split(out, []byte("\n---\n")) {
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(doc, &u.Object); err != nil {
			t.Fatalf("parsing rendered %s: %v\n%s", dir, err, doc)
		}
		objs = append(objs, u)
	}
	return objs
}

func configDir(parts ...string) string {
	return filepath.Join(append([]string{testenv.RepoRoot(), "config"}, parts...)...)
}

// decode converts a rendered object into a typed one.
func decode(t *testing.T, u *unstructured.Unstructured, into any) {
	t.Helper()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, into); err != nil {
		t.Fatalf("decoding %s %s: %v", u.GetKind(), u.GetName(), err)
	}
}

// byKind returns the only rendered object of kind, failing if there is not exactly one.
func byKind(t *testing.T, objs []*unstructured.Unstructured, kind string) *unstructured.Unstructured {
	t.Helper()
	var found []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind {
			found = append(found, o)
		}
	}
	if len(found) != 1 {
		t.Fatalf("want one %s in config/default, found %d", kind, len(found))
	}
	return found[0]
}

// TestDefaultAppliesToAnAPIServer renders config/default and applies it to a real API
// server: config/namespace's Namespace for real (it is applied first, on its own), then
// everything else with server-side dry-run, so a manifest the API server refuses (a bad
// field, a bad selector, an invalid probe) fails here and not in a cluster.
func TestDefaultAppliesToAnAPIServer(t *testing.T) {
	needAPIServer(t)
	g := NewWithT(t)
	ctx := context.Background()
	objs := render(t, configDir("default"))
	c, err := client.New(hubConfig, client.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	createNamespaces(t, c, configDir("namespace"))

	var kinds []string
	for _, o := range objs {
		kinds = append(kinds, o.GetKind())
	}
	g.Expect(kinds).To(ConsistOf("ServiceAccount", "ClusterRole", "ClusterRole", "Role", "ClusterRoleBinding", "RoleBinding",
		"Deployment", "PodDisruptionBudget", "Service", "NetworkPolicy", "ConfigMap"))
	for _, o := range objs {
		err := c.Create(ctx, o.DeepCopy(), client.DryRunAll, client.FieldOwner("anchorage-config-test"))
		g.Expect(err).NotTo(HaveOccurred(), "server-side dry-run of %s %s", o.GetKind(), o.GetName())
		if ns := o.GetNamespace(); ns != "" {
			g.Expect(ns).To(Equal(deployNamespace), "%s %s", o.GetKind(), o.GetName())
		}
	}
}

// TestDefaultDeployment checks what the manifests promise beyond validity: three
// replicas named by the downward API, readiness tied to member validity, a disruption
// budget and a metrics Service that select the manager's pods, non-root, and the
// configuration file --config names mounted from the ConfigMap, loading as the manager
// loads it and naming the deployment's namespace.
func TestDefaultDeployment(t *testing.T) {
	g := NewWithT(t)
	objs := render(t, configDir("default"))
	var dep appsv1.Deployment
	decode(t, byKind(t, objs, "Deployment"), &dep)
	g.Expect(dep.Spec.Replicas).NotTo(BeNil())
	g.Expect(*dep.Spec.Replicas).To(BeNumerically("==", 3))
	g.Expect(dep.Spec.Template.Spec.ServiceAccountName).To(Equal("anchorage-manager"))
	podLabels := dep.Spec.Template.Labels

	g.Expect(dep.Spec.Template.Spec.Containers).To(HaveLen(1))
	ctr := dep.Spec.Template.Spec.Containers[0]
	fieldOf := map[string]string{}
	for _, e := range ctr.Env {
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			fieldOf[e.Name] = e.ValueFrom.FieldRef.FieldPath
		}
	}
	g.Expect(fieldOf).To(HaveKeyWithValue("POD_NAME", "metadata.name"), "the pod name through the downward API")
	g.Expect(ctr.Args).To(ContainElement("--identity=$(POD_NAME)"))
	loaded := loadMountedConfig(t, objs, dep)
	g.Expect(loaded.ProviderNamespace).To(Equal(deployNamespace), "the provider namespace is the deployment's")
	g.Expect(loaded.LeaseNamespaceOrProvider()).To(Equal(deployNamespace), "the lease namespace is the deployment's")
	g.Expect(ctr.ReadinessProbe).NotTo(BeNil())
	g.Expect(ctr.ReadinessProbe.HTTPGet).NotTo(BeNil())
	g.Expect(ctr.ReadinessProbe.HTTPGet.Path).To(Equal("/readyz"), "readiness is the member-validity check")
	g.Expect(ctr.LivenessProbe).NotTo(BeNil())
	g.Expect(ctr.LivenessProbe.HTTPGet.Path).To(Equal("/healthz"))

	sc := dep.Spec.Template.Spec.SecurityContext
	g.Expect(sc).NotTo(BeNil())
	g.Expect(sc.RunAsNonRoot).To(HaveValue(BeTrue()))
	g.Expect(ctr.SecurityContext).NotTo(BeNil())
	g.Expect(ctr.SecurityContext.AllowPrivilegeEscalation).To(HaveValue(BeFalse()))
	g.Expect(ctr.SecurityContext.ReadOnlyRootFilesystem).To(HaveValue(BeTrue()))

	var pdb policyv1.PodDisruptionBudget
	decode(t, byKind(t, objs, "PodDisruptionBudget"), &pdb)
	g.Expect(pdb.Spec.Selector).NotTo(BeNil())
	g.Expect(podLabels).To(matchLabels(pdb.Spec.Selector.MatchLabels), "the PodDisruptionBudget selects the manager's pods")

	var svc corev1.Service
	decode(t, byKind(t, objs, "Service"), &svc)
	g.Expect(podLabels).To(matchLabels(svc.Spec.Selector), "the metrics Service selects the manager's pods")
	var metricsPort []string
	for _, p := range ctr.Ports {
		metricsPort = append(metricsPort, p.Name)
	}
	g.Expect(svc.Spec.Ports).To(HaveLen(1))
	g.Expect(metricsPort).To(ContainElement(svc.Spec.Ports[0].TargetPort.String()), "the Service targets a named container port")
}

// matchLabels succeeds when every label of selector is in the actual map.
func matchLabels(selector map[string]string) OmegaMatcher {
	var ms []OmegaMatcher
	for k, v := range selector {
		ms = append(ms, HaveKeyWithValue(k, v))
	}
	if len(ms) == 0 {
		return BeNil() // an empty selector selects everything: never what is meant
	}
	return And(ms...)
}

// TestDefaultRBACIsLeastPrivilege: Leases and Secrets only through the namespaced
// Role (Leases in the lease namespace, Secrets in the provider namespace, both the
// deployment's namespace); the cluster-wide role grants neither, and nothing grants
// escalation verbs. The dependents scan's lists are granted kind by kind, for exactly
// the kinds it lists (resync.DependentKindsOf of the live path's writes).
func TestDefaultRBACIsLeastPrivilege(t *testing.T) {
	g := NewWithT(t)
	objs := render(t, configDir("default"))
	var cr rbacv1.ClusterRole
	decode(t, byName(t, objs, "ClusterRole", "anchorage-manager"), &cr)
	var role rbacv1.Role
	decode(t, byKind(t, objs, "Role"), &role)
	g.Expect(role.Namespace).To(Equal(deployNamespace))

	for _, rule := range cr.Rules {
		for _, res := range []struct{ group, resource string }{{"", "secrets"}, {"coordination.k8s.io", "leases"}} {
			g.Expect(grants(rule, res.group, res.resource)).To(BeFalse(),
				"the ClusterRole must not reach %s cluster-wide (rule %v): they belong to the namespaced Role", res.resource, rule)
		}
		g.Expect(rule.Verbs).NotTo(ContainElements("escalate", "bind", "impersonate", "*"), "rule %v", rule)
	}
	for _, gk := range resync.DependentKindsOf(resync.DefaultHubWrites, nil) {
		resource := resourceOf(gk)
		g.Expect(anyGrants(cr.Rules, gk.Group, resource, "list")).To(BeTrue(), "the dependents scan lists %s", gk)
	}
	g.Expect(anyGrants(cr.Rules, "authentication.k8s.io", "tokenreviews", "create")).To(BeTrue(), "authenticating metrics scrapes")
	g.Expect(anyGrants(cr.Rules, "authorization.k8s.io", "subjectaccessreviews", "create")).To(BeTrue(), "authorizing metrics scrapes")
	g.Expect(anyGrants(role.Rules, "", "secrets", "get", "list", "watch")).To(BeTrue(), "the Role reads kubeconfig Secrets")
	g.Expect(anyGrants(role.Rules, "coordination.k8s.io", "leases", "get", "list", "watch", "create", "update", "delete")).To(BeTrue(),
		"the Role writes Leases")
	for _, rule := range role.Rules {
		if grants(rule, "", "secrets") {
			g.Expect(rule.Verbs).To(ConsistOf("get", "list", "watch"), "Secrets are only read")
		}
	}

	// The bindings bind the ServiceAccount in the deployment's namespace.
	for _, kind := range []string{"ClusterRoleBinding", "RoleBinding"} {
		var b rbacv1.RoleBinding // same shape for both kinds
		decode(t, byKind(t, objs, kind), &b)
		g.Expect(b.Subjects).To(ConsistOf(rbacv1.Subject{Kind: "ServiceAccount", Name: "anchorage-manager", Namespace: deployNamespace}), kind)
	}

	// The scraper's role: get on /metrics, nothing else.
	var reader rbacv1.ClusterRole
	decode(t, byName(t, objs, "ClusterRole", "anchorage-metrics-reader"), &reader)
	g.Expect(reader.Rules).To(Equal([]rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}))
}

// TestProjectRoleIsLeastPrivilege: the plane's role (bound to the user of every
// project's kubeconfig) reads no Secret, grants get on every owner kind the resync
// reads live by default, and what the gateway path writes.
func TestProjectRoleIsLeastPrivilege(t *testing.T) {
	g := NewWithT(t)
	roles := projectRoles(t)
	g.Expect(roles).To(HaveLen(1))
	cr := roles[0]
	g.Expect(cr.Name).To(Equal("anchorage-project"))
	for _, rule := range cr.Rules {
		g.Expect(grants(rule, "", "secrets")).To(BeFalse(), "rule %v", rule)
	}
	for _, gk := range resync.DefaultLiveOwnerKinds {
		g.Expect(anyGrants(cr.Rules, gk.Group, resourceOf(gk), "get")).To(BeTrue(), "the resync reads %s owners live", gk)
	}
	g.Expect(anyGrants(cr.Rules, "", "namespaces", "get")).To(BeTrue(), "upstream namespaces and the plane identity")
}

// projectRoles parses config/rbac/project-role.yaml.
func projectRoles(t *testing.T) []rbacv1.ClusterRole {
	t.Helper()
	data, err := os.ReadFile(configDir("rbac", "project-role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var out []rbacv1.ClusterRole
	for _, doc := range strings.Split(string(data), "\n---") {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		var cr rbacv1.ClusterRole
		if err := yaml.Unmarshal([]byte(doc), &cr); err != nil {
			t.Fatalf("parsing config/rbac/project-role.yaml: %v", err)
		}
		if cr.Kind != "ClusterRole" {
			t.Fatalf("config/rbac/project-role.yaml holds a %s; want only ClusterRoles", cr.Kind)
		}
		out = append(out, cr)
	}
	return out
}

// TestNoWildcardOrClusterWideSecretAnywhere renders everything config/ ships (the
// hub's config/default with the prometheus component, and the planes' role) and fails
// on any rule with "*" in its API groups, resources, verbs or URLs, and on Secrets in
// any ClusterRole: a ClusterRole bound anywhere reaches every namespace's Secrets.
func TestNoWildcardOrClusterWideSecretAnywhere(t *testing.T) {
	type named struct {
		what  string
		kind  string
		rules []rbacv1.PolicyRule
	}
	var all []named
	_, _, objs := renderWithPrometheus(t)
	for _, o := range objs {
		switch o.GetKind() {
		case "ClusterRole", "Role":
			var r rbacv1.ClusterRole // same shape for both kinds
			decode(t, o, &r)
			all = append(all, named{o.GetKind() + " " + o.GetName(), o.GetKind(), r.Rules})
		}
	}
	for _, cr := range projectRoles(t) {
		all = append(all, named{"config/rbac/project-role.yaml " + cr.Name, "ClusterRole", cr.Rules})
	}
	if len(all) < 4 {
		t.Fatalf("found only %d roles in config/", len(all))
	}
	for _, r := range all {
		for _, rule := range r.rules {
			wild := func(field []string) bool {
				return slices.ContainsFunc(field, func(v string) bool { return strings.Contains(v, "*") })
			}
			if wild(rule.APIGroups) || wild(rule.Resources) || wild(rule.Verbs) || wild(rule.NonResourceURLs) {
				t.Errorf("%s: wildcard in rule %+v", r.what, rule)
			}
			if r.kind == "ClusterRole" && slices.ContainsFunc(rule.Resources, func(v string) bool { return v == "secrets" || strings.HasPrefix(v, "secrets/") }) {
				t.Errorf("%s: a ClusterRole reaches Secrets in every namespace (rule %+v)", r.what, rule)
			}
		}
	}
}

// TestNetworkPolicyAdmitsOnlyMetricsAndHealth: the manager's pods take traffic on the
// metrics and health ports only.
func TestNetworkPolicyAdmitsOnlyMetricsAndHealth(t *testing.T) {
	g := NewWithT(t)
	objs := render(t, configDir("default"))
	var np networkingv1.NetworkPolicy
	decode(t, byKind(t, objs, "NetworkPolicy"), &np)
	var dep appsv1.Deployment
	decode(t, byKind(t, objs, "Deployment"), &dep)
	g.Expect(dep.Spec.Template.Labels).To(matchLabels(np.Spec.PodSelector.MatchLabels), "the NetworkPolicy selects the manager's pods")
	g.Expect(np.Spec.PolicyTypes).To(ContainElement(networkingv1.PolicyTypeIngress))
	var ports []string
	for _, rule := range np.Spec.Ingress {
		g.Expect(rule.Ports).NotTo(BeEmpty(), "an ingress rule without ports admits every port")
		for _, p := range rule.Ports {
			ports = append(ports, p.Port.String())
		}
	}
	g.Expect(ports).To(ConsistOf("metrics", "health"))
	var named []string
	for _, p := range dep.Spec.Template.Spec.Containers[0].Ports {
		named = append(named, p.Name)
	}
	g.Expect(named).To(ConsistOf("metrics", "health"), "the ports the policy names are the container's")
	g.Expect(dep.Spec.Template.Spec.Containers[0].Args).NotTo(ContainElement("--metrics-secure=false"), "metrics are served over HTTPS")
}

// byName returns the only rendered object of kind named name.
func byName(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	t.Fatalf("no %s %s in config/default", kind, name)
	return nil
}

// resourceOf is the resource of a kind the way RBAC names it. A kind the resync comes to
// list or read that is missing here fails the test that asked, rather than being guessed
// (apimachinery's guess makes "gatewaies" of Gateway).
func resourceOf(gk schema.GroupKind) string {
	resources := map[schema.GroupKind]string{
		{Kind: "ConfigMap"}: "configmaps",
		{Group: "gateway.networking.k8s.io", Kind: "Gateway"}:   "gateways",
		{Group: "gateway.networking.k8s.io", Kind: "HTTPRoute"}: "httproutes",
		{Group: "cert-manager.io", Kind: "Certificate"}:         "certificates",
		{Group: "externaldns.k8s.io", Kind: "DNSEndpoint"}:      "dnsendpoints",
		{Group: "networking.datumapis.com", Kind: "HTTPProxy"}:  "httpproxies",
		{Kind: "Service"}: "services",
		{Group: "discovery.k8s.io", Kind: "EndpointSlice"}:             "endpointslices",
		{Group: "gateway.networking.k8s.io", Kind: "BackendTLSPolicy"}: "backendtlspolicies",
		// The previous manager's replicated kinds (resync.PreviousReplicatedKinds).
		{Group: "gateway.envoyproxy.io", Kind: "Backend"}:                    "backends",
		{Group: "gateway.envoyproxy.io", Kind: "BackendTrafficPolicy"}:       "backendtrafficpolicies",
		{Group: "gateway.envoyproxy.io", Kind: "SecurityPolicy"}:             "securitypolicies",
		{Group: "gateway.envoyproxy.io", Kind: "HTTPRouteFilter"}:            "httproutefilters",
		{Group: "networking.datumapis.com", Kind: "TrafficProtectionPolicy"}: "trafficprotectionpolicies",
		{Group: "networking.datumapis.com", Kind: "NetworkContext"}:          "networkcontexts",
		{Group: "networking.datumapis.com", Kind: "Subnet"}:                  "subnets",
		{Group: "networking.datumapis.com", Kind: "Connector"}:               "connectors",
	}
	if r, ok := resources[gk]; ok {
		return r
	}
	return "unknown kind " + gk.String() + ": add its resource to resourceOf"
}

// grants reports whether rule reaches resource in group (wildcards included).
func grants(rule rbacv1.PolicyRule, group, resource string) bool {
	return (slices.Contains(rule.APIGroups, group) || slices.Contains(rule.APIGroups, "*")) &&
		(slices.Contains(rule.Resources, resource) || slices.Contains(rule.Resources, "*")) &&
		len(rule.ResourceNames) == 0
}

// anyGrants reports whether the rules together grant every verb on resource.
func anyGrants(rules []rbacv1.PolicyRule, group, resource string, verbs ...string) bool {
	for _, v := range verbs {
		ok := false
		for _, r := range rules {
			if grants(r, group, resource) && (slices.Contains(r.Verbs, v) || slices.Contains(r.Verbs, "*")) {
				ok = true
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// TestDeploymentFlagsAreAccepted runs the real manager binary with the Deployment's
// arguments (the downward-API variables filled in, --config naming a copy of the
// mounted file) against a hub that is not there: it must get as far as looking for the
// hub, so every flag in the manifest, and every key of its configuration file, is one
// the binary knows and accepts.
func TestDeploymentFlagsAreAccepted(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the manager binary")
	}
	g := NewWithT(t)
	objs := render(t, configDir("default"))
	var dep appsv1.Deployment
	decode(t, byKind(t, objs, "Deployment"), &dep)
	ctr := dep.Spec.Template.Spec.Containers[0]
	g.Expect(ctr.Command).To(BeEmpty(), "the image's entrypoint is the manager")

	bin := managerBinary(t)
	kubeconfig := filepath.Join(t.TempDir(), "hub.kubeconfig")
	g.Expect(os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: hub, cluster: {server: "http://127.0.0.1:1"}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: hub, context: {cluster: hub, user: u}}]
current-context: hub
`), 0o600)).To(Succeed())
	env := map[string]string{"POD_NAME": "anchorage-manager-0", "POD_NAMESPACE": deployNamespace}
	var args []string
	for _, a := range ctr.Args {
		args = append(args, os.Expand(strings.ReplaceAll(strings.ReplaceAll(a, "$(", "${"), ")", "}"), func(k string) string { return env[k] }))
	}
	args = withLocalConfig(t, objs, dep, args)
	// Later flags win: point it at the dead hub, and keep its ports free.
	args = append(args, "--kubeconfig="+kubeconfig, "--metrics-bind-address=0", "--health-probe-bind-address=0")
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "POD_NAME=anchorage-manager-0", "KUBECONFIG=")
	out, err := cmd.CombinedOutput()
	g.Expect(err).To(HaveOccurred())
	g.Expect(string(out)).To(ContainSubstring("unreachable"), "with the Deployment's args %q the manager stopped before looking for the hub:\n%s", args, out)
}

var (
	managerOnce sync.Once
	managerPath string
	managerErr  error
)

// managerBinary builds cmd/manager once for the package's tests.
func managerBinary(t *testing.T) string {
	t.Helper()
	managerOnce.Do(func() {
		dir, err := os.MkdirTemp("", "anchorage-config-test-")
		if err != nil {
			managerErr = err
			return
		}
		managerPath = filepath.Join(dir, "manager")
		build := exec.Command("go", "build", "-o", managerPath, "./cmd/manager")
		build.Dir = testenv.RepoRoot()
		if out, err := build.CombinedOutput(); err != nil {
			managerErr = fmt.Errorf("building the manager: %w\n%s", err, out)
		}
	})
	if managerErr != nil {
		t.Fatal(managerErr)
	}
	return managerPath
}

// helpFlag finds a flag's name in the manager's help, in pflag's format: "  -o, --output
// string  ..." or "      --kubeconfig string  ...".
var helpFlag = regexp.MustCompile(`(?m)^ +(?:-[a-zA-Z], )?--([a-z0-9-]+)`)

// TestEveryFlagIsDocumented: the help the binary prints (on stdout) for the replica and
// for the sweep lists only flags that docs/operations.md documents in that command's
// table, so an operator never has to read the code. cmd/manager's TestFlagTable checks
// the tables' names and defaults against the command definitions; this checks the built
// binary's help against them.
func TestEveryFlagIsDocumented(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the manager binary")
	}
	g := NewWithT(t)
	bin := managerBinary(t)
	doc, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "docs", "operations.md"))
	g.Expect(err).NotTo(HaveOccurred())
	_, flagsSection, found := strings.Cut(string(doc), "\n## Flags\n")
	g.Expect(found).To(BeTrue(), "docs/operations.md has no ## Flags section")
	replicaTable, sweepTable, found := strings.Cut(flagsSection, "\n### manager sweep\n")
	g.Expect(found).To(BeTrue(), "docs/operations.md's ## Flags has no ### manager sweep table")
	for _, c := range []struct {
		args  []string
		table string
	}{{[]string{"-h"}, replicaTable}, {[]string{"sweep", "-h"}, sweepTable}} {
		cmd := exec.Command(bin, c.args...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		g.Expect(err).NotTo(HaveOccurred(), "manager %s: %s", strings.Join(c.args, " "), stderr.String())
		g.Expect(stderr.String()).To(BeEmpty(), "manager %s wrote help on stderr", strings.Join(c.args, " "))
		flags := helpFlag.FindAllStringSubmatch(string(out), -1)
		g.Expect(len(flags)).To(BeNumerically(">", 10), "manager %s printed few flags:\n%s", strings.Join(c.args, " "), out)
		for _, f := range flags {
			if f[1] == "help" || f[1] == "version" {
				continue
			}
			if !strings.Contains(c.table, "`--"+f[1]+"` |") {
				t.Errorf("docs/operations.md does not document the flag --%s in the table of manager %s", f[1], strings.Join(c.args[:len(c.args)-1], " "))
			}
		}
	}
}

// TestRBACIsFresh regenerates the RBAC roles from the +kubebuilder:rbac markers and
// fails when config/rbac/role.yaml or project-role.yaml differs: a marker changed without
// `make manifests` would deploy (and test with) the wrong permissions.
func TestRBACIsFresh(t *testing.T) {
	if testing.Short() {
		t.Skip("runs controller-gen; skipped in -short mode")
	}
	root := testenv.RepoRoot()
	out := t.TempDir()
	cmd := exec.Command(filepath.Join(root, "hack", "manifests.sh"), "rbac")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "OUT_DIR="+out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("hack/manifests.sh rbac failed: %v\n%s", err, b)
	}
	for _, file := range []string{"role.yaml", "project-role.yaml"} {
		want, err := os.ReadFile(filepath.Join(out, "config", "rbac", file))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(configDir("rbac", file))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(string(want), string(got)); diff != "" {
			t.Errorf("config/rbac/%s is stale; run `make manifests` (-generated +checked in):\n%s", file, diff)
		}
	}
}

// promRule is one rule of a PrometheusRule.
type promRule struct {
	Alert       string            `json:"alert"`
	Record      string            `json:"record"`
	Expr        string            `json:"expr"`
	For         string            `json:"for"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

// renderAlerts renders config/default with the prometheus component and returns the
// alert rules.
func renderAlerts(t *testing.T) ([]promRule, *unstructured.Unstructured) {
	t.Helper()
	rules, prometheusRule, _ := renderWithPrometheus(t)
	return rules, prometheusRule
}

// renderWithPrometheus renders config/default with the prometheus component, as a user
// adds it (components: [../prometheus]), from a kustomization in a temporary directory.
func renderWithPrometheus(t *testing.T) ([]promRule, *unstructured.Unstructured, []*unstructured.Unstructured) {
	t.Helper()
	dir := t.TempDir()
	rel := func(p string) string {
		r, err := filepath.Rel(dir, p)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	kustomization := fmt.Sprintf("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- %s\ncomponents:\n- %s\n",
		rel(configDir("default")), rel(configDir("prometheus")))
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(kustomization), 0o600); err != nil {
		t.Fatal(err)
	}
	var rules []promRule
	var prometheusRule *unstructured.Unstructured
	objs := render(t, dir)
	for _, o := range objs {
		if o.GetKind() != "PrometheusRule" {
			continue
		}
		if prometheusRule != nil {
			t.Fatalf("more than one PrometheusRule")
		}
		prometheusRule = o
		var spec struct {
			Groups []struct {
				Name  string     `json:"name"`
				Rules []promRule `json:"rules"`
			} `json:"groups"`
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object["spec"].(map[string]any), &spec); err != nil {
			t.Fatalf("parsing the PrometheusRule: %v", err)
		}
		for _, grp := range spec.Groups {
			rules = append(rules, grp.Rules...)
		}
	}
	if prometheusRule == nil {
		t.Fatal("config/prometheus renders no PrometheusRule")
	}
	return rules, prometheusRule, objs
}

// metricName finds metric names in PromQL.
var metricName = regexp.MustCompile(`\banchorage_[a-z0-9_]+`)

// TestAlertsUseExportedMetrics assembles a replica (without starting it) against the
// test API server and checks that every anchorage_ metric an alert reads is one a
// replica registers: an alert on a renamed metric would never fire.
func TestAlertsUseExportedMetrics(t *testing.T) {
	needAPIServer(t)
	g := NewWithT(t)
	rules, _ := renderAlerts(t)
	reg := &recordingRegisterer{Registry: prometheus.NewRegistry(), names: map[string]bool{}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err := app.New(ctx, defaultReplica("config-test", "0", reg))
	g.Expect(err).NotTo(HaveOccurred())
	var exported []string
	for n := range reg.names {
		exported = append(exported, n)
	}
	sort.Strings(exported)
	g.Expect(exported).NotTo(BeEmpty())
	for _, r := range rules {
		for _, m := range metricName.FindAllString(r.Expr, -1) {
			base := m
			for _, suffix := range []string{"_bucket", "_count", "_sum"} {
				if b, ok := strings.CutSuffix(m, suffix); ok && reg.names[b] {
					base = b
				}
			}
			g.Expect(reg.names).To(HaveKey(base), "alert %s reads %s, which no replica exports; exported: %v", r.Alert, m, exported)
		}
	}
}

// recordingRegisterer records the name of every metric registered through it.
type recordingRegisterer struct {
	*prometheus.Registry
	names map[string]bool
}

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

func (r *recordingRegisterer) Register(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc, 64)
	go func() { c.Describe(ch); close(ch) }()
	for d := range ch {
		if m := fqName.FindStringSubmatch(d.String()); m != nil {
			r.names[m[1]] = true
		}
	}
	return r.Registry.Register(c)
}

func (r *recordingRegisterer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

// defaultReplica is a replica's options on the test API server with every setting the
// replicas share at its default (pkg/config), as a Deployment without --config runs.
func defaultReplica(identity, metricsAddr string, reg prometheus.Registerer) app.Options {
	c := managerconfig.Default()
	hub := rest.CopyConfig(hubConfig)
	hub.QPS, hub.Burst = c.Clients.Hub.QPS, c.Clients.Hub.Burst
	project := c.Clients.Project
	return app.Options{
		Hub: hub, Identity: identity, ProviderNamespace: deployNamespace, LeaseNamespace: deployNamespace,
		MetricsAddr: metricsAddr, HealthAddr: "0", Registry: reg,
		HubCheckTimeout: c.HubTimeout.Duration, ProjectCallTimeout: c.Sharding.ProjectCallTimeout.Duration,
		ProjectRESTOptions: []func(*rest.Config) error{func(r *rest.Config) error { r.QPS, r.Burst = project.QPS, project.Burst; return nil }},
		Timings:            c.Timings(), Weight: 1, Gateway: c.GatewayConfig(), Resync: c.ResyncOptions(),
	}
}
