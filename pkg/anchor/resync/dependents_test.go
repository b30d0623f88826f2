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
	gateway := metav1.TypeMeta{APIVersion: "gateway.networking.k8s.io/v1", Kind: "Gateway"}
	route := metav1.TypeMeta{APIVersion: "gateway.networking.k8s.io/v1", Kind: "HTTPRoute"}
	certificate := metav1.TypeMeta{APIVersion: "cert-manager.io/v1", Kind: "Certificate"}
	obj := func(tm metav1.TypeMeta, name string, labels map[string]string, refs ...metav1.OwnerReference) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{TypeMeta: tm, ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns-x", Labels: labels, OwnerReferences: append([]metav1.OwnerReference{anchorRef}, refs...)}}
	}
	dep := func(labels map[string]string, refs ...metav1.OwnerReference) *metav1.PartialObjectMetadata {
		return obj(gateway, "edge", labels, refs...)
	}
	routeDep := obj(route, "edge-route", sibling.Labels())
	existing := map[types.UID]bool{liveOwnerUID: true}
	deleting := dep(owner.Labels())
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	ownCluster := map[string]string{anchor.LabelClusterName: anchor.ClusterNameValue("proj")}
	otherCluster := map[string]string{anchor.LabelClusterName: anchor.ClusterNameValue("other")}
	replacedNow := ownOwner{Fresh: Observation{State: Present, UID: liveOwnerUID}}
	goneNow := ownOwner{Fresh: Observation{State: Absent}}

	cases := []struct {
		reason   string
		dep      *metav1.PartialObjectMetadata
		proof    Reason
		other    map[anchor.Owner]otherOwner
		own      ownOwner
		want     dependentKind
		wantRead []anchor.Owner
	}{
		{"another existing owner keeps it alive: the anchor may go", dep(owner.Labels(), metav1.OwnerReference{UID: liveOwnerUID}), ReasonNotFound, nil, ownOwner{}, dependentShared, nil},
		{"a reference to an object not known to exist does not count as an owner", dep(owner.Labels(), metav1.OwnerReference{UID: otherUID}), ReasonNotFound, nil, ownOwner{}, dependentOrphan, nil},
		{"already being deleted", deleting, ReasonNotFound, nil, ownOwner{}, dependentShared, nil},
		{"its owner is gone: it goes with the anchor", dep(owner.Labels()), ReasonNotFound, nil, ownOwner{}, dependentOrphan, nil},
		{"its owner was recreated under the same name: claimed", dep(owner.Labels()), ReasonReplaced, nil, ownOwner{}, dependentClaimed, nil},
		{"its owner's namespace was recreated: the new owner maps elsewhere", dep(owner.Labels()), ReasonNamespaceRecreated, nil, ownOwner{}, dependentOrphan, nil},
		{"no labels: its only owner is gone, it goes with the anchor (as the garbage collector would judge it)", dep(nil), ReasonNotFound, nil, ownOwner{}, dependentOrphan, nil},
		{"only this project's cluster name: ours, and nothing live claims it", dep(ownCluster), ReasonNotFound, nil, ownOwner{}, dependentOrphan, nil},
		{"labels of another project", dep(foreignProject.Labels()), ReasonNotFound, nil, ownOwner{}, dependentForeign, nil},
		{"only another project's cluster name", dep(otherCluster), ReasonNotFound, nil, ownOwner{}, dependentForeign, nil},
		{"a cluster name that does not decode is not ours to judge", dep(map[string]string{anchor.LabelClusterName: "cluster-_a_b"}), ReasonNotFound, nil, ownOwner{}, dependentForeign, nil},
		{"labels of another owner that is gone", routeDep, ReasonNotFound,
			map[anchor.Owner]otherOwner{keyOf(sibling): {State: Absent}}, ownOwner{}, dependentOrphan, []anchor.Owner{keyOf(sibling)}},
		{"labels of another owner, live in this hub namespace: claimed", routeDep, ReasonNotFound,
			map[anchor.Owner]otherOwner{keyOf(sibling): {State: Present, UID: liveOwnerUID, Namespace: NamespaceMatches}}, ownOwner{}, dependentClaimed, []anchor.Owner{keyOf(sibling)}},
		{"labels of another owner, live in a recreated namespace", routeDep, ReasonNotFound,
			map[anchor.Owner]otherOwner{keyOf(sibling): {State: Present, UID: liveOwnerUID, Namespace: NamespaceRecreated}}, ownOwner{}, dependentOrphan, []anchor.Owner{keyOf(sibling)}},
		{"labels of another owner that could not be read", routeDep, ReasonNotFound,
			map[anchor.Owner]otherOwner{keyOf(sibling): {State: Failed}}, ownOwner{}, dependentUnreadable, []anchor.Owner{keyOf(sibling)}},
		{"labels of another owner not read at all", routeDep, ReasonNotFound, nil, ownOwner{}, dependentUnreadable, []anchor.Owner{keyOf(sibling)}},
		// Claims that end: only an owner that would write that kind and name claims.
		{"labelled for another live owner that would not write that kind: nothing re-attaches it", obj(gateway, "edge-route", sibling.Labels()), ReasonNotFound,
			map[anchor.Owner]otherOwner{keyOf(sibling): {State: Present, UID: liveOwnerUID, Namespace: NamespaceMatches}}, ownOwner{}, dependentOrphan, nil},
		{"a Certificate <gateway>-<listener> of a recreated Gateway: claimed", obj(certificate, "edge-https-a.example", owner.Labels()), ReasonReplaced, nil, ownOwner{}, dependentClaimed, nil},
		{"a Certificate not named for a listener of that Gateway", obj(certificate, "other-https", owner.Labels()), ReasonReplaced, nil, ownOwner{}, dependentOrphan, nil},
		{"a kind the owner never writes, labelled for it", obj(route, "edge", owner.Labels()), ReasonReplaced, nil, ownOwner{}, dependentOrphan, nil},
		// Fresh proof at the moment of deletion.
		{"proven gone, but recreated since (read again just before the delete): claimed", dep(owner.Labels()), ReasonNotFound, nil, replacedNow, dependentClaimed, nil},
		{"proven replaced, gone by the delete: nothing claims it", dep(owner.Labels()), ReasonReplaced, nil, goneNow, dependentOrphan, nil},
		{"proven through its namespace: an owner of that name now lives elsewhere", dep(owner.Labels()), ReasonNamespaceGone, nil, replacedNow, dependentOrphan, nil},
		{"the owner read again could not be read", dep(owner.Labels()), ReasonNotFound, nil, ownOwner{Fresh: Observation{State: Failed}}, dependentUnreadable, nil},
		{"the owner read again with the anchor's own UID contradicts the proof", dep(owner.Labels()), ReasonNotFound, nil, ownOwner{Fresh: Observation{State: Present, UID: anchorUID}}, dependentUnreadable, nil},
		{"a sibling anchor of the same owner in this hub namespace: claimed", dep(owner.Labels()), ReasonNotFound, nil, ownOwner{Sibling: true, Fresh: Observation{State: Absent}}, dependentClaimed, nil},
	}
	for _, tc := range cases {
		t.Run(tc.reason, func(t *testing.T) {
			j := dependentJudge{anchorUID: anchorObjUID, owner: owner, proof: tc.proof, existing: existing, other: tc.other, own: tc.own, writes: DefaultHubWrites}
			if got := j.judge(tc.dep); got != tc.want {
				t.Errorf("%s: judge() = %d, want %d", tc.reason, got, tc.want)
			}
			reads := j.otherOwnersToRead([]*metav1.PartialObjectMetadata{tc.dep})
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
		{TypeMeta: metav1.TypeMeta{APIVersion: "gateway.networking.k8s.io/v1", Kind: "Gateway"}, ObjectMeta: metav1.ObjectMeta{Name: "edge", Labels: owner.Labels(), OwnerReferences: []metav1.OwnerReference{ref}}},
		{TypeMeta: metav1.TypeMeta{APIVersion: "cert-manager.io/v1", Kind: "Certificate"}, ObjectMeta: metav1.ObjectMeta{Name: "edge-https", Labels: owner.Labels(), OwnerReferences: []metav1.OwnerReference{ref}}},
	}
	j := dependentJudge{anchorUID: anchorObjUID, owner: owner, proof: ReasonReplaced, writes: DefaultHubWrites}
	s, claimers := j.summarize(deps)
	if diff := cmp.Diff(DependentsSummary{Total: 2, Claimed: 2}, s); diff != "" {
		t.Errorf("summary: -want +got:\n%s", diff)
	}
	want := owner
	want.UID = ""
	if diff := cmp.Diff([]anchor.Owner{want}, claimers); diff != "" {
		t.Errorf("claimers, one per owner: -want +got:\n%s", diff)
	}
}

// The index forgets an anchor as it is deleted, so what hung on it and on
// another anchor is judged as hanging on the other alone; and it finds sibling anchors.
func TestDependentsIndexForgetsAndFindsSiblings(t *testing.T) {
	owner := anchor.Owner{Project: "proj", Kind: "ConfigMap", Namespace: "web", Name: "edge", UID: anchorUID}
	newer := owner
	newer.UID = otherUID
	cm := metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}
	a := metav1.PartialObjectMetadata{TypeMeta: cm, ObjectMeta: metav1.ObjectMeta{Name: anchor.Name(owner.UID), Namespace: "ns-00000000-0000-0000-0000-000000000001", UID: "a", Labels: owner.Labels()}}
	b := metav1.PartialObjectMetadata{TypeMeta: cm, ObjectMeta: metav1.ObjectMeta{Name: anchor.Name(newer.UID), Namespace: a.Namespace, UID: "b", Labels: newer.Labels()}}
	foreign := owner
	foreign.Project = "other"
	x := metav1.PartialObjectMetadata{TypeMeta: cm, ObjectMeta: metav1.ObjectMeta{Name: "legacy", Namespace: a.Namespace, UID: "x", Labels: foreign.Labels(),
		OwnerReferences: []metav1.OwnerReference{{UID: "a"}, {UID: "b"}}}}
	idx := indexDependents([]metav1.PartialObjectMetadata{a, b, x})
	if uid, ok := idx.sibling(owner, "a"); !ok || uid != "b" {
		t.Errorf("sibling of a: %q, %t; want b", uid, ok)
	}
	judge := func(anchorObj types.UID) dependentKind {
		return dependentJudge{anchorUID: anchorObj, owner: owner, proof: ReasonNotFound, existing: idx.existing, writes: DefaultHubWrites}.judge(idx.byOwner[anchorObj][0])
	}
	if got := judge("b"); got != dependentShared {
		t.Errorf("before a is deleted, x is shared: got %d", got)
	}
	idx.forget("a")
	if got := judge("b"); got != dependentForeign {
		t.Errorf("once a is deleted, x hangs on b alone and is another project's: got %d", got)
	}
	if _, ok := idx.sibling(newer, "b"); ok {
		t.Errorf("a forgotten anchor is no sibling")
	}
}

