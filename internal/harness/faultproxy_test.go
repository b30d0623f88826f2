package harness

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

func TestClassifyRequest(t *testing.T) {
	for _, tc := range []struct {
		method, target string
		want           RequestInfo
	}{
		{"GET", "/apis/coordination.k8s.io/v1/namespaces/sys/leases/a", RequestInfo{Verb: "get", Group: "coordination.k8s.io", Resource: "leases", Namespace: "sys", Name: "a"}},
		{"GET", "/apis/coordination.k8s.io/v1/namespaces/sys/leases", RequestInfo{Verb: "list", Group: "coordination.k8s.io", Resource: "leases", Namespace: "sys"}},
		{"GET", "/apis/coordination.k8s.io/v1/namespaces/sys/leases?watch=true&resourceVersion=5", RequestInfo{Verb: "watch", Group: "coordination.k8s.io", Resource: "leases", Namespace: "sys"}},
		{"GET", "/api/v1/watch/namespaces/sys/configmaps", RequestInfo{Verb: "watch", Resource: "configmaps", Namespace: "sys"}},
		{"PUT", "/apis/coordination.k8s.io/v1/namespaces/sys/leases/a", RequestInfo{Verb: "update", Group: "coordination.k8s.io", Resource: "leases", Namespace: "sys", Name: "a"}},
		{"PATCH", "/apis/gateway.networking.k8s.io/v1/namespaces/n/gateways/g/status", RequestInfo{Verb: "patch", Group: "gateway.networking.k8s.io", Resource: "gateways", Subresource: "status", Namespace: "n", Name: "g"}},
		{"POST", "/api/v1/namespaces/sys/configmaps", RequestInfo{Verb: "create", Resource: "configmaps", Namespace: "sys"}},
		{"DELETE", "/api/v1/namespaces/sys/configmaps/x", RequestInfo{Verb: "delete", Resource: "configmaps", Namespace: "sys", Name: "x"}},
		{"DELETE", "/api/v1/namespaces/sys/configmaps", RequestInfo{Verb: "deletecollection", Resource: "configmaps", Namespace: "sys"}},
		{"GET", "/api/v1/namespaces/sys", RequestInfo{Verb: "get", Resource: "namespaces", Name: "sys"}},
		{"PUT", "/api/v1/namespaces/sys/finalize", RequestInfo{Verb: "update", Resource: "namespaces", Subresource: "finalize", Name: "sys"}},
		{"GET", "/api/v1/namespaces", RequestInfo{Verb: "list", Resource: "namespaces"}},
		{"GET", "/api/v1/nodes/n1", RequestInfo{Verb: "get", Resource: "nodes", Name: "n1"}},
		{"GET", "/readyz", RequestInfo{Verb: "get"}},
		{"GET", "/apis/coordination.k8s.io/v1", RequestInfo{Verb: "get"}},
	} {
		u, err := url.Parse(tc.target)
		if err != nil {
			t.Fatal(err)
		}
		if got := ClassifyRequest(tc.method, u); got != tc.want {
			t.Errorf("%s %s: got %+v, want %+v", tc.method, tc.target, got, tc.want)
		}
	}
}

// proxyTo starts a fault proxy in front of handler and returns a client of it.
func proxyTo(t *testing.T, handler http.Handler) (*FaultProxy, *http.Client) {
	t.Helper()
	backend := httptest.NewServer(handler)
	t.Cleanup(backend.Close)
	p, err := NewFaultProxy(&rest.Config{Host: backend.URL}, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p, &http.Client{Timeout: 5 * time.Second}
}

func TestFaultProxyAnswersWithTheFaultOfTheFirstMatchingRule(t *testing.T) {
	var reached atomic.Int32
	p, c := proxyTo(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		reached.Add(1)
		_, _ = io.WriteString(w, "ok")
	}))
	lease := "http://" + p.Addr() + "/apis/coordination.k8s.io/v1/namespaces/sys/leases/a"
	configMap := "http://" + p.Addr() + "/api/v1/namespaces/sys/configmaps/a"
	p.SetRules(
		FaultRule{Verbs: []string{"get"}, Resources: []string{"leases"}, Rate: 1, Status: http.StatusServiceUnavailable},
		FaultRule{Rate: 1, Status: http.StatusTooManyRequests},
	)
	for _, tc := range []struct {
		target     string
		wantStatus int
	}{{lease, 503}, {configMap, 429}} {
		resp, err := c.Get(tc.target)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != tc.wantStatus || resp.Header.Get("Retry-After") != "1" || !strings.Contains(string(body), `"kind":"Status"`) {
			t.Errorf("GET %s: %d %q (Retry-After %q), want %d with a Status", tc.target, resp.StatusCode, body, resp.Header.Get("Retry-After"), tc.wantStatus)
		}
	}
	if n := reached.Load(); n != 0 {
		t.Errorf("%d requests reached the API server; answered by the proxy, none should", n)
	}
	p.Clear()
	resp, err := c.Get(lease)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("after Clear: %v %v", resp, err)
	}
	_ = resp.Body.Close()
	applied, sent := p.Applied()
	if applied["status-503"] != 1 || applied["status-429"] != 1 || sent != 1 {
		t.Errorf("applied %v, sent %d; want one 503, one 429, one request sent", applied, sent)
	}
}

