// Hub creates after a proxy's deletion was requested: the live guard's promise
// (docs/design.md, Gateway path), judged from the audit logs of every scenario.

package bench

import (
	"sort"
	"strings"
	"time"

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
// downstream Gateway and HTTPRoute by their name (the proxy's), a Certificate by the
// "<gateway>-https-" its name begins with. ok is false for anything else (the hub
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
	case "gateways", "httproutes":
		k.Name = name
		return k, true, true
	case "certificates":
		if gateway, _, found := strings.Cut(name, "-https-"); found {
			k.Name = gateway
			return k, true, true
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
}

// CreatesAfterDeletion compares every successful create on the hub by a replica of the
// run (writer names it, "" for anyone else) in a project's hub namespace with the
// delete request of the proxy it was made for (deleted, from ProxyDeletions). Creates
// for proxies never deleted are not checked.
func CreatesAfterDeletion(hubEvents []auditEvent, writer func(auditEvent) string, x ProxyIndex, deleted map[ProxyKey]time.Time) DeletionCheck {
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
		if late := e.RequestReceivedTimestamp.Sub(at); late > DeletionTolerance {
			out.Late = append(out.Late, LateCreate{
				Replica: replica, Proxy: proxy, Resource: ref.Resource, Namespace: ref.Namespace, Name: ref.Name,
				At: e.RequestReceivedTimestamp, Late: late,
			})
		}
	}
	sort.SliceStable(out.Late, func(i, j int) bool { return out.Late[i].At.Before(out.Late[j].At) })
	return out
}
