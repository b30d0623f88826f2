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
	for h, want := range map[gatewayv1.Hostname]bool{"a.example.com": true, "*.example.com": false, "*": false, "": false,
		"*.": false, "**.example.com": false, "*example.com": false, "a.*.example.com": false, "example.*": false, "a.example.com*": false} {
		if got := claimable(h); got != want {
			t.Errorf("claimable(%q) = %v, want %v", h, got, want)
		}
	}
}

func TestClaimsReleasedAfterAFailedWrite(t *testing.T) {
	cm := func(host string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: host}}
	}
	claims := func(hosts ...string) map[string]*corev1.ConfigMap {
		out := map[string]*corev1.ConfigMap{}
		for _, h := range hosts {
			out[h] = cm(h)
		}
		return out
	}
	serving := func(hosts ...string) *gatewayv1.Gateway {
		gw := &gatewayv1.Gateway{}
		for _, h := range hosts {
			gw.Spec.Listeners = append(gw.Spec.Listeners, gatewayv1.Listener{Name: gatewayv1.SectionName(h), Hostname: ptr.To(gatewayv1.Hostname(h))})
		}
		return gw
	}
	for _, tc := range []struct {
		name        string
		held, taken map[string]*corev1.ConfigMap
		serving     *gatewayv1.Gateway
		released    []string
	}{
		{"first write refused: everything taken goes", nil, claims("a", "b"), nil, []string{"a", "b"}},
		{"an update refused: what the hub still serves stays", claims("a"), claims("b", "c"), serving("a"), []string{"b", "c"}},
		{"a claim left by an earlier failure that nothing serves goes", claims("a", "old"), claims("b"), serving("a"), []string{"b", "old"}},
		{"no hub Gateway: held claims go too", claims("a"), nil, nil, []string{"a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			all, keep := claimsToRelease(tc.held, tc.taken, tc.serving)
			var released []string
			for h := range all {
				if !keep[h] {
					released = append(released, h)
				}
			}
			slices.Sort(released)
			if !slices.Equal(released, tc.released) {
				t.Fatalf("released %v, want %v", released, tc.released)
			}
		})
	}
}

func TestHostnameBound(t *testing.T) {
	listeners := func(names ...string) []gatewayv1.Listener {
		var out []gatewayv1.Listener
		for i, h := range names {
			l := gatewayv1.Listener{Name: gatewayv1.SectionName("l" + string(rune('a'+i)))}
			if h != "" {
				l.Hostname = ptr.To(gatewayv1.Hostname(h))
			}
			out = append(out, l)
		}
		return out
	}
	direct := func(ls ...gatewayv1.Listener) *gatewayv1.Gateway {
		return &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: gatewayv1.GatewaySpec{Listeners: ls}}
	}
	proxys := func(ls ...gatewayv1.Listener) *gatewayv1.Gateway {
		gw := direct(ls...)
		gw.OwnerReferences = []metav1.OwnerReference{{APIVersion: "networking.datumapis.com/v1alpha", Kind: kindHTTPProxy, Name: "web", UID: "u", Controller: ptr.To(true)}}
		return gw
	}
	cfg := Config{HostnamesPerProxy: 2, HostnamesPerGateway: 3}
	for _, tc := range []struct {
		name string
		gw   *gatewayv1.Gateway
		cfg  Config
		over bool
	}{
		{"a direct Gateway at its bound", direct(listeners("a", "b", "c", "", "a")...), cfg, false},
		{"a direct Gateway over its bound", direct(listeners("a", "b", "c", "d")...), cfg, true},
		{"a proxy's Gateway at the proxy's bound, HTTP and HTTPS listeners for each", proxys(listeners("a", "a", "b", "b")...), cfg, false},
		{"a proxy's Gateway over the proxy's bound", proxys(listeners("a", "b", "c")...), cfg, true},
		{"no bound configured", direct(listeners("a", "b", "c", "d")...), Config{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			refused := overHostnameBound(tc.gw, tc.cfg)
			if (refused != nil) != tc.over {
				t.Fatalf("refused %v, want over=%v", refused, tc.over)
			}
			if !tc.over {
				return
			}
			for h := range listenerHostnames(tc.gw) {
				if r, ok := refused[gatewayv1.Hostname(h)]; !ok || r.reason != ReasonTooManyHostnames {
					t.Errorf("hostname %s: %+v, want refused with %s", h, r, ReasonTooManyHostnames)
				}
			}
			if got := refused.programmable(tc.gw); len(listenerHostnames(got)) != 0 {
				t.Errorf("programmable keeps hostname listeners: %v", got.Spec.Listeners)
			}
		})
	}
}
