package config_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"anchorage/internal/testenv"
	"anchorage/pkg/config"
)

// leaseNamespace is where config/overlays/split-namespaces puts the Leases.
const leaseNamespace = "anchorage-leases"

// hubKubeconfigDir is where config/overlays/remote-hub/runtime mounts the hub's
// kubeconfig Secret.
const hubKubeconfigDir = "/etc/anchorage/hub"

// createNamespaces renders the kustomization in dir, which must hold only Namespaces,
// and creates them for real (an existing one is fine).
func createNamespaces(t *testing.T, c client.Client, dir string) []string {
	t.Helper()
	var names []string
	for _, o := range render(t, dir) {
		if o.GetKind() != "Namespace" {
			t.Fatalf("%s renders a %s %s; want only Namespaces", dir, o.GetKind(), o.GetName())
		}
		if err := c.Create(context.Background(), o.DeepCopy()); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("creating Namespace %s: %v", o.GetName(), err)
		}
		names = append(names, o.GetName())
	}
	return names
}

// dryRunAll creates every object with server-side dry-run and fails on the first the
// API server refuses.
func dryRunAll(t *testing.T, c client.Client, objs []*unstructured.Unstructured) {
	t.Helper()
	for _, o := range objs {
		if err := c.Create(context.Background(), o.DeepCopy(), client.DryRunAll, client.FieldOwner("anchorage-config-test")); err != nil {
			t.Errorf("server-side dry-run of %s %s/%s: %v", o.GetKind(), o.GetNamespace(), o.GetName(), err)
		}
	}
}

// ids names rendered objects as "Kind namespace/name", sorted.
func ids(objs []*unstructured.Unstructured) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.GetKind()+" "+o.GetNamespace()+"/"+o.GetName())
	}
	slices.Sort(out)
	return out
}

// deploymentOf decodes the only Deployment rendered from dir.
func deploymentOf(t *testing.T, objs []*unstructured.Unstructured) appsv1.Deployment {
	t.Helper()
	var dep appsv1.Deployment
	decode(t, byKind(t, objs, "Deployment"), &dep)
	return dep
}

// rbacKinds are the kinds that grant or bind permissions.
var rbacKinds = []string{"ClusterRole", "Role", "ClusterRoleBinding", "RoleBinding"}

// TestDefaultRendersNoNamespace: config/default never creates (so `kubectl delete -k`
// never deletes) a Namespace; config/namespace holds exactly the deployment namespace.
func TestDefaultRendersNoNamespace(t *testing.T) {
	g := NewWithT(t)
	for _, o := range render(t, configDir("default")) {
		g.Expect(o.GetKind()).NotTo(Equal("Namespace"), "config/default renders Namespace %s: deleting it would delete every project's kubeconfig Secret", o.GetName())
	}
	g.Expect(ids(render(t, configDir("namespace")))).To(Equal([]string{"Namespace /" + deployNamespace}))
}

// TestOverlaysApplyToAnAPIServer renders every overlay and applies it to a real API
// server as TestDefaultAppliesToAnAPIServer does config/default: the namespaces the
// overlay says to apply first for real, everything else with server-side dry-run.
// Namespaced objects land only in those namespaces.
func TestOverlaysApplyToAnAPIServer(t *testing.T) {
	needAPIServer(t)
	c, err := client.New(hubConfig, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		overlay    string
		namespaces string // the kustomization applied once, first
	}{
		{"remote-hub/hub", "namespace"},
		{"remote-hub/runtime", "namespace"},
		{"cut-over", "namespace"},
		{"split-namespaces", "overlays/split-namespaces/namespaces"},
	} {
		t.Run(tc.overlay, func(t *testing.T) {
			objs := render(t, configDir("overlays", tc.overlay))
			if len(objs) == 0 {
				t.Fatal("renders nothing")
			}
			allowed := createNamespaces(t, c, configDir(strings.Split(tc.namespaces, "/")...))
			for _, o := range objs {
				if o.GetKind() == "Namespace" {
					t.Errorf("renders Namespace %s: namespaces are applied once, apart, and never deleted", o.GetName())
				}
				if ns := o.GetNamespace(); ns != "" && !slices.Contains(allowed, ns) {
					t.Errorf("%s %s is in namespace %s, which config/%s does not create (%v)", o.GetKind(), o.GetName(), ns, tc.namespaces, allowed)
				}
			}
			dryRunAll(t, c, objs)
		})
	}
}

