package resync

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Operator controls, read by every pass (no restart needed).
const (
	// AnnotationDeletion on the lease namespace set to "off" turns every replica's
	// resync deletions off, for all projects, from the next pass (or namespace batch)
	// on: passes still decide and report. Any other value, or none, means on.
	//
	//	kubectl annotate namespace <lease-namespace> anchorage.datumapis.com/anchor-deletion=off
	AnnotationDeletion = "anchorage.datumapis.com/anchor-deletion"
	// DeletionOff is the AnnotationDeletion value that turns deletion off.
	DeletionOff = "off"
	// AnnotationExclude on a project's kubeconfig Secret set to "true" excludes the
	// project from resync deletions (passes still decide and report).
	AnnotationExclude = "anchorage.datumapis.com/resync-exclude"
	// LabelPlaneIdentity marks the ConfigMaps, in the lease namespace, that record each
	// project's plane identity.
	LabelPlaneIdentity = "anchorage.datumapis.com/plane-identity"

	// DefaultSecretLabel is the label of kubeconfig Secrets (multicluster-runtime's
	// kubeconfig provider).
	DefaultSecretLabel = "sigs.k8s.io/multicluster-runtime-kubeconfig"

	planeIdentityPrefix = "anchorage-plane-"
	planeKeyProject     = "project"
	planeKeyUID         = "default-namespace-uid"
)

// secrets finds a project's kubeconfig Secret.
type secrets struct {
	namespace string
	// label marks kubeconfig Secrets (value "true").
	label string
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

// find returns the metadata of project's kubeconfig Secret, nil if there is none, and
// the number of requests made. Two Secrets for one project is an error.
func (s secrets) find(ctx context.Context, hub client.Reader, project string) (*metav1.PartialObjectMetadata, int, error) {
	calls := 0
	if len(validation.IsDNS1123Subdomain(project)) == 0 {
		sec := secretMetadata()
		calls++
		err := hub.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: project}, sec)
		switch {
		case err == nil:
			if sec.Labels[s.label] == "true" && s.projectOf(sec) == project {
				return sec, calls, nil
			}
		case !apierrors.IsNotFound(err):
			return nil, calls, fmt.Errorf("reading the kubeconfig Secret of project %q: %w", project, err)
		}
	}
	all, n, err := s.list(ctx, hub)
	calls += n
	if err != nil {
		return nil, calls, err
	}
	var found []metav1.PartialObjectMetadata
	for _, sec := range all {
		if s.projectOf(&sec) == project {
			found = append(found, sec)
		}
	}
	switch len(found) {
	case 0:
		return nil, calls, nil
	case 1:
		return &found[0], calls, nil
	}
	return nil, calls, fmt.Errorf("project %q is named by %d kubeconfig Secrets", project, len(found))
}

// list returns the metadata of every kubeconfig Secret.
func (s secrets) list(ctx context.Context, hub client.Reader) ([]metav1.PartialObjectMetadata, int, error) {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("SecretList"))
	if err := hub.List(ctx, list, client.InNamespace(s.namespace), client.MatchingLabels{s.label: "true"}); err != nil {
		return nil, 1, fmt.Errorf("listing kubeconfig Secrets in %s: %w", s.namespace, err)
	}
	return list.Items, 1, nil
}

func secretMetadata() *metav1.PartialObjectMetadata {
	sec := &metav1.PartialObjectMetadata{}
	sec.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	return sec
}

// excluded reports whether a Secret excludes its project from deletions.
func excluded(sec metav1.Object) bool {
	return sec != nil && strings.EqualFold(sec.GetAnnotations()[AnnotationExclude], "true")
}

// deletionSwitch reads the runtime switch on the lease namespace. A switch that cannot
// be read counts as off: deleting is never the default when in doubt.
func deletionSwitch(ctx context.Context, hub client.Reader, leaseNamespace string) (on bool, err error) {
	ns := &metav1.PartialObjectMetadata{}
	ns.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	if err := hub.Get(ctx, client.ObjectKey{Name: leaseNamespace}, ns); err != nil {
		return false, fmt.Errorf("reading the deletion switch on namespace %s: %w", leaseNamespace, err)
	}
	return !strings.EqualFold(ns.Annotations[AnnotationDeletion], DeletionOff), nil
}

