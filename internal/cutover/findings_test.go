package cutover

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

var deleted = metav1.NewTime(time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC))

func objMeta(name string, finalizers []string, terminating bool) metav1.ObjectMeta {
	m := metav1.ObjectMeta{Namespace: "shop", Name: name, UID: types.UID("uid-" + name), Finalizers: finalizers}
	if terminating {
		m.DeletionTimestamp = &deleted
	}
	return m
}

// controlledBy makes m controlled by the HTTPProxy proxy (UID "uid-<proxy>").
func controlledBy(m metav1.ObjectMeta, proxy string) metav1.ObjectMeta {
	m.OwnerReferences = []metav1.OwnerReference{{APIVersion: "networking.datumapis.com/v1alpha", Kind: "HTTPProxy", Name: proxy,
		UID: types.UID("uid-" + proxy), Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}
	return m
}

// summary is a row without its detail, for comparisons.
func summary(rows []Row) []string {
	var out []string
	for _, r := range rows {
		out = append(out, strings.Join([]string{string(r.Verdict), r.Project, r.Kind, r.Namespace, r.Name}, " "))
	}
	return out
}

func expectRows(t *testing.T, what string, rows []Row, want ...string) {
	t.Helper()
	if got := summary(rows); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("%s: rows\n  %s\nwant\n  %s", what, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

func expectDetail(t *testing.T, what string, rows []Row, says ...string) {
	t.Helper()
	if len(rows) == 0 {
		t.Errorf("%s: no row", what)
		return
	}
	for _, s := range says {
		if !strings.Contains(rows[0].Detail, s) {
			t.Errorf("%s: detail %q does not say %q", what, rows[0].Detail, s)
		}
	}
}

func TestTerminatingRows(t *testing.T) {
	cases := []struct {
		name      string
		kind      string
		meta      metav1.ObjectMeta
		wantStuck string // "" for no row
		notNaming string
	}{
		{"an unknown finalizer", KindGateway, objMeta("gw", []string{"dns.datumapis.com/records"}, true), "dns.datumapis.com/records", ""},
		{"not terminating", KindGateway, objMeta("gw", []string{"dns.datumapis.com/records"}, false), "", ""},
		{"the Gateway finalizer is honoured", KindGateway, objMeta("gw", []string{FinalizerGateway}, true), "", ""},
		{"the GC finalizer on an HTTPRoute", KindHTTPRoute, objMeta("rt", []string{FinalizerGC}, true), "", ""},
		{"the GC finalizer on an EndpointSlice", KindEndpointSlice, objMeta("es", []string{FinalizerGC}, true), "", ""},
		{"both proxy finalizers", KindHTTPProxy, objMeta("p", []string{FinalizerHTTPProxyCleanup, FinalizerReplicator}, true), "", ""},
		{"the garbage collector's finalizers", KindHTTPRoute, objMeta("rt", []string{metav1.FinalizerDeleteDependents, metav1.FinalizerOrphanDependents}, true), "", ""},
		{"the replicator's finalizer on a Gateway: HTTPProxies only", KindGateway, objMeta("gw", []string{FinalizerReplicator}, true), FinalizerReplicator, ""},
		{"the GC finalizer on a Gateway is not the Gateway's", KindGateway, objMeta("gw", []string{FinalizerGC}, true), FinalizerGC, ""},
		{"only the unknown one is named", KindHTTPProxy, objMeta("p", []string{FinalizerHTTPProxyCleanup, "example.com/other"}, true), "example.com/other", FinalizerHTTPProxyCleanup + ","},
	}
	for _, tc := range cases {
		m := tc.meta
		rows := TerminatingRows("acme", tc.kind, []metav1.Object{&m})
		if tc.wantStuck == "" {
			expectRows(t, tc.name, rows)
			continue
		}
		expectRows(t, tc.name, rows, "blocked acme "+tc.kind+" shop "+m.Name)
		expectDetail(t, tc.name, rows, "terminating since 2025-03-01T12:00:00Z", "finalizer "+tc.wantStuck+",", "nothing removes")
		if tc.notNaming != "" && strings.Contains(rows[0].Detail, "finalizer "+tc.notNaming) {
			t.Errorf("%s: detail %q names an honoured finalizer as stuck", tc.name, rows[0].Detail)
		}
	}
}

// proxy is an HTTPProxy as the API server returns it, unstructured.
func proxy(name string, finalizers []string, backends ...map[string]any) unstructured.Unstructured {
	var list []any
	for _, b := range backends {
		list = append(list, b)
	}
	u := unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "networking.datumapis.com/v1alpha", "kind": "HTTPProxy",
		"metadata": map[string]any{"namespace": "shop", "name": name, "uid": "uid-" + name},
		"spec":     map[string]any{"rules": []any{map[string]any{"backends": list}}},
	}}
	if finalizers != nil {
		u.SetFinalizers(finalizers)
	}
	return u
}

func TestProxyRows(t *testing.T) {
	endpoint := map[string]any{"endpoint": "https://api.example.com"}
	connector := map[string]any{"endpoint": "http://localhost:8080", "connector": map[string]any{"name": "tunnel"}}
	instance := map[string]any{"instance": map[string]any{"name": "vm-1", "port": int64(8080)}}
	rows, left := ProxyRows("acme", []unstructured.Unstructured{
		proxy("plain", []string{FinalizerHTTPProxyCleanup}, endpoint),
		proxy("replicated", []string{FinalizerHTTPProxyCleanup, FinalizerReplicator}, endpoint),
		proxy("tunnelled", nil, connector),
		proxy("on-vm", nil, instance),
	}, Options{})
	Sort(rows)
	expectRows(t, "proxies", rows,
		"adopted acme HTTPProxy shop replicated",
		"left acme HTTPProxy shop on-vm",
		"left acme HTTPProxy shop tunnelled")
	expectDetail(t, "replicator", rows[0:1], FinalizerReplicator, "hub copy goes with the proxy's anchor")
	expectDetail(t, "instance", rows[1:2], "rule 0 has a instance backend (vm-1)", "UnsupportedBackend", "is touched")
	expectDetail(t, "connector", rows[2:3], "rule 0 has a connector backend (tunnel)")
	if len(left) != 2 || !left["uid-tunnelled"] || !left["uid-on-vm"] {
		t.Errorf("left %v: want the connector and the instance proxies", left)
	}
}

// TestProxyRowsRefusedBackends: a stored proxy whose endpoint anchorage refuses (a name
// that is no public DNS name, a reserved one, a non-public IP address) is reported as
// changed before the cut-over, each refused backend named with the reason; a proxy left
// for its connector is not judged, a public backend not reported.
func TestProxyRowsRefusedBackends(t *testing.T) {
	ep := func(e string) map[string]any { return map[string]any{"endpoint": e} }
	rows, left := ProxyRows("acme", []unstructured.Unstructured{
		proxy("public", nil, ep("https://api.example.com"), ep("http://203.0.113.10:8080")),
		proxy("apiserver", nil, ep("https://api.example.com"), ep("https://kubernetes.default")),
		proxy("pod-form", nil, ep("http://169-254-169-254.default.pod")),
		proxy("short", nil, ep("http://METADATA.")),
		proxy("corp", nil, ep("http://db.corp:5432")),
		proxy("reserved", nil, ep("http://db.intra.example.com")),
		proxy("private-ip", nil, ep("http://10.0.0.1")),
		proxy("tunnelled", nil, map[string]any{"endpoint": "http://localhost:8080", "connector": map[string]any{"name": "tunnel"}}),
	}, Options{BackendReservedDomains: []string{"intra.example.com"}})
	Sort(rows)
	expectRows(t, "proxies", rows,
		"changed acme HTTPProxy shop apiserver",
		"changed acme HTTPProxy shop corp",
		"changed acme HTTPProxy shop pod-form",
		"changed acme HTTPProxy shop private-ip",
		"changed acme HTTPProxy shop reserved",
		"changed acme HTTPProxy shop short",
		"left acme HTTPProxy shop tunnelled")
	expectDetail(t, "apiserver", rows[0:1], `rule 0: backend "https://kubernetes.default"`, `host "kubernetes.default" is not a public DNS name`, `top-level domain "default"`,
		"Accepted=False, reason Invalid", "every other proxy keep serving")
	expectDetail(t, "corp", rows[1:2], `host "db.corp" is not a public DNS name`)
	expectDetail(t, "pod-form", rows[2:3], `host "169-254-169-254.default.pod" is not a public DNS name`)
	expectDetail(t, "private-ip", rows[3:4], `host "10.0.0.1" is a private range`)
	expectDetail(t, "reserved", rows[4:5], "reserved domain intra.example.com")
	expectDetail(t, "short", rows[5:6], `host "METADATA." is not a public DNS name: a single label`)
	if len(left) != 1 || !left["uid-tunnelled"] {
		t.Errorf("left %v: want the connector proxy only", left)
	}
}

func gateway(m metav1.ObjectMeta, class string, listeners ...string) gatewayv1.Gateway {
	gw := gatewayv1.Gateway{ObjectMeta: m, Spec: gatewayv1.GatewaySpec{GatewayClassName: gatewayv1.ObjectName(class)}}
	for _, l := range listeners {
		gw.Spec.Listeners = append(gw.Spec.Listeners, gatewayv1.Listener{Name: gatewayv1.SectionName(l)})
	}
	return gw
}

func TestGatewayRows(t *testing.T) {
	opts := Options{GatewayClass: "anchorage"}
	left := map[types.UID]bool{"uid-left": true}
	cases := []struct {
		name string
		gw   gatewayv1.Gateway
		want []string // details, in order
	}{
		{"the previous manager's class", gateway(controlledBy(objMeta("p", nil, false), "p"), "datum-external-global-proxy", "default-http"),
			[]string{`gatewayClassName "datum-external-global-proxy" becomes "anchorage" (gateway.gatewayClassName)`}},
		{"already anchorage's class", gateway(controlledBy(objMeta("p", nil, false), "p"), "anchorage", "default-http", "default-https"), nil},
		{"per-hostname HTTP listeners", gateway(controlledBy(objMeta("p", nil, false), "p"), "anchorage", "default-http", "http-hostname-0", "https-hostname-0", "http-hostname-1"),
			[]string{`listeners http-hostname-0, http-hostname-1 become the one listener "http"`}},
		{"both", gateway(controlledBy(objMeta("p", nil, false), "p"), "other", "http-hostname-0"),
			[]string{`becomes "anchorage"`, `listener http-hostname-0 becomes the one listener "http"`}},
		{"not a proxy's Gateway", gateway(objMeta("mine", nil, false), "other", "http-hostname-0"), nil},
		{"a proxy anchorage leaves alone", gateway(controlledBy(objMeta("left", nil, false), "left"), "other", "http-hostname-0"), nil},
		{"terminating", gateway(controlledBy(objMeta("p", []string{FinalizerGateway}, true), "p"), "other", "http-hostname-0"), nil},
	}
	for _, tc := range cases {
		rows := GatewayRows("acme", []gatewayv1.Gateway{tc.gw}, left, opts)
		if len(rows) != len(tc.want) {
			t.Errorf("%s: rows %+v, want %d", tc.name, rows, len(tc.want))
			continue
		}
		for i, s := range tc.want {
			if rows[i].Verdict != Changed || rows[i].Kind != KindGateway || rows[i].Name != tc.gw.Name || !strings.Contains(rows[i].Detail, s) {
				t.Errorf("%s: row %+v, want changed Gateway %s saying %q", tc.name, rows[i], tc.gw.Name, s)
			}
		}
	}
	// The default is the replicas'.
	rows := GatewayRows("acme", []gatewayv1.Gateway{gateway(controlledBy(objMeta("p", nil, false), "p"), "anchorage")}, nil, Options{})
	expectRows(t, "default class", rows)
}

func route(m metav1.ObjectMeta, refs ...[]gatewayv1.BackendObjectReference) gatewayv1.HTTPRoute {
	rt := gatewayv1.HTTPRoute{ObjectMeta: m}
	for _, rule := range refs {
		var r gatewayv1.HTTPRouteRule
		for _, ref := range rule {
			r.BackendRefs = append(r.BackendRefs, gatewayv1.HTTPBackendRef{BackendRef: gatewayv1.BackendRef{BackendObjectReference: ref}})
		}
		rt.Spec.Rules = append(rt.Spec.Rules, r)
	}
	return rt
}

func slice(name string) gatewayv1.BackendObjectReference {
	return gatewayv1.BackendObjectReference{Group: ptr.To(gatewayv1.Group("discovery.k8s.io")), Kind: ptr.To(gatewayv1.Kind("EndpointSlice")), Name: gatewayv1.ObjectName(name), Port: ptr.To(gatewayv1.PortNumber(443))}
}

func service(name string) gatewayv1.BackendObjectReference {
	return gatewayv1.BackendObjectReference{Name: gatewayv1.ObjectName(name), Port: ptr.To(gatewayv1.PortNumber(443))}
}

func TestRouteRows(t *testing.T) {
	left := map[types.UID]bool{"uid-left": true}
	rows := RouteRows("acme", []gatewayv1.HTTPRoute{
		route(controlledBy(objMeta("p", nil, false), "p"), []gatewayv1.BackendObjectReference{slice("p-0-0")}, nil, []gatewayv1.BackendObjectReference{slice("p-2-0")}),
		route(controlledBy(objMeta("done", nil, false), "done"), []gatewayv1.BackendObjectReference{service("done-backend-0")}),
		route(objMeta("mine", nil, false), []gatewayv1.BackendObjectReference{slice("x")}),
		route(controlledBy(objMeta("left", nil, false), "left"), []gatewayv1.BackendObjectReference{slice("left-0-0")}),
		route(controlledBy(objMeta("going", []string{FinalizerGC}, true), "going"), []gatewayv1.BackendObjectReference{slice("going-0-0")}),
		route(controlledBy(objMeta("9lives", nil, false), "9lives"), []gatewayv1.BackendObjectReference{slice("9lives-0-0")}),
	}, left)
	Sort(rows)
	expectRows(t, "routes", rows, "changed acme HTTPRoute shop 9lives", "changed acme HTTPRoute shop p")
	expectDetail(t, "a name that is no DNS-1035 label", rows[0:1], "EndpointSlice 9lives-0-0 -> Service "+BackendServiceName("9lives", 0))
	expectDetail(t, "two rules", rows[1:2], "rule 0: EndpointSlice p-0-0 -> Service p-backend-0", "rule 2: EndpointSlice p-2-0 -> Service p-backend-2")
}

func TestBackendServiceName(t *testing.T) {
	if got := BackendServiceName("shop", 3); got != "shop-backend-3" {
		t.Errorf("got %q", got)
	}
	// sha256("9lives") = 1e3a…: the digest form pkg/gateway writes.
	got := BackendServiceName("9lives", 0)
	if !strings.HasPrefix(got, "backend-") || !strings.HasSuffix(got, "-0") || len(got) != len("backend-")+12+len("-0") {
		t.Errorf("got %q: want backend-<12 hex digits>-0", got)
	}
}

func TestEndpointSliceRows(t *testing.T) {
	rows := EndpointSliceRows("acme", []metav1.PartialObjectMetadata{
		{ObjectMeta: objMeta("p-0-0", []string{FinalizerGC}, false)},
		{ObjectMeta: objMeta("unrelated", nil, false)},
	})
	expectRows(t, "slices", rows, "adopted acme EndpointSlice shop p-0-0")
	expectDetail(t, "slices", rows, FinalizerGC, "anchorage honours")
}

// hubLabels are the five upstream labels of an object written for project acme's
// kind shop/name.
func hubLabels(kind, name string) map[string]string {
	return map[string]string{
		"meta.datumapis.com/upstream-cluster-name": "cluster-acme", "meta.datumapis.com/upstream-group": "gateway.networking.k8s.io",
		"meta.datumapis.com/upstream-kind": kind, "meta.datumapis.com/upstream-name": name, "meta.datumapis.com/upstream-namespace": "shop",
	}
}

func TestHubGatewayRows(t *testing.T) {
	hub := func(name, class string, labels map[string]string) gatewayv1.Gateway {
		return gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "ns-1", Name: name, Labels: labels}, Spec: gatewayv1.GatewaySpec{GatewayClassName: gatewayv1.ObjectName(class)}}
	}
	left := LeftObjects{Gateways: map[Upstream]bool{{"acme", "shop", "left"}: true}}
	gws := []gatewayv1.Gateway{
		hub("p", "datum-downstream-gateway", hubLabels("Gateway", "p")),
		hub("ok", "anchorage-edge", hubLabels("Gateway", "ok")),
		hub("unlabelled", "other", nil),
		hub("left", "other", hubLabels("Gateway", "left")),
	}
	rows := HubGatewayRows(gws, left, Options{})
	expectRows(t, "hub gateways", rows, "changed  Gateway ns-1 p")
	expectDetail(t, "hub gateways", rows, "project acme's Gateway shop/p", `"datum-downstream-gateway" becomes "anchorage-edge" (gateway.downstreamGatewayClassName)`)
	expectRows(t, "another project asked for", HubGatewayRows(gws, left, Options{Projects: []string{"other"}}))
}

