// The data path's cost: the design minimum of hub requests per proxy, percentiles of
// latencies, and the hub requests a run's replicas sent, from the hub's audit log.

package bench

import (
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"time"

	"anchorage/internal/harness"
	"anchorage/pkg/anchor"
)

// MinimumCost is the hub requests, by verb, that one proxy needs at the least.
type MinimumCost map[string]float64

// Total sums the requests of every verb.
func (m MinimumCost) Total() float64 {
	var t float64
	for _, v := range m {
		t += v
	}
	return t
}

// DesignMinimum is what docs/design.md ("Gateway path", anchors, deletion) needs from
// the hub, per proxy, and nothing more:
//
//   - programming a proxy with hostnames hostnames, one of proxiesPerNamespace in a
//     fresh upstream namespace: the create of the mapped namespace (once per upstream
//     namespace, so amortized over its proxies), the two anchors (the upstream
//     Gateway's and HTTPRoute's), the downstream Gateway and HTTPRoute, one
//     Certificate per hostname and the backendObjects of its backends (per backend a
//     Service and an EndpointSlice, and a BackendTLSPolicy for an https one) — creates
//     only, since nothing is there to read;
//   - deleting it: the two anchor deletes, each a GET in the mapped namespace (the live
//     read that proves what is deleted) and a DELETE with that read's UID and
//     resourceVersion as preconditions; and one DELETE of each downstream object (the
//     Gateway, the HTTPRoute, one Certificate per hostname, the backend objects), which
//     the upstream finalizers delete themselves so that deletion does not wait on the
//     hub's garbage collector. Those need no read: the owner is terminating and its
//     finalizer holds the names (the replica that wrote them conditions the delete on
//     the UID it wrote).
//
// A proxiesPerNamespace below 1 counts as 1.
func DesignMinimum(hostnames, backendObjects, proxiesPerNamespace int) (create, del MinimumCost) {
	perNamespace := float64(max(proxiesPerNamespace, 1))
	const anchors = 2 // the upstream Gateway's and the HTTPRoute's
	objects := 1 + 1 + float64(hostnames) + float64(backendObjects)
	create = MinimumCost{"create": 1/perNamespace + anchors + objects}
	del = MinimumCost{"get": anchors, "delete": anchors + objects}
	return create, del
}

// DataPathBackendObjects is the hub objects of a data-path proxy's backends: its one
// https backend's Service, EndpointSlice and BackendTLSPolicy.
const DataPathBackendObjects = 3

// Latency is the p50, p99 and max of a set of durations.
type Latency struct {
	N   int           `json:"n"`
	P50 time.Duration `json:"p50"`
	P99 time.Duration `json:"p99"`
	Max time.Duration `json:"max"`
}

