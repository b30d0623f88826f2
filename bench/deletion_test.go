package bench

import (
	"slices"
	"testing"
	"time"
)

// auditAt is a synthetic audit event: verb on resource namespace/name by user, received
// at t0+ms milliseconds, answered with code.
// slowCommit makes e's commit (its stage time) come after its request.
func slowCommit(e auditEvent, after time.Duration) auditEvent {
	e.StageTimestamp = e.RequestReceivedTimestamp.Add(after)
	return e
}

func auditAt(ms int, user, verb, resource, namespace, name string, code int) auditEvent {
	var e auditEvent
	e.Verb, e.User.Username = verb, user
	e.ObjectRef.Resource, e.ObjectRef.Namespace, e.ObjectRef.Name = resource, namespace, name
	e.ResponseStatus.Code = code
	e.RequestReceivedTimestamp = reportT0.Add(time.Duration(ms) * time.Millisecond)
	e.StageTimestamp = e.RequestReceivedTimestamp.Add(5 * time.Millisecond)
	return e
}

// TestCreatesAfterDeletion: from a project plane's audit log, each proxy's first
// successful DELETE, committed, is its deletion time; every successful hub create by a replica for
// that proxy (its anchors, by the owner the observer saw; its downstream Gateway and
// HTTPRoute by name; its Certificates by prefix) that the hub received more than
// DeletionTolerance later is listed, latest last. Creates within the tolerance, failed
// creates, creates by anyone but a replica, in other namespaces or for proxies never
// deleted are not; anchors whose owner was never seen are counted apart.
func TestCreatesAfterDeletion(t *testing.T) {
	p := ProjectLoad{Name: "run-p0", Namespace: "bench-run"}
	hubNS := "ns-00000000-0000-0000-0000-000000000001"
	proxy := func(name string) ProxyKey { return ProxyKey{Project: p.Name, Namespace: p.Namespace, Name: name} }

	plane := []auditEvent{
		auditAt(1000, "admin", "delete", "httpproxies", "bench-run", "px-1", 200),
		auditAt(1500, "admin", "delete", "httpproxies", "bench-run", "px-1", 200), // a retry: the first counts
		auditAt(900, "admin", "delete", "httpproxies", "bench-run", "px-2", 404),  // failed: not a deletion
		auditAt(2000, "admin", "delete", "httpproxies", "bench-run", "px-2", 200),
		auditAt(100, "admin", "delete", "httpproxies", "elsewhere", "px-3", 200), // another namespace
		auditAt(100, "admin", "create", "httpproxies", "bench-run", "px-4", 201),
		slowCommit(auditAt(4000, "admin", "delete", "httpproxies", "bench-run", "px-5", 200), 200*time.Millisecond),
		// The live guard's reads, and the deletes they race.
		auditAt(5900, "u-r0", "get", "httpproxies", "bench-run", "px-6", 200),
		auditAt(6000, "admin", "delete", "httpproxies", "bench-run", "px-6", 200),
		auditAt(6200, "u-r1", "get", "httpproxies", "bench-run", "px-7", 200),
		auditAt(7000, "admin", "delete", "httpproxies", "bench-run", "px-7", 200),
		auditAt(8000, "admin", "delete", "httpproxies", "bench-run", "px-8", 200),
		auditAt(8100, "u-r2", "get", "httpproxies", "bench-run", "px-8", 200),
		auditAt(8900, "u-r0", "get", "httpproxies", "bench-run", "px-9", 200),
		auditAt(8950, "u-r1", "get", "httpproxies", "bench-run", "px-9", 404), // failed: not a read
		auditAt(9000, "admin", "delete", "httpproxies", "bench-run", "px-9", 200),
	}
	deleted := ProxyDeletions(p.Name, p.Namespace, plane)
	// A deletion's time is its commit (auditAt's stage time is 5 ms after the request).
	commit := func(s float64, after time.Duration) time.Time { return reportAt(s).Add(after) }
	wantDeleted := map[ProxyKey]time.Time{
		proxy("px-1"): commit(1, 5*time.Millisecond), proxy("px-2"): commit(2, 5*time.Millisecond),
		proxy("px-5"): commit(4, 200*time.Millisecond),
		proxy("px-6"): commit(6, 5*time.Millisecond), proxy("px-7"): commit(7, 5*time.Millisecond),
		proxy("px-8"): commit(8, 5*time.Millisecond), proxy("px-9"): commit(9, 5*time.Millisecond),
	}
	if len(deleted) != len(wantDeleted) {
		t.Fatalf("deletions = %v, want %v", deleted, wantDeleted)
	}
	for k, at := range wantDeleted {
		if !deleted[k].Equal(at) {
			t.Errorf("deletion of %v = %v, want %v", k, deleted[k], at)
		}
	}

	hub := []auditEvent{
		auditAt(900, "u-r0", "create", "configmaps", hubNS, "anchor-a1", 201),                         // before: fine
		auditAt(1000+100, "u-r0", "create", "gateways", hubNS, "px-1", 201),                           // at the tolerance: fine
		auditAt(1350, "u-r1", "create", "configmaps", hubNS, "anchor-a1", 201),                        // late anchor
		auditAt(1400, "u-r1", "create", "certificates", hubNS, "px-1-https-px-1.example", 201),        // late Certificate
		auditAt(1450, "u-r1", "create", "endpointslices", hubNS, "route-a1-rule-0-backendref-0", 201), // late backend object, by its route's anchor
		auditAt(5000, "u-r0", "create", "services", hubNS, "web-backend-0", 201),                      // not a backend object's name
		auditAt(1200, "u-r1", "create", "httproutes", hubNS, "px-1", 409),                             // refused: created nothing
		auditAt(5000, "admin", "create", "gateways", hubNS, "px-1", 201),                              // not a replica
		auditAt(5000, "u-r0", "create", "gateways", "ns-other", "px-1", 201),                          // not the run's
		auditAt(5000, "u-r0", "create", "namespaces", "", hubNS, 201),                                 // shared
		auditAt(5000, "u-r0", "create", "configmaps", hubNS, "not-an-anchor", 201),                    // not an anchor
		auditAt(5000, "u-r0", "create", "httproutes", hubNS, "px-4", 201),                             // never deleted
		auditAt(5000, "u-r0", "create", "configmaps", hubNS, "anchor-unseen", 201),                    // owner never seen
		auditAt(2500, "u-r2", "update", "httproutes", hubNS, "px-2", 200),                             // an update
		auditAt(3000, "u-r2", "create", "httproutes", hubNS, "px-2", 201),                             // late route
		auditAt(4250, "u-r0", "create", "gateways", hubNS, "px-5", 201),                               // 250 ms after the request, 50 after the commit: fine
		auditAt(6300, "u-r0", "create", "gateways", hubNS, "px-6", 201),                               // 395 after its read, begun before the commit: the guard's window
		auditAt(7300, "u-r1", "create", "gateways", hubNS, "px-7", 201),                               // 1.095 s after its read: a second attempt, late
		auditAt(8200, "u-r2", "create", "gateways", hubNS, "px-8", 201),                               // its read began after the commit: late
		auditAt(9200, "u-r1", "create", "gateways", hubNS, "px-9", 201),                               // another replica's read: late
	}
	writer := func(e auditEvent) string {
		return map[string]string{"u-r0": "r0", "u-r1": "r1", "u-r2": "r2"}[e.User.Username]
	}
	reads := ProxyReads(p.Name, p.Namespace, plane, writer)
	if n := len(reads[ProxyReader{Replica: "r1", Proxy: proxy("px-9")}]); n != 0 {
		t.Errorf("r1's failed read of px-9 counted: %d reads", n)
	}
	index := ProxyIndex{
		Projects: map[string]ProjectLoad{hubNS: p},
		AnchorOwner: func(name string) (ProxyKey, bool) {
			k, ok := map[string]ProxyKey{"anchor-a1": proxy("px-1")}[name]
			return k, ok
		},
	}
	got := CreatesAfterDeletion(hub, writer, index, deleted, reads)

	want := []LateCreate{
		{Replica: "r1", Proxy: proxy("px-1"), Resource: "configmaps", Namespace: hubNS, Name: "anchor-a1", At: reportAt(1.35), Late: 345 * time.Millisecond},
		{Replica: "r1", Proxy: proxy("px-1"), Resource: "certificates", Namespace: hubNS, Name: "px-1-https-px-1.example", At: reportAt(1.4), Late: 395 * time.Millisecond},
		{Replica: "r1", Proxy: proxy("px-1"), Resource: "endpointslices", Namespace: hubNS, Name: "route-a1-rule-0-backendref-0", At: reportAt(1.45), Late: 445 * time.Millisecond},
		{Replica: "r2", Proxy: proxy("px-2"), Resource: "httproutes", Namespace: hubNS, Name: "px-2", At: reportAt(3), Late: 995 * time.Millisecond},
		{Replica: "r1", Proxy: proxy("px-7"), Resource: "gateways", Namespace: hubNS, Name: "px-7", At: reportT0.Add(7300 * time.Millisecond), Late: 295 * time.Millisecond},
		{Replica: "r2", Proxy: proxy("px-8"), Resource: "gateways", Namespace: hubNS, Name: "px-8", At: reportT0.Add(8200 * time.Millisecond), Late: 195 * time.Millisecond},
		{Replica: "r1", Proxy: proxy("px-9"), Resource: "gateways", Namespace: hubNS, Name: "px-9", At: reportT0.Add(9200 * time.Millisecond), Late: 195 * time.Millisecond},
	}
	if !slices.Equal(got.Late, want) {
		t.Errorf("late creates:\n got %+v\nwant %+v", got.Late, want)
	}
	if got.Checked != 11 {
		t.Errorf("checked %d creates, want 11 (every successful replica create for a deleted proxy)", got.Checked)
	}
	if got.InGuardWindow != 1 {
		t.Errorf("creates in the guard's window = %d, want 1 (px-6)", got.InGuardWindow)
	}
	if got.Unattributed != 1 {
		t.Errorf("unattributed anchors = %d, want 1", got.Unattributed)
	}
}
