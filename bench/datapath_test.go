package bench

import (
	"bytes"
	"maps"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"anchorage/pkg/anchor"
)

// TestDesignMinimum: creates only when programming (the mapped namespace amortized
// over the proxies of its upstream namespace, two anchors, the downstream Gateway and
// HTTPRoute, one Certificate per hostname); a GET and a DELETE per anchor when
// deleting, whatever the hostnames.
func TestDesignMinimum(t *testing.T) {
	tests := []struct {
		name                       string
		hostnames, backends, perNS int
		create                     MinimumCost
		del                        MinimumCost
		createTotal, delTotal      float64
	}{
		{"one proxy alone in its namespace", 1, 0, 1, MinimumCost{"create": 6}, MinimumCost{"get": 2, "delete": 5}, 6, 7},
		{"fifty proxies share the namespace's create", 1, 0, 50, MinimumCost{"create": 5.02}, MinimumCost{"get": 2, "delete": 5}, 5.02, 7},
		{"three hostnames: three Certificates", 3, 0, 1, MinimumCost{"create": 8}, MinimumCost{"get": 2, "delete": 7}, 8, 9},
		{"no proxies per namespace counts as one", 1, 0, 0, MinimumCost{"create": 6}, MinimumCost{"get": 2, "delete": 5}, 6, 7},
		{"an https backend: its Service, EndpointSlice and BackendTLSPolicy", 1, 3, 1, MinimumCost{"create": 9}, MinimumCost{"get": 2, "delete": 8}, 9, 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			create, del := DesignMinimum(tt.hostnames, tt.backends, tt.perNS)
			if !sameCost(create, tt.create) || !sameCost(del, tt.del) {
				t.Errorf("DesignMinimum(%d, %d, %d) = %v, %v; want %v, %v", tt.hostnames, tt.backends, tt.perNS, create, del, tt.create, tt.del)
			}
			if math.Abs(create.Total()-tt.createTotal) > 1e-9 || del.Total() != tt.delTotal {
				t.Errorf("totals = %v, %v; want %v, %v", create.Total(), del.Total(), tt.createTotal, tt.delTotal)
			}
		})
	}
}

func sameCost(a, b MinimumCost) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if math.Abs(b[k]-v) > 1e-9 {
			return false
		}
	}
	return true
}

// TestPercentile: nearest rank; p99 of 100 values is the 99th, of 10 the largest;
// empty input and out-of-range p report false; the input is not modified.
func TestPercentile(t *testing.T) {
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[i] = time.Duration(100-i) * time.Millisecond // descending: sorting is Percentile's job
	}
	ten := []time.Duration{10, 9, 8, 7, 6, 5, 4, 3, 2, 1}
	tests := []struct {
		name string
		in   []time.Duration
		p    float64
		want time.Duration
		ok   bool
	}{
		{"p50 of 100", hundred, 50, 50 * time.Millisecond, true},
		{"p99 of 100", hundred, 99, 99 * time.Millisecond, true},
		{"p100 of 100", hundred, 100, 100 * time.Millisecond, true},
		{"p50 of 10", ten, 50, 5, true},
		{"p99 of 10 is the max", ten, 99, 10, true},
		{"p1 of 10 is the min", ten, 1, 1, true},
		{"one value", []time.Duration{7}, 99, 7, true},
		{"empty", nil, 50, 0, false},
		{"p 0", ten, 0, 0, false},
		{"p above 100", ten, 101, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := slices.Clone(tt.in)
			got, ok := Percentile(in, tt.p)
			if got != tt.want || ok != tt.ok {
				t.Errorf("Percentile(p%v) = %v, %v; want %v, %v", tt.p, got, ok, tt.want, tt.ok)
			}
			if !slices.Equal(in, tt.in) {
				t.Errorf("input modified")
			}
		})
	}
	l := LatencyOf(ten)
	if l != (Latency{N: 10, P50: 5, P99: 10, Max: 10}) {
		t.Errorf("LatencyOf = %+v", l)
	}
}