// TestOverlayRemoteHub: the manager runs in an ordinary cluster and reaches the hub
// through a mounted kubeconfig Secret. The runtime half's Deployment passes
// --kubeconfig into a Secret volume, its configuration file names the hub's namespaces
// instead of its own pod namespace, it mounts no token of the runtime cluster and ships no RBAC; the hub half is
// config/rbac with a token for the identity it binds, and nothing that runs pods.
// Together the halves hold everything config/default holds.
func TestOverlayRemoteHub(t *testing.T) {
	g := NewWithT(t)
	runtimeObjs := render(t, configDir("overlays", "remote-hub", "runtime"))
	hubObjs := render(t, configDir("overlays", "remote-hub", "hub"))

	dep := deploymentOf(t, runtimeObjs)
	pod := dep.Spec.Template.Spec
	ctr := pod.Containers[0]
	var kubeconfig string
	for _, a := range ctr.Args {
		if v, ok := strings.CutPrefix(a, "--kubeconfig="); ok {
			kubeconfig = v
		}
		g.Expect(a).NotTo(ContainSubstring("$(POD_NAMESPACE)"), "the pod's namespace is the runtime cluster's, not the hub's: %s", a)
	}
	g.Expect(kubeconfig).NotTo(BeEmpty(), "the runtime Deployment passes --kubeconfig: %v", ctr.Args)
	loaded := loadMountedConfig(t, runtimeObjs, dep)
	g.Expect(loaded.ProviderNamespace).To(Equal(deployNamespace), "the hub's provider namespace")
	g.Expect(loaded.LeaseNamespaceOrProvider()).To(Equal(deployNamespace), "the hub's lease namespace")

	// The path is a file of a Secret volume mounted into the container (the deepest
	// mount holding it: the configuration's is its parent directory).
	var mount *corev1.VolumeMount
	for i, m := range ctr.VolumeMounts {
		if strings.HasPrefix(kubeconfig, m.MountPath+"/") && (mount == nil || len(m.MountPath) > len(mount.MountPath)) {
			mount = &ctr.VolumeMounts[i]
		}
	}
	g.Expect(mount).NotTo(BeNil(), "--kubeconfig=%s is under no volume mount of the container", kubeconfig)
	g.Expect(mount.ReadOnly).To(BeTrue())
	var vol *corev1.Volume
	for i, v := range pod.Volumes {
		if v.Name == mount.Name {
			vol = &pod.Volumes[i]
		}
	}
	g.Expect(vol).NotTo(BeNil())
	g.Expect(vol.Secret).NotTo(BeNil(), "the kubeconfig comes from a Secret")
	file := strings.TrimPrefix(kubeconfig, mount.MountPath+"/")
	g.Expect(vol.Secret.Items).To(ContainElement(corev1.KeyToPath{Key: "kubeconfig", Path: file, Mode: nil}),
		"the Secret's kubeconfig key is projected to %s", kubeconfig)
	g.Expect(pod.AutomountServiceAccountToken).To(HaveValue(BeFalse()), "nothing in the pod talks to the runtime cluster")

	for _, o := range runtimeObjs {
		g.Expect(rbacKinds).NotTo(ContainElement(o.GetKind()), "the runtime cluster gets no RBAC: %s %s", o.GetKind(), o.GetName())
	}
	var sa corev1.ServiceAccount
	decode(t, byKind(t, runtimeObjs, "ServiceAccount"), &sa)
	g.Expect(sa.Name).To(Equal(pod.ServiceAccountName))

	// The hub half: config/rbac, and a token for the ServiceAccount it binds.
	for _, o := range hubObjs {
		g.Expect(o.GetKind()).NotTo(BeElementOf("Deployment", "Pod", "Service", "PodDisruptionBudget", "NetworkPolicy"),
			"the hub runs no pods: %s %s belongs to the runtime half", o.GetKind(), o.GetName())
	}
	var token corev1.Secret
	decode(t, byKind(t, hubObjs, "Secret"), &token)
	g.Expect(token.Type).To(Equal(corev1.SecretTypeServiceAccountToken))
	g.Expect(token.Annotations).To(HaveKeyWithValue(corev1.ServiceAccountNameKey, "anchorage-manager"))
	for _, kind := range []string{"ClusterRoleBinding", "RoleBinding"} {
		var b rbacv1.RoleBinding
		decode(t, byKind(t, hubObjs, kind), &b)
		g.Expect(b.Subjects).To(ConsistOf(rbacv1.Subject{Kind: "ServiceAccount", Name: "anchorage-manager", Namespace: token.Namespace}), kind)
	}

	// Every object of config/default goes to one cluster or the other.
	both := ids(append(append([]*unstructured.Unstructured{}, runtimeObjs...), hubObjs...))
	for _, id := range ids(render(t, configDir("default"))) {
		g.Expect(both).To(ContainElement(id), "%s of config/default is in neither half of remote-hub", id)
	}
}

