package gateway

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// TestWrittenObjectsRemembersPerOwnerWithinItsBound: what an owner wrote is found by
// kind and key and listed by kind and namespace; forgetting one object or the owner
// drops it; the least recently written owner goes first past the bound; a nil memory
// remembers nothing and never panics.
func TestWrittenObjectsRemembersPerOwnerWithinItsBound(t *testing.T) {
	obj := func(ns, name string, uid types.UID) client.Object {
		return &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: uid}}
	}
	m := NewWrittenObjects(2)
	m.remember("o1", kindCertificate, obj("ns-a", "web-https-b", "c2"))
	m.remember("o1", kindCertificate, obj("ns-a", "web-https-a", "c1"))
	m.remember("o1", kindCertificate, obj("ns-b", "web-https-z", "c3"))
	m.remember("o1", kindGateway, obj("ns-a", "web", "g1"))
	m.remember("o1", kindGateway, obj("ns-a", "unsaved", "")) // no UID: nothing to condition on

	if uid, ok := m.uidOf("o1", kindGateway, client.ObjectKey{Namespace: "ns-a", Name: "web"}); !ok || uid != "g1" {
		t.Errorf("uidOf(o1, Gateway, ns-a/web) = %q, %v; want g1", uid, ok)
	}
	if _, ok := m.uidOf("o1", kindGateway, client.ObjectKey{Namespace: "ns-a", Name: "unsaved"}); ok {
		t.Error("an object without a UID is remembered")
	}
	if _, ok := m.uidOf("o2", kindGateway, client.ObjectKey{Namespace: "ns-a", Name: "web"}); ok {
		t.Error("another owner's lookup finds o1's write")
	}
	if got := fmt.Sprint(m.namesOf("o1", kindCertificate, "ns-a")); got != "[web-https-a web-https-b]" {
		t.Errorf("namesOf(o1, Certificate, ns-a) = %s", got)
	}
	m.forget("o1", kindCertificate, client.ObjectKey{Namespace: "ns-a", Name: "web-https-a"})
	if got := fmt.Sprint(m.namesOf("o1", kindCertificate, "ns-a")); got != "[web-https-b]" {
		t.Errorf("after forget, namesOf = %s", got)
	}

	m.remember("o2", kindGateway, obj("ns-a", "api", "g2"))
	m.remember("o3", kindGateway, obj("ns-a", "shop", "g3")) // o1 is the least recent: it goes
	if _, ok := m.uidOf("o1", kindGateway, client.ObjectKey{Namespace: "ns-a", Name: "web"}); ok {
		t.Error("past the bound of 2 owners, the oldest owner is still remembered")
	}
	m.forgetOwner("o3")
	if _, ok := m.uidOf("o3", kindGateway, client.ObjectKey{Namespace: "ns-a", Name: "shop"}); ok {
		t.Error("a forgotten owner is still remembered")
	}

	var none *WrittenObjects
	none.remember("o1", kindGateway, obj("ns-a", "web", "g1"))
	none.forget("o1", kindGateway, client.ObjectKey{Namespace: "ns-a", Name: "web"})
	none.forgetOwner("o1")
	if _, ok := none.uidOf("o1", kindGateway, client.ObjectKey{Namespace: "ns-a", Name: "web"}); ok || none.namesOf("o1", kindGateway, "ns-a") != nil {
		t.Error("a nil memory remembers")
	}
}

// TestCertificateNamesToDelete: the listeners' Certificates and the remembered ones,
// each once, sorted; an HTTP listener or one without a hostname has none.
func TestCertificateNamesToDelete(t *testing.T) {
	noHost := httpsListener("web", "https-nohost", "x")
	noHost.Hostname = nil
	cases := []struct {
		name       string
		listeners  []gatewayv1.Listener
		remembered []string
		want       string
	}{
		{"nothing", []gatewayv1.Listener{httpListener("http", "")}, nil, "[]"},
		{"listeners only", []gatewayv1.Listener{httpListener("http", ""), httpsListener("web", "https-b", "b.example.com"), httpsListener("web", "https-a", "a.example.com")}, nil, "[web-https-a web-https-b]"},
		{"a listener without a hostname", []gatewayv1.Listener{noHost}, nil, "[]"},
		{"remembered beside the listeners, once each", []gatewayv1.Listener{httpsListener("web", "https-a", "a.example.com")}, []string{"web-https-old", "web-https-a"}, "[web-https-a web-https-old]"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			gw := &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: gatewayv1.GatewaySpec{Listeners: tc.listeners}}
			if got := fmt.Sprint(certificateNamesToDelete(gw, tc.remembered)); got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}
