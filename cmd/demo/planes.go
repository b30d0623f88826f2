// Setup: the hub and the project control planes started, and the projects registered on the hub.

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/multicluster-runtime/providers/kubeconfig"

	"anchorage/internal/harness"
	"anchorage/internal/testenv"
)

// startPlanes starts the hub and the project planes and writes admin kubeconfigs.
func (d *demo) startPlanes(ctx context.Context) error {
	hubCRDs, err := testenv.HubCRDs()
	if err != nil {
		return err
	}
	projectCRDs, err := testenv.ProjectCRDs()
	if err != nil {
		return err
	}
	began := time.Now()
	if d.hub, err = harness.StartControlPlane("demo-hub", harness.PlaneOptions{CRDs: hubCRDs, GarbageCollector: true, AuditSecretReads: true}); err != nil {
		return err
	}
	if d.hubKubeconfig, err = d.adminKubeconfig(d.hub, "hub"); err != nil {
		return err
	}
	d.say("hub      %s  kube-apiserver, etcd, kube-controller-manager (garbage collector); serves Gateway API and cert-manager Certificates (%.1fs)",
		d.hub.Config.Host, time.Since(began).Seconds())
	for _, spec := range []struct{ name, namespace string }{{"acme", "shop"}, {"initech", "blog"}} {
		began := time.Now()
		plane, err := harness.StartControlPlane("demo-"+spec.name, harness.PlaneOptions{CRDs: projectCRDs})
		if err != nil {
			return err
		}
		p := &project{name: spec.name, namespace: spec.namespace, plane: plane}
		d.projects = append(d.projects, p)
		if p.kubeconfig, err = d.adminKubeconfig(plane, spec.name); err != nil {
			return err
		}
		d.say("%-8s %s  kube-apiserver, etcd; serves HTTPProxy and Gateway API (%.1fs)", spec.name, plane.Config.Host, time.Since(began).Seconds())
	}
	d.res.projects = len(d.projects)
	return ctx.Err()
}

// adminKubeconfig writes a system:masters kubeconfig for plane into the demo directory.
func (d *demo) adminKubeconfig(plane *harness.ControlPlane, name string) (string, error) {
	_, kc, err := plane.User("demo-admin", "system:masters")
	if err != nil {
		return "", err
	}
	path := filepath.Join(d.dir, name+".kubeconfig")
	return path, os.WriteFile(path, kc, 0o600)
}

// registerProjects does what an operator does on the hub: install config/namespace's
// namespace and config/default's ServiceAccount and RBAC, and add each project as a
// Secret in the provider namespace with the project plane's kubeconfig.
func (d *demo) registerProjects(ctx context.Context) error {
	c := d.hub.Client
	created, err := installRBAC(ctx, c)
	if err != nil {
		return err
	}
	d.say("from config/namespace and config/default (rendered with kustomize): %s", strings.Join(created, ", "))
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: providerNamespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", providerNamespace, err)
	}
	for _, p := range d.projects {
		// The plane's user is bound only to config/rbac/project-role.yaml, as an
		// operator binds it: the replicas cannot read the plane's Secrets.
		cfg, _, err := p.plane.User(harness.ProjectUser)
		if err != nil {
			return err
		}
		if err := harness.BindProjectRole(ctx, p.plane, harness.ProjectUser); err != nil {
			return err
		}
		kc, err := harness.KubeconfigVia(cfg, "")
		if err != nil {
			return err
		}
		s := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: p.name, Namespace: providerNamespace,
				Labels: map[string]string{kubeconfig.DefaultKubeconfigSecretLabel: "true"}},
			Data: map[string][]byte{kubeconfig.DefaultKubeconfigSecretKey: kc},
		}
		if err := c.Create(ctx, s); err != nil {
			return fmt.Errorf("creating the Secret of project %s: %w", p.name, err)
		}
		d.say("Secret %s/%s  label %s=true, data key %q: the project plane's kubeconfig, user %s bound to ClusterRole anchorage-project there",
			providerNamespace, p.name, kubeconfig.DefaultKubeconfigSecretLabel, kubeconfig.DefaultKubeconfigSecretKey, harness.ProjectUser)
	}
	return nil
}