// TestOverlayRemoteHubRunsWithTheMountedKubeconfig runs the real manager binary with
// the runtime Deployment's arguments, the mounted directory replaced by one holding a
// kubeconfig for a hub that is not there (and --config by a copy of the mounted file),
// and no in-cluster environment: the manager
// must look for that hub, so it reads the mounted kubeconfig and assumes nothing of the
// cluster it runs in.
func TestOverlayRemoteHubRunsWithTheMountedKubeconfig(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the manager binary")
	}
	objs := render(t, configDir("overlays", "remote-hub", "runtime"))
	dep := deploymentOf(t, objs)
	dir := t.TempDir()
	writeDeadHubKubeconfig(t, filepath.Join(dir, "kubeconfig"))
	var args []string
	for _, a := range dep.Spec.Template.Spec.Containers[0].Args {
		args = append(args, strings.ReplaceAll(expandPodEnv(a), hubKubeconfigDir, dir))
	}
	out := runManagerAgainstDeadHub(t, withLocalConfig(t, objs, dep, args))
	if !strings.Contains(out, "127.0.0.1:1") {
		t.Errorf("the manager did not look for the hub of the mounted kubeconfig:\n%s", out)
	}
}

// expandPodEnv fills in the downward-API variables the Deployment's arguments use.
func expandPodEnv(arg string) string {
	env := map[string]string{"POD_NAME": "anchorage-manager-0", "POD_NAMESPACE": deployNamespace}
	return os.Expand(strings.ReplaceAll(strings.ReplaceAll(arg, "$(", "${"), ")", "}"), func(k string) string { return env[k] })
}