// TestClassifyConfigMapList: a name field selector is the old finalizer's list,
// whatever else the request names; a resourceVersion is an informer's; anything else
// is other.
func TestClassifyConfigMapList(t *testing.T) {
	tests := []struct{ uri, want string }{
		{"/api/v1/configmaps?fieldSelector=metadata.name%3Danchor-1234", ListByName},
		{"/api/v1/configmaps?fieldSelector=metadata.namespace%21%3Dx%2Cmetadata.name%3Danchor-1", ListByName},
		{"/api/v1/configmaps?fieldSelector=metadata.name%3Danchor-1&resourceVersion=0", ListByName},
		{"/api/v1/configmaps?limit=500&resourceVersion=0", ListInformer},
		{"/api/v1/namespaces/ns-1/configmaps?labelSelector=a%3Db&resourceVersion=4711", ListInformer},
		{"/api/v1/configmaps?labelSelector=a&limit=500", ListOther},
		{"/api/v1/configmaps?fieldSelector=metadata.namespace%3Dns-1", ListOther},
		{"/api/v1/configmaps", ListOther},
	}
	for _, tt := range tests {
		if got := ClassifyConfigMapList(tt.uri); got != tt.want {
			t.Errorf("ClassifyConfigMapList(%q) = %q, want %q", tt.uri, got, tt.want)
		}
	}
}

// request is a synthetic request event: auditAt plus its stage and URI.
func request(ms int, user, verb, resource, namespace, name string, code int, uri string) requestEvent {
	return requestEvent{auditEvent: auditAt(ms, user, verb, resource, namespace, name, code), Stage: "ResponseComplete", RequestURI: uri}
}

// TestCountRequests: only the run's replicas' finished requests received in
// [from, to) count, by verb and by verb and resource; watches, Leases, Events, the
// harness's requests and a watch's ResponseStarted stage do not; failed requests do
// (they cost the hub too); ConfigMap LISTs are split by kind.
func TestCountRequests(t *testing.T) {
	users := map[string]bool{"bench:r0": true, "bench:r1": true}
	started := request(1100, "bench:r0", "get", "configmaps", "ns-1", "anchor-a", 200, "")
	started.Stage = "ResponseStarted"
	events := []requestEvent{
		request(999, "bench:r0", "get", "configmaps", "ns-1", "anchor-a", 200, ""), // before the phase
		request(1000, "bench:r0", "get", "configmaps", "ns-1", "anchor-a", 200, ""),
		request(1001, "bench:r1", "delete", "configmaps", "ns-1", "anchor-a", 200, ""),
		request(1002, "bench:r1", "delete", "configmaps", "ns-1", "anchor-b", 409, ""), // failed: still a request
		request(1003, "bench:r0", "list", "configmaps", "", "", 200, "/api/v1/configmaps?fieldSelector=metadata.name%3Danchor-a"),
		request(1004, "bench:r0", "list", "configmaps", "", "", 200, "/api/v1/configmaps?resourceVersion=0"),
		request(1005, "bench:r0", "list", "certificates", "ns-1", "", 200, "/apis/cert-manager.io/v1/namespaces/ns-1/certificates?labelSelector=x"),
		request(1006, "bench:r0", "watch", "configmaps", "", "", 200, "/api/v1/configmaps?watch=true"),
		request(1007, "bench:r0", "update", "leases", "bench-r1", "m", 200, ""),
		request(1008, "bench:r0", "create", "events", "bench-r1", "e", 201, ""),
		request(1009, "admin", "get", "configmaps", "ns-1", "anchor-a", 200, ""), // the harness
		started,
		request(2000, "bench:r0", "get", "configmaps", "ns-1", "anchor-a", 200, ""), // at the phase's end: not in it
	}
	c := CountRequests(events, users, reportAt(1), reportAt(2))
	wantVerb := map[string]int{"get": 1, "delete": 2, "list": 3}
	if !mapsEqual(c.ByVerb, wantVerb) {
		t.Errorf("ByVerb = %v, want %v", c.ByVerb, wantVerb)
	}
	wantVR := map[string]int{"get configmaps": 1, "delete configmaps": 2, "list configmaps": 2, "list certificates": 1}
	if !mapsEqual(c.ByVerbResource, wantVR) {
		t.Errorf("ByVerbResource = %v, want %v", c.ByVerbResource, wantVR)
	}
	wantLists := map[string]int{ListByName: 1, ListInformer: 1}
	if !mapsEqual(c.ConfigMapLists, wantLists) {
		t.Errorf("ConfigMapLists = %v, want %v", c.ConfigMapLists, wantLists)
	}
	if c.Total() != 6 {
		t.Errorf("Total = %d, want 6", c.Total())
	}
	per := c.PerProxy(2)
	if per["delete"] != 1 || per["list"] != 1.5 || per["get"] != 0.5 {
		t.Errorf("PerProxy(2) = %v", per)
	}
	if c.PerProxy(0) != nil {
		t.Errorf("PerProxy(0) = %v, want nil", c.PerProxy(0))
	}
}

