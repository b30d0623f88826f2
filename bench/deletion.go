// Hub creates after a proxy's deletion was requested: the live guard's promise
// (docs/design.md, Gateway path), judged from the audit logs of every scenario.

package bench

import (
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"anchorage/pkg/anchor"
)

// DeletionTolerance is how much later than its proxy's delete (committed on the
// project's API server) a hub create may arrive and still not count. The live guard
// reads the proxy and then sends one create (docs/design.md, Residual windows, 4): a
// delete committed after that read was served cannot stop a create already on its way.
// What fits in between is one read's answer back to the replica and the create's request
// to the hub, all on one machine; 100 ms leaves room for a loaded 2-core machine while
// staying far below what a decision taken on a stale view shows (seconds). The delete's
// own commit is not in the window: a read served while the delete is being written
// rightly sees the proxy live (measured from the delete's request, a loaded plane's
// commit time counted against the guard: 110 ms once in a smoke run).
const DeletionTolerance = 100 * time.Millisecond

// GuardWindow is how long after the live guard's read of its proxy a hub create may
// reach the hub when that read began before the proxy's delete committed: the guard read
// the proxy live, then sent one create, and what separated the two is the replica's own
// work on a loaded machine (the answer's decoding, the client's rate limiter, the
// scheduler), which on 2 cores running a dozen processes passed DeletionTolerance (156 ms
// once in a smoke run, before any fault). It stays well under what a second attempt of
// the same create shows (client-go waits at least the 1 s Retry-After of a 429 or 503
// before sending a create again, past the guard; gateway.SendCreatesOnce) and under what
// a decision on a stale view shows (seconds).
const GuardWindow = 500 * time.Millisecond

// ProxyRead is one replica's successful live GET of an HTTPProxy on its project plane,
// from that plane's audit log: when the API server received it and when it answered.
type ProxyRead struct {
	Received, Answered time.Time
}

// ProxyReader names one replica's reads of one proxy.
type ProxyReader struct {
	Replica string
	Proxy   ProxyKey
}

// ProxyReads returns, per replica (reader names it, "" for anyone else) and HTTPProxy in
// namespace, its successful GETs of the proxy in the order received.
func ProxyReads(project, namespace string, events []auditEvent, reader func(auditEvent) string) map[ProxyReader][]ProxyRead {
	out := map[ProxyReader][]ProxyRead{}
	for _, e := range events {
		ref := e.ObjectRef
		if e.Verb != "get" || ref.Resource != "httpproxies" || ref.Namespace != namespace || !succeeded(e) {
			continue
		}
		replica := reader(e)
		if replica == "" {
			continue
		}
		k := ProxyReader{Replica: replica, Proxy: ProxyKey{Project: project, Namespace: namespace, Name: ref.Name}}
		out[k] = append(out[k], ProxyRead{Received: e.RequestReceivedTimestamp, Answered: e.StageTimestamp})
	}
	for _, rs := range out {
		sort.Slice(rs, func(i, j int) bool { return rs[i].Received.Before(rs[j].Received) })
	}
	return out
}

// inGuardWindow reports whether a create the hub received at created, for a proxy whose
// delete committed at deleted, followed a live read of the proxy (the latest of reads,
// the creating replica's, received before the create) that began before the delete
// committed, and came within GuardWindow of its answer: the live guard's window, which
// no check on one API server can close for a write to another (docs/design.md, Residual
// windows, 4). A read that began after the commit saw the proxy terminating: a create
// after it was not the guard's decision.
func inGuardWindow(created, deleted time.Time, reads []ProxyRead) bool {
	i := sort.Search(len(reads), func(i int) bool { return !reads[i].Received.Before(created) })
	if i == 0 {
		return false
	}
	last := reads[i-1]
	return last.Received.Before(deleted) && created.Sub(last.Answered) <= GuardWindow
}

// LateCreate is a hub object created for an HTTPProxy later than the proxy's delete
// request plus DeletionTolerance.
type LateCreate struct {
	Replica   string   `json:"replica"`
	Proxy     ProxyKey `json:"proxy"`
	Resource  string   `json:"resource"`
	Namespace string   `json:"namespace"`
	Name      string   `json:"name"`
	// At is when the hub received the create; Late how long after the proxy's delete
	// request that was.
	At   time.Time     `json:"at"`
	Late time.Duration `json:"late"`
}

// ProxyDeletions returns when each HTTPProxy in namespace was first asked to be
// deleted, from its project plane's audit events: the requestReceivedTimestamp of the
// first successful DELETE, whoever sent it (in a run, the load).
func ProxyDeletions(project, namespace string, events []auditEvent) map[ProxyKey]time.Time {
	out := map[ProxyKey]time.Time{}
	for _, e := range events {
		ref := e.ObjectRef
		if e.Verb != "delete" || ref.Resource != "httpproxies" || ref.Namespace != namespace || !succeeded(e) {
			continue
		}
		k := ProxyKey{Project: project, Namespace: namespace, Name: ref.Name}
		// The commit (the response's stage time), not the request: a live read served
		// while the delete was still being written sees the proxy live, rightly.
		if at, ok := out[k]; !ok || e.StageTimestamp.Before(at) {
			out[k] = e.StageTimestamp
		}
	}
	return out
}

