// Package testenv locates the control-plane binaries built by hack/build-k8s.sh and the
// CRDs the tests install, so every test package starts envtest the same way.
package testenv

import (
	"fmt"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// KubernetesVersion is the control-plane version the tests run; its minor matches the
// k8s.io libraries in go.mod.
const KubernetesVersion = "1.35.4"

// RepoRoot returns the checkout's root directory.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// BinaryDir returns the directory holding etcd, kube-apiserver and
// kube-controller-manager: KUBEBUILDER_ASSETS when set, else bin/k8s/<version>.
// It returns an error naming the command that builds them when they are missing.
func BinaryDir() (string, error) {
	dir := os.Getenv("KUBEBUILDER_ASSETS")
	if dir == "" {
		dir = filepath.Join(RepoRoot(), "bin", "k8s", KubernetesVersion)
	}
	for _, b := range []string{"etcd", "kube-apiserver"} {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			return "", fmt.Errorf("control-plane binary %s missing in %s (run hack/build-k8s.sh or make test): %w", b, dir, err)
		}
	}
	return dir, nil
}

// ModuleDir returns the module cache directory of a module at the version go.mod
// selects, downloading it through the module proxy if needed.
func ModuleDir(module string) (string, error) {
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", module)
	cmd.Dir = RepoRoot()
	out, err := cmd.Output()
	if err == nil && strings.TrimSpace(string(out)) != "" {
		return strings.TrimSpace(string(out)), nil
	}
	return "", fmt.Errorf("locating module %s: %w", module, err)
}

// DownloadedModuleDir returns the module cache directory of module@version, a module
// that go.mod does not require (the test only reads files it ships).
func DownloadedModuleDir(module, version string) (string, error) {
	cmd := exec.Command("go", "mod", "download", "-json", module+"@"+version)
	cmd.Dir = RepoRoot()
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("downloading %s@%s: %w", module, version, err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, `"Dir":`) {
			return strings.Trim(strings.TrimSuffix(strings.TrimPrefix(line, `"Dir":`), ","), ` "`), nil
		}
	}
	return "", fmt.Errorf("no Dir in go mod download output for %s@%s", module, version)
}

// RunWithHub starts one envtest API server for a test package, hands its admin config
// to use (which keeps it for the package's tests), runs the tests and stops the server.
// It returns the exit code for os.Exit; a server that cannot start fails the package
// (exit 1) with the reason on stderr, never a silent skip.
func RunWithHub(m interface{ Run() int }, use func(*rest.Config) error) int {
	dir, err := BinaryDir()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	env := &envtest.Environment{BinaryAssetsDirectory: dir}
	cfg, err := env.Start()
	if err != nil {
		fmt.Fprintf(os.Stderr, "starting envtest: %v\n", err)
		return 1
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stopping envtest: %v\n", err)
		}
	}()
	if err := use(cfg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// StartAPIServer starts an API server (envtest: etcd and kube-apiserver) for one test,
// stops it when the test ends, and returns its admin config.
func StartAPIServer(t testing.TB, crds ...*apiextensionsv1.CustomResourceDefinition) *rest.Config {
	t.Helper()
	dir, err := BinaryDir()
	if err != nil {
		t.Fatal(err)
	}
	env := &envtest.Environment{BinaryAssetsDirectory: dir, CRDs: crds}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("starting envtest: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stopping envtest: %v", err)
		}
	})
	return cfg
}

// EdgeTranslateBinary returns the path of the data-plane oracle built by
// hack/build-edge-translate.sh: EDGE_TRANSLATE when set, else bin/edge-translate. It
// returns an error naming the command that builds it when it is missing.
func EdgeTranslateBinary() (string, error) {
	return builtBinary("EDGE_TRANSLATE", "edge-translate", "data-plane oracle", "edge-translate")
}

// CertManagerBinary returns the path of cert-manager's controller built by
// hack/build-cert-manager.sh: CERT_MANAGER_CONTROLLER when set, else
// bin/cert-manager-controller. It returns an error naming the command that builds it
// when it is missing.
func CertManagerBinary() (string, error) {
	return builtBinary("CERT_MANAGER_CONTROLLER", "cert-manager-controller", "cert-manager's controller", "cert-manager")
}

// ExternalDNSBinary returns the path of external-dns built by
// hack/build-external-dns.sh: EXTERNAL_DNS when set, else bin/external-dns. It returns an
// error naming the command that builds it when it is missing.
func ExternalDNSBinary() (string, error) {
	return builtBinary("EXTERNAL_DNS", "external-dns", "external-dns", "external-dns")
}

// PebbleBinary returns the path of Pebble, Let's Encrypt's ACME test server, built by
// hack/build-pebble.sh: PEBBLE when set, else bin/pebble. It returns an error naming the
// command that builds it when it is missing.
func PebbleBinary() (string, error) {
	return builtBinary("PEBBLE", "pebble", "Pebble", "pebble")
}

// builtBinary returns env's value when set, else bin/<name> in the checkout, once it
// exists; the error says what the binary is and that make <target> (which runs
// hack/build-<target>.sh) builds it.
func builtBinary(env, name, what, target string) (string, error) {
	path := os.Getenv(env)
	if path == "" {
		path = filepath.Join(RepoRoot(), "bin", name)
	}
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("%s missing at %s (run make %s, which runs hack/build-%s.sh, or make test): %w", what, path, target, target, err)
	}
	return path, nil
}