func mapsEqual[K comparable, V comparable](a, b map[K]V) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestCleanTimes: a proxy is clean when every hub object created for it (its anchors
// by owner, its downstream Gateway and HTTPRoute by name, its Certificates by prefix)
// has a successful delete, by anyone, after its last create; the time is from the
// proxy's delete request to the last of those deletes. One whose object was never
// deleted, or was created again after its delete, is not clean; a proxy with no hub
// object is neither; another namespace's objects and failed deletes do not count.
func TestCleanTimes(t *testing.T) {
	p := ProjectLoad{Name: "run-p0", Namespace: "bench-run"}
	hubNS := "ns-00000000-0000-0000-0000-000000000001"
	proxy := func(name string) ProxyKey { return ProxyKey{Project: p.Name, Namespace: p.Namespace, Name: name} }
	owners := map[string]ProxyKey{"anchor-g1": proxy("px-1"), "anchor-r1": proxy("px-1"), "anchor-g2": proxy("px-2"), "anchor-g3": proxy("px-3")}
	x := ProxyIndex{Projects: map[string]ProjectLoad{hubNS: p}, AnchorOwner: func(n string) (ProxyKey, bool) { k, ok := owners[n]; return k, ok }}
	const gc = "system:kube-controller-manager"
	ev := func(ms int, user, verb, resource, name string, code int) requestEvent {
		return request(ms, user, verb, resource, hubNS, name, code, "")
	}
	events := []requestEvent{
		// px-1: anchors, Gateway, HTTPRoute, Certificate; the GC's delete of the
		// Certificate is the last.
		ev(100, "bench:r0", "create", "configmaps", "anchor-g1", 201),
		ev(110, "bench:r0", "create", "configmaps", "anchor-r1", 201),
		ev(120, "bench:r0", "create", "gateways", "px-1", 201),
		ev(130, "bench:r0", "create", "httproutes", "px-1", 201),
		ev(140, "bench:r0", "create", "certificates", "px-1-https-px-1.example", 201),
		ev(1200, "bench:r1", "delete", "gateways", "px-1", 200),
		ev(1250, "bench:r1", "delete", "configmaps", "anchor-g1", 409), // failed
		ev(1300, "bench:r1", "delete", "configmaps", "anchor-g1", 200),
		ev(1400, "bench:r1", "delete", "configmaps", "anchor-r1", 200),
		ev(1500, gc, "delete", "httproutes", "px-1", 200),
		ev(1995, gc, "delete", "certificates", "px-1-https-px-1.example", 200),
		request(9000, gc, "delete", "gateways", "ns-other", "px-1", 200, ""), // another namespace
		// px-2: its anchor deleted, its Gateway never.
		ev(200, "bench:r0", "create", "configmaps", "anchor-g2", 201),
		ev(210, "bench:r0", "create", "gateways", "px-2", 201),
		ev(1500, "bench:r0", "delete", "configmaps", "anchor-g2", 200),
		// px-3: its anchor deleted, then created again.
		ev(300, "bench:r0", "create", "configmaps", "anchor-g3", 201),
		ev(1500, "bench:r0", "delete", "configmaps", "anchor-g3", 200),
		ev(1600, "bench:r0", "create", "configmaps", "anchor-g3", 201),
		// px-5: its Gateway's delete answered 504 (the client gave up), then a GET found
		// it gone: deleted at the attempt.
		ev(500, "bench:r0", "create", "gateways", "px-5", 201),
		ev(1300, "bench:r0", "delete", "gateways", "px-5", 504),
		ev(1400, "bench:r0", "get", "gateways", "px-5", 404),
		// px-6: a delete answered 500 and nothing after it: not proven.
		ev(600, "bench:r0", "get", "gateways", "px-6", 404), // before the create: no proof
		ev(610, "bench:r0", "create", "gateways", "px-6", 201),
		ev(1300, "bench:r0", "delete", "gateways", "px-6", 500),
		// px-7: only read, never created in the run: no object of its.
		ev(700, "bench:r0", "get", "gateways", "px-7", 404),
	}
	deleted := map[ProxyKey]time.Time{proxy("px-1"): reportAt(1), proxy("px-2"): reportAt(1), proxy("px-3"): reportAt(1), proxy("px-4"): reportAt(1),
		proxy("px-5"): reportAt(1), proxy("px-6"): reportAt(1), proxy("px-7"): reportAt(1)}
	clean, notClean := CleanTimes(events, x, deleted)
	// px-1: 1995 ms received + 5 ms to the stage timestamp, less the delete at 1 s; px-5:
	// its failed delete's answer (1305 ms), proven by the 404 after it.
	if want := map[ProxyKey]time.Duration{proxy("px-1"): time.Second, proxy("px-5"): 305 * time.Millisecond}; !maps.Equal(clean, want) {
		t.Errorf("clean = %v, want %v", clean, want)
	}
	if want := []ProxyKey{proxy("px-2"), proxy("px-3"), proxy("px-6")}; !slices.Equal(notClean, want) {
		t.Errorf("notClean = %v, want %v", notClean, want)
	}
	lives := hubObjectLives(events, x)
	for k, want := range map[ProxyKey][]string{
		proxy("px-1"): nil,
		proxy("px-2"): {"gateways " + hubNS + "/px-2 created 12:00:00.215, never deleted"},
		proxy("px-3"): {"configmaps " + hubNS + "/anchor-g3 created 12:00:01.605, last deleted 12:00:01.505"},
		proxy("px-5"): nil,
		proxy("px-6"): {"gateways " + hubNS + "/px-6 created 12:00:00.615, never deleted, 1 delete(s) answered with an error"},
	} {
		if got := undeleted(lives[k]); !slices.Equal(got, want) {
			t.Errorf("undeleted objects of %s = %q, want %q", k.Name, got, want)
		}
	}
}

// TestDataPathTargets: the cost per deleted proxy against 1.5 × the minimum, the
// finalizer lists (by name or other, not informer ones), and anchorage's p99s against
// the baseline's; without the baseline the latency targets have no verdict, and with
// a proxy not clean the cost has none (its requests fall outside the phase).
func TestDataPathTargets(t *testing.T) {
	_, minDel := DesignMinimum(1, 0, 50)
	anch := DataPathResult{
		Coordinator: Anchorage, Deleted: 10, MinimumDelete: minDel,
		DeleteRequests: RequestCount{ByVerb: map[string]int{"get": 20, "delete": 50}, ConfigMapLists: map[string]int{ListInformer: 2}},
		ToProgrammed:   []time.Duration{time.Second, 2 * time.Second},
		ToClean:        []time.Duration{3 * time.Second},
	}
	base := DataPathResult{Coordinator: Sharded, ToProgrammed: []time.Duration{3 * time.Second}, ToClean: []time.Duration{2 * time.Second}}
	verdicts := func(r *Report) []string {
		var out []string
		for _, tg := range DataPathTargets(r) {
			out = append(out, tg.Verdict())
		}
		return out
	}
	// 70 requests / 10 proxies = 7 per proxy = 1.0 × 7: met.
	if got, want := verdicts(&Report{DataPath: []DataPathResult{anch, base}}), []string{"yes", "yes", "n/a", "yes", "no"}; !slices.Equal(got, want) {
		t.Errorf("verdicts = %v, want %v", got, want)
	}
	anch.DeleteRequests.ByVerb["list"] = 36 // 10.6 per proxy
	anch.DeleteRequests.ConfigMapLists[ListByName] = 1
	if got, want := verdicts(&Report{DataPath: []DataPathResult{anch}}), []string{"no", "no", "n/a", "n/a", "n/a"}; !slices.Equal(got, want) {
		t.Errorf("verdicts = %v, want %v", got, want)
	}
	certLists := anch
	certLists.DeleteRequests = RequestCount{ByVerb: map[string]int{"get": 20, "list": 1, "delete": 50}, ByVerbResource: map[string]int{"list certificates": 1}}
	if got := verdicts(&Report{DataPath: []DataPathResult{certLists}})[1]; got != "yes" {
		t.Errorf("lists verdict with a live proxy's Certificate LIST in the delete phase = %v, want yes", got)
	}
	certLists.CertificateListsOfDeleted = 1
	if got := verdicts(&Report{DataPath: []DataPathResult{certLists}})[1]; got != "no" {
		t.Errorf("lists verdict with a Certificate LIST of a proxy being deleted = %v, want no", got)
	}
	anch.NotClean = 1
	if got := verdicts(&Report{DataPath: []DataPathResult{anch}})[0]; got != "n/a" {
		t.Errorf("cost verdict with a proxy not clean = %v, want n/a", got)
	}
	if got := verdicts(&Report{}); !slices.Equal(got, []string{"n/a", "n/a", "n/a", "n/a", "n/a"}) {
		t.Errorf("verdicts without data = %v", got)
	}
	anch.CertificateOrders = CertificateOrders{Created: 20, Hostnames: 20}
	if got := verdicts(&Report{DataPath: []DataPathResult{anch}})[2]; got != "yes" {
		t.Errorf("orders verdict at one order per hostname = %v, want yes", got)
	}
	anch.CertificateOrders.AfterDelete = 1
	if got := verdicts(&Report{DataPath: []DataPathResult{anch}})[2]; got != "no" {
		t.Errorf("orders verdict with an order after a deletion = %v, want no", got)
	}
}

// TestCountCertificateOrders: a replica's successful Certificate create in a project's
// hub namespace is an order of its proxy (a tenant hostname's or the platform's), and
// counts again when sent after the proxy's deletion was requested; others' creates,
// failed ones and other kinds do not count.
func TestCountCertificateOrders(t *testing.T) {
	p := ProjectLoad{Name: "run-p0", Namespace: "bench-run"}
	hubNS := "ns-00000000-0000-0000-0000-000000000001"
	x := ProxyIndex{Projects: map[string]ProjectLoad{hubNS: p}}
	deleted := map[ProxyKey]time.Time{{Project: p.Name, Namespace: p.Namespace, Name: "px-1"}: reportAt(1)}
	events := []requestEvent{
		request(900, "u-r0", "create", "certificates", hubNS, "px-1-https-a.example.com", 201, ""),
		request(950, "u-r0", "create", "certificates", hubNS, "px-1-default-https", 201, ""),
		request(1100, "u-r1", "create", "certificates", hubNS, "px-1-default-https", 201, ""), // after the delete
		request(1200, "u-r0", "create", "certificates", hubNS, "px-2-default-https", 409, ""), // refused
		request(1300, "admin", "create", "certificates", hubNS, "px-2-default-https", 201, ""),
		request(1400, "u-r0", "create", "dnsendpoints", hubNS, "px-2", 201, ""),
		request(1500, "u-r0", "create", "certificates", "ns-other", "px-2-default-https", 201, ""),
	}
	got := CountCertificateOrders(events, map[string]bool{"u-r0": true, "u-r1": true}, x, 2, 1, deleted)
	if want := (CertificateOrders{Created: 3, AfterDelete: 1, Hostnames: 4}); got != want {
		t.Errorf("orders = %+v, want %+v", got, want)
	}
	if got.PerHostname() != 0.75 {
		t.Errorf("per hostname = %v, want 0.75", got.PerHostname())
	}
}

// TestWriteReportDataPath: the data-path section, its targets and its plot appear
// when the report has a data-path result.
func TestWriteReportDataPath(t *testing.T) {
	minCreate, minDel := DesignMinimum(1, 0, 10)
	d := DataPathResult{
		Coordinator: Anchorage, Planes: 2, Proxies: 20, Replicas: 3, Created: 20, Deleted: 20,
		ToProgrammed: []time.Duration{time.Second, 2 * time.Second}, ToClean: []time.Duration{time.Second},
		CreateRequests: RequestCount{ByVerb: map[string]int{"create": 12}, ByVerbResource: map[string]int{"create configmaps": 12}},
		DeleteRequests: RequestCount{ByVerb: map[string]int{"get": 40, "delete": 100}, ByVerbResource: map[string]int{"get configmaps": 40, "delete configmaps": 40, "delete gateways": 20, "delete httproutes": 20, "delete certificates": 20}},
		MinimumCreate:  minCreate, MinimumDelete: minDel, PeakRSS: []uint64{50e6, 60e6, 70e6},
	}
	dir := t.TempDir()
	if err := WriteReport(dir, &Report{DataPath: []DataPathResult{d}}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, ReportFile))
	if err != nil {
		t.Fatal(err)
	}
	md := string(b)
	for _, want := range []string{"## Data path", "create → Programmed p50 / p99 / max", "1.00 s / 2.00 s / 2.00 s",
		"7.00 (1.00 × minimum 7.00)", "hub requests per deleted proxy ≤ 1.5 × the design minimum", "50.0, 60.0, 70.0", DataPathPlot} {
		if !strings.Contains(md, want) {
			t.Errorf("report.md lacks %q:\n%s", want, md)
		}
	}
	if png, err := os.ReadFile(filepath.Join(dir, DataPathPlot)); err != nil || !bytes.HasPrefix(png, []byte("\x89PNG")) {
		t.Errorf("%s not written as a PNG: %v", DataPathPlot, err)
	}
}