// ProxyIndex ties a run's hub objects to the proxies they were created for.
type ProxyIndex struct {
	// Projects maps each project's hub namespace (anchor.MappedNamespace) to it.
	Projects map[string]ProjectLoad
	// AnchorOwner returns the proxy an anchor stood for, when it was seen
	// (Observer.AnchorOwner): the audit log records an anchor's name, not its labels.
	AnchorOwner func(name string) (ProxyKey, bool)
}

// proxyOf names the proxy a hub object was created for: an anchor by its owner, the
// downstream Gateway, HTTPRoute and DNSEndpoint by their name (the proxy's), a
// Certificate by the "<gateway>-https-" its name begins with or the
// "<gateway>-default-https" it is (the platform hostname's), a backend's Service, EndpointSlice or
// BackendTLSPolicy by the route whose UID its name carries (route-<UID>-rule-...), whose
// anchor is named after the same UID. ok is false for anything else (the hub
// namespace itself serves every proxy of its upstream namespace); known is false for an
// anchor whose owner was never seen.
func (x ProxyIndex) proxyOf(p ProjectLoad, resource, name string) (k ProxyKey, ok, known bool) {
	k = ProxyKey{Project: p.Name, Namespace: p.Namespace}
	switch resource {
	case "configmaps":
		if !strings.HasPrefix(name, anchor.NamePrefix) {
			return k, false, false
		}
		owner, seen := x.AnchorOwner(name)
		return owner, true, seen
	case "gateways", "httproutes", "dnsendpoints":
		k.Name = name
		return k, true, true
	case "certificates":
		if gateway, _, found := strings.Cut(name, "-https-"); found {
			k.Name = gateway
			return k, true, true
		}
		if gateway, found := strings.CutSuffix(name, "-default-https"); found {
			k.Name = gateway // the platform hostname's listener
			return k, true, true
		}
	case "services", "endpointslices", "backendtlspolicies":
		rest, isBackend := strings.CutPrefix(name, "route-")
		uid, _, hasRule := strings.Cut(rest, "-rule-")
		if isBackend && hasRule {
			owner, seen := x.AnchorOwner(anchor.Name(types.UID(uid)))
			return owner, true, seen
		}
	}
	return k, false, false
}

// DeletionCheck is the outcome of CreatesAfterDeletion.
type DeletionCheck struct {
	// Late are the creates later than their proxy's delete request + DeletionTolerance.
	Late []LateCreate
	// Checked counts the hub creates made for a proxy the load deleted.
	Checked int
	// Unattributed counts anchor creates whose owner was never seen (an anchor
	// created and deleted between two samples of the observer).
	Unattributed int
	// InGuardWindow counts the creates later than DeletionTolerance that followed,
	// within GuardWindow, a read of the proxy begun before its delete committed: not late.
	InGuardWindow int
}

// CreatesAfterDeletion compares every successful create on the hub by a replica of the
// run (writer names it, "" for anyone else) in a project's hub namespace with the
// delete of the proxy it was made for (deleted, from ProxyDeletions). Creates for
// proxies never deleted are not checked; a create later than DeletionTolerance is late
// unless it came in the live guard's window after that replica's read of the proxy
// (reads, from ProxyReads; inGuardWindow).
func CreatesAfterDeletion(hubEvents []auditEvent, writer func(auditEvent) string, x ProxyIndex, deleted map[ProxyKey]time.Time, reads map[ProxyReader][]ProxyRead) DeletionCheck {
	var out DeletionCheck
	for _, e := range hubEvents {
		ref := e.ObjectRef
		p, inRun := x.Projects[ref.Namespace]
		if e.Verb != "create" || !inRun || !succeeded(e) {
			continue
		}
		replica := writer(e)
		if replica == "" {
			continue
		}
		proxy, ok, known := x.proxyOf(p, ref.Resource, ref.Name)
		if !ok {
			continue
		}
		if !known {
			out.Unattributed++
			continue
		}
		at, wasDeleted := deleted[proxy]
		if !wasDeleted {
			continue
		}
		out.Checked++
		late := e.RequestReceivedTimestamp.Sub(at)
		if late <= DeletionTolerance {
			continue
		}
		if inGuardWindow(e.RequestReceivedTimestamp, at, reads[ProxyReader{Replica: replica, Proxy: proxy}]) {
			out.InGuardWindow++
			continue
		}
		out.Late = append(out.Late, LateCreate{
			Replica: replica, Proxy: proxy, Resource: ref.Resource, Namespace: ref.Namespace, Name: ref.Name,
			At: e.RequestReceivedTimestamp, Late: late,
		})
	}
	sort.SliceStable(out.Late, func(i, j int) bool { return out.Late[i].At.Before(out.Late[j].At) })
	return out
}
