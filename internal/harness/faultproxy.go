package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// FaultProxy is an HTTP proxy between one API client (a replica, in-process or a
// process of its own) and an API server, which a test or the bench steers while the
// client runs: it stalls watch streams, answers chosen requests with 429, 500 or 503,
// leaves them unanswered, delays their answers or drops their connections.
//
// The client talks plain HTTP to the proxy, without credentials; the proxy forwards
// every request as the user of the backend config it was built with, so the API
// server's audit log still names the client's own user. One proxy per client keeps
// the faults of one replica apart from the others'.
type FaultProxy struct {
	listener  net.Listener
	server    *http.Server
	backend   *url.URL
	transport http.RoundTripper

	mu     sync.Mutex
	rules  []idRule
	rng    *rand.Rand
	stalls map[int][]string // resources whose watches each stall holds (none: all)
	// stallsChanged is closed, and replaced, whenever a stall is added or lifted.
	stallsChanged chan struct{}
	nextID        int
	applied       map[string]int
	sent          int
	answered      []FaultAnswer
}

// FaultAnswer is one request the proxy answered itself with a fault's status, never
// forwarding it: when it came, what it was, and the client's user agent.
type FaultAnswer struct {
	At        time.Time
	Info      RequestInfo
	UserAgent string
	Status    int
}

// idRule is a rule with the id AddRules removes it by.
type idRule struct {
	id int
	FaultRule
}

// FaultRule says which requests a fault hits and what it does to them. Exactly one of
// Status, Timeout, Delay and Drop is set.
type FaultRule struct {
	// Verbs are the API verbs matched (get, list, watch, create, update, patch, delete,
	// deletecollection); empty matches every verb.
	Verbs []string
	// Resources are matched against "resource" and "resource/subresource" (leases,
	// leases/status); empty matches every resource.
	Resources []string
	// Names are the object names matched; empty matches every name.
	Names []string
	// Rate is the share of matching requests hit, from 0 to 1.
	Rate float64
	// Status answers the request from the proxy with this code (429, 500, 503) and a
	// Retry-After of one second for 429 and 503; the API server never sees it.
	Status int
	// Timeout sends the request on but holds its answer until the client gives up, then
	// drops the connection: the client cannot tell whether the request took effect.
	Timeout bool
	// Delay sends the request at once and hands its answer back this much later.
	Delay time.Duration
	// Drop closes the connection without sending the request or answering it.
	Drop bool
}

// kind names what r does, for the counts of applied faults.
func (r FaultRule) kind() string {
	switch {
	case r.Status != 0:
		return fmt.Sprintf("status-%d", r.Status)
	case r.Timeout:
		return "timeout"
	case r.Delay > 0:
		return "delay"
	case r.Drop:
		return "drop"
	}
	return "none"
}

// matches reports whether the rule covers a request.
func (r FaultRule) matches(info RequestInfo) bool {
	if len(r.Verbs) > 0 && !slices.Contains(r.Verbs, info.Verb) {
		return false
	}
	if len(r.Names) > 0 && !slices.Contains(r.Names, info.Name) {
		return false
	}
	return len(r.Resources) == 0 || slices.Contains(r.Resources, info.Resource) ||
		(info.Subresource != "" && slices.Contains(r.Resources, info.Resource+"/"+info.Subresource))
}

// NewFaultProxy listens on a free loopback port and forwards to the API server of
// backend, authenticating as backend's user. seed makes the rate draws repeatable.
func NewFaultProxy(backend *rest.Config, seed uint64) (*FaultProxy, error) {
	u, err := url.Parse(backend.Host)
	if err != nil {
		return nil, fmt.Errorf("fault proxy backend %q: %w", backend.Host, err)
	}
	rt, err := rest.TransportFor(backend)
	if err != nil {
		return nil, fmt.Errorf("fault proxy transport: %w", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &FaultProxy{listener: l, backend: u, transport: rt, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		stalls: map[int][]string{}, stallsChanged: make(chan struct{}), applied: map[string]int{}}
	p.server = &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = p.server.Serve(l) }()
	return p, nil
}

// Addr is the proxy's "host:port".
func (p *FaultProxy) Addr() string { return p.listener.Addr().String() }

// RESTConfig reaches the API server through the proxy.
func (p *FaultProxy) RESTConfig() *rest.Config { return &rest.Config{Host: "http://" + p.Addr()} }

// Kubeconfig is RESTConfig as kubeconfig bytes, for a replica of its own process.
func (p *FaultProxy) Kubeconfig() ([]byte, error) {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["c"] = &clientcmdapi.Cluster{Server: "http://" + p.Addr()}
	kc.AuthInfos["u"] = &clientcmdapi.AuthInfo{}
	kc.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	kc.CurrentContext = "c"
	return clientcmd.Write(*kc)
}

// SetRules replaces the faults; nil forwards every request untouched.
func (p *FaultProxy) SetRules(rules ...FaultRule) {
	p.mu.Lock()
	p.rules = nil
	p.mu.Unlock()
	p.AddRules(rules...)
}

// AddRules adds faults after those in place and returns what removes them again (and
// only them), so faults that overlap in time can each be lifted on their own.
func (p *FaultProxy) AddRules(rules ...FaultRule) (remove func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ids := map[int]bool{}
	for _, r := range rules {
		p.nextID++
		ids[p.nextID] = true
		p.rules = append(p.rules, idRule{id: p.nextID, FaultRule: r})
	}
	return func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.rules = slices.DeleteFunc(p.rules, func(r idRule) bool { return ids[r.id] })
	}
}