func TestHubCertificateRows(t *testing.T) {
	cert := func(name, issuer, kind string) unstructured.Unstructured {
		u := unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "cert-manager.io/v1", "kind": "Certificate",
			"metadata": map[string]any{"namespace": "ns-1", "name": name},
			"spec":     map[string]any{"secretName": name, "issuerRef": map[string]any{"name": issuer, "kind": "ClusterIssuer"}},
		}}
		u.SetLabels(hubLabels(kind, "p"))
		return u
	}
	rows := HubCertificateRows([]unstructured.Unstructured{
		cert("p-https-hostname-0", "letsencrypt-prod", "Gateway"),
		cert("p-default-https", "anchorage", "Gateway"),
		cert("other", "letsencrypt-prod", "Other"),
	}, LeftObjects{}, Options{})
	expectRows(t, "certificates", rows, "changed  Certificate ns-1 p-https-hostname-0")
	expectDetail(t, "certificates", rows, `issuerRef.name "letsencrypt-prod" becomes "anchorage" (gateway.certificateIssuer.name)`, "re-issues")
	rows = HubCertificateRows([]unstructured.Unstructured{cert("p-default-https", "anchorage", "Gateway")}, LeftObjects{}, Options{IssuerName: "le"})
	expectRows(t, "another gateway.certificateIssuer.name", rows, "changed  Certificate ns-1 p-default-https")
	rows = HubCertificateRows([]unstructured.Unstructured{cert("p-default-https", "x", "Gateway")}, LeftObjects{Gateways: map[Upstream]bool{{"acme", "shop", "p"}: true}}, Options{})
	expectRows(t, "a left proxy's", rows)
}

