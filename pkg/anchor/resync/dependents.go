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

// DependentLister lists, live, the metadata of the objects in one hub namespace that
// could hang on an anchor: the kinds the live path writes there (DependentKindsOf). It
// is called in two steps so that each request of a pass can run in its own admission
// step: Kinds once per pass, then List per kind and namespace. calls is the number of
// API requests made, for the pass's accounting.
type DependentLister interface {
	// Kinds returns the listed kinds the hub serves. A failed discovery of a group that
	// holds one of them is an error: a kind that could not be discovered could hold a
	// live dependent.
	Kinds(ctx context.Context) (kinds []DependentKind, calls int, err error)
	// List returns the metadata of every object of kind in namespace.
	List(ctx context.Context, kind DependentKind, namespace string) (objects []metav1.PartialObjectMetadata, calls int, err error)
}

// DependentKind is a kind the hub serves, as listed for dependents.
type DependentKind struct {
	Resource schema.GroupVersionResource
	Kind     string
}

// anchorKind is the kind of anchors themselves: always listed, because which anchors
// exist in a namespace (an owner's recreated anchor, objects hanging on two anchors)
// is part of every judgement.
var anchorKind = schema.GroupKind{Group: "", Kind: "ConfigMap"}

// DependentKindsOf returns the kinds the dependents scan lists: anchors (ConfigMaps),
// every kind writes says the live path writes on the hub, and extra (an operator's
// legacy dependents, --resync-extra-dependent-kinds), each once, in that order.
//
// Only these, and never every served kind (docs/design.md, No cascade into live
// objects): a live owner can re-attach only what the live path writes, so nothing else
// can ever be claimed, and listing every kind needs cluster-wide list on every
// resource, every Secret of the hub included.
func DependentKindsOf(writes map[schema.GroupKind][]HubWrite, extra []schema.GroupKind) []schema.GroupKind {
	out := []schema.GroupKind{anchorKind}
	add := func(gk schema.GroupKind) {
		if !slices.Contains(out, gk) {
			out = append(out, gk)
		}
	}
	var written []schema.GroupKind
	for _, ws := range writes {
		for _, w := range ws {
			written = append(written, schema.GroupKind{Group: w.Group, Kind: w.Kind})
		}
	}
	// Map order is random; the scan's order (and its request log) should not be.
	slices.SortFunc(written, func(a, b schema.GroupKind) int { return strings.Compare(a.String(), b.String()) })
	for _, gk := range written {
		add(gk)
	}
	for _, gk := range extra {
		add(gk)
	}
	return out
}

// hubDependents lists the configured kinds through discovery and the metadata API.
type hubDependents struct {
	disc discovery.DiscoveryInterface
	meta metadata.Interface
	// kinds are the group-kinds listed (DependentKindsOf).
	kinds []schema.GroupKind
	// pageSize bounds each list response.
	pageSize int64
}

// NewDependentLister returns a DependentLister of kinds over discovery and the
// metadata API.
func NewDependentLister(disc discovery.DiscoveryInterface, meta metadata.Interface, kinds []schema.GroupKind) DependentLister {
	return &hubDependents{disc: disc, meta: meta, kinds: slices.Clone(kinds), pageSize: 500}
}

// NewHubDependentLister returns a DependentLister of kinds on the hub at cfg (through
// hc when not nil), with a client-side rate limit of its own (qps, burst; the defaults
// of Options when zero).
func NewHubDependentLister(cfg *rest.Config, hc *http.Client, kinds []schema.GroupKind, qps float32, burst int) (DependentLister, error) {
	d := Options{}.WithDefaults()
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst, cfg.RateLimiter = d.DependentsQPS, d.DependentsBurst, nil
	if qps > 0 {
		cfg.QPS = qps
	}
	if burst > 0 {
		cfg.Burst = burst
	}
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
	return NewDependentLister(disc, md, kinds), nil
}

