package resync

import (
	"context"
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
// could hang on an anchor: every namespaced kind the hub serves. It is called in two
// steps so that each request of a pass can run in its own admission step: Kinds once
// per pass, then List per kind and namespace. calls is the number of API requests made,
// for the pass's accounting.
type DependentLister interface {
	// Kinds returns the namespaced kinds the hub serves and can list. Partial discovery
	// is an error: a kind that could not be discovered could hold a live dependent.
	Kinds(ctx context.Context) (kinds []DependentKind, calls int, err error)
	// List returns the metadata of every object of kind in namespace.
	List(ctx context.Context, kind DependentKind, namespace string) (objects []metav1.PartialObjectMetadata, calls int, err error)
}

// DependentKind is a kind the hub serves, as listed for dependents.
type DependentKind struct {
	Resource schema.GroupVersionResource
	Kind     string
}

// skippedDependentResources are never listed: Events are not workloads, a cascade into
// them takes no traffic down, and a busy namespace holds more of them than of anything
// else.
var skippedDependentResources = map[schema.GroupResource]bool{
	{Group: "", Resource: "events"}:              true,
	{Group: "events.k8s.io", Resource: "events"}: true,
}

// hubDependents lists through discovery and the metadata API.
type hubDependents struct {
	disc discovery.DiscoveryInterface
	meta metadata.Interface
	// pageSize bounds each list response.
	pageSize int64
}

// NewDependentLister returns a DependentLister over discovery and the metadata API.
func NewDependentLister(disc discovery.DiscoveryInterface, meta metadata.Interface) DependentLister {
	return &hubDependents{disc: disc, meta: meta, pageSize: 500}
}

// NewHubDependentLister returns a DependentLister of the hub at cfg (through hc when
// not nil), with a client-side rate limit of its own (qps, burst; the defaults of
// Options when zero). Deprecation warnings are dropped: listing every served kind
// lists the deprecated ones too, on every pass.
func NewHubDependentLister(cfg *rest.Config, hc *http.Client, qps float32, burst int) (DependentLister, error) {
	d := Options{}.WithDefaults()
	cfg = rest.CopyConfig(cfg)
	cfg.WarningHandler = rest.NoWarnings{}
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
	return NewDependentLister(disc, md), nil
}

// Kinds implements DependentLister. Discovery runs on every call: a kind installed
// since the last pass must be seen.
func (h *hubDependents) Kinds(_ context.Context) ([]DependentKind, int, error) {
	// Aggregated discovery answers /api and /apis: two requests.
	calls := 2
	lists, err := discovery.ServerPreferredNamespacedResources(h.disc)
	if err != nil {
		return nil, calls, fmt.Errorf("discovering the hub's namespaced kinds: %w", err)
	}
	var out []DependentKind
	for _, list := range lists {
		gv, err := schema.ParseGroupVersion(list.GroupVersion)
		if err != nil {
			return nil, calls, fmt.Errorf("discovering the hub's namespaced kinds: %w", err)
		}
		for _, r := range list.APIResources {
			if strings.Contains(r.Name, "/") || !slices.Contains(r.Verbs, "list") || skippedDependentResources[gv.WithResource(r.Name).GroupResource()] {
				continue
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
	// with the anchor, as intended.
	dependentOrphan
	// dependentClaimed: it hangs on this anchor alone and a live owner of the same name
	// maps to its hub namespace: that owner must re-attach it first.
	dependentClaimed
	// dependentForeign: it hangs on this anchor alone and its labels name no owner of
	// this project.
	dependentForeign
	// dependentUnreadable: it hangs on this anchor alone and names another owner whose
	// state could not be read.
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

// otherOwner is what a live read said about an owner a dependent's labels name, when
// it is not the anchor's own owner.
type otherOwner struct {
	State ObjectState
	UID   types.UID
	// Namespace is the state of the owner's upstream namespace relative to the
	// dependent's hub namespace.
	Namespace NamespaceState
}

// dependentOwnerKey decodes the owner a dependent's labels name. ok is false for labels
// that do not decode.
func dependentOwnerKey(labels map[string]string) (ownerKey, bool) {
	o, err := anchor.Decode(placeholderName, labels)
	if err != nil {
		return ownerKey{}, false
	}
	return keyOf(o), true
}

// placeholderName stands in for an anchor name when only labels are decoded.
var placeholderName = anchor.Name("00000000-0000-0000-0000-000000000000")

// hangsAlone reports whether dep depends on the anchor with anchorUID alone: it holds a
// reference to it and no reference to another object known to exist. References to
// objects not in existing (cluster-scoped or unknown) are not counted as owners, so an
// unknown reference errs towards "alone", which only ever keeps the anchor longer.
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

// judgeDependent decides what dep means for deleting the anchor (the ConfigMap whose
// own UID is anchorUID) of anchorOwner, whose absence was proven by proof. other holds
// live reads of owners that dependents' labels name when it is not anchorOwner (the
// caller reads those named by otherOwnersToRead).
func judgeDependent(dep *metav1.PartialObjectMetadata, anchorUID types.UID, anchorOwner anchor.Owner, proof Reason, existing map[types.UID]bool, other map[ownerKey]otherOwner) dependentKind {
	if dep.DeletionTimestamp != nil {
		return dependentShared
	}
	if _, alone := hangsAlone(dep, anchorUID, existing); !alone {
		return dependentShared
	}
	key, ok := dependentOwnerKey(dep.Labels)
	if !ok || key.Project != anchorOwner.Project {
		return dependentForeign
	}
	if key == keyOf(anchorOwner) {
		// The anchor's own owner: a live object of that name with another UID, in the
		// namespace this hub namespace mirrors, is the owner that takes it over. Absence
		// proven through the namespace means any live object of that name lives in a new
		// namespace, which maps to another hub namespace: it cannot claim this one.
		if proof == ReasonReplaced {
			return dependentClaimed
		}
		return dependentOrphan
	}
	o, ok := other[key]
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

// otherOwnersToRead returns the owners, other than anchorOwner, that dependents hanging
// on the anchor (whose own UID is anchorUID) alone name in their labels: judgeDependent
// needs their live state.
func otherOwnersToRead(deps []*metav1.PartialObjectMetadata, anchorUID types.UID, anchorOwner anchor.Owner, existing map[types.UID]bool) []ownerKey {
	var out []ownerKey
	for _, dep := range deps {
		if dep.DeletionTimestamp != nil {
			continue
		}
		if _, alone := hangsAlone(dep, anchorUID, existing); !alone {
			continue
		}
		key, ok := dependentOwnerKey(dep.Labels)
		if !ok || key.Project != anchorOwner.Project || key == keyOf(anchorOwner) || slices.Contains(out, key) {
			continue
		}
		out = append(out, key)
	}
	return out
}

// summarizeDependents judges every dependent of the anchor and returns the summary
// Decide reads, with the live owners that claim dependents (to be enqueued).
func summarizeDependents(deps []*metav1.PartialObjectMetadata, anchorUID types.UID, anchorOwner anchor.Owner, proof Reason, existing map[types.UID]bool, other map[ownerKey]otherOwner) (DependentsSummary, []anchor.Owner) {
	s := DependentsSummary{Total: len(deps)}
	var claimers []anchor.Owner
	for _, dep := range deps {
		switch judgeDependent(dep, anchorUID, anchorOwner, proof, existing, other) {
		case dependentClaimed:
			s.Claimed++
			key, _ := dependentOwnerKey(dep.Labels)
			claimer := key.owner(other[key].UID)
			if key == keyOf(anchorOwner) {
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
// them, and records which UIDs exist.
type dependentsIndex struct {
	existing map[types.UID]bool
	byOwner  map[types.UID][]*metav1.PartialObjectMetadata
}

func indexDependents(objects []metav1.PartialObjectMetadata) dependentsIndex {
	idx := dependentsIndex{existing: make(map[types.UID]bool, len(objects)), byOwner: map[types.UID][]*metav1.PartialObjectMetadata{}}
	for i := range objects {
		o := &objects[i]
		idx.existing[o.UID] = true
		for _, ref := range o.OwnerReferences {
			idx.byOwner[ref.UID] = append(idx.byOwner[ref.UID], o)
		}
	}
	return idx
}

// dependentRef names a dependent in reports and Events.
func dependentRef(dep *metav1.PartialObjectMetadata) string {
	gk := dep.GroupVersionKind().GroupKind()
	return fmt.Sprintf("%s %s (uid %s)", gk.String(), dep.Name, dep.UID)
}
