package resync

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const (
	LabelPlaneIdentity = "anchorage.datumapis.com/plane-identity" // marks the plane identity records
	// AnnotationAcknowledgePlane on a plane identity record, set to the UID of the
	// plane's "default" Namespace, acknowledges that plane; any other value is ignored.
	AnnotationAcknowledgePlane = "anchorage.datumapis.com/acknowledge-plane"

	planeIdentityPrefix = "anchorage-plane-"
	planeKeyProject     = "project"
	planeKeyUID         = "default-namespace-uid"
	planeKeySecretUID   = "secret-uid"
)

// PlaneIdentityName names project's plane identity record in the lease namespace.
func PlaneIdentityName(project string) string {
	sum := sha256.Sum256([]byte(project))
	return planeIdentityPrefix + hex.EncodeToString(sum[:10])
}

// planeCheck is the outcome of comparing the plane's identity with the record.
type planeCheck struct {
	State            PlaneState
	Detail           string
	Recorded         types.UID // the identity on record ("" if none)
	Current          types.UID
	Acknowledged     bool // an operator acknowledged Current, which is now recorded
	LossAcknowledged bool // Current, the recorded plane, is acknowledged: no mass-loss halt
}

// checkPlane compares the plane's current identity with project's record, writing the
// record when there is none (and record is set), noting a new Secret's UID once
// verified, and honouring an acknowledgement (docs/design.md, Plane identity).
func checkPlane(ctx context.Context, hub client.Reader, writer client.Writer, leaseNamespace, project string, secret *metav1.PartialObjectMetadata, current types.UID, record bool) (planeCheck, error) {
	pc := planeCheck{State: PlaneUnverified, Current: current}
	key := client.ObjectKey{Namespace: leaseNamespace, Name: PlaneIdentityName(project)}
	cm := &corev1.ConfigMap{}
	err := hub.Get(ctx, key, cm)
	if apierrors.IsNotFound(err) {
		if !record || secret == nil {
			pc.State, pc.Detail = PlaneVerified, "no identity on record; taking the current plane"
			return pc, nil
		}
		cm = &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, Labels: map[string]string{LabelPlaneIdentity: "true"}},
			Data:       map[string]string{planeKeyProject: project, planeKeyUID: string(current), planeKeySecretUID: string(secret.UID)},
		}
		if err := writer.Create(ctx, cm); err == nil {
			pc.State, pc.Recorded, pc.Detail = PlaneVerified, current, "identity recorded"
			return pc, nil
		} else if !apierrors.IsAlreadyExists(err) {
			pc.Detail = "recording identity failed"
			return pc, fmt.Errorf("recording the plane identity of project %q: %w", project, err)
		}
		cm = &corev1.ConfigMap{}
		err = hub.Get(ctx, key, cm)
	}
	if err != nil {
		pc.Detail = "identity record unreadable"
		return pc, fmt.Errorf("reading the plane identity of project %q: %w", project, err)
	}
	if cm.Data[planeKeyProject] != project {
		pc.Detail = fmt.Sprintf("identity record %s names project %q", key.Name, cm.Data[planeKeyProject])
		return pc, nil
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
	var secretUID types.UID
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
			if err := rewriteRecord(ctx, writer, cm, current, secretUID, false); err != nil {
				// Still verified; the next pass notes the Secret.
				pc.Detail = strings.TrimPrefix(pc.Detail+"; noting the Secret on the record failed: "+err.Error(), "; ")
			}
		}
		return pc, nil
	}

	if ack == current && current != "" {
		if !record || secretUID == "" {
			pc.State = PlaneChanged
			pc.Detail = fmt.Sprintf("the plane's default namespace has UID %s, recorded %s; acknowledged on the record, to be recorded by a replica (this run writes nothing)", current, pc.Recorded)
			return pc, nil
		}
		if err := rewriteRecord(ctx, writer, cm, current, secretUID, true); err != nil {
			pc.State = PlaneChanged
			pc.Detail = fmt.Sprintf("the plane's default namespace has UID %s, recorded %s; recording the acknowledged plane failed: %v", current, pc.Recorded, err)
			return pc, nil
		}
		pc.State, pc.Acknowledged = PlaneVerified, true
		pc.Detail = fmt.Sprintf("new plane %s acknowledged by an operator (was %s)", current, pc.Recorded)
		return pc, nil
	}

	pc.State = PlaneChanged
	pc.Detail = fmt.Sprintf("the plane's default namespace has UID %s, recorded %s (ConfigMap %s/%s)", current, pc.Recorded, key.Namespace, key.Name)
	if newSecret {
		pc.Detail += fmt.Sprintf("; the project's Secret (uid %s) is not the one the record was verified with (%s)", secretUID, verifiedWith)
	}
	if ack != "" {
		pc.Detail += fmt.Sprintf("; the acknowledgement on the record names plane %s, not this one", ack)
	}
	return pc, nil
}

// rewriteRecord notes the plane uid and verifying Secret on cm, drops Secret
// ownerReferences and, when acknowledged, the acknowledgement; on cm's resourceVersion.
func rewriteRecord(ctx context.Context, writer client.Writer, cm *corev1.ConfigMap, uid, secretUID types.UID, acknowledged bool) error {
	cm = cm.DeepCopy()
	cm.OwnerReferences = slices.DeleteFunc(cm.OwnerReferences, func(ref metav1.OwnerReference) bool { return ref.Kind == "Secret" })
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
func clearLossAcknowledgement(ctx context.Context, hub client.Reader, writer client.Writer, leaseNamespace, project string, current types.UID) error {
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
func dropPlaneRecord(ctx context.Context, hub client.Reader, writer client.Writer, leaseNamespace, project string) (gone bool, err error) {
	cm := &corev1.ConfigMap{}
	err = hub.Get(ctx, client.ObjectKey{Namespace: leaseNamespace, Name: PlaneIdentityName(project)}, cm)
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	if cm.Data[planeKeyProject] != project {
		return false, fmt.Errorf("record %s names project %q", cm.Name, cm.Data[planeKeyProject])
	}
	uid, rv := cm.UID, cm.ResourceVersion
	err = writer.Delete(ctx, cm, client.Preconditions{UID: &uid, ResourceVersion: &rv})
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	return false, err
}