// Kinds implements DependentLister. Discovery runs on every call: a CRD of a listed
// kind installed since the last pass must be seen. A listed kind the hub does not
// serve has no objects to list and is left out.
func (h *hubDependents) Kinds(_ context.Context) ([]DependentKind, int, error) {
	// Aggregated discovery answers /api and /apis: two requests.
	calls := 2
	lists, err := discovery.ServerPreferredNamespacedResources(h.disc)
	if err != nil {
		// A group that failed discovery matters only if a listed kind may live in it.
		var failed *discovery.ErrGroupDiscoveryFailed
		if !errors.As(err, &failed) {
			return nil, calls, fmt.Errorf("discovering the hub's namespaced kinds: %w", err)
		}
		for gv := range failed.Groups {
			if slices.ContainsFunc(h.kinds, func(gk schema.GroupKind) bool { return gk.Group == gv.Group }) {
				return nil, calls, fmt.Errorf("discovering the hub's namespaced kinds: %w", err)
			}
		}
	}
	var out []DependentKind
	for _, list := range lists {
		gv, err := schema.ParseGroupVersion(list.GroupVersion)
		if err != nil {
			return nil, calls, fmt.Errorf("discovering the hub's namespaced kinds: %w", err)
		}
		for _, r := range list.APIResources {
			if strings.Contains(r.Name, "/") || !slices.Contains(h.kinds, gv.WithKind(r.Kind).GroupKind()) {
				continue
			}
			if !slices.Contains(r.Verbs, "list") {
				return nil, calls, fmt.Errorf("the hub serves %s without list: its dependents cannot be read", gv.WithKind(r.Kind).GroupKind())
			}
			out = append(out, DependentKind{Resource: gv.WithResource(r.Name), Kind: r.Kind})
		}
	}
	return out, calls, nil
}

// List implements DependentLister, by pages.
func (h *hubDependents) List(ctx context.Context, kind DependentKind, namespace string) ([]metav1.PartialObjectMetadata, int, error) {
	calls := 0
	opts := metav1.ListOptions{Limit: h.pageSize}
	var out []metav1.PartialObjectMetadata
	for {
		calls++
		page, err := h.meta.Resource(kind.Resource).Namespace(namespace).List(ctx, opts)
		if err != nil {
			return nil, calls, fmt.Errorf("listing %s in %s: %w", kind.Resource.GroupResource(), namespace, err)
		}
		// Every object is kept, owner or not: whether a dependent has another existing
		// owner is read from these same lists.
		for _, item := range page.Items {
			item.TypeMeta = metav1.TypeMeta{APIVersion: kind.Resource.GroupVersion().String(), Kind: kind.Kind}
			out = append(out, item)
		}
		if page.Continue == "" {
			return out, calls, nil
		}
		opts.Continue = page.Continue
	}
}

// dependentKind is the judgement of one dependent of an anchor.
type dependentKind int

const (
	// dependentShared: it has another existing owner, or is already being deleted: it
	// does not depend on this anchor alone.
	dependentShared dependentKind = iota
	// dependentOrphan: it hangs on this anchor alone and no live owner claims it; it goes
	// with the anchor, as the hub's garbage collector would judge any object whose only
	// owner is gone. Unlabelled dependents and those labelled for the anchor's own owner
	// are orphans unless claimed.
	dependentOrphan
	// dependentClaimed: it hangs on this anchor alone and a live owner of the same name,
	// mapping to its hub namespace, would write that kind and name: that owner must
	// re-attach it first.
	dependentClaimed
	// dependentForeign: it hangs on this anchor alone and its labels name an owner in
	// another project (or a cluster name that does not decode): not ours to judge.
	dependentForeign
	// dependentUnreadable: it hangs on this anchor alone and names an owner whose state
	// could not be read.
	dependentUnreadable
)

// ownerKey is an owner without its UID: what labels of a downstream object name.
type ownerKey struct{ Project, Group, Kind, Namespace, Name string }

func keyOf(o anchor.Owner) ownerKey {
	return ownerKey{Project: o.Project, Group: o.Group, Kind: o.Kind, Namespace: o.Namespace, Name: o.Name}
}

func (k ownerKey) owner(uid types.UID) anchor.Owner {
	return anchor.Owner{Project: k.Project, Group: k.Group, Kind: k.Kind, Namespace: k.Namespace, Name: k.Name, UID: uid}
}

func (k ownerKey) groupKind() schema.GroupKind { return schema.GroupKind{Group: k.Group, Kind: k.Kind} }

// otherOwner is what a live read said about an owner a dependent's labels name, when
// it is not the anchor's own owner.
type otherOwner struct {
	State ObjectState
	UID   types.UID
	// Namespace is the state of the owner's upstream namespace relative to the
	// dependent's hub namespace.
	Namespace NamespaceState
}

// ownOwner is what is known, just before the delete, of the anchor's own owner, for
// the dependents labelled for it.
type ownOwner struct {
	// Fresh is the owner read live again just before the delete (NotRead: not read, and
	// the proof alone decides).
	Fresh Observation
	// Sibling: another anchor with the same five labels lives in the same hub namespace:
	// the anchor of the owner recreated under the same name.
	Sibling bool
}