// mountedConfig finds the configuration file the Deployment's --config names in the
// rendered objs: the path is a file of a read-only ConfigMap volume mounted into the
// container, and the file is that ConfigMap's key. It returns the path and the content.
func mountedConfig(t *testing.T, objs []*unstructured.Unstructured, dep appsv1.Deployment) (string, []byte) {
	t.Helper()
	ctr := dep.Spec.Template.Spec.Containers[0]
	var path string
	for _, a := range ctr.Args {
		if v, ok := strings.CutPrefix(a, "--config="); ok {
			path = v
		}
	}
	if path == "" {
		t.Fatalf("the Deployment passes no --config: %v", ctr.Args)
	}
	// The deepest mount holding the path is the one the container sees it through.
	var mount *corev1.VolumeMount
	for i, m := range ctr.VolumeMounts {
		if strings.HasPrefix(path, strings.TrimSuffix(m.MountPath, "/")+"/") && (mount == nil || len(m.MountPath) > len(mount.MountPath)) {
			mount = &ctr.VolumeMounts[i]
		}
	}
	if mount == nil {
		t.Fatalf("--config=%s is under no volume mount of the container", path)
	}
	if !mount.ReadOnly {
		t.Errorf("the configuration's volume %s is mounted writable", mount.Name)
	}
	var cm *corev1.ConfigMapVolumeSource
	for _, v := range dep.Spec.Template.Spec.Volumes {
		if v.Name == mount.Name {
			cm = v.ConfigMap
		}
	}
	if cm == nil {
		t.Fatalf("--config=%s: volume %s is no ConfigMap volume", path, mount.Name)
	}
	file := strings.TrimPrefix(path, strings.TrimSuffix(mount.MountPath, "/")+"/")
	key := file
	if len(cm.Items) > 0 {
		key = ""
		for _, it := range cm.Items {
			if it.Path == file {
				key = it.Key
			}
		}
		if key == "" {
			t.Fatalf("--config=%s: ConfigMap %s projects no key to %s", path, cm.Name, file)
		}
	}
	var rendered corev1.ConfigMap
	decode(t, byName(t, objs, "ConfigMap", cm.Name), &rendered)
	data, ok := rendered.Data[key]
	if !ok {
		t.Fatalf("--config=%s: ConfigMap %s has no key %s", path, cm.Name, key)
	}
	return path, []byte(data)
}

// loadMountedConfig loads the configuration file the Deployment mounts (mountedConfig)
// as the manager does, failing on what the manager would refuse at start.
func loadMountedConfig(t *testing.T, objs []*unstructured.Unstructured, dep appsv1.Deployment) *config.Loaded {
	t.Helper()
	_, data := mountedConfig(t, objs, dep)
	file := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	loaded, err := config.Load(file)
	if err != nil {
		t.Fatalf("the mounted configuration: %v", err)
	}
	return loaded
}

// withLocalConfig readies the Deployment's args for a run outside any cluster:
// --config names a copy of the mounted file (mountedConfig) with a short hubTimeout,
// so that a dead hub fails the run in seconds.
func withLocalConfig(t *testing.T, objs []*unstructured.Unstructured, dep appsv1.Deployment, args []string) []string {
	t.Helper()
	path, data := mountedConfig(t, objs, dep)
	var doc map[string]any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatalf("the mounted configuration: %v", err)
	}
	doc["hubTimeout"] = "2s"
	out, err := yaml.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(file, out, 0o600); err != nil {
		t.Fatal(err)
	}
	local := slices.Clone(args)
	for i, a := range local {
		if a == "--config="+path {
			local[i] = "--config=" + file
		}
	}
	return local
}

// writeDeadHubKubeconfig writes a kubeconfig for a hub at 127.0.0.1:1, where nothing
// listens.
func writeDeadHubKubeconfig(t *testing.T, path string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(`apiVersion: v1
kind: Config
clusters: [{name: hub, cluster: {server: "http://127.0.0.1:1"}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: hub, context: {cluster: hub, user: u}}]
current-context: hub
`), 0o600); err != nil {
		t.Fatal(err)
	}
}

// runManagerAgainstDeadHub runs the manager with args (ports freed; withLocalConfig
// gives the short hub timeout) outside any cluster, expects it to fail looking for the
// hub, and returns its output.
func runManagerAgainstDeadHub(t *testing.T, args []string) string {
	t.Helper()
	args = append(args, "--metrics-bind-address=0", "--health-probe-bind-address=0")
	cmd := exec.Command(managerBinary(t), args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG=", "KUBERNETES_SERVICE_HOST=", "KUBERNETES_SERVICE_PORT=")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("the manager with %q exited 0 with no hub:\n%s", args, out)
	}
	if !strings.Contains(string(out), "unreachable") {
		t.Fatalf("with %q the manager stopped before looking for the hub:\n%s", args, out)
	}
	return string(out)
}

// TestOverlayCutOverRunsNoReplica: cut-over is config/default, object for object,
// with replicas 0.
func TestOverlayCutOverRunsNoReplica(t *testing.T) {
	g := NewWithT(t)
	objs := render(t, configDir("overlays", "cut-over"))
	dep := deploymentOf(t, objs)
	g.Expect(dep.Spec.Replicas).To(HaveValue(BeNumerically("==", 0)))
	g.Expect(ids(objs)).To(Equal(ids(render(t, configDir("default")))))
}

