package shard

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"
)

// TestDiscoveryEndedIsARemovalUnlessStopping: a discovery whose context ends is a
// removed Secret and is forgotten, except while the process is stopping (the provider
// then ends every discovery) and except for a discovery already replaced by a newer one.
func TestDiscoveryEndedIsARemovalUnlessStopping(t *testing.T) {
	cases := []struct {
		name       string
		stopping   bool
		replaced   bool // the provider re-engaged the Secret under a new context
		wantForget bool
	}{
		{name: "removed while running", wantForget: true},
		{name: "provider stopping with the process", stopping: true},
		{name: "replaced by a newer discovery", replaced: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
			s := &Shard{clock: clk, m: newMetrics(prometheus.NewRegistry()), found: map[string]discovered{}, observer: newLeaseObserver(clk)}
			ended, end := context.WithCancel(context.Background())
			s.found["p"] = discovered{project: "p", config: &rest.Config{}, ctx: ended}
			if c.replaced {
				s.found["p"] = discovered{project: "p", config: &rest.Config{}, ctx: context.Background()}
			}
			if c.stopping {
				s.Stopping()
			}
			end()
			if got := s.discoveryEnded(ended, "p"); got != c.wantForget {
				t.Fatalf("forgot = %v, want %v", got, c.wantForget)
			}
			if _, kept := s.discoveredProjects()["p"]; kept == c.wantForget {
				t.Fatalf("project kept = %v after the discovery ended, want %v", kept, !c.wantForget)
			}
		})
	}
}
