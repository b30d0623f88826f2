package resync

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"anchorage/pkg/anchor"
)

// AnchorSource lists the anchors a pass examines: the metadata of ConfigMaps carrying
// LabelClusterName, not all of them anchors (the pass checks).
type AnchorSource interface {
	// ProjectAnchors returns the items whose LabelClusterName decodes to project.
	ProjectAnchors(ctx context.Context, project string) ([]metav1.PartialObjectMetadata, error)
	// Named returns the items named name, in any namespace and of any project.
	Named(ctx context.Context, name string) ([]metav1.PartialObjectMetadata, error)
}

// listedAnchors is an AnchorSource over one list of the hub, for the one-shot sweep.
type listedAnchors struct {
	byProject map[string][]metav1.PartialObjectMetadata
	byName    map[string][]metav1.PartialObjectMetadata
}

// listAnchors lists, live and by pages, the metadata of every ConfigMap carrying
// LabelClusterName.
func listAnchors(ctx context.Context, hub client.Reader) (*listedAnchors, error) {
	out := &listedAnchors{byProject: map[string][]metav1.PartialObjectMetadata{}, byName: map[string][]metav1.PartialObjectMetadata{}}
	for cont := ""; ; {
		list := coreMetaList("ConfigMapList")
		if err := hub.List(ctx, list, client.HasLabels{anchor.LabelClusterName}, client.Limit(listPage), client.Continue(cont)); err != nil {
			return nil, fmt.Errorf("listing anchors on the hub: %w", err)
		}
		for _, item := range list.Items {
			p := projectOfLabels(item.Labels)
			out.byProject[p] = append(out.byProject[p], item)
			out.byName[item.Name] = append(out.byName[item.Name], item)
		}
		if cont = list.Continue; cont == "" {
			return out, nil
		}
	}
}

func (l *listedAnchors) ProjectAnchors(_ context.Context, project string) ([]metav1.PartialObjectMetadata, error) {
	return l.byProject[project], nil
}

func (l *listedAnchors) Named(_ context.Context, name string) ([]metav1.PartialObjectMetadata, error) {
	return l.byName[name], nil
}

// projectOfLabels is the project an anchor's labels name, "" when they name none.
func projectOfLabels(labels map[string]string) string {
	p, err := anchor.ProjectFromClusterName(labels[anchor.LabelClusterName])
	if err != nil {
		return ""
	}
	return p
}

// coreMeta and coreMetaList are empty metadata-only objects of a core kind.
func coreMeta(kind string) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: kind}}
}

func coreMetaList(kind string) *metav1.PartialObjectMetadataList {
	return &metav1.PartialObjectMetadataList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: kind}}
}