func TestHubEndpointSliceRows(t *testing.T) {
	uid := "0f7c1a52-7a43-4d1e-9b8e-6a1f4c2d9e10"
	es := func(name, kind string) metav1.PartialObjectMetadata {
		labels := hubLabels(kind, "p-0-0")
		labels["meta.datumapis.com/upstream-group"] = "discovery.k8s.io"
		return metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "ns-1", Name: name, Labels: labels}}
	}
	slices := []metav1.PartialObjectMetadata{
		es("route-"+uid+"-rule-0-backendref-0", "EndpointSlice"),
		es("route-"+uid+"-rule-1-backendref-0", "HTTPRoute"),
		es("p-backend-0", "EndpointSlice"),
	}
	rows := HubEndpointSliceRows(slices, LeftObjects{}, Options{})
	expectRows(t, "hub slices", rows, "adopted  EndpointSlice ns-1 route-"+uid+"-rule-0-backendref-0")
	expectDetail(t, "hub slices", rows, "HTTPRoute of UID "+uid+" (rule 0, backendRef 0)", "project acme's EndpointSlice shop/p-0-0")
	expectRows(t, "a left proxy's route", HubEndpointSliceRows(slices, LeftObjects{RouteUIDs: map[types.UID]bool{types.UID(uid): true}}, Options{}))
}

