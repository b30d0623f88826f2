package resync

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	"anchorage/pkg/anchor"
)

// DependentLister lists, live, the metadata of the objects of one hub namespace that
// could hang on an anchor (DependentKindsOf): Kinds once per pass, then List per kind
// and namespace, so each kind is listed in its own admission step.
type DependentLister interface {
	// Kinds returns the listed kinds the hub serves; failed discovery of one is an error.
	Kinds(ctx context.Context) ([]DependentKind, error)
	// List returns one page (from cont, "" first) of the metadata of the objects of kind
	// in namespace, and the continue token of the next ("" after the last).
	List(ctx context.Context, kind DependentKind, namespace, cont string) (objects []metav1.PartialObjectMetadata, next string, err error)
}

// DependentKind is a kind the hub serves, as listed for dependents.
type DependentKind struct {
	Resource schema.GroupVersionResource
	Kind     string
}

// anchorKind is the kind of anchors, always listed: every judgement reads them.
var anchorKind = schema.GroupKind{Group: "", Kind: "ConfigMap"}

// DependentKindsOf returns the kinds the dependents scan lists, once each: anchors, the
// kinds in writes, then extra; never every served kind (docs/design.md, No cascade into live objects).
func DependentKindsOf(writes map[schema.GroupKind][]HubWrite, extra []schema.GroupKind) []schema.GroupKind {
	out := []schema.GroupKind{anchorKind}
	var written []schema.GroupKind
	for _, ws := range writes {
		for _, w := range ws {
			written = append(written, schema.GroupKind{Group: w.Group, Kind: w.Kind})
		}
	}
	slices.SortFunc(written, func(a, b schema.GroupKind) int { return strings.Compare(a.String(), b.String()) })
	for _, gk := range append(written, extra...) {
		if !slices.Contains(out, gk) {
			out = append(out, gk)
		}
	}
	return out
}

// hubDependents lists the configured kinds through discovery and the metadata API.
type hubDependents struct {
	disc  discovery.DiscoveryInterface
	meta  metadata.Interface
	kinds []schema.GroupKind
}

// NewHubDependentLister returns a DependentLister of kinds on the hub at cfg (through hc
// when not nil), rate-limited on its own by qps and burst.
func NewHubDependentLister(cfg *rest.Config, hc *http.Client, kinds []schema.GroupKind, qps float32, burst int) (DependentLister, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst, cfg.RateLimiter = qps, burst, nil
	if hc == nil {
		var err error
		if hc, err = rest.HTTPClientFor(cfg); err != nil {
			return nil, fmt.Errorf("building the hub HTTP client: %w", err)
		}
	}
	disc, err := discovery.NewDiscoveryClientForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, fmt.Errorf("building the hub discovery client: %w", err)
	}
	md, err := metadata.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, fmt.Errorf("building the hub metadata client: %w", err)
	}
	return &hubDependents{disc: disc, meta: md, kinds: slices.Clone(kinds)}, nil
}

// Kinds implements DependentLister. Discovery runs on every call, so a CRD installed
// since is seen; a listed kind the hub does not serve is left out.
func (h *hubDependents) Kinds(_ context.Context) ([]DependentKind, error) {
	lists, err := discovery.ServerPreferredNamespacedResources(h.disc)
	if err != nil {
		// A group that failed discovery matters only if a listed kind may live in it.
		var failed *discovery.ErrGroupDiscoveryFailed
		if !errors.As(err, &failed) {
			return nil, fmt.Errorf("discovering the hub's namespaced kinds: %w", err)
		}
		for gv := range failed.Groups {
			if slices.ContainsFunc(h.kinds, func(gk schema.GroupKind) bool { return gk.Group == gv.Group }) {
				return nil, fmt.Errorf("discovering the hub's namespaced kinds: %w", err)
			}
		}
	}
	var out []DependentKind
	for _, list := range lists {
		gv, err := schema.ParseGroupVersion(list.GroupVersion)
		if err != nil {
			return nil, fmt.Errorf("discovering the hub's namespaced kinds: %w", err)
		}
		for _, r := range list.APIResources {
			if strings.Contains(r.Name, "/") || !slices.Contains(h.kinds, gv.WithKind(r.Kind).GroupKind()) {
				continue
			}
			if !slices.Contains(r.Verbs, "list") {
				return nil, fmt.Errorf("the hub serves %s without list: its dependents cannot be read", gv.WithKind(r.Kind).GroupKind())
			}
			out = append(out, DependentKind{Resource: gv.WithResource(r.Name), Kind: r.Kind})
		}
	}
	return out, nil
}