// Percentile returns the nearest-rank p-th percentile of xs (0 < p ≤ 100): the
// smallest value at least p percent of the values are at or below. False when xs is
// empty. xs is not modified.
func Percentile(xs []time.Duration, p float64) (time.Duration, bool) {
	if len(xs) == 0 || p <= 0 || p > 100 {
		return 0, false
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	return s[max(rank, 1)-1], true
}

// LatencyOf summarizes ds; the zero Latency when ds is empty.
func LatencyOf(ds []time.Duration) Latency {
	l := Latency{N: len(ds)}
	l.P50, _ = Percentile(ds, 50)
	l.P99, _ = Percentile(ds, 99)
	l.Max, _ = Max(ds)
	return l
}

// requestEvent is an audit event with the fields a request count needs besides the
// ones every check reads.
type requestEvent struct {
	auditEvent
	// Stage is ResponseComplete for a finished request; a watch also logs
	// ResponseStarted.
	Stage      string `json:"stage"`
	RequestURI string `json:"requestURI"`
}

// readRequests reads the audit log at path from offset on.
func readRequests(path string, offset int64) ([]requestEvent, error) {
	return harness.ReadJSONLines[requestEvent](path, offset)
}

// Kinds of ConfigMap LIST a replica sends, as ClassifyConfigMapList tells them.
const (
	// ListInformer is an informer's list (initial or relist): it names a
	// resourceVersion to start its watch from.
	ListInformer = "informer"
	// ListByName selects one name (fieldSelector metadata.name=…): what the old
	// finalizer sent to find an anchor across every namespace.
	ListByName = "by-name"
	// ListOther is any other list (the resync's pages, for one).
	ListOther = "other"
)

// ClassifyConfigMapList tells a ConfigMap LIST's kind from its request URI: a name
// field selector first (whatever else it carries), then a resourceVersion parameter
// (what a reflector's list always names), else other.
func ClassifyConfigMapList(requestURI string) string {
	q := url.Values{}
	if u, err := url.Parse(requestURI); err == nil {
		q = u.Query()
	}
	for _, sel := range q["fieldSelector"] {
		for _, term := range strings.Split(sel, ",") {
			if strings.HasPrefix(strings.TrimSpace(term), "metadata.name=") {
				return ListByName
			}
		}
	}
	if q.Has("resourceVersion") {
		return ListInformer
	}
	return ListOther
}

// CertificateListsOfDeleted counts the replicas' (users') Certificate LISTs on the hub
// sent for a proxy whose deletion was requested before (deleted): the lists a
// finalizer, or a reconcile the live guard should have stopped, would send. The
// Gateway reconciler lists one owner's Certificates (to delete those of listeners gone)
// by its labels: the upstream name label is the upstream Gateway's, which is named after
// its proxy, and the namespace is the project's hub namespace (x.Projects). A list of a
// proxy still live is the live path's, not counted.
func CertificateListsOfDeleted(events []requestEvent, users map[string]bool, x ProxyIndex, deleted map[ProxyKey]time.Time) int {
	n := 0
	for _, e := range events {
		ref := e.ObjectRef
		if !countsAsDataPath(e, users) || e.Verb != "list" || ref.Resource != "certificates" {
			continue
		}
		p, ok := x.Projects[ref.Namespace]
		if !ok {
			continue
		}
		name, ok := selectedUpstreamName(e.RequestURI)
		if !ok {
			continue
		}
		if at, wasDeleted := deleted[ProxyKey{Project: p.Name, Namespace: p.Namespace, Name: name}]; wasDeleted && !e.RequestReceivedTimestamp.Before(at) {
			n++
		}
	}
	return n
}

// CertificateOrders counts the Certificates the replicas created on the hub: each is an
// order (ACME, in the field) for its hostname, and the seed's edge reached 42 ACME
// requests a second from leaked Gateways ordering again and again.
type CertificateOrders struct {
	// Created counts the replicas' Certificate creates for the run's proxies.
	Created int `json:"created"`
	// AfterDelete counts those sent after their proxy's deletion was requested.
	AfterDelete int `json:"afterDelete"`
	// Hostnames counts the hostnames of the proxies they were made for: each proxy's
	// own and its platform hostname.
	Hostnames int `json:"hostnames"`
}

// PerHostname is the orders per hostname over the proxies' lives (target: at most one).
func (c CertificateOrders) PerHostname() float64 {
	return float64(c.Created) / float64(max(c.Hostnames, 1))
}

// CountCertificateOrders counts the users' Certificate creates in the projects' hub
// namespaces (x), attributed to their proxy, for proxies with hostnames each (plus the
// platform hostname); those of a proxy whose deletion was requested before are counted
// again in AfterDelete.
func CountCertificateOrders(events []requestEvent, users map[string]bool, x ProxyIndex, proxies, hostnames int, deleted map[ProxyKey]time.Time) CertificateOrders {
	c := CertificateOrders{Hostnames: proxies * (hostnames + 1)}
	for _, e := range events {
		ref := e.ObjectRef
		if !countsAsDataPath(e, users) || e.Verb != "create" || ref.Resource != "certificates" || !succeeded(e.auditEvent) {
			continue
		}
		p, ok := x.Projects[ref.Namespace]
		if !ok {
			continue
		}
		k, ok, _ := x.proxyOf(p, ref.Resource, ref.Name)
		if !ok {
			continue
		}
		c.Created++
		if at, gone := deleted[k]; gone && !e.RequestReceivedTimestamp.Before(at) {
			c.AfterDelete++
		}
	}
	return c
}

// selectedUpstreamName returns the upstream name a request's label selector asks for
// (anchor.LabelName=<name>).
func selectedUpstreamName(requestURI string) (string, bool) {
	u, err := url.Parse(requestURI)
	if err != nil {
		return "", false
	}
	for _, term := range strings.Split(u.Query().Get("labelSelector"), ",") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(term), anchor.LabelName+"="); ok {
			return v, true
		}
	}
	return "", false
}

