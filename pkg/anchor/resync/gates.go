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
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Operator controls, read by every pass (docs/design.md, Throttle, not halt; Plane
// identity; Projects with no Secret).
const (
	// AnnotationDeletion set to DeletionOff on the lease namespace turns deletion off.
	AnnotationDeletion = "anchorage.datumapis.com/anchor-deletion"
	// DeletionOff is the AnnotationDeletion value that turns deletion off.
	DeletionOff = "off"
	// AnnotationExclude set to "true" on a project's Secret excludes it from deletions.
	AnnotationExclude = "anchorage.datumapis.com/resync-exclude"
	// LabelPlaneIdentity marks the plane identity records in the lease namespace.
	LabelPlaneIdentity = "anchorage.datumapis.com/plane-identity"
	// AnnotationAcknowledgePlane on a plane identity record, set to the UID of the
	// plane's "default" Namespace, acknowledges that plane; any other value is ignored.
	AnnotationAcknowledgePlane = "anchorage.datumapis.com/acknowledge-plane"
	// LabelTombstone set to "true" on a ConfigMap in the lease namespace, whose data key
	// TombstoneKeyProject names a project, retires that project once it has no Secret.
	LabelTombstone = "anchorage.datumapis.com/retired-project"
	// TombstoneKeyProject is the data key of a tombstone naming the retired project.
	TombstoneKeyProject = "project"

	// DefaultSecretLabel marks kubeconfig Secrets (multicluster-runtime's provider).
	DefaultSecretLabel = "sigs.k8s.io/multicluster-runtime-kubeconfig"

	planeIdentityPrefix = "anchorage-plane-"
	planeKeyProject     = "project"
	planeKeyUID         = "default-namespace-uid"
	planeKeySecretUID   = "secret-uid"
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
		sec := coreMeta("Secret")
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

// findKnown is find, first trying the Secret last found, known, with one GET: a
// project whose name is no Secret name would otherwise list every kubeconfig Secret.
func (s secrets) findKnown(ctx context.Context, hub client.Reader, project, known string) (*metav1.PartialObjectMetadata, int, error) {
	if known == "" || known == project {
		return s.find(ctx, hub, project)
	}
	sec := coreMeta("Secret")
	err := hub.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: known}, sec)
	switch {
	case err == nil && sec.Labels[s.label] == "true" && s.projectOf(sec) == project:
		return sec, 1, nil
	case err != nil && !apierrors.IsNotFound(err):
		return nil, 1, fmt.Errorf("reading the kubeconfig Secret %s of project %q: %w", known, project, err)
	}
	found, calls, err := s.find(ctx, hub, project)
	return found, calls + 1, err
}

// list returns the metadata of every kubeconfig Secret.
func (s secrets) list(ctx context.Context, hub client.Reader) ([]metav1.PartialObjectMetadata, int, error) {
	list := coreMetaList("SecretList")
	if err := hub.List(ctx, list, client.InNamespace(s.namespace), client.MatchingLabels{s.label: "true"}); err != nil {
		return nil, 1, fmt.Errorf("listing kubeconfig Secrets in %s: %w", s.namespace, err)
	}
	return list.Items, 1, nil
}

// excluded reports whether a Secret excludes its project from deletions.
func excluded(sec metav1.Object) bool {
	return sec != nil && strings.EqualFold(sec.GetAnnotations()[AnnotationExclude], "true")
}

// deletionSwitch reads the runtime switch; one that cannot be read counts as off.
func deletionSwitch(ctx context.Context, hub client.Reader, leaseNamespace string) (on bool, err error) {
	ns := coreMeta("Namespace")
	if err := hub.Get(ctx, client.ObjectKey{Name: leaseNamespace}, ns); err != nil {
		return false, fmt.Errorf("reading the deletion switch on namespace %s: %w", leaseNamespace, err)
	}
	return !strings.EqualFold(ns.Annotations[AnnotationDeletion], DeletionOff), nil
}

// PlaneIdentityName names project's plane identity record in the lease namespace.
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
	// Acknowledged: an operator acknowledged Current, which is now recorded.
	Acknowledged bool
	// LossAcknowledged: Current, the recorded plane, is acknowledged: no mass-loss halt.
	LossAcknowledged bool
}

