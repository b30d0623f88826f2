package gateway

import (
	"errors"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"anchorage/pkg/anchor"
)

func TestNotLabelledForAnotherOwner(t *testing.T) {
	owner := anchor.Owner{Project: "proj", Group: gatewayv1.GroupName, Kind: "Gateway", Namespace: "team", Name: "web", UID: ownerUID}
	with := func(k, v string) map[string]string {
		l := owner.Labels()
		l[k] = v
		return l
	}
	cases := []struct {
		reason string
		labels map[string]string
		ok     bool
	}{
		{"no labels (written before they existed, or by hand)", nil, true},
		{"the owner's labels", owner.Labels(), true},
		{"legacy spelling of the same project", with(anchor.LabelClusterName, "cluster-_proj"), true},
		{"another project", with(anchor.LabelClusterName, "cluster-other"), false},
		{"another project, in the legacy spelling", with(anchor.LabelClusterName, "cluster-_other"), false},
		{"a project of an organisation, named like the owner's", with(anchor.LabelClusterName, "cluster-org_proj"), false},
		{"a project whose name starts with the owner's", with(anchor.LabelClusterName, "cluster-proj2"), false},
		{"the owner's project in another case", with(anchor.LabelClusterName, "cluster-PROJ"), false},
		{"another name", with(anchor.LabelName, "api"), false},
		{"another namespace", with(anchor.LabelNamespace, "other-team"), false},
		{"another kind", with(anchor.LabelKind, "HTTPRoute"), false},
		{"another group", with(anchor.LabelGroup, "networking.datumapis.com"), false},
		{"an empty name", with(anchor.LabelName, ""), false},
		{"an undecodable project", with(anchor.LabelClusterName, "nope"), false},
		{"an empty project", with(anchor.LabelClusterName, ""), false},
	}
	for _, tc := range cases {
		err := notLabelledForAnotherOwner(&gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Labels: tc.labels}}, owner)
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, anchor.ErrForeign)) {
			t.Errorf("%s: got %v, want ok=%v (or ErrForeign)", tc.reason, err, tc.ok)
		}
	}
}
