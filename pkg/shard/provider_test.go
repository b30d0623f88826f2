package shard

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
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
			s := &Shard{clock: clk, m: newMetrics(prometheus.NewRegistry()), found: map[string]discovered{}, observer: newLeaseObserver(clk, 15*time.Second, 400*time.Millisecond)}
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

// failingReader fails its first failures reads of the project Secret, then serves it.
type failingReader struct {
	client.Reader
	mu       sync.Mutex
	failures int
	reads    int
	secret   *corev1.Secret
}

func (f *failingReader) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	if f.reads <= f.failures {
		return apierrors.NewTooManyRequests("slow down", 1)
	}
	if key.Name != f.secret.Name {
		return apierrors.NewNotFound(corev1.Resource("secrets"), key.Name)
	}
	f.secret.DeepCopyInto(obj.(*corev1.Secret))
	return nil
}

func (f *failingReader) readCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reads
}

// TestEngageWaitsForTheProjectName: a project Secret whose read fails is not offered
// under the Secret's name; it is offered under its annotated project name once a retry
// reads it, and never when the discovery ends first.
func TestEngageWaitsForTheProjectName(t *testing.T) {
	cases := []struct {
		name     string
		failures int
		endFirst bool
		want     string // project offered at the end, "" for none
	}{
		{name: "read at once", failures: 0, want: "tenant-a"},
		{name: "read after two failures", failures: 2, want: "tenant-a"},
		{name: "discovery ended before a read succeeded", failures: 100, endFirst: true, want: ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
			reader := &failingReader{failures: c.failures, secret: &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "kubeconfig-7", Annotations: map[string]string{AnnotationProject: "tenant-a"}}}}
			s := &Shard{clock: clk, t: Timings{RetryPeriod: time.Second, CallTimeout: time.Second}, log: logr.Discard(), m: newMetrics(prometheus.NewRegistry()),
				found: map[string]discovered{}, observer: newLeaseObserver(clk, 15*time.Second, 400*time.Millisecond), hubReader: reader}
			ctx, end := context.WithCancel(context.Background())
			defer end()
			if err := s.Engage(ctx, "kubeconfig-7", &fakeProjectCluster{}); err != nil {
				t.Fatal(err)
			}
			offered := func() []string {
				var out []string
				for p := range s.discoveredProjects() {
					out = append(out, p)
				}
				return out
			}
			for step := 0; step < 10; step++ {
				// The retry waits on the clock only after a failed read.
				waitFor(t, func() bool { return clk.HasWaiters() || len(offered()) > 0 }, func() string { return "neither a retry waits nor a project is offered" })
				if got := offered(); len(got) > 0 {
					if fmt.Sprint(got) != "[tenant-a]" {
						t.Fatalf("offered %v, want only the annotated name", got)
					}
					break
				}
				if c.endFirst && step == 3 {
					end()
					break
				}
				clk.Step(time.Minute)
			}
			want := []string{}
			if c.want != "" {
				want = []string{c.want}
			}
			waitFor(t, func() bool { return fmt.Sprint(offered()) == fmt.Sprint(want) }, func() string {
				return fmt.Sprintf("offered %v, want %v, reads %d", offered(), want, reader.readCount())
			})
		})
	}
}

// waitFor polls cond for up to 5 s (a goroutine of the code under test must act);
// state says what was seen when it fails.
func waitFor(t *testing.T, cond func() bool, state func() string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within 5s: %s", state())
		}
		time.Sleep(time.Millisecond)
	}
}

// fakeProjectCluster is the cluster the provider hands to Engage: only its config is read.
type fakeProjectCluster struct{ cluster.Cluster }

func (fakeProjectCluster) GetConfig() *rest.Config {
	return &rest.Config{Host: "https://plane.invalid"}
}

// TestIndexFieldLeavesAClusterBeingBuiltToItsClaim: a holding whose cluster is not
// built yet is not indexed by IndexField (it has nothing to index, and its claim
// indexes it with every recorded field); the field is recorded for it.
func TestIndexFieldLeavesAClusterBeingBuiltToItsClaim(t *testing.T) {
	s := &Shard{holdings: map[string]*holding{"p": {project: "p", holder: "pod/1"}}}
	extract := func(client.Object) []string { return nil }
	if err := s.IndexField(context.Background(), &corev1.ConfigMap{}, "data.key", extract); err != nil {
		t.Fatalf("IndexField with a holding being built: %v", err)
	}
	if len(s.indexers) != 1 || s.indexers[0].field != "data.key" {
		t.Fatalf("recorded indexers %+v, want the one field", s.indexers)
	}
}