// StallWatches stops forwarding anything on the watch streams of the resources (every
// resource when none is named), open ones and new ones alike, until lift is called or
// ResumeWatches lifts every stall: the connections stay open, as with an API server that
// hangs.
func (p *FaultProxy) StallWatches(resources ...string) (lift func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.nextID++
	id := p.nextID
	p.stalls[id] = resources
	p.stallsChangedLocked()
	return func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if _, ok := p.stalls[id]; ok {
			delete(p.stalls, id)
			p.stallsChangedLocked()
		}
	}
}

// ResumeWatches lifts every stall: what the streams held back is forwarded now.
func (p *FaultProxy) ResumeWatches() {
	p.mu.Lock()
	defer p.mu.Unlock()
	clear(p.stalls)
	p.stallsChangedLocked()
}

func (p *FaultProxy) stallsChangedLocked() {
	close(p.stallsChanged)
	p.stallsChanged = make(chan struct{})
}

// Clear lifts every fault and stall.
func (p *FaultProxy) Clear() {
	p.SetRules()
	p.ResumeWatches()
}

// Applied counts the faults applied so far by kind (status-503, timeout, delay, drop,
// stalled-watch), and Sent the requests forwarded to the API server.
func (p *FaultProxy) Applied() (applied map[string]int, sent int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]int, len(p.applied))
	for k, v := range p.applied {
		out[k] = v
	}
	return out, p.sent
}

// Answered returns the requests the proxy answered with a fault's status so far, in the
// order they came (the API server's audit log never sees them).
func (p *FaultProxy) Answered() []FaultAnswer {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.answered)
}

// Close stops the proxy and drops every connection.
func (p *FaultProxy) Close() error {
	p.Clear()
	return p.server.Close()
}

// decide picks the fault for one request: the first rule that matches it and whose
// draw falls within its rate.
func (p *FaultProxy) decide(info RequestInfo) (FaultRule, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range p.rules {
		if r.matches(info) && p.rng.Float64() < r.Rate {
			p.applied[r.kind()]++
			return r.FaultRule, true
		}
	}
	return FaultRule{}, false
}

// stalledNow reports whether a watch stream of info is stalled, and the channel that is
// closed at the next change of the stalls.
func (p *FaultProxy) stalledNow(info RequestInfo) (bool, <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if info.Verb != "watch" {
		return false, nil
	}
	for _, resources := range p.stalls {
		if len(resources) == 0 || slices.Contains(resources, info.Resource) {
			return true, p.stallsChanged
		}
	}
	return false, nil
}

// holdStalled waits while info's watch stream is stalled; false when the client left
// first. Each stream counts once among the applied faults.
func (p *FaultProxy) holdStalled(ctx context.Context, info RequestInfo, counted *bool) bool {
	for {
		stalled, changed := p.stalledNow(info)
		if !stalled {
			return true
		}
		if !*counted {
			*counted = true
			p.mu.Lock()
			p.applied["stalled-watch"]++
			p.mu.Unlock()
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return false
		}
	}
}

func (p *FaultProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	info := ClassifyRequest(r.Method, r.URL)
	rule, hit := p.decide(info)
	switch {
	case hit && rule.Status != 0:
		p.mu.Lock()
		p.answered = append(p.answered, FaultAnswer{At: time.Now(), Info: info, UserAgent: r.UserAgent(), Status: rule.Status})
		p.mu.Unlock()
		writeStatus(w, rule.Status)
		return
	case hit && rule.Drop:
		panic(http.ErrAbortHandler) // net/http closes the connection, logs nothing
	}
	resp, err := p.forward(r)
	if err != nil {
		if r.Context().Err() == nil {
			writeStatus(w, http.StatusBadGateway)
		}
		return
	}
	defer resp.Body.Close()
	if hit && rule.Timeout {
		<-r.Context().Done()
		panic(http.ErrAbortHandler)
	}
	if hit && rule.Delay > 0 {
		select {
		case <-time.After(rule.Delay):
		case <-r.Context().Done():
			panic(http.ErrAbortHandler)
		}
	}
	p.relay(w, r, resp, info)
}