// RequestCount is the hub requests of a run's replicas in one phase.
type RequestCount struct {
	// ByVerb counts requests by verb; ByVerbResource by "verb resource".
	ByVerb         map[string]int `json:"byVerb"`
	ByVerbResource map[string]int `json:"byVerbResource"`
	// ConfigMapLists counts ConfigMap LISTs by ClassifyConfigMapList's kind.
	ConfigMapLists map[string]int `json:"configMapLists"`
}

// Total sums every verb.
func (c RequestCount) Total() int {
	t := 0
	for _, v := range c.ByVerb {
		t += v
	}
	return t
}

// countsAsDataPath says whether a hub request is the data path's: sent by one of
// users (the run's replicas; the harness's own requests are not), finished
// (ResponseComplete), not a watch (a connection, not a request per object) and not
// on Leases or Events (coordination and reporting, counted elsewhere).
func countsAsDataPath(e requestEvent, users map[string]bool) bool {
	return users[e.User.Username] && e.Stage == "ResponseComplete" && e.Verb != "watch" &&
		!isLeaseOrEvent(e.ObjectRef.Resource)
}

// CountRequests counts the data path's hub requests (countsAsDataPath) received in
// [from, to).
func CountRequests(events []requestEvent, users map[string]bool, from, to time.Time) RequestCount {
	c := RequestCount{ByVerb: map[string]int{}, ByVerbResource: map[string]int{}, ConfigMapLists: map[string]int{}}
	for _, e := range events {
		at := e.RequestReceivedTimestamp
		if !countsAsDataPath(e, users) || at.Before(from) || !at.Before(to) {
			continue
		}
		c.ByVerb[e.Verb]++
		c.ByVerbResource[e.Verb+" "+e.ObjectRef.Resource]++
		if e.Verb == "list" && e.ObjectRef.Resource == "configmaps" {
			c.ConfigMapLists[ClassifyConfigMapList(e.RequestURI)]++
		}
	}
	return c
}

// PerProxy divides every verb's count by n proxies (nil when n is 0).
func (c RequestCount) PerProxy(n int) map[string]float64 {
	if n == 0 {
		return nil
	}
	out := map[string]float64{}
	for v, k := range c.ByVerb {
		out[v] = float64(k) / float64(n)
	}
	return out
}

// hubObject names one object on the hub.
type hubObject struct{ resource, namespace, name string }

// objectLife is when an object was last created and last deleted, and the evidence
// for a deletion whose answer was lost.
type objectLife struct {
	created, deleted time.Time
	// attempts are the deletes answered with an error other than 404 (a timeout: the
	// deletion may have committed), absent the requests answered 404 (GET or DELETE),
	// both by when they were answered.
	attempts, absent []time.Time
}

// gone returns when the object was last deleted: its last successful delete, or, when
// none came after its last create, the first delete attempted after it whose answer
// was an error, provided a later request found the object absent (404): a delete whose
// client gave up (the replica's deadline passed on a saturated hub) can still have
// committed, and the replica's next GET finding nothing is how it learns so. Without a
// 404 after it, a failed attempt proves nothing.
func (l *objectLife) gone() time.Time {
	if l.after(l.deleted) {
		return l.deleted
	}
	var proof time.Time
	for _, at := range l.absent {
		if at.After(l.created) && (proof.IsZero() || at.Before(proof)) {
			proof = at
		}
	}
	if proof.IsZero() {
		return l.deleted
	}
	gone := proof
	for _, at := range l.attempts {
		if at.After(l.created) && at.Before(gone) {
			gone = at
		}
	}
	return gone
}

// after reports whether at is a time no earlier than the object's last create.
func (l *objectLife) after(at time.Time) bool { return !at.IsZero() && !at.Before(l.created) }