// dependentJudge holds what judging the dependents of one anchor depends on, besides
// each dependent.
type dependentJudge struct {
	// anchorUID is the anchor ConfigMap's own UID; owner is the owner it is named for,
	// whose absence proof proved.
	anchorUID types.UID
	owner     anchor.Owner
	proof     Reason
	// existing holds the UIDs of the objects of the hub namespace still there.
	existing map[types.UID]bool
	// other holds live reads of the owners, other than owner, that dependents name.
	other map[ownerKey]otherOwner
	own   ownOwner
	// writes says what a live owner would write (Options.Writes).
	writes map[schema.GroupKind][]HubWrite
}

// labelledOwner decodes the owner a dependent's labels name. unlabelled is true when
// it carries no cluster name at all; ok is false when the labels do not decode to an
// owner (foreign is then true if the cluster name names, or may name, another project
// than project).
func labelledOwner(labels map[string]string, project string) (key ownerKey, ok, unlabelled, foreign bool) {
	if o, err := anchor.Decode(placeholderName, labels); err == nil {
		return keyOf(o), true, false, o.Project != project
	}
	v, has := labels[anchor.LabelClusterName]
	if !has {
		return ownerKey{}, false, true, false
	}
	p, err := anchor.ProjectFromClusterName(v)
	return ownerKey{}, false, false, err != nil || p != project
}

// placeholderName stands in for an anchor name when only labels are decoded.
var placeholderName = anchor.Name("00000000-0000-0000-0000-000000000000")

// hangsAlone reports whether dep depends on the anchor with anchorUID alone: it holds a
// reference to it and no reference to another object known to exist. References to
// objects not in existing (cluster-scoped or unknown) are not counted as owners, so an
// unknown reference errs towards "alone", which never deletes a dependent that a
// judgement would keep: every dependent that hangs alone is judged.
func hangsAlone(dep *metav1.PartialObjectMetadata, anchorUID types.UID, existing map[types.UID]bool) (refers, alone bool) {
	alone = true
	for _, ref := range dep.OwnerReferences {
		if ref.UID == anchorUID {
			refers = true
			continue
		}
		if existing[ref.UID] {
			alone = false
		}
	}
	return refers, alone
}

// gkOf returns a listed dependent's group and kind.
func gkOf(dep *metav1.PartialObjectMetadata) schema.GroupKind {
	return dep.GroupVersionKind().GroupKind()
}

