package resync

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"anchorage/pkg/anchor"
)

// batchListMin is how many owners of one kind and namespace a pass lists instead of GETs.
const batchListMin = 2

// ownerBatch is the key of one batched list: an owner kind in an upstream namespace.
type ownerBatch struct {
	GK        schema.GroupKind
	Namespace string
}

// ownerList is one batched list's owners by name; not complete: read each with a GET.
type ownerList struct {
	complete bool
	byName   map[string]Observation
}

// batchedOwner returns what a batched list of owner's kind and namespace says of it,
// listed once per pass; ok is false when a GET must read it. A name missing from a
// complete list is Absent (docs/design.md, What a pass does).
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

// suspectsOf counts the anchors still waiting for a live read of an owner of b.
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

// listOwners lists b's objects live, by pages, each rate-limited in its own step. Only
// an abort is an error: a failed list leaves the owners to GETs, and a kind refused
// (403) is not listed again in the pass.
func (p *pass) listOwners(ctx context.Context, b ownerBatch) (ownerList, error) {
	if p.unreachable || p.unlistable[b.GK] {
		return ownerList{}, nil
	}
	mapping, err := p.plane.Mapper.RESTMapping(b.GK)
	if err != nil || (mapping.Scope != nil && mapping.Scope.Name() == meta.RESTScopeNameNamespace) != (b.Namespace != "") {
		// Unmapped, or a scope that does not fit: the GETs tell.
		return ownerList{}, nil
	}
	out := ownerList{byName: map[string]Observation{}}
	gvk := mapping.GroupVersionKind
	gvk.Kind += "List"
	for cont := ""; ; {
		page := &metav1.PartialObjectMetadataList{}
		page.SetGroupVersionKind(gvk)
		var listErr error
		err := p.liveRead(ctx, func(ctx context.Context) error {
			// No resourceVersion: a quorum read, never the watch cache.
			if err := p.plane.Live.List(ctx, page, client.InNamespace(b.Namespace), client.Limit(listPage), client.Continue(cont)); err != nil {
				listErr = fmt.Errorf("listing %s in %s: %w", mapping.Resource.GroupResource(), b.Namespace, err)
			}
			return listErr
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