func TestSortAndWrite(t *testing.T) {
	rows := []Row{
		{Verdict: Left, Project: "a", Kind: "HTTPProxy", Namespace: "n", Name: "x"},
		{Verdict: Adopted, Project: "a", Kind: "EndpointSlice", Namespace: "n", Name: "x"},
		{Verdict: Changed, Project: "b", Kind: "Gateway", Namespace: "n", Name: "x", Detail: "2"},
		{Verdict: Changed, Project: "b", Kind: "Gateway", Namespace: "n", Name: "x", Detail: "1"},
		{Verdict: Blocked, Project: "b", Kind: "Gateway", Namespace: "n", Name: "x"},
		{Verdict: Blocked, Project: "", Kind: "ValidatingWebhookConfiguration", Name: "c", Detail: "webhook w\t(tabbed)\nline"},
		{Verdict: Blocked, Project: "a", Kind: "HTTPRoute", Namespace: "n", Name: "x"},
		{Verdict: Blocked, Project: "a", Kind: "Gateway", Namespace: "z", Name: "a"},
		{Verdict: Blocked, Project: "a", Kind: "Gateway", Namespace: "m", Name: "b"},
	}
	Sort(rows)
	expectRows(t, "sorted", rows,
		"blocked  ValidatingWebhookConfiguration  c",
		"blocked a Gateway m b",
		"blocked a Gateway z a",
		"blocked a HTTPRoute n x",
		"blocked b Gateway n x",
		"changed b Gateway n x",
		"changed b Gateway n x",
		"adopted a EndpointSlice n x",
		"left a HTTPProxy n x")
	if rows[5].Detail != "1" {
		t.Errorf("one object's findings are sorted by detail: %+v", rows[5:7])
	}
	if n := CountBlocked(rows); n != 5 {
		t.Errorf("CountBlocked = %d, want 5", n)
	}

	var table bytes.Buffer
	if err := Write(&table, rows[:2], FormatTable); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(table.String(), "\n"), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "VERDICT  PROJECT  KIND") || !strings.HasSuffix(lines[0], "DETAIL") {
		t.Fatalf("table:\n%s", table.String())
	}
	if f := strings.Fields(lines[1]); f[0] != "blocked" || f[1] != "-" || f[3] != "-" || f[4] != "c" || strings.Join(f[5:], " ") != "webhook w (tabbed) line" {
		t.Errorf("a hub row on one line, dashes for empty cells: %q", lines[1])
	}
	table.Reset()
	if err := Write(&table, nil, ""); err != nil || strings.Count(table.String(), "\n") != 1 {
		t.Errorf("no rows: a header alone, got %q (%v)", table.String(), err)
	}

	var jsonl bytes.Buffer
	if err := Write(&jsonl, rows[:2], FormatJSON); err != nil {
		t.Fatal(err)
	}
	out := strings.Split(strings.TrimSpace(jsonl.String()), "\n")
	if len(out) != 2 {
		t.Fatalf("JSON Lines: %q", jsonl.String())
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(out[0]), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"verdict": "blocked", "project": "", "kind": "ValidatingWebhookConfiguration", "namespace": "", "name": "c", "detail": "webhook w\t(tabbed)\nline"}
	if len(got) != len(want) {
		t.Errorf("JSON keys %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("JSON %s = %v, want %v", k, got[k], v)
		}
	}
	if err := Write(&jsonl, rows, "yaml"); err == nil {
		t.Error("an unknown format is refused")
	}
}

