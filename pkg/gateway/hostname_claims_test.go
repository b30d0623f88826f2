package gateway

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"anchorage/pkg/anchor"
)

func TestClaimantHolds(t *testing.T) {
	who := claimant{project: "acme", namespace: "team", name: "web"}
	claim := func(labels map[string]string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a.example.com", Labels: labels}}
	}
	cases := []struct {
		reason string
		claim  *corev1.ConfigMap
		want   bool
	}{
		{"written by this manager", claim(who.labels()), true},
		{"the previous manager's legacy cluster label", claim(map[string]string{anchor.LabelClusterName: "cluster-_acme", anchor.LabelNamespace: "team", anchor.LabelName: "web"}), true},
		{"another project's Gateway of the same namespace and name", claim(map[string]string{anchor.LabelClusterName: "cluster-evil", anchor.LabelNamespace: "team", anchor.LabelName: "web"}), false},
		{"another Gateway of the project", claim(map[string]string{anchor.LabelClusterName: "cluster-acme", anchor.LabelNamespace: "team", anchor.LabelName: "api"}), false},
		{"another namespace", claim(map[string]string{anchor.LabelClusterName: "cluster-acme", anchor.LabelNamespace: "other", anchor.LabelName: "web"}), false},
		{"no labels (written by hand)", claim(nil), false},
		{"an undecodable cluster label", claim(map[string]string{anchor.LabelClusterName: "acme", anchor.LabelNamespace: "team", anchor.LabelName: "web"}), false},
	}
	for _, tc := range cases {
		if got := who.holds(tc.claim); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.reason, got, tc.want)
		}
	}
}

// Only listeners whose hostname is held (and those without one) reach the hub; a
// wildcard is never claimable.
func TestProgrammableListeners(t *testing.T) {
	host := func(h string) *gatewayv1.Hostname { return ptr.To(gatewayv1.Hostname(h)) }
	gw := &gatewayv1.Gateway{Spec: gatewayv1.GatewaySpec{Listeners: []gatewayv1.Listener{
		{Name: "http"},
		{Name: "https-a", Hostname: host("a.example.com")},
		{Name: "https-b", Hostname: host("b.example.com")},
		{Name: "https-wild", Hostname: host("*.example.com")},
	}}}
	res := refusedHostnames{"b.example.com": {ReasonHostnamesInUse, "held"}, "*.example.com": {ReasonHostnamesInUse, "wildcard"}}
	var names []string
	for _, l := range res.programmable(gw).Spec.Listeners {
		names = append(names, string(l.Name))
	}
	if want := []string{"http", "https-a"}; !slices.Equal(names, want) {
		t.Errorf("programmable listeners %v, want %v", names, want)
	}
	if len(gw.Spec.Listeners) != 4 {
		t.Errorf("the upstream Gateway was changed: %v", gw.Spec.Listeners)
	}
	for h, want := range map[gatewayv1.Hostname]bool{"a.example.com": true, "*.example.com": false, "*": false, "": false} {
		if got := claimable(h); got != want {
			t.Errorf("claimable(%q) = %v, want %v", h, got, want)
		}
	}
}
