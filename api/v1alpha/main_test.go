package v1alpha_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"anchorage/api/v1alpha"
	"anchorage/internal/testenv"
)

// apiClient talks to the package's one envtest API server, which has the checked-in CRD
// installed. It is nil when the server could not start; envStartErr then says why.
var (
	apiClient   client.Client
	envStartErr error
)

// TestMain starts one API server for the whole package: starting etcd and
// kube-apiserver costs seconds, each validation case only a request.
func TestMain(m *testing.M) {
	env, err := startEnv()
	envStartErr = err
	code := m.Run()
	if env != nil {
		if err := env.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stopping envtest: %v\n", err)
		}
	}
	os.Exit(code)
}

func startEnv() (*envtest.Environment, error) {
	dir, err := testenv.BinaryDir()
	if err != nil {
		return nil, err
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: dir,
		// The checked-in CRD, not one generated on the fly: the test proves what ships.
		CRDDirectoryPaths:     []string{filepath.Join(testenv.RepoRoot(), "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("starting envtest (etcd and kube-apiserver from %s): %w", dir, err)
	}
	scheme := runtime.NewScheme()
	if err := v1alpha.AddToScheme(scheme); err != nil {
		_ = env.Stop()
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		_ = env.Stop()
		return nil, err
	}
	apiClient = c
	return env, nil
}

// requireAPIServer fails the test when the package's API server did not start.
func requireAPIServer(t *testing.T) client.Client {
	t.Helper()
	if envStartErr != nil {
		t.Fatalf("no API server: %v", envStartErr)
	}
	return apiClient
}