// judge decides what dep means for deleting the anchor (docs/design.md, No cascade into
// live objects).
func (j dependentJudge) judge(dep *metav1.PartialObjectMetadata) dependentKind {
	if dep.DeletionTimestamp != nil {
		return dependentShared
	}
	if _, alone := hangsAlone(dep, j.anchorUID, j.existing); !alone {
		return dependentShared
	}
	key, ok, unlabelled, foreign := labelledOwner(dep.Labels, j.owner.Project)
	switch {
	case foreign:
		return dependentForeign
	case unlabelled, !ok:
		// Nobody's labels: its only owner is this anchor, and nothing live can claim
		// it (the live path labels everything it writes).
		return dependentOrphan
	}
	if !wouldWrite(j.writes, key.groupKind(), key.Name, gkOf(dep), dep.Name) {
		// The owner its labels name would not write this kind and name: no reconcile
		// re-attaches it, so no claim can end.
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

// judgeOwn judges a dependent labelled for the anchor's own owner, which that owner
// would write.
func (j dependentJudge) judgeOwn() dependentKind {
	if j.own.Sibling {
		// The owner's current anchor is right here: it re-attaches the dependent.
		return dependentClaimed
	}
	nsProof := j.proof == ReasonNamespaceRecreated || j.proof == ReasonNamespaceGone
	switch j.own.Fresh.State {
	case NotRead:
		// A live object of that name with another UID, in the namespace this hub
		// namespace mirrors, is the owner that takes it over.
		if j.proof == ReasonReplaced {
			return dependentClaimed
		}
		return dependentOrphan
	case Absent:
		return dependentOrphan
	case Present:
		if j.own.Fresh.UID == j.owner.UID {
			// The owner read with the anchor's UID contradicts the proof: keep.
			return dependentUnreadable
		}
		// Recreated since, or still: unless absence was proven through the namespace
		// (a live object of that name then lives in a new namespace, which maps to
		// another hub namespace), it claims the dependent.
		if nsProof {
			return dependentOrphan
		}
		return dependentClaimed
	}
	return dependentUnreadable
}

// needsOwn reports whether any dependent that hangs on the anchor alone is labelled for
// the anchor's own owner, which would write it: the owner is then read again, live,
// just before the delete.
func (j dependentJudge) needsOwn(deps []*metav1.PartialObjectMetadata) bool {
	for _, dep := range deps {
		if dep.DeletionTimestamp != nil {
			continue
		}
		if _, alone := hangsAlone(dep, j.anchorUID, j.existing); !alone {
			continue
		}
		key, ok, _, _ := labelledOwner(dep.Labels, j.owner.Project)
		if ok && key == keyOf(j.owner) && wouldWrite(j.writes, key.groupKind(), key.Name, gkOf(dep), dep.Name) {
			return true
		}
	}
	return false
}

// otherOwnersToRead returns the owners, other than the anchor's own, that dependents
// hanging on the anchor alone name in their labels and would write them: judge needs
// their live state.
func (j dependentJudge) otherOwnersToRead(deps []*metav1.PartialObjectMetadata) []ownerKey {
	var out []ownerKey
	for _, dep := range deps {
		if dep.DeletionTimestamp != nil {
			continue
		}
		if _, alone := hangsAlone(dep, j.anchorUID, j.existing); !alone {
			continue
		}
		key, ok, _, foreign := labelledOwner(dep.Labels, j.owner.Project)
		if !ok || foreign || key == keyOf(j.owner) || slices.Contains(out, key) {
			continue
		}
		if !wouldWrite(j.writes, key.groupKind(), key.Name, gkOf(dep), dep.Name) {
			continue
		}
		out = append(out, key)
	}
	return out
}

// summarize judges every dependent of the anchor and returns the summary Decide reads,
// with the live owners that claim dependents (to be enqueued).
func (j dependentJudge) summarize(deps []*metav1.PartialObjectMetadata) (DependentsSummary, []anchor.Owner) {
	s := DependentsSummary{Total: len(deps)}
	var claimers []anchor.Owner
	for _, dep := range deps {
		switch j.judge(dep) {
		case dependentClaimed:
			s.Claimed++
			key, _, _, _ := labelledOwner(dep.Labels, j.owner.Project)
			claimer := key.owner(j.other[key].UID)
			if key == keyOf(j.owner) {
				// A reconcile is about the object that has the name now.
				claimer = key.owner("")
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

// dependentsIndex maps the UIDs of the objects in one hub namespace to what refers to
// them, records which UIDs exist, and which anchors each owner has there.
type dependentsIndex struct {
	existing map[types.UID]bool
	byOwner  map[types.UID][]*metav1.PartialObjectMetadata
	// anchors maps an owner to the UIDs of the anchors (ConfigMaps) it has here.
	anchors map[ownerKey][]types.UID
}

func indexDependents(objects []metav1.PartialObjectMetadata) dependentsIndex {
	idx := dependentsIndex{
		existing: make(map[types.UID]bool, len(objects)),
		byOwner:  map[types.UID][]*metav1.PartialObjectMetadata{},
		anchors:  map[ownerKey][]types.UID{},
	}
	for i := range objects {
		o := &objects[i]
		idx.existing[o.UID] = true
		for _, ref := range o.OwnerReferences {
			idx.byOwner[ref.UID] = append(idx.byOwner[ref.UID], o)
		}
		if gk := gkOf(o); gk.Group == "" && gk.Kind == "ConfigMap" && o.DeletionTimestamp == nil && anchor.IsAnchor(o) {
			if owner, err := anchor.Decode(o.Name, o.Labels); err == nil {
				idx.anchors[keyOf(owner)] = append(idx.anchors[keyOf(owner)], o.UID)
			}
		}
	}
	return idx
}

// sibling returns another anchor of owner's in this namespace than the one whose own
// UID is anchorUID, if any.
func (idx dependentsIndex) sibling(owner anchor.Owner, anchorUID types.UID) (types.UID, bool) {
	for _, uid := range idx.anchors[keyOf(owner)] {
		if uid != anchorUID && idx.existing[uid] {
			return uid, true
		}
	}
	return "", false
}

// forget removes an anchor about to be deleted from the index: what hangs on it and
// on another anchor judged later then hangs on that one alone, and is judged as such.
func (idx dependentsIndex) forget(uid types.UID) {
	delete(idx.existing, uid)
}

// dependentRef names a dependent in reports and Events.
func dependentRef(dep *metav1.PartialObjectMetadata) string {
	gk := dep.GroupVersionKind().GroupKind()
	return fmt.Sprintf("%s %s (uid %s)", gk.String(), dep.Name, dep.UID)
}