// TestOverlaySplitNamespaces: the Lease rules are granted in the lease namespace only,
// the Secret rules in the provider namespace only, the Lease rules are exactly the
// generated ones, and the configuration file the Deployment mounts names both
// namespaces. The grants are then
// applied to a real API server and checked with SubjectAccessReviews.
func TestOverlaySplitNamespaces(t *testing.T) {
	g := NewWithT(t)
	objs := render(t, configDir("overlays", "split-namespaces"))
	roles := map[string]rbacv1.Role{}
	for _, o := range objs {
		if o.GetKind() == "Role" {
			var r rbacv1.Role
			decode(t, o, &r)
			roles[r.Namespace] = r
		}
	}
	g.Expect(roles).To(HaveLen(2))
	g.Expect(roles).To(HaveKey(leaseNamespace))
	g.Expect(roles).To(HaveKey(deployNamespace))
	g.Expect(anyGrants(roles[leaseNamespace].Rules, "coordination.k8s.io", "leases", "get", "list", "watch", "create", "update", "patch", "delete")).To(BeTrue())
	g.Expect(anyGrants(roles[deployNamespace].Rules, "", "secrets", "get", "list", "watch")).To(BeTrue())
	for _, rule := range roles[leaseNamespace].Rules {
		g.Expect(grants(rule, "", "secrets")).To(BeFalse(), "Secrets in the lease namespace: %v", rule)
	}
	for _, rule := range roles[deployNamespace].Rules {
		g.Expect(grants(rule, "coordination.k8s.io", "leases")).To(BeFalse(), "Leases in the provider namespace: %v", rule)
	}
	g.Expect(roles[leaseNamespace].Rules).To(Equal(generatedRules(t, "coordination.k8s.io", "leases")),
		"the lease Role's rules are config/rbac/role.yaml's (from pkg/shard's markers)")
	g.Expect(roles[deployNamespace].Rules).To(Equal(generatedRules(t, "", "secrets")))

	dep := deploymentOf(t, objs)
	loaded := loadMountedConfig(t, objs, dep)
	g.Expect(loaded.LeaseNamespaceOrProvider()).To(Equal(leaseNamespace))
	g.Expect(loaded.ProviderNamespace).To(Equal(deployNamespace))
	g.Expect(dep.Namespace).To(Equal(deployNamespace))

	if hubConfig == nil {
		return // the SubjectAccessReviews need the API server; the rest above ran
	}
	checkSplitGrantsOnAPIServer(t, objs)
}

// generatedRules returns the rules of config/rbac/role.yaml's namespaced Role that
// grant resource in group.
func generatedRules(t *testing.T, group, resource string) []rbacv1.PolicyRule {
	t.Helper()
	var role rbacv1.Role
	decode(t, byKind(t, render(t, configDir("rbac")), "Role"), &role)
	var out []rbacv1.PolicyRule
	for _, r := range role.Rules {
		if grants(r, group, resource) {
			out = append(out, r)
		}
	}
	if len(out) == 0 {
		t.Fatalf("config/rbac/role.yaml grants no %s", resource)
	}
	return out
}

