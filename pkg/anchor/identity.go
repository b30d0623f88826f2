package anchor

import (
	"errors"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Label keys naming the upstream object, carried by anchors, by mapped namespaces
// (LabelClusterName and LabelNamespace only) and by every downstream object.
const (
	LabelClusterName = "meta.datumapis.com/upstream-cluster-name" // its project, as ClusterNameValue
	LabelGroup       = "meta.datumapis.com/upstream-group"        // its API group; empty for the core group
	LabelKind        = "meta.datumapis.com/upstream-kind"         // its kind
	LabelName        = "meta.datumapis.com/upstream-name"         // its name
	LabelNamespace   = "meta.datumapis.com/upstream-namespace"    // its namespace
)

// Name prefixes: an anchor is anchor-<upstream object UID>, a mapped namespace
// ns-<upstream Namespace UID>.
const (
	NamePrefix      = "anchor-"
	NamespacePrefix = "ns-"

	clusterNamePrefix = "cluster-"
	projectSeparator  = "_" // a "/" of a project name, in a label value
)

// Errors callers tell apart with errors.Is. None proves anything about the upstream
// owner: the object is kept.
var (
	// ErrMalformed means a name or a label is not in the anchor wire format.
	ErrMalformed = errors.New("not in the anchor format")
	// ErrForeign means an object with an anchor's name is not the owner's anchor
	// (other labels, data, ownerReferences, or being deleted).
	ErrForeign = errors.New("not the owner's anchor")
	// ErrAmbiguous means the hub holds more than one anchor of one name.
	ErrAmbiguous = errors.New("more than one anchor of that name")
)

// Owner identifies an upstream object in a project: the object whose anchor it is.
// Owners compare with ==.
type Owner struct {
	// Project is the project name, which may hold one "/".
	Project string
	// Group is the API group; empty for the core group.
	Group     string
	Kind      string
	Namespace string
	Name      string
	// UID is the object's UID; the anchor is named after it.
	UID types.UID
}

// OwnerOf returns the Owner that identifies obj, of kind gvk, in project; the version
// is dropped.
func OwnerOf(project string, gvk schema.GroupVersionKind, obj metav1.Object) Owner {
	return Owner{
		Project:   project,
		Group:     gvk.Group,
		Kind:      gvk.Kind,
		Namespace: obj.GetNamespace(),
		Name:      obj.GetName(),
		UID:       obj.GetUID(),
	}
}

// String returns the owner in a form fit for logs and error messages.
func (o Owner) String() string {
	gk := o.Kind
	if o.Group != "" {
		gk = o.Kind + "." + o.Group
	}
	return fmt.Sprintf("%s %s/%s (uid %s) in project %q", gk, o.Namespace, o.Name, o.UID, o.Project)
}

// Labels returns the five labels every anchor and downstream object of o carries, in a
// new map.
func (o Owner) Labels() map[string]string {
	return map[string]string{
		LabelClusterName: ClusterNameValue(o.Project),
		LabelGroup:       o.Group,
		LabelKind:        o.Kind,
		LabelName:        o.Name,
		LabelNamespace:   o.Namespace,
	}
}

// Validate reports whether o can be written as an anchor and read back as itself.
func (o Owner) Validate() error {
	got, err := Decode(Name(o.UID), o.Labels())
	if err != nil {
		return fmt.Errorf("validating owner %s: %w", o, err)
	}
	if got != o {
		return fmt.Errorf("validating owner %s: it would be read back as %s: %w", o, got, ErrMalformed)
	}
	return nil
}

// ClusterNameValue returns the LabelClusterName value for project: "cluster-" and the
// project with "/" written as "_". It does not validate the project (Owner.Validate).
func ClusterNameValue(project string) string {
	return clusterNamePrefix + strings.ReplaceAll(project, "/", projectSeparator)
}

// ProjectFromClusterName returns the project a LabelClusterName value names, legacy
// forms included ("cluster-_proj" is "proj"). Anything else, "cluster-_org_proj"
// among them, is an error wrapping ErrMalformed, never a best guess.
func ProjectFromClusterName(v string) (string, error) {
	rest, ok := strings.CutPrefix(v, clusterNamePrefix)
	if !ok {
		return "", fmt.Errorf("reading project from cluster name %q: no %q prefix: %w", v, clusterNamePrefix, ErrMalformed)
	}
	// A legacy "/proj" had no other slash.
	maxParts := 2
	if legacy, ok := strings.CutPrefix(rest, projectSeparator); ok {
		rest, maxParts = legacy, 1
	}
	parts := strings.Split(rest, projectSeparator)
	if len(parts) > maxParts {
		return "", fmt.Errorf("reading project from cluster name %q: too many %q: %w", v, projectSeparator, ErrMalformed)
	}
	for _, p := range parts {
		if errs := validation.IsDNS1123Subdomain(p); len(errs) > 0 {
			return "", fmt.Errorf("reading project from cluster name %q: segment %q: %s: %w", v, p, strings.Join(errs, "; "), ErrMalformed)
		}
	}
	return strings.Join(parts, "/"), nil
}

// Name returns the name of the anchor of the upstream object with uid.
func Name(uid types.UID) string {
	return NamePrefix + string(uid)
}

// UIDOfName returns the upstream UID an anchor's name carries, and whether name has an
// anchor's form at all (anchor-<canonical UUID>).
func UIDOfName(name string) (types.UID, bool) {
	uid, ok := strings.CutPrefix(name, NamePrefix)
	if !ok || !isUUID(uid) {
		return "", false
	}
	return types.UID(uid), true
}

// MappedNamespace returns the name of the hub namespace that mirrors the upstream
// Namespace with upstreamNamespaceUID.
func MappedNamespace(upstreamNamespaceUID types.UID) string {
	return NamespacePrefix + string(upstreamNamespaceUID)
}

// Decode reads the Owner of the anchor with name and labels: the UID from the name,
// the rest from the five labels (others are ignored). Any departure from the wire
// format, or a value no Kubernetes object could have, is an error wrapping ErrMalformed.
func Decode(name string, labels map[string]string) (Owner, error) {
	malformed := func(format string, args ...any) (Owner, error) {
		return Owner{}, fmt.Errorf("decoding anchor %q: %s: %w", name, fmt.Sprintf(format, args...), ErrMalformed)
	}

	uid, ok := strings.CutPrefix(name, NamePrefix)
	if !ok {
		return malformed("name lacks the %q prefix", NamePrefix)
	}
	if !isUUID(uid) {
		return malformed("%q is not a lowercase canonical UUID", uid)
	}

	for _, k := range []string{LabelClusterName, LabelGroup, LabelKind, LabelName, LabelNamespace} {
		v, ok := labels[k]
		if !ok {
			return malformed("label %s missing", k)
		}
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			return malformed("label %s=%q: %s", k, v, strings.Join(errs, "; "))
		}
	}

	project, err := ProjectFromClusterName(labels[LabelClusterName])
	if err != nil {
		return Owner{}, fmt.Errorf("decoding anchor %q: %w", name, err)
	}
	if g := labels[LabelGroup]; g != "" {
		if errs := validation.IsDNS1123Subdomain(g); len(errs) > 0 {
			return malformed("group %q: %s", g, strings.Join(errs, "; "))
		}
	}
	// A kind's lowercase form is a DNS-1035 label (CRD validation; built-ins too).
	kind := labels[LabelKind]
	if errs := validation.IsDNS1035Label(strings.ToLower(kind)); len(errs) > 0 {
		return malformed("kind %q: %s", kind, strings.Join(errs, "; "))
	}
	ns := labels[LabelNamespace]
	if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
		return malformed("namespace %q: %s", ns, strings.Join(errs, "; "))
	}
	objName := labels[LabelName]
	if errs := validation.IsDNS1123Subdomain(objName); len(errs) > 0 {
		return malformed("name %q: %s", objName, strings.Join(errs, "; "))
	}

	return Owner{
		Project:   project,
		Group:     labels[LabelGroup],
		Kind:      kind,
		Namespace: ns,
		Name:      objName,
		UID:       types.UID(uid),
	}, nil
}

// IsAnchor reports whether obj, a ConfigMap's metadata, is an anchor: Decode accepts
// its name and labels, it has no ownerReferences, and its namespace is named ns-<uuid>.
// Data is not checked, so metadata-only caches can use it.
func IsAnchor(obj metav1.Object) bool {
	if obj == nil || len(obj.GetOwnerReferences()) > 0 || !IsMappedNamespaceName(obj.GetNamespace()) {
		return false
	}
	_, err := Decode(obj.GetName(), obj.GetLabels())
	return err == nil
}

// IsMappedNamespaceName reports whether name has the form ns-<uuid>; older mapped
// namespaces have no labels.
func IsMappedNamespaceName(name string) bool {
	uid, ok := strings.CutPrefix(name, NamespacePrefix)
	return ok && isUUID(uid)
}

// isUUID reports whether s is a UUID in the lowercase canonical 8-4-4-4-12 form the
// API server writes; other spellings are refused.
func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i, c := range []byte(s) {
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
				return false
			}
		}
	}
	return true
}