// List implements DependentLister. Every object is kept: a dependent's other owners are
// looked up in these lists.
func (h *hubDependents) List(ctx context.Context, kind DependentKind, namespace, cont string) ([]metav1.PartialObjectMetadata, string, error) {
	page, err := h.meta.Resource(kind.Resource).Namespace(namespace).List(ctx, metav1.ListOptions{Limit: listPage, Continue: cont})
	if err != nil {
		return nil, "", fmt.Errorf("listing %s in %s: %w", kind.Resource.GroupResource(), namespace, err)
	}
	for i := range page.Items {
		page.Items[i].TypeMeta = metav1.TypeMeta{APIVersion: kind.Resource.GroupVersion().String(), Kind: kind.Kind}
	}
	return page.Items, page.Continue, nil
}

// dependentKind is the judgement of one dependent of an anchor.
type dependentKind int

// The judgements of docs/design.md, No cascade into live objects.
const (
	dependentShared     dependentKind = iota // another existing owner, or already being deleted
	dependentOrphan                          // no live owner claims it; it goes with the anchor
	dependentClaimed                         // a live owner would write it and must re-attach it first
	dependentForeign                         // labelled for another project, or an undecodable cluster name
	dependentUnreadable                      // labelled for an owner whose state could not be read
)

// keyOf is o without its UID: what labels of a downstream object name, the key of
// the maps of owners judging dependents reads.
func keyOf(o anchor.Owner) anchor.Owner {
	o.UID = ""
	return o
}

// otherOwner is a live read of another owner a dependent's labels name, with its
// upstream namespace's state relative to the dependent's.
type otherOwner struct {
	State     ObjectState
	UID       types.UID
	Namespace NamespaceState
}

// ownOwner is what is known, just before the delete, of the anchor's own owner.
type ownOwner struct {
	Fresh   Observation // the owner read live again (NotRead: not read; the proof alone decides)
	Sibling bool        // another anchor with the same five labels is in the same hub namespace
}

// dependentJudge holds what judging one anchor's dependents depends on.
type dependentJudge struct {
	anchorUID types.UID // the anchor ConfigMap's own UID; owner is the one absent by proof
	owner     anchor.Owner
	proof     Reason
	existing  map[types.UID]bool // holds the UIDs of the objects still in the hub namespace
	other     map[anchor.Owner]otherOwner
	own       ownOwner
	writes    map[schema.GroupKind][]HubWrite
}

// labelledOwner decodes the owner a dependent's labels name (ok); foreign: a cluster name
// names (or may name) another project.
func labelledOwner(labels map[string]string, project string) (key anchor.Owner, ok, foreign bool) {
	if o, err := anchor.Decode(placeholderName, labels); err == nil {
		return keyOf(o), true, o.Project != project
	}
	v, has := labels[anchor.LabelClusterName]
	if !has {
		return anchor.Owner{}, false, false
	}
	p, err := anchor.ProjectFromClusterName(v)
	return anchor.Owner{}, false, err != nil || p != project
}

// placeholderName stands in for an anchor name when only labels are decoded.
var placeholderName = anchor.Name("00000000-0000-0000-0000-000000000000")

// shared reports whether dep is being deleted or refers to an object in existing other
// than the anchor (an unknown reference is no owner): it does not hang on the anchor alone.
func (j dependentJudge) shared(dep *metav1.PartialObjectMetadata) bool {
	if dep.DeletionTimestamp != nil {
		return true
	}
	for _, ref := range dep.OwnerReferences {
		if ref.UID != j.anchorUID && j.existing[ref.UID] {
			return true
		}
	}
	return false
}

// judge decides what dep means for deleting the anchor (docs/design.md, No cascade into
// live objects).
func (j dependentJudge) judge(dep *metav1.PartialObjectMetadata) dependentKind {
	if j.shared(dep) {
		return dependentShared
	}
	if _, _, foreign := labelledOwner(dep.Labels, j.owner.Project); foreign {
		return dependentForeign
	}
	key, ok := j.writer(dep)
	if !ok {
		// No live owner would write (and re-attach) it.
		return dependentOrphan
	}
	if key == keyOf(j.owner) {
		return j.judgeOwn()
	}
	o, ok := j.other[key]
	if !ok {
		return dependentUnreadable
	}
	switch o.State {
	case Absent:
		return dependentOrphan
	case Present:
		switch o.Namespace {
		case NamespaceMatches:
			return dependentClaimed
		case NamespaceRecreated, NamespaceGone:
			return dependentOrphan
		}
	}
	return dependentUnreadable
}