// TestDomainRows: every stored Domain is adopted; the row says whether it is Verified,
// pending with the proof it keeps, or pending without one.
func TestDomainRows(t *testing.T) {
	domain := func(name string, status map[string]any) unstructured.Unstructured {
		u := unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"domainName": name}, "status": status}}
		u.SetName(name)
		u.SetNamespace("shop")
		return u
	}
	rows := DomainRows("acme", []unstructured.Unstructured{
		domain("v.example", map[string]any{"conditions": []any{map[string]any{"type": "Verified", "status": "True"}}}),
		domain("p.example", map[string]any{"verification": map[string]any{"dnsRecord": map[string]any{"name": "datum-custom-hostname.p.example", "content": "tok"}},
			"conditions": []any{map[string]any{"type": "Verified", "status": "False"}}}),
		domain("n.example", nil),
	})
	expectRows(t, "domains", rows, "adopted acme Domain shop v.example", "adopted acme Domain shop p.example", "adopted acme Domain shop n.example")
	for i, want := range []string{"Verified: hostnames under v.example", "keeps its proof (TXT datum-custom-hostname.p.example, content tok)", "anchorage gives n.example its proof"} {
		if !strings.Contains(rows[i].Detail, want) {
			t.Errorf("row %d: detail %q does not say %q", i, rows[i].Detail, want)
		}
	}
}
