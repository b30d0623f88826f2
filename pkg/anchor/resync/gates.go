package resync

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Operator controls, read by every pass (docs/design.md, Throttle, not halt; Projects
// with no Secret); the plane identity record's are in plane_identity.go.
const (
	// AnnotationDeletion set to DeletionOff on the lease namespace turns deletion off.
	AnnotationDeletion = "anchorage.datumapis.com/anchor-deletion"
	DeletionOff        = "off"                                    // the AnnotationDeletion value that turns deletion off
	AnnotationExclude  = "anchorage.datumapis.com/resync-exclude" // "true" on a project's Secret excludes it from deletions
	// LabelTombstone set to "true" on a ConfigMap in the lease namespace, whose data key
	// TombstoneKeyProject names a project, retires that project once it has no Secret.
	LabelTombstone      = "anchorage.datumapis.com/retired-project"
	TombstoneKeyProject = "project" // the data key of a tombstone naming the retired project

	DefaultSecretLabel = "sigs.k8s.io/multicluster-runtime-kubeconfig" // marks kubeconfig Secrets (multicluster-runtime's provider)
)

// secrets finds a project's kubeconfig Secret.
type secrets struct {
	namespace string
	label     string // marks kubeconfig Secrets (value "true")
	// projectAnnotation, on a Secret, names its project when the name cannot.
	projectAnnotation string
}

// projectOf returns the project a kubeconfig Secret stands for.
func (s secrets) projectOf(sec metav1.Object) string {
	if s.projectAnnotation != "" {
		if p := sec.GetAnnotations()[s.projectAnnotation]; p != "" {
			return p
		}
	}
	return sec.GetName()
}

// findKnown returns the metadata of project's kubeconfig Secret, nil if there is none;
// two Secrets for one project is an error. It first GETs the Secret last found, known,
// then one named project, and lists every kubeconfig Secret only if neither is it.
func (s secrets) findKnown(ctx context.Context, hub client.Reader, project, known string) (*metav1.PartialObjectMetadata, error) {
	names := []string{project}
	if known != "" && known != project {
		names = []string{known, project}
	}
	for _, name := range names {
		if len(validation.IsDNS1123Subdomain(name)) != 0 {
			continue
		}
		sec := coreMeta("Secret")
		err := hub.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: name}, sec)
		switch {
		case err == nil && sec.Labels[s.label] == "true" && s.projectOf(sec) == project:
			return sec, nil
		case err != nil && !apierrors.IsNotFound(err):
			what := "Secret " + name
			if name == project {
				what = "Secret"
			}
			return nil, fmt.Errorf("reading the kubeconfig %s of project %q: %w", what, project, err)
		}
	}
	all, err := s.list(ctx, hub)
	if err != nil {
		return nil, err
	}
	found := slices.DeleteFunc(all, func(sec metav1.PartialObjectMetadata) bool { return s.projectOf(&sec) != project })
	switch len(found) {
	case 0:
		return nil, nil
	case 1:
		return &found[0], nil
	}
	return nil, fmt.Errorf("project %q is named by %d kubeconfig Secrets", project, len(found))
}

// list returns the metadata of every kubeconfig Secret.
func (s secrets) list(ctx context.Context, hub client.Reader) ([]metav1.PartialObjectMetadata, error) {
	list := coreMetaList("SecretList")
	if err := hub.List(ctx, list, client.InNamespace(s.namespace), client.MatchingLabels{s.label: "true"}); err != nil {
		return nil, fmt.Errorf("listing kubeconfig Secrets in %s: %w", s.namespace, err)
	}
	return list.Items, nil
}

// deletionSwitch reads the runtime switch; one that cannot be read counts as off.
func deletionSwitch(ctx context.Context, hub client.Reader, leaseNamespace string) (on bool, err error) {
	ns := coreMeta("Namespace")
	if err := hub.Get(ctx, client.ObjectKey{Name: leaseNamespace}, ns); err != nil {
		return false, fmt.Errorf("reading the deletion switch on namespace %s: %w", leaseNamespace, err)
	}
	return !strings.EqualFold(ns.Annotations[AnnotationDeletion], DeletionOff), nil
}

// tombstones returns the tombstone's name of each retired project.
func tombstones(ctx context.Context, hub client.Reader, leaseNamespace string) (map[string]string, error) {
	list := &corev1.ConfigMapList{}
	if err := hub.List(ctx, list, client.InNamespace(leaseNamespace), client.MatchingLabels{LabelTombstone: "true"}); err != nil {
		return nil, fmt.Errorf("listing project tombstones in %s: %w", leaseNamespace, err)
	}
	out := map[string]string{}
	for _, cm := range list.Items {
		if p := cm.Data[TombstoneKeyProject]; p != "" && cm.DeletionTimestamp == nil {
			out[p] = cm.Name
		}
	}
	return out, nil
}