// PlaneIdentityName is the ConfigMap, in the lease namespace, recording project's
// plane identity.
func PlaneIdentityName(project string) string {
	sum := sha256.Sum256([]byte(project))
	return planeIdentityPrefix + hex.EncodeToString(sum[:10])
}

// planeCheck is the outcome of comparing the plane's identity with the record.
type planeCheck struct {
	State  PlaneState
	Detail string
	// Recorded is the identity on record ("" if none).
	Recorded types.UID
	Current  types.UID
}

// checkPlane compares the plane's current identity with the one recorded for project,
// recording it if none is (and record is set). The record is a ConfigMap in the lease
// namespace, owned by the project's Secret: deleting the Secret (a project removed)
// lets the hub's garbage collector remove the record, while editing it (a repointed
// kubeconfig) keeps it, which is what exposes the change. A record owned by an earlier
// Secret of the same name is not trusted (it is waiting for the garbage collector).
func checkPlane(ctx context.Context, hub client.Reader, writer client.Client, leaseNamespace, project string, secret *metav1.PartialObjectMetadata, current types.UID, record bool) (planeCheck, int, error) {
	pc := planeCheck{State: PlaneUnverified, Current: current}
	key := client.ObjectKey{Namespace: leaseNamespace, Name: PlaneIdentityName(project)}
	cm := &corev1.ConfigMap{}
	calls := 1
	err := hub.Get(ctx, key, cm)
	if apierrors.IsNotFound(err) {
		if !record || secret == nil {
			pc.State, pc.Detail = PlaneVerified, "no identity on record; taking the current plane"
			return pc, calls, nil
		}
		cm = &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: key.Namespace, Name: key.Name,
				Labels: map[string]string{LabelPlaneIdentity: "true"},
				OwnerReferences: []metav1.OwnerReference{{
					APIVersion: "v1", Kind: "Secret", Name: secret.Name, UID: secret.UID, BlockOwnerDeletion: ptr.To(false),
				}},
			},
			Data: map[string]string{planeKeyProject: project, planeKeyUID: string(current)},
		}
		calls++
		if err := writer.Create(ctx, cm); err == nil {
			pc.State, pc.Recorded, pc.Detail = PlaneVerified, current, "identity recorded"
			return pc, calls, nil
		} else if !apierrors.IsAlreadyExists(err) {
			pc.Detail = "recording identity failed"
			return pc, calls, fmt.Errorf("recording the plane identity of project %q: %w", project, err)
		}
		calls++
		cm = &corev1.ConfigMap{}
		err = hub.Get(ctx, key, cm)
	}
	if err != nil {
		pc.Detail = "identity record unreadable"
		return pc, calls, fmt.Errorf("reading the plane identity of project %q: %w", project, err)
	}
	if cm.Data[planeKeyProject] != project {
		pc.Detail = fmt.Sprintf("identity record %s names project %q", key.Name, cm.Data[planeKeyProject])
		return pc, calls, nil
	}
	if secret != nil {
		for _, ref := range cm.OwnerReferences {
			if ref.Kind == "Secret" && ref.UID != secret.UID {
				pc.Detail = "identity record belongs to an earlier Secret of this name (waiting for garbage collection)"
				return pc, calls, nil
			}
		}
	}
	pc.Recorded = types.UID(cm.Data[planeKeyUID])
	if pc.Recorded != current {
		pc.State = PlaneChanged
		pc.Detail = fmt.Sprintf("the plane's default namespace has UID %s, recorded %s (ConfigMap %s/%s)", current, pc.Recorded, key.Namespace, key.Name)
		return pc, calls, nil
	}
	pc.State = PlaneVerified
	return pc, calls, nil
}