// judgeOwn judges a dependent the anchor's own owner would write.
func (j dependentJudge) judgeOwn() dependentKind {
	if j.own.Sibling {
		return dependentClaimed
	}
	nsProof := j.proof == ReasonNamespaceRecreated || j.proof == ReasonNamespaceGone
	switch j.own.Fresh.State {
	case NotRead:
		// Replaced: the object of that name now takes it over.
		if j.proof == ReasonReplaced {
			return dependentClaimed
		}
		return dependentOrphan
	case Absent:
		return dependentOrphan
	case Present:
		if j.own.Fresh.UID == j.owner.UID {
			// Contradicts the proof: keep.
			return dependentUnreadable
		}
		// Another UID claims it, unless in a new namespace (another hub namespace).
		if nsProof {
			return dependentOrphan
		}
		return dependentClaimed
	}
	return dependentUnreadable
}

// writer returns the owner of this project its labels name that would write dep, if dep
// is not being deleted and hangs on the anchor alone.
func (j dependentJudge) writer(dep *metav1.PartialObjectMetadata) (key anchor.Owner, ok bool) {
	if j.shared(dep) {
		return anchor.Owner{}, false
	}
	key, ok, foreign := labelledOwner(dep.Labels, j.owner.Project)
	return key, ok && !foreign && wouldWrite(j.writes, schema.GroupKind{Group: key.Group, Kind: key.Kind}, key.Name, dep.GroupVersionKind().GroupKind(), dep.Name)
}

// needsOwn reports whether the anchor's own owner would write a dependent: it is then
// read again.
func (j dependentJudge) needsOwn(deps []*metav1.PartialObjectMetadata) bool {
	return slices.ContainsFunc(deps, func(dep *metav1.PartialObjectMetadata) bool {
		key, ok := j.writer(dep)
		return ok && key == keyOf(j.owner)
	})
}

// otherOwnersToRead returns the other owners that would write a dependent: judge needs
// their live state.
func (j dependentJudge) otherOwnersToRead(deps []*metav1.PartialObjectMetadata) []anchor.Owner {
	var out []anchor.Owner
	for _, dep := range deps {
		if key, ok := j.writer(dep); ok && key != keyOf(j.owner) && !slices.Contains(out, key) {
			out = append(out, key)
		}
	}
	return out
}

// summarize judges every dependent: the summary Decide reads, and the claimers.
func (j dependentJudge) summarize(deps []*metav1.PartialObjectMetadata) (DependentsSummary, []anchor.Owner) {
	s := DependentsSummary{Total: len(deps)}
	var claimers []anchor.Owner
	for _, dep := range deps {
		switch j.judge(dep) {
		case dependentClaimed:
			s.Claimed++
			// The own owner's claimer keeps no UID: the object that has the name now.
			claimer, _, _ := labelledOwner(dep.Labels, j.owner.Project)
			if claimer != keyOf(j.owner) {
				claimer.UID = j.other[claimer].UID
			}
			if !slices.Contains(claimers, claimer) {
				claimers = append(claimers, claimer)
			}
		case dependentForeign:
			s.Foreign++
		case dependentUnreadable:
			s.Unreadable++
		}
	}
	return s, claimers
}

// dependentsIndex indexes one hub namespace: existing UIDs, referrers, owners' anchors.
type dependentsIndex struct {
	existing map[types.UID]bool
	byOwner  map[types.UID][]*metav1.PartialObjectMetadata
	anchors  map[anchor.Owner][]types.UID
}

func indexDependents(objects []metav1.PartialObjectMetadata) dependentsIndex {
	idx := dependentsIndex{
		existing: make(map[types.UID]bool, len(objects)),
		byOwner:  map[types.UID][]*metav1.PartialObjectMetadata{},
		anchors:  map[anchor.Owner][]types.UID{},
	}
	for i := range objects {
		o := &objects[i]
		idx.existing[o.UID] = true
		for _, ref := range o.OwnerReferences {
			idx.byOwner[ref.UID] = append(idx.byOwner[ref.UID], o)
		}
		if o.GroupVersionKind().GroupKind() == anchorKind && o.DeletionTimestamp == nil && anchor.IsAnchor(o) {
			if owner, err := anchor.Decode(o.Name, o.Labels); err == nil {
				idx.anchors[keyOf(owner)] = append(idx.anchors[keyOf(owner)], o.UID)
			}
		}
	}
	return idx
}

// sibling returns an anchor of owner's in this namespace other than anchorUID, if any.
func (idx dependentsIndex) sibling(owner anchor.Owner, anchorUID types.UID) (types.UID, bool) {
	for _, uid := range idx.anchors[keyOf(owner)] {
		if uid != anchorUID && idx.existing[uid] {
			return uid, true
		}
	}
	return "", false
}

// forget drops an anchor about to be deleted from existing.
func (idx dependentsIndex) forget(uid types.UID) {
	delete(idx.existing, uid)
}