// checkPlane compares the plane's current identity with project's record, writing the
// record when there is none (and record is set), noting a new Secret's UID once
// verified, and honouring an acknowledgement (docs/design.md, Plane identity).
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
			ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, Labels: map[string]string{LabelPlaneIdentity: "true"}},
			Data:       map[string]string{planeKeyProject: project, planeKeyUID: string(current), planeKeySecretUID: string(secret.UID)},
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
	pc.Recorded = types.UID(cm.Data[planeKeyUID])
	verifiedWith := types.UID(cm.Data[planeKeySecretUID])
	legacyOwned := false
	for _, ref := range cm.OwnerReferences {
		if ref.Kind == "Secret" {
			legacyOwned = true
			if verifiedWith == "" {
				verifiedWith = ref.UID
			}
		}
	}
	secretUID := types.UID("")
	if secret != nil {
		secretUID = secret.UID
	}
	newSecret := secretUID != "" && verifiedWith != secretUID
	ack := types.UID(cm.Annotations[AnnotationAcknowledgePlane])

	if pc.Recorded == current {
		pc.State = PlaneVerified
		pc.LossAcknowledged = ack == current
		if newSecret {
			pc.Detail = fmt.Sprintf("Secret uid %s verified against the recorded plane (recorded with %s)", secretUID, verifiedWith)
		}
		if (newSecret || legacyOwned) && record && secretUID != "" {
			calls++
			if err := rewriteRecord(ctx, writer, cm, current, secretUID, false); err != nil {
				// Still verified; the next pass notes the Secret.
				pc.Detail = strings.TrimPrefix(pc.Detail+"; noting the Secret on the record failed: "+err.Error(), "; ")
			}
		}
		return pc, calls, nil
	}

	if ack == current && current != "" {
		if !record || secretUID == "" {
			pc.State = PlaneChanged
			pc.Detail = fmt.Sprintf("the plane's default namespace has UID %s, recorded %s; acknowledged on the record, to be recorded by a replica (this run writes nothing)", current, pc.Recorded)
			return pc, calls, nil
		}
		calls++
		if err := rewriteRecord(ctx, writer, cm, current, secretUID, true); err != nil {
			pc.State = PlaneChanged
			pc.Detail = fmt.Sprintf("the plane's default namespace has UID %s, recorded %s; recording the acknowledged plane failed: %v", current, pc.Recorded, err)
			return pc, calls, nil
		}
		pc.State, pc.Acknowledged = PlaneVerified, true
		pc.Detail = fmt.Sprintf("new plane %s acknowledged by an operator (was %s)", current, pc.Recorded)
		return pc, calls, nil
	}

	pc.State = PlaneChanged
	pc.Detail = fmt.Sprintf("the plane's default namespace has UID %s, recorded %s (ConfigMap %s/%s)", current, pc.Recorded, key.Namespace, key.Name)
	if newSecret {
		pc.Detail += fmt.Sprintf("; the project's Secret (uid %s) is not the one the record was verified with (%s)", secretUID, verifiedWith)
	}
	if ack != "" {
		pc.Detail += fmt.Sprintf("; the acknowledgement on the record names plane %s, not this one", ack)
	}
	return pc, calls, nil
}

// rewriteRecord notes the plane uid and the verifying Secret on cm, drops any
// ownerReference to a Secret and, when acknowledged, the acknowledgement; conditional
// on the resourceVersion read.
func rewriteRecord(ctx context.Context, writer client.Client, cm *corev1.ConfigMap, uid, secretUID types.UID, acknowledged bool) error {
	cm = cm.DeepCopy()
	var refs []metav1.OwnerReference
	for _, ref := range cm.OwnerReferences {
		if ref.Kind != "Secret" {
			refs = append(refs, ref)
		}
	}
	cm.OwnerReferences = refs
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	cm.Data[planeKeyUID], cm.Data[planeKeySecretUID] = string(uid), string(secretUID)
	if acknowledged {
		delete(cm.Annotations, AnnotationAcknowledgePlane)
	}
	return writer.Update(ctx, cm)
}

// clearLossAcknowledgement removes an acknowledgement of the recorded plane.
func clearLossAcknowledgement(ctx context.Context, hub client.Reader, writer client.Client, leaseNamespace, project string, current types.UID) error {
	cm := &corev1.ConfigMap{}
	if err := hub.Get(ctx, client.ObjectKey{Namespace: leaseNamespace, Name: PlaneIdentityName(project)}, cm); err != nil {
		return err
	}
	if types.UID(cm.Annotations[AnnotationAcknowledgePlane]) != current || types.UID(cm.Data[planeKeyUID]) != current {
		return nil
	}
	delete(cm.Annotations, AnnotationAcknowledgePlane)
	return writer.Update(ctx, cm)
}

// dropPlaneRecord deletes a retired project's plane identity record with UID and
// resourceVersion preconditions: the only delete of a record. gone: there was none.
func dropPlaneRecord(ctx context.Context, hub client.Reader, writer client.Client, leaseNamespace, project string) (gone bool, calls int, err error) {
	cm := &corev1.ConfigMap{}
	calls++
	err = hub.Get(ctx, client.ObjectKey{Namespace: leaseNamespace, Name: PlaneIdentityName(project)}, cm)
	if apierrors.IsNotFound(err) {
		return true, calls, nil
	}
	if err != nil {
		return false, calls, err
	}
	if cm.Data[planeKeyProject] != project {
		return false, calls, fmt.Errorf("record %s names project %q", cm.Name, cm.Data[planeKeyProject])
	}
	uid, rv := cm.UID, cm.ResourceVersion
	calls++
	err = writer.Delete(ctx, cm, client.Preconditions{UID: &uid, ResourceVersion: &rv})
	if apierrors.IsNotFound(err) {
		return true, calls, nil
	}
	return false, calls, err
}

// tombstoneOf returns the name of a tombstone retiring project ("" if none), and calls.
func tombstoneOf(ctx context.Context, hub client.Reader, leaseNamespace, project string) (string, int, error) {
	names, err := tombstones(ctx, hub, leaseNamespace)
	if err != nil {
		return "", 1, err
	}
	return names[project], 1, nil
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