func TestWouldWrite(t *testing.T) {
	gw := schema.GroupKind{Group: "gateway.networking.k8s.io", Kind: "Gateway"}
	route := schema.GroupKind{Group: "gateway.networking.k8s.io", Kind: "HTTPRoute"}
	cert := schema.GroupKind{Group: "cert-manager.io", Kind: "Certificate"}
	proxy := schema.GroupKind{Group: "networking.datumapis.com", Kind: "HTTPProxy"}
	cases := []struct {
		owner schema.GroupKind
		name  string
		gk    schema.GroupKind
		dep   string
		want  bool
	}{
		{gw, "edge", gw, "edge", true},
		{gw, "edge", gw, "edge2", false},
		{gw, "edge", cert, "edge-https-a.example", true},
		{gw, "edge", cert, "edge-", false},
		{gw, "edge", cert, "edge", false},
		{gw, "edge", route, "edge", false},
		{route, "edge", route, "edge", true},
		{route, "edge", cert, "edge-x", false},
		{proxy, "edge", gw, "edge", false},
		// A backend object's name carries its route's UID: a live route of the same name
		// never writes the one a stale anchor holds.
		{route, "edge", schema.GroupKind{Kind: "Service"}, "route-6f1c8f4e-93b0-4d2c-9d53-2c8f5a7e1b11-rule-0-backendref-0", false},
		{route, "edge", schema.GroupKind{Group: "discovery.k8s.io", Kind: "EndpointSlice"}, "edge", false},
		{schema.GroupKind{Kind: "ConfigMap"}, "edge", schema.GroupKind{Kind: "ConfigMap"}, "edge", false},
	}
	for _, tc := range cases {
		if got := wouldWrite(DefaultHubWrites, tc.owner, tc.name, tc.gk, tc.dep); got != tc.want {
			t.Errorf("wouldWrite(%s %s, %s %s) = %t, want %t", tc.owner, tc.name, tc.gk, tc.dep, got, tc.want)
		}
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
