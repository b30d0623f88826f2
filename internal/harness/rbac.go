package harness

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	"anchorage/internal/testenv"
)

// ProjectUser is the user in every project kubeconfig Secret the harness writes: the
// manager's identity on each project's plane, bound only to config/rbac/project-role.yaml.
const ProjectUser = "anchorage-project"

// ProjectRole reads the plane's ClusterRole generated into config/rbac/project-role.yaml.
func ProjectRole() (*rbacv1.ClusterRole, error) {
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "rbac", "project-role.yaml"))
	if err != nil {
		return nil, fmt.Errorf("reading the generated plane role: %w", err)
	}
	role := &rbacv1.ClusterRole{}
	if err := yaml.Unmarshal(data, role); err != nil {
		return nil, fmt.Errorf("parsing config/rbac/project-role.yaml: %w", err)
	}
	if role.Kind != "ClusterRole" || role.Name == "" {
		return nil, fmt.Errorf("config/rbac/project-role.yaml: want one ClusterRole, got %s %q", role.Kind, role.Name)
	}
	return role, nil
}

// BindProjectRole installs the plane's ClusterRole on plane and binds user to it, as an
// operator does on every project's plane (docs/operations.md); both are kept when they
// exist already (planes are shared between tests). It returns once the plane's
// authorizer allows user what the role grants.
func BindProjectRole(ctx context.Context, plane *ControlPlane, user string) error {
	role, err := ProjectRole()
	if err != nil {
		return err
	}
	if err := plane.Client.Create(ctx, role); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating ClusterRole %s on %s: %w", role.Name, plane.Name, err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name + "-" + user},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
	if err := plane.Client.Create(ctx, binding); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("binding %s to %s on %s: %w", user, role.Name, plane.Name, err)
	}
	return WaitAllowed(ctx, plane, user, authorizationv1.ResourceAttributes{
		Verb: "get", Group: "networking.datumapis.com", Resource: "httpproxies",
	})
}

// Allowed asks plane's authorizer, with a SubjectAccessReview, whether user may do attrs.
func Allowed(ctx context.Context, plane *ControlPlane, user string, attrs authorizationv1.ResourceAttributes) (bool, error) {
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: user, ResourceAttributes: &attrs}}
	if err := plane.Client.Create(ctx, sar); err != nil {
		return false, fmt.Errorf("asking %s whether %s may %s %s: %w", plane.Name, user, attrs.Verb, attrs.Resource, err)
	}
	return sar.Status.Allowed, nil
}

// WaitAllowed waits, up to 10s, until plane allows user attrs.
func WaitAllowed(ctx context.Context, plane *ControlPlane, user string, attrs authorizationv1.ResourceAttributes) error {
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		return Allowed(ctx, plane, user, attrs)
	})
	if err != nil {
		return fmt.Errorf("%s never allowed %s to %s %s/%s: %w", plane.Name, user, attrs.Verb, attrs.Group, attrs.Resource, err)
	}
	return nil
}