// forward sends r to the API server as the backend's user.
func (p *FaultProxy) forward(r *http.Request) (*http.Response, error) {
	out := r.Clone(r.Context())
	out.RequestURI = ""
	out.URL.Scheme, out.URL.Host, out.Host = p.backend.Scheme, p.backend.Host, ""
	for _, h := range []string{"Connection", "Proxy-Connection", "Keep-Alive", "Te", "Trailer", "Transfer-Encoding", "Upgrade", "Authorization"} {
		out.Header.Del(h)
	}
	p.mu.Lock()
	p.sent++
	p.mu.Unlock()
	return p.transport.RoundTrip(out)
}

// relay copies an answer back, flushing as it goes so watch events arrive one by one,
// and holding a stalled watch's bytes until the stall is lifted.
func (p *FaultProxy) relay(w http.ResponseWriter, r *http.Request, resp *http.Response, info RequestInfo) {
	for k, vs := range resp.Header {
		if k == "Connection" || k == "Transfer-Encoding" || k == "Keep-Alive" {
			continue
		}
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	counted := false
	if !p.holdStalled(r.Context(), info, &counted) {
		return
	}
	w.WriteHeader(resp.StatusCode)
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			if !p.holdStalled(r.Context(), info, &counted) {
				return
			}
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			_ = rc.Flush()
		}
		if err != nil {
			return
		}
	}
}

// writeStatus answers with an API Status of code, as an API server under load would.
func writeStatus(w http.ResponseWriter, code int) {
	reason := map[int]metav1.StatusReason{
		http.StatusTooManyRequests:     metav1.StatusReasonTooManyRequests,
		http.StatusInternalServerError: metav1.StatusReasonInternalError,
		http.StatusServiceUnavailable:  metav1.StatusReasonServiceUnavailable,
	}[code]
	if reason == "" {
		reason = metav1.StatusReasonUnknown
	}
	st := metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure, Code: int32(code), Reason: reason,
		Message: fmt.Sprintf("fault proxy: %d", code),
	}
	if code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
		st.Details = &metav1.StatusDetails{RetryAfterSeconds: 1}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(st)
}

// RequestInfo is what the API server's authorizer would make of a request.
type RequestInfo struct {
	Verb, Group, Resource, Subresource, Namespace, Name string
}

// ClassifyRequest names a request's verb and resource from its method and path, the way
// the API server does for resource requests; anything else (discovery, /readyz) gets the
// lower-cased method as its verb and no resource.
func ClassifyRequest(method string, u *url.URL) RequestInfo {
	parts := strings.Split(strings.Trim(u.Path, "/"), "/")
	info := RequestInfo{Verb: strings.ToLower(method)}
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 4 && parts[0] == "apis":
		info.Group, parts = parts[1], parts[3:]
	default:
		return info
	}
	watchPath := false
	if parts[0] == "watch" {
		watchPath, parts = true, parts[1:]
	}
	if len(parts) >= 2 && parts[0] == "namespaces" {
		if len(parts) == 2 || parts[2] == "status" || parts[2] == "finalize" {
			// The namespace object itself.
			info.Resource, info.Name = "namespaces", parts[1]
			if len(parts) > 2 {
				info.Subresource = parts[2]
			}
			info.Verb = resourceVerb(method, info.Name != "", watchPath || isWatch(u))
			return info
		}
		info.Namespace, parts = parts[1], parts[2:]
	}
	if len(parts) > 0 {
		info.Resource = parts[0]
	}
	if len(parts) > 1 {
		info.Name = parts[1]
	}
	if len(parts) > 2 {
		info.Subresource = parts[2]
	}
	info.Verb = resourceVerb(method, info.Name != "", watchPath || isWatch(u))
	return info
}

func isWatch(u *url.URL) bool {
	w := u.Query().Get("watch")
	return w == "true" || w == "1"
}

// resourceVerb maps an HTTP method on a resource path to the API verb.
func resourceVerb(method string, named, watch bool) string {
	switch method {
	case http.MethodGet, http.MethodHead:
		switch {
		case watch:
			return "watch"
		case named:
			return "get"
		}
		return "list"
	case http.MethodPost:
		return "create"
	case http.MethodPut:
		return "update"
	case http.MethodPatch:
		return "patch"
	case http.MethodDelete:
		if named {
			return "delete"
		}
		return "deletecollection"
	}
	return strings.ToLower(method)
}
