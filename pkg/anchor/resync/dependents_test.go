package resync

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"anchorage/pkg/anchor"
)

func TestJudgeDependent(t *testing.T) {
	owner := anchor.Owner{Project: "proj", Group: "gateway.networking.k8s.io", Kind: "Gateway", Namespace: "web", Name: "edge", UID: anchorUID}
	sibling := owner
	sibling.Kind, sibling.Name = "HTTPRoute", "edge-route"
	foreignProject := owner
	foreignProject.Project = "other"
	const liveOwnerUID = types.UID("11111111-2222-4333-8444-555555555555")
	// The anchor ConfigMap's own UID, unrelated to the owner UID in its name.
	const anchorObjUID = types.UID("99999999-8888-4777-8666-555555555555")
	anchorRef := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: anchor.Name(anchorUID), UID: anchorObjUID}
	dep := func(labels map[string]string, refs ...metav1.OwnerReference) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "edge", Namespace: "ns-x", Labels: labels, OwnerReferences: append([]metav1.OwnerReference{anchorRef}, refs...)}}
	}
	existing := map[types.UID]bool{liveOwnerUID: true}
	deleting := dep(owner.Labels())
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}

	cases := []struct {
		reason   string
		dep      *metav1.PartialObjectMetadata
		proof    Reason
		other    map[ownerKey]otherOwner
		want     dependentKind
		wantRead []ownerKey
	}{
		{"another existing owner keeps it alive: the anchor may go", dep(owner.Labels(), metav1.OwnerReference{UID: liveOwnerUID}), ReasonNotFound, nil, dependentShared, nil},
		{"a reference to an object not known to exist does not count as an owner", dep(owner.Labels(), metav1.OwnerReference{UID: otherUID}), ReasonNotFound, nil, dependentOrphan, nil},
		{"already being deleted", deleting, ReasonNotFound, nil, dependentShared, nil},
		{"its owner is gone: it goes with the anchor", dep(owner.Labels()), ReasonNotFound, nil, dependentOrphan, nil},
		{"its owner was recreated under the same name: claimed", dep(owner.Labels()), ReasonReplaced, nil, dependentClaimed, nil},
		{"its owner's namespace was recreated: the new owner maps elsewhere", dep(owner.Labels()), ReasonNamespaceRecreated, nil, dependentOrphan, nil},
		{"no labels: nobody can claim it, keep the anchor", dep(nil), ReasonNotFound, nil, dependentForeign, nil},
		{"labels of another project", dep(foreignProject.Labels()), ReasonNotFound, nil, dependentForeign, nil},
		{"labels of another owner that is gone", dep(sibling.Labels()), ReasonNotFound,
			map[ownerKey]otherOwner{keyOf(sibling): {State: Absent}}, dependentOrphan, []ownerKey{keyOf(sibling)}},
		{"labels of another owner, live in this hub namespace: claimed", dep(sibling.Labels()), ReasonNotFound,
			map[ownerKey]otherOwner{keyOf(sibling): {State: Present, UID: liveOwnerUID, Namespace: NamespaceMatches}}, dependentClaimed, []ownerKey{keyOf(sibling)}},
		{"labels of another owner, live in a recreated namespace", dep(sibling.Labels()), ReasonNotFound,
			map[ownerKey]otherOwner{keyOf(sibling): {State: Present, UID: liveOwnerUID, Namespace: NamespaceRecreated}}, dependentOrphan, []ownerKey{keyOf(sibling)}},
		{"labels of another owner that could not be read", dep(sibling.Labels()), ReasonNotFound,
			map[ownerKey]otherOwner{keyOf(sibling): {State: Failed}}, dependentUnreadable, []ownerKey{keyOf(sibling)}},
		{"labels of another owner not read at all", dep(sibling.Labels()), ReasonNotFound, nil, dependentUnreadable, []ownerKey{keyOf(sibling)}},
	}
	for _, tc := range cases {
		t.Run(tc.reason, func(t *testing.T) {
			if got := judgeDependent(tc.dep, anchorObjUID, owner, tc.proof, existing, tc.other); got != tc.want {
				t.Errorf("%s: judgeDependent() = %d, want %d", tc.reason, got, tc.want)
			}
			reads := otherOwnersToRead([]*metav1.PartialObjectMetadata{tc.dep}, anchorObjUID, owner, existing)
			if diff := cmp.Diff(tc.wantRead, reads); diff != "" {
				t.Errorf("%s: otherOwnersToRead(): -want +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestSummarizeDependentsEnqueuesClaimers(t *testing.T) {
	owner := anchor.Owner{Project: "proj", Group: "gateway.networking.k8s.io", Kind: "Gateway", Namespace: "web", Name: "edge", UID: anchorUID}
	const anchorObjUID = types.UID("99999999-8888-4777-8666-555555555555")
	ref := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: anchor.Name(anchorUID), UID: anchorObjUID}
	deps := []*metav1.PartialObjectMetadata{
		{ObjectMeta: metav1.ObjectMeta{Name: "edge", Labels: owner.Labels(), OwnerReferences: []metav1.OwnerReference{ref}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "edge-https", Labels: owner.Labels(), OwnerReferences: []metav1.OwnerReference{ref}}},
	}
	s, claimers := summarizeDependents(deps, anchorObjUID, owner, ReasonReplaced, nil, nil)
	if diff := cmp.Diff(DependentsSummary{Total: 2, Claimed: 2}, s); diff != "" {
		t.Errorf("summary: -want +got:\n%s", diff)
	}
	want := owner
	want.UID = ""
	if diff := cmp.Diff([]anchor.Owner{want}, claimers); diff != "" {
		t.Errorf("claimers, one per owner: -want +got:\n%s", diff)
	}
}

func TestNotFoundNames(t *testing.T) {
	gateways := schema.GroupResource{Group: "gateway.networking.k8s.io", Resource: "gateways"}
	cases := []struct {
		reason string
		err    error
		want   bool
	}{
		{"the API server's NotFound for the object", apierrors.NewNotFound(gateways, "edge"), true},
		{"a NotFound for another object", apierrors.NewNotFound(gateways, "other"), false},
		{"a NotFound for another resource of that name", apierrors.NewNotFound(schema.GroupResource{Group: "gateway.networking.k8s.io", Resource: "httproutes"}, "edge"), false},
		{"a 404 for a kind that is not served, through a client that names what it asked for",
			apierrors.NewGenericServerResponse(404, "GET", gateways, "edge", "404 page not found", 0, true), false},
		{"a 404 for a kind that is not served, through the dynamic or metadata client",
			apierrors.NewGenericServerResponse(404, "GET", schema.GroupResource{}, "", "404 page not found", 0, true), false},
		{"forbidden", apierrors.NewForbidden(gateways, "edge", nil), false},
		{"not an API error", errNotAPI{}, false},
	}
	for _, tc := range cases {
		if got := anchor.NotFoundProvesAbsence(tc.err, gateways, "edge"); got != tc.want {
			t.Errorf("%s: anchor.NotFoundProvesAbsence() = %t, want %t", tc.reason, got, tc.want)
		}
	}
}

type errNotAPI struct{}

func (errNotAPI) Error() string { return "connection refused" }
