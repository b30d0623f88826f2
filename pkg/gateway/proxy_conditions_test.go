package gateway

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"anchorage/api/v1alpha"
)

// proxyWith returns a proxy of ns/name carrying the given condition statuses.
func proxyWith(name string, conds map[string]metav1.ConditionStatus) *v1alpha.HTTPProxy {
	p := &v1alpha.HTTPProxy{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
	for typ, st := range conds {
		p.Status.Conditions = append(p.Status.Conditions, metav1.Condition{Type: typ, Status: st, Reason: "Test"})
	}
	return p
}

const proxiesHeader = `
# HELP anchorage_httpproxies HTTPProxies of the projects this replica holds, by condition (Accepted, Programmed) and status (True, False, Unknown).
# TYPE anchorage_httpproxies gauge
`

// proxySeries is the exposition of one project's six series: Accepted then Programmed,
// each True, False, Unknown.
func proxySeries(project string, acc, prog [3]int) string {
	var b strings.Builder
	for i, typ := range []string{"Accepted", "Programmed"} {
		counts := [][3]int{acc, prog}[i]
		for j, st := range []string{"True", "False", "Unknown"} {
			b.WriteString(`anchorage_httpproxies{condition="` + typ + `",project="` + project + `",status="` + st + `"} `)
			b.WriteString(string(rune('0' + counts[j])))
			b.WriteString("\n")
		}
	}
	return b.String()
}

func expectProxies(t *testing.T, reg *prometheus.Registry, when, series string) {
	t.Helper()
	want := ""
	if series != "" {
		want = proxiesHeader + series
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "anchorage_httpproxies"); err != nil {
		t.Fatalf("%s: %v", when, err)
	}
}

// eventuallyProxies waits for the gauge to settle after an engagement ends (its end is
// noticed by a goroutine).
func eventuallyProxies(t *testing.T, reg *prometheus.Registry, when, series string) {
	t.Helper()
	want := ""
	if series != "" {
		want = proxiesHeader + series
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := testutil.GatherAndCompare(reg, strings.NewReader(want), "anchorage_httpproxies")
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", when, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestHTTPProxyGaugeCountsEngagedProjectsOnly: proxies are counted by condition and
// status (a missing condition as Unknown) for engaged projects only; a proxy gone or
// terminating leaves the count; a project's series go when its engagement ends, and the
// end of an older engagement does not remove a newer one.
func TestHTTPProxyGaugeCountsEngagedProjectsOnly(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	expectProxies(t, reg, "nothing engaged", "")

	m.proxyObserved("p1", proxyWith("early", map[string]metav1.ConditionStatus{"Programmed": metav1.ConditionTrue}))
	expectProxies(t, reg, "a proxy of a project not engaged here", "")

	first, loseFirst := context.WithCancel(context.Background())
	defer loseFirst()
	if err := m.Proxies.Engage(first, "p1", nil); err != nil {
		t.Fatal(err)
	}
	expectProxies(t, reg, "engaged, no proxy yet", proxySeries("p1", [3]int{0, 0, 0}, [3]int{0, 0, 0}))

	m.proxyObserved("p1", proxyWith("a", map[string]metav1.ConditionStatus{"Accepted": metav1.ConditionTrue, "Programmed": metav1.ConditionFalse}))
	m.proxyObserved("p1", proxyWith("b", map[string]metav1.ConditionStatus{"Accepted": metav1.ConditionTrue, "Programmed": metav1.ConditionTrue}))
	m.proxyObserved("p1", proxyWith("c", nil))
	expectProxies(t, reg, "three proxies", proxySeries("p1", [3]int{2, 0, 1}, [3]int{1, 1, 1}))

	m.proxyObserved("p1", proxyWith("a", map[string]metav1.ConditionStatus{"Accepted": metav1.ConditionTrue, "Programmed": metav1.ConditionTrue}))
	expectProxies(t, reg, "a programmed now", proxySeries("p1", [3]int{2, 0, 1}, [3]int{2, 0, 1}))

	m.proxyGone("p1", types.NamespacedName{Namespace: "ns", Name: "c"})
	terminating := proxyWith("b", map[string]metav1.ConditionStatus{"Accepted": metav1.ConditionTrue, "Programmed": metav1.ConditionTrue})
	terminating.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	m.proxyObserved("p1", terminating)
	expectProxies(t, reg, "c gone, b terminating", proxySeries("p1", [3]int{1, 0, 0}, [3]int{1, 0, 0}))

	// Engaged again (a new cluster for the project): counted afresh, and the end of
	// the first engagement leaves the second.
	m.Proxies.mu.Lock()
	firstEngagement := m.Proxies.projects["p1"]
	m.Proxies.mu.Unlock()
	second, loseSecond := context.WithCancel(context.Background())
	defer loseSecond()
	if err := m.Proxies.Engage(second, "p1", nil); err != nil {
		t.Fatal(err)
	}
	m.proxyObserved("p1", proxyWith("a", map[string]metav1.ConditionStatus{"Accepted": metav1.ConditionTrue, "Programmed": metav1.ConditionFalse}))
	loseFirst()
	// What loseFirst runs, run here too, so the check below follows it.
	m.Proxies.disengaged("p1", firstEngagement)
	expectProxies(t, reg, "the first engagement ended under the second", proxySeries("p1", [3]int{1, 0, 0}, [3]int{0, 1, 0}))

	loseSecond()
	eventuallyProxies(t, reg, "the project lost", "")
	m.proxyObserved("p1", proxyWith("a", map[string]metav1.ConditionStatus{"Programmed": metav1.ConditionFalse}))
	expectProxies(t, reg, "a late reconcile after the loss", "")
}