// TestCertificateListsOfDeleted: a replica's Certificate LIST selecting a proxy's
// upstream name, in its project's hub namespace, counts once the proxy's deletion was
// requested; lists before it, of other proxies, by others, or elsewhere do not.
func TestCertificateListsOfDeleted(t *testing.T) {
	p := ProjectLoad{Name: "run-p0", Namespace: "bench-run"}
	hubNS := "ns-00000000-0000-0000-0000-000000000001"
	x := ProxyIndex{Projects: map[string]ProjectLoad{hubNS: p}}
	deleted := map[ProxyKey]time.Time{{Project: p.Name, Namespace: p.Namespace, Name: "px-1"}: reportAt(1)}
	uri := func(ns, name string) string {
		return "/apis/cert-manager.io/v1/namespaces/" + ns + "/certificates?labelSelector=" +
			url.QueryEscape("meta.datumapis.com/upstream-group=gateway.networking.k8s.io,"+anchor.LabelName+"="+name)
	}
	events := []requestEvent{
		request(900, "u-r0", "list", "certificates", hubNS, "", 200, uri(hubNS, "px-1")),   // before the delete: live path
		request(1100, "u-r0", "list", "certificates", hubNS, "", 200, uri(hubNS, "px-1")),  // after: counted
		request(1200, "u-r1", "list", "certificates", hubNS, "", 200, uri(hubNS, "px-1")),  // after, another replica: counted
		request(1300, "u-r0", "list", "certificates", hubNS, "", 200, uri(hubNS, "px-2")),  // a live proxy
		request(1400, "admin", "list", "certificates", hubNS, "", 200, uri(hubNS, "px-1")), // not a replica
		request(1500, "u-r0", "list", "certificates", "ns-other", "", 200, uri("ns-other", "px-1")),
		request(1600, "u-r0", "get", "certificates", hubNS, "px-1-https-a", 200, ""),
	}
	users := map[string]bool{"u-r0": true, "u-r1": true}
	if got := CertificateListsOfDeleted(events, users, x, deleted); got != 2 {
		t.Errorf("Certificate lists of deleted proxies = %d, want 2", got)
	}
}