// checkSplitGrantsOnAPIServer creates the overlay's Roles and RoleBindings for real,
// renamed and bound to a ServiceAccount of their own so that no other test's grants
// answer for them, and asks the API server what that identity may do where.
func checkSplitGrantsOnAPIServer(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	c, err := client.New(hubConfig, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	createNamespaces(t, c, configDir("overlays", "split-namespaces", "namespaces"))
	sa := "split-" + rand.String(5)
	var typed []client.Object
	for _, o := range objs {
		switch o.GetKind() {
		case "Role":
			r := &rbacv1.Role{}
			decode(t, o, r)
			typed = append(typed, r)
		case "RoleBinding":
			b := &rbacv1.RoleBinding{}
			decode(t, o, b)
			for i := range b.Subjects {
				b.Subjects[i].Name = sa
			}
			typed = append(typed, b)
		}
	}
	applyRenamed(t, c, typed, "-"+sa)
	user := "system:serviceaccount:" + deployNamespace + ":" + sa
	groups := []string{"system:serviceaccounts", "system:serviceaccounts:" + deployNamespace, "system:authenticated"}
	must := append(each("coordination.k8s.io", "leases", leaseNamespace, "get", "list", "watch", "create", "update", "patch", "delete"),
		each("", "secrets", deployNamespace, "get", "list", "watch")...)
	mustNot := append(each("coordination.k8s.io", "leases", deployNamespace, "get", "create", "update"),
		each("", "secrets", leaseNamespace, "get", "list", "watch")...)
	// The API server's RBAC authorizer learns of new Roles through its own watch: a
	// grant just created may be refused for a moment. Wait for each required grant
	// (bounded), then check the refusals against an authorizer that has seen the Roles.
	for _, a := range must {
		deadline := time.Now().Add(15 * time.Second)
		for !allowed(t, c, user, groups, a) {
			if time.Now().After(deadline) {
				t.Errorf("split-namespaces: the manager may not %s; it needs to", a)
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	for _, a := range mustNot {
		if allowed(t, c, user, groups, a) {
			t.Errorf("split-namespaces: the manager may %s; it must not", a)
		}
	}
}

// TestOverlaySplitNamespacesFlagsAreAccepted runs the real manager binary with the
// overlay's Deployment arguments and configuration file: it accepts the split
// namespaces.
func TestOverlaySplitNamespacesFlagsAreAccepted(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the manager binary")
	}
	objs := render(t, configDir("overlays", "split-namespaces"))
	dep := deploymentOf(t, objs)
	kubeconfig := filepath.Join(t.TempDir(), "hub.kubeconfig")
	writeDeadHubKubeconfig(t, kubeconfig)
	var args []string
	for _, a := range dep.Spec.Template.Spec.Containers[0].Args {
		args = append(args, expandPodEnv(a))
	}
	runManagerAgainstDeadHub(t, append(withLocalConfig(t, objs, dep, args), "--kubeconfig="+kubeconfig))
}

// TestSampleIsAcceptedByTheAPIServer installs the HTTPProxy CRD (config/crd) on the
// API server, dry-runs config/samples against it, then creates the sample for real and
// reads it back as kubectl does: as a Table with the CRD's columns (hostnames, address,
// Programmed), and through the short name and category discovery announces, which are
// not Contour's.
func TestSampleIsAcceptedByTheAPIServer(t *testing.T) {
	needAPIServer(t)
	g := NewWithT(t)
	ctx := context.Background()
	c, err := client.New(hubConfig, client.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	installCRDs(t, c)

	samples := render(t, configDir("samples"))
	g.Expect(samples).NotTo(BeEmpty())
	ns := "samples-" + rand.String(4)
	g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	for _, o := range samples {
		o.SetNamespace(ns)
	}
	// The CRD may take a moment to serve: retry the dry-run until it is served.
	g.Eventually(func() error {
		for _, o := range samples {
			if err := c.Create(ctx, o.DeepCopy(), client.DryRunAll); err != nil {
				return err
			}
		}
		return nil
	}, 20*time.Second, 200*time.Millisecond).Should(Succeed(), "server-side dry-run of config/samples")

	proxy := byKind(t, samples, "HTTPProxy")
	g.Expect(c.Create(ctx, proxy.DeepCopy())).To(Succeed())
	columns, cells := tableOf(t, "networking.datumapis.com", "v1alpha", "httpproxies", ns, proxy.GetName())
	g.Expect(columns).To(ContainElements("Name", "Hostnames", "Address", "Programmed", "Age"))
	hostnames, _, _ := unstructured.NestedStringSlice(proxy.Object, "spec", "hostnames")
	g.Expect(hostnames).NotTo(BeEmpty())
	g.Expect(cells[slices.Index(columns, "Hostnames")]).To(ContainSubstring(hostnames[0]))

	dc, err := discovery.NewDiscoveryClientForConfig(hubConfig)
	g.Expect(err).NotTo(HaveOccurred())
	resources, err := dc.ServerResourcesForGroupVersion("networking.datumapis.com/v1alpha")
	g.Expect(err).NotTo(HaveOccurred())
	var found bool
	for _, r := range resources.APIResources {
		if r.Name != "httpproxies" {
			continue
		}
		found = true
		g.Expect(r.ShortNames).To(ContainElement("ahp"))
		g.Expect(r.Categories).To(ContainElement("anchorage"))
		g.Expect(r.ShortNames).NotTo(ContainElements("proxy", "proxies"), "Contour's HTTPProxy answers to those")
		g.Expect(r.Categories).NotTo(ContainElement("all"), "kubectl get all must not list tenants' proxies")
	}
	g.Expect(found).To(BeTrue(), "discovery lists httpproxies")
}

// installCRDs creates config/crd's CRDs for real (an existing one is replaced by
// nothing: it is the same file) and waits until they are established.
func installCRDs(t *testing.T, c client.Client) {
	t.Helper()
	ctx := context.Background()
	for _, o := range render(t, configDir("crd")) {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		decode(t, o, crd)
		if err := c.Create(ctx, crd); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("creating CRD %s: %v", crd.Name, err)
		}
		NewWithT(t).Eventually(func() bool {
			cur := &apiextensionsv1.CustomResourceDefinition{}
			if err := c.Get(ctx, client.ObjectKey{Name: crd.Name}, cur); err != nil {
				return false
			}
			for _, cond := range cur.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					return true
				}
			}
			return false
		}, 20*time.Second, 100*time.Millisecond).Should(BeTrue(), "CRD %s established", crd.Name)
	}
}

// tableOf gets one object as the server-side Table kubectl prints and returns the
// column names and the object's row, cells as text.
func tableOf(t *testing.T, group, version, resource, namespace, name string) ([]string, []string) {
	t.Helper()
	cfg := rest.CopyConfig(hubConfig)
	cfg.APIPath = "/apis"
	cfg.GroupVersion = &schema.GroupVersion{Group: group, Version: version}
	cfg.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	rc, err := rest.RESTClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := rc.Get().Namespace(namespace).Resource(resource).Name(name).
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(context.Background())
	if err != nil {
		t.Fatalf("getting %s %s/%s as a Table: %v", resource, namespace, name, err)
	}
	var table metav1.Table
	if err := json.Unmarshal(raw, &table); err != nil {
		t.Fatalf("decoding the Table: %v\n%s", err, raw)
	}
	var columns []string
	for _, col := range table.ColumnDefinitions {
		columns = append(columns, col.Name)
	}
	if len(table.Rows) != 1 {
		t.Fatalf("want one row, got %d", len(table.Rows))
	}
	var cells []string
	for _, cell := range table.Rows[0].Cells {
		cells = append(cells, fmt.Sprint(cell))
	}
	return columns, cells
}

// makeTarget is a target declared in the Makefile (a `name:` line).
var makeTarget = regexp.MustCompile(`(?m)^([a-zA-Z][a-zA-Z0-9_-]*):([^=]|$)`)

// makeHelpLine is one line of `make help`: the target, then its description.
var makeHelpLine = regexp.MustCompile(`(?m)^  ([a-zA-Z][a-zA-Z0-9_-]*) +(\S.*)$`)

// runMake runs make with args at the repository root and returns its output.
func runMake(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command("make", append([]string{"--no-print-directory"}, args...)...)
	cmd.Dir = testenv.RepoRoot()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestMakeHelpListsEveryTarget: every target the Makefile declares (its `name:` lines)
// is .PHONY and vice versa, and `make help` lists each one, and only those, with a
// description.
func TestMakeHelpListsEveryTarget(t *testing.T) {
	g := NewWithT(t)
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "Makefile"))
	g.Expect(err).NotTo(HaveOccurred())
	var declared, phony []string
	for _, m := range makeTarget.FindAllStringSubmatch(string(data), -1) {
		declared = append(declared, m[1])
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, ".PHONY:"); ok {
			phony = append(phony, strings.Fields(rest)...)
		}
	}
	g.Expect(declared).To(ContainElements("help", "all", "build", "run", "docker-build", "deploy", "undeploy", "test", "demo"))
	g.Expect(phony).To(ConsistOf(declared), ".PHONY lists exactly the declared targets")

	described := map[string]string{}
	for _, m := range makeHelpLine.FindAllStringSubmatch(runMake(t, "help"), -1) {
		described[m[1]] = m[2]
	}
	for _, target := range declared {
		g.Expect(described).To(HaveKey(target), "make help does not list %s", target)
		g.Expect(len(strings.Fields(described[target]))).To(BeNumerically(">=", 3), "make help's description of %s: %q", target, described[target])
	}
	for target := range described {
		g.Expect(declared).To(ContainElement(target), "make help lists %s, which the Makefile does not declare", target)
	}
	// DATE fixed: the stamp changes every second.
	g.Expect(runMake(t, "-n", "DATE=x")).To(Equal(runMake(t, "-n", "build", "DATE=x")), "the default goal is build")
}

