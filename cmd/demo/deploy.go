package main

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"anchorage/internal/harness"
	"anchorage/internal/testenv"
)

// serviceAccount is the identity config/default gives the manager.
const serviceAccount = "anchorage-manager"

// installedKinds are the kinds of config/namespace and config/default the demo applies:
// what the replicas need to run as the manager's ServiceAccount. The Deployment, its
// disruption budget and metrics Service stay out: the replicas are local processes.
var installedKinds = map[string]bool{
	"Namespace": true, "ServiceAccount": true, "ClusterRole": true, "Role": true, "ClusterRoleBinding": true, "RoleBinding": true,
}

// installRBAC renders config/namespace and config/default with kustomize, as an
// operator applies them (the namespace first), and creates the namespace,
// ServiceAccount and RBAC on the hub; it returns what it created, as "Kind name".
func installRBAC(ctx context.Context, c client.Client) ([]string, error) {
	var objs []*unstructured.Unstructured
	for _, dir := range []string{"namespace", "default"} {
		rendered, err := renderConfig(filepath.Join(testenv.RepoRoot(), "config", dir))
		if err != nil {
			return nil, err
		}
		objs = append(objs, rendered...)
	}
	// The Namespace first: everything else lives in it or binds into it.
	var created []string
	for _, first := range []bool{true, false} {
		for _, u := range objs {
			if (u.GetKind() == "Namespace") != first {
				continue
			}
			if err := c.Create(ctx, u); err != nil && !apierrors.IsAlreadyExists(err) {
				return nil, fmt.Errorf("creating %s %s from config/namespace and config/default: %w", u.GetKind(), u.GetName(), err)
			}
			created = append(created, u.GetKind()+" "+u.GetName())
		}
	}
	return created, nil
}

// renderConfig renders the kustomization in dir and returns the objects of the kinds
// the demo installs.
func renderConfig(dir string) ([]*unstructured.Unstructured, error) {
	resMap, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("rendering %s: %w", dir, err)
	}
	out, err := resMap.AsYaml()
	if err != nil {
		return nil, fmt.Errorf("rendering %s: %w", dir, err)
	}
	var objs []*unstructured.Unstructured
	for _, doc := range bytes.Split(out, []byte("\n---\n")) {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(doc, &u.Object); err != nil {
			return nil, fmt.Errorf("parsing rendered %s: %w", dir, err)
		}
		if installedKinds[u.GetKind()] {
			objs = append(objs, u)
		}
	}
	return objs, nil
}

// serviceAccountKubeconfig mints a token for the manager's ServiceAccount (as the
// kubelet does for a pod) and returns a kubeconfig for the hub that uses it.
func serviceAccountKubeconfig(ctx context.Context, hub *rest.Config) ([]byte, error) {
	cs, err := kubernetes.NewForConfig(hub)
	if err != nil {
		return nil, err
	}
	tr, err := cs.CoreV1().ServiceAccounts(providerNamespace).CreateToken(ctx, serviceAccount, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](24 * 3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("requesting a token for ServiceAccount %s/%s: %w", providerNamespace, serviceAccount, err)
	}
	cfg := &rest.Config{Host: hub.Host, BearerToken: tr.Status.Token, TLSClientConfig: rest.TLSClientConfig{CAData: hub.CAData}}
	return harness.KubeconfigVia(cfg, "")
}
