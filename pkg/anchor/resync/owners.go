package resync

// Batched live reads of owners: one list per owner kind and upstream namespace instead
// of one GET per owner, for the kinds the owner's cache does not answer.

import (
	"context"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"anchorage/pkg/anchor"
)

// batchListMin is how many owners of one kind in one upstream namespace a pass must
// need to read live before it lists them instead of reading each: one owner is cheaper
// to GET than a list of its namespace.
const batchListMin = 2

// ownerListPage bounds each page of a batched owner list.
const ownerListPage = 500

// ownerBatch is the key of one batched list: an owner kind in an upstream namespace.
type ownerBatch struct {
	GK        schema.GroupKind
	Namespace string
}

// ownerList is the outcome of one batched list: the owners found, by name, when the
// list read every page (complete); otherwise the pass reads each owner with a GET.
type ownerList struct {
	complete bool
	byName   map[string]Observation
}

// batchedOwner returns what a batched list of owner's kind and namespace says of it,
// listing once per pass when enough suspects share them. ok is false when the owner is
// to be read with a GET (too few to batch, or the list could not be done). A name
// missing from a complete list is Absent: the list is a quorum read of the server, as
// strong as a GET's 404 for that name, and the proof still waits for ConfirmAfter.
func (p *pass) batchedOwner(ctx context.Context, owner anchor.Owner) (Observation, bool, error) {
	b := ownerBatch{GK: schema.GroupKind{Group: owner.Group, Kind: owner.Kind}, Namespace: owner.Namespace}
	l, listed := p.ownerLists[b]
	if !listed {
		if p.suspectsOf(b) < batchListMin {
			return Observation{}, false, nil
		}
		var err error
		if l, err = p.listOwners(ctx, b); err != nil {
			return Observation{}, false, err
		}
		p.ownerLists[b] = l
	}
	if !l.complete {
		return Observation{}, false, nil
	}
	if o, ok := l.byName[owner.Name]; ok {
		return o, true, nil
	}
	return Observation{State: Absent}, true, nil
}

// suspectsOf counts the anchors of the pass that still wait for a live read of an
// owner of b.
func (p *pass) suspectsOf(b ownerBatch) int {
	n := 0
	for _, it := range p.items {
		if it.verdict.Need != NeedNamespace && it.verdict.Need != NeedLive {
			continue
		}
		if it.owner.Group == b.GK.Group && it.owner.Kind == b.GK.Kind && it.owner.Namespace == b.Namespace {
			n++
		}
	}
	return n
}

// listOwners lists the metadata of every object of b's kind in b's namespace, live and
// by pages, each page rate-limited and in its own step. Only an abort is returned as an
// error: a failed list leaves the owners to GETs. A kind the plane does not let the
// manager list (403) is not listed again in this pass: its owners are read with GETs,
// which the plane's role grants.
func (p *pass) listOwners(ctx context.Context, b ownerBatch) (ownerList, error) {
	if p.unreachable || p.unlistable[b.GK] {
		return ownerList{}, nil
	}
	mapping, err := p.plane.Mapper.RESTMapping(b.GK)
	if err != nil || namespaced(mapping) != (b.Namespace != "") {
		// Not mapped, or the owner's namespace does not fit the kind's scope: a list
		// would not read what a GET reads; the GETs tell.
		return ownerList{}, nil
	}
	out := ownerList{byName: map[string]Observation{}}
	cont := ""
	for {
		if err := p.live(ctx); err != nil {
			return ownerList{}, err
		}
		var page *metav1.PartialObjectMetadataList
		var listErr error
		err := p.step(ctx, func(ctx context.Context, _ client.Client, _ client.Reader) error {
			rctx, cancel := context.WithTimeout(ctx, p.opts.LiveTimeout)
			defer cancel()
			page, listErr = listOwnerPage(rctx, p.plane.Live, mapping, b.Namespace, cont)
			p.rep.APICalls++
			p.noteRead(listErr)
			return nil
		})
		if err != nil {
			return ownerList{}, err
		}
		if listErr != nil {
			if apierrors.IsForbidden(listErr) || apierrors.IsMethodNotSupported(listErr) {
				p.unlistable[b.GK] = true
				p.log.V(1).Info("Owners of this kind cannot be listed on the plane; reading each", "kind", b.GK.String(), "error", listErr.Error())
			}
			return ownerList{}, nil
		}
		for i := range page.Items {
			out.byName[page.Items[i].Name] = observed(&page.Items[i])
		}
		if cont = page.Continue; cont == "" {
			out.complete = true
			return out, nil
		}
	}
}

// namespaced reports whether mapping's kind lives in namespaces.
func namespaced(mapping *meta.RESTMapping) bool {
	return mapping.Scope != nil && mapping.Scope.Name() == meta.RESTScopeNameNamespace
}

// listOwnerPage lists one page of owners. No resourceVersion is set: the API server
// answers from its storage (a quorum read), never from its watch cache.
func listOwnerPage(ctx context.Context, live client.Reader, mapping *meta.RESTMapping, namespace, cont string) (*metav1.PartialObjectMetadataList, error) {
	list := &metav1.PartialObjectMetadataList{}
	gvk := mapping.GroupVersionKind
	gvk.Kind += "List"
	list.SetGroupVersionKind(gvk)
	opts := []client.ListOption{client.InNamespace(namespace), client.Limit(ownerListPage)}
	if cont != "" {
		opts = append(opts, client.Continue(cont))
	}
	if err := live.List(ctx, list, opts...); err != nil {
		return nil, fmt.Errorf("listing %s in %s: %w", mapping.Resource.GroupResource(), namespace, err)
	}
	return list, nil
}

// ownerReadable reports whether the pass may read owners of gk live at all (configured
// and not refused in this pass), so that a batched list never reads a kind a GET would
// not.
func (p *pass) ownerReadable(gk schema.GroupKind) bool {
	if !slices.Contains(p.opts.LiveOwnerKinds, gk) {
		return false
	}
	_, refused := p.forbidden[gk]
	return !refused
}