func TestFaultProxyRateDrawsARepeatableShare(t *testing.T) {
	p, c := proxyTo(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	p.SetRules(FaultRule{Rate: 0.25, Status: http.StatusInternalServerError})
	failed := 0
	for range 400 {
		resp, err := c.Get("http://" + p.Addr() + "/api/v1/namespaces/sys/configmaps")
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode == http.StatusInternalServerError {
			failed++
		}
	}
	if failed < 60 || failed > 140 {
		t.Errorf("%d of 400 failed at rate 0.25", failed)
	}
}

func TestFaultProxyDelaysTimesOutAndDrops(t *testing.T) {
	var reached atomic.Int32
	p, _ := proxyTo(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		reached.Add(1)
		_, _ = io.WriteString(w, "ok")
	}))
	target := "http://" + p.Addr() + "/api/v1/namespaces/sys/configmaps/a"

	p.SetRules(FaultRule{Rate: 1, Delay: 300 * time.Millisecond})
	start := time.Now()
	resp, err := http.Get(target)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if d := time.Since(start); d < 300*time.Millisecond || reached.Load() != 1 {
		t.Errorf("delayed answer after %s with %d requests sent; want ≥ 300ms and sent at once", d, reached.Load())
	}

	p.SetRules(FaultRule{Rate: 1, Timeout: true})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if _, err := http.DefaultClient.Do(req); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("timeout fault: %v, want the client's deadline", err)
	}
	if reached.Load() != 2 {
		t.Errorf("a request timing out must still reach the server: %d sent", reached.Load())
	}

	p.SetRules(FaultRule{Rate: 1, Drop: true})
	if _, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Get(target); err == nil {
		t.Errorf("drop: the request got an answer")
	}
	if reached.Load() != 2 {
		t.Errorf("a dropped request reached the server")
	}
}

func TestFaultProxyStallsWatchStreams(t *testing.T) {
	events := make(chan string)
	p, _ := proxyTo(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("watch") != "true" {
			_, _ = io.WriteString(w, "list\n")
			return
		}
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		for {
			select {
			case e := <-events:
				_, _ = fmt.Fprintln(w, e)
				w.(http.Flusher).Flush()
			case <-r.Context().Done():
				return
			}
		}
	}))
	base := "http://" + p.Addr() + "/apis/coordination.k8s.io/v1/namespaces/sys/leases"
	resp, err := http.Get(base + "?watch=true")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := make(chan string, 10)
	go func() {
		s := bufio.NewScanner(resp.Body)
		for s.Scan() {
			lines <- s.Text()
		}
	}()
	next := func(within time.Duration) string {
		select {
		case l := <-lines:
			return l
		case <-time.After(within):
			return ""
		}
	}
	events <- "e1"
	if got := next(2 * time.Second); got != "e1" {
		t.Fatalf("first event: %q", got)
	}
	p.StallWatches("configmaps")
	events <- "e2"
	if got := next(2 * time.Second); got != "e2" {
		t.Fatalf("a stall of another resource held the lease watch: %q", got)
	}
	p.StallWatches("leases")
	events <- "e3"
	if got := next(500 * time.Millisecond); got != "" {
		t.Fatalf("stalled watch forwarded %q", got)
	}
	// Other requests on the resource go through during the stall.
	list, err := http.Get(base)
	if err != nil {
		t.Fatal(err)
	}
	_ = list.Body.Close()
	if list.StatusCode != http.StatusOK {
		t.Errorf("list during a watch stall: %d", list.StatusCode)
	}
	p.ResumeWatches()
	if got := next(2 * time.Second); got != "e3" {
		t.Fatalf("after the stall: %q, want the held event", got)
	}
	if applied, _ := p.Applied(); applied["stalled-watch"] != 1 {
		t.Errorf("applied %v, want one stalled watch", applied)
	}
}

func TestFaultProxyOverlappingFaultsAreLiftedOneByOne(t *testing.T) {
	p, c := proxyTo(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	target := "http://" + p.Addr() + "/api/v1/namespaces/sys/configmaps"
	status := func() int {
		resp, err := c.Get(target)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	removeBurst := p.AddRules(FaultRule{Rate: 1, Status: http.StatusTooManyRequests})
	removeOutage := p.AddRules(FaultRule{Rate: 1, Status: http.StatusServiceUnavailable})
	if got := status(); got != http.StatusTooManyRequests {
		t.Errorf("both faults in place: %d, want the first added (429)", got)
	}
	removeBurst()
	if got := status(); got != http.StatusServiceUnavailable {
		t.Errorf("the burst lifted, the outage not: %d, want 503", got)
	}
	removeOutage()
	if got := status(); got != http.StatusOK {
		t.Errorf("both lifted: %d", got)
	}

	info := RequestInfo{Verb: "watch", Resource: "leases"}
	liftAll := p.StallWatches()
	liftLeases := p.StallWatches("leases")
	liftAll()
	if stalled, _ := p.stalledNow(info); !stalled {
		t.Errorf("one of two stalls lifted: the lease watch must still stall")
	}
	liftLeases()
	if stalled, _ := p.stalledNow(info); stalled {
		t.Errorf("both stalls lifted: the lease watch still stalls")
	}
}