// TestMakeDeployAppliesTheNamespaceFirst: `make deploy` applies config/namespace before
// config/default, with the image set to IMG; `make undeploy` deletes config/default
// and never a namespace.
func TestMakeDeployAppliesTheNamespaceFirst(t *testing.T) {
	g := NewWithT(t)
	deploy := nonEmptyLines(runMake(t, "-n", "deploy", "IMG=example/anchorage:v1"))
	g.Expect(deploy).To(HaveLen(2), "%q", deploy)
	g.Expect(deploy[0]).To(MatchRegexp(`^kubectl apply -k config/namespace$`))
	g.Expect(deploy[1]).To(ContainSubstring("kubectl kustomize config/default"))
	g.Expect(deploy[1]).To(ContainSubstring("image: example/anchorage:v1"))
	g.Expect(deploy[1]).To(HaveSuffix("kubectl apply -f -"))

	undeploy := nonEmptyLines(runMake(t, "-n", "undeploy"))
	g.Expect(undeploy).To(Equal([]string{"kubectl delete -k config/default --ignore-not-found"}))
	for _, line := range undeploy {
		g.Expect(line).NotTo(ContainSubstring("config/namespace"))
		g.Expect(line).NotTo(MatchRegexp(`\bnamespaces?\b|\bns\b`))
	}
	g.Expect(nonEmptyLines(runMake(t, "-n", "undeploy", "DEPLOY_DIR=config/overlays/cut-over"))).
		To(Equal([]string{"kubectl delete -k config/overlays/cut-over --ignore-not-found"}))
}

// TestMakeBuildStampsTheVersion: make build links VERSION, COMMIT and DATE into
// internal/version, VERSION defaulting to `git describe --tags --always --dirty`.
func TestMakeBuildStampsTheVersion(t *testing.T) {
	g := NewWithT(t)
	out := runMake(t, "-n", "build", "VERSION=v9.8.7", "COMMIT=abc123", "DATE=2026-01-02T03:04:05Z")
	for _, want := range []string{
		"-X anchorage/internal/version.Version=v9.8.7",
		"-X anchorage/internal/version.Commit=abc123",
		"-X anchorage/internal/version.BuildDate=2026-01-02T03:04:05Z",
	} {
		g.Expect(out).To(ContainSubstring(want))
	}
	describe := exec.Command("git", "describe", "--tags", "--always", "--dirty")
	describe.Dir = testenv.RepoRoot()
	if v, err := describe.Output(); err == nil {
		g.Expect(runMake(t, "-n", "build")).To(ContainSubstring("version.Version=" + strings.TrimSpace(string(v)) + " "))
	}
}

// nonEmptyLines splits out into its non-blank lines.
func nonEmptyLines(out string) []string {
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if strings.TrimSpace(l) != "" {
			lines = append(lines, l)
		}
	}
	return lines
}