// CleanTimes returns, for every proxy in deleted (when its deletion was requested),
// how long after that every hub object created for it (x.proxyOf: its anchors, its
// downstream Gateway, HTTPRoute and Certificates) was deleted, from the hub's audit
// events (successful creates and deletes, by anyone: the garbage collector deletes
// the downstream objects; and a delete whose answer was lost, once a 404 proves it:
// objectLife.gone). A proxy one of whose objects was not deleted after its last create
// is listed in notClean; a proxy with no hub object at all is in neither.
func CleanTimes(events []requestEvent, x ProxyIndex, deleted map[ProxyKey]time.Time) (clean map[ProxyKey]time.Duration, notClean []ProxyKey) {
	return cleanTimesOf(hubObjectLives(events, x), deleted)
}

// hubObjectLives returns, per proxy, the life of each hub object created for it
// (successful creates and deletes by anyone, failed deletes, 404 answers).
func hubObjectLives(events []requestEvent, x ProxyIndex) map[ProxyKey]map[hubObject]*objectLife {
	lives := map[ProxyKey]map[hubObject]*objectLife{}
	for _, e := range events {
		ref := e.ObjectRef
		p, inRun := x.Projects[ref.Namespace]
		if !inRun || e.Stage != "ResponseComplete" || (e.Verb != "create" && e.Verb != "delete" && e.Verb != "get") {
			continue
		}
		proxy, ok, known := x.proxyOf(p, ref.Resource, ref.Name)
		if !ok || !known {
			continue
		}
		if lives[proxy] == nil {
			lives[proxy] = map[hubObject]*objectLife{}
		}
		key := hubObject{ref.Resource, ref.Namespace, ref.Name}
		life := lives[proxy][key]
		if life == nil {
			life = &objectLife{}
			lives[proxy][key] = life
		}
		at, code := e.StageTimestamp, e.ResponseStatus.Code
		switch {
		case code == http.StatusNotFound && (e.Verb == "get" || e.Verb == "delete"):
			life.absent = append(life.absent, at)
		case !succeeded(e.auditEvent):
			if e.Verb == "delete" {
				life.attempts = append(life.attempts, at)
			}
		case e.Verb == "create" && at.After(life.created):
			life.created = at
		case e.Verb == "delete" && at.After(life.deleted):
			life.deleted = at
		}
	}
	// An object only read was not created in the run.
	for proxy, objects := range lives {
		for o, life := range objects {
			if life.created.IsZero() && life.deleted.IsZero() {
				delete(objects, o)
			}
		}
		if len(objects) == 0 {
			delete(lives, proxy)
		}
	}
	return lives
}

// cleanTimesOf is CleanTimes on the objects' lives.
func cleanTimesOf(lives map[ProxyKey]map[hubObject]*objectLife, deleted map[ProxyKey]time.Time) (clean map[ProxyKey]time.Duration, notClean []ProxyKey) {
	clean = map[ProxyKey]time.Duration{}
	for proxy, at := range deleted {
		objects := lives[proxy]
		if len(objects) == 0 {
			continue
		}
		last, ok := lastDeletion(objects)
		if !ok {
			notClean = append(notClean, proxy)
			continue
		}
		clean[proxy] = max(last.Sub(at), 0)
	}
	sort.Slice(notClean, func(i, j int) bool { return notClean[i].Name < notClean[j].Name })
	return clean, notClean
}

// undeleted describes the objects not deleted after they were last created, by name,
// with when they were created and last deleted: what a proxy that is not clean left.
func undeleted(objects map[hubObject]*objectLife) []string {
	var out []string
	for o, life := range objects {
		if life.after(life.gone()) {
			continue
		}
		d := "never deleted"
		if !life.deleted.IsZero() {
			d = "last deleted " + life.deleted.UTC().Format("15:04:05.000")
		}
		if n := len(life.attempts); n > 0 {
			d += fmt.Sprintf(", %d delete(s) answered with an error", n)
		}
		out = append(out, fmt.Sprintf("%s %s/%s created %s, %s", o.resource, o.namespace, o.name, life.created.UTC().Format("15:04:05.000"), d))
	}
	sort.Strings(out)
	return out
}

// lastDeletion returns the latest delete among objects, false when one of them was
// not deleted after it was last created.
func lastDeletion(objects map[hubObject]*objectLife) (time.Time, bool) {
	var last time.Time
	for _, life := range objects {
		gone := life.gone()
		if !life.after(gone) {
			return time.Time{}, false
		}
		if gone.After(last) {
			last = gone
		}
	}
	return last, true
}
