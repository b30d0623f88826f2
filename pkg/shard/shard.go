package shard

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
)

// Options configures a Shard.
type Options struct {
	Hub             *rest.Config     // for Leases and Secrets on the hub
	Namespace       string           // of member and project Leases
	SecretNamespace string           // of the projects' kubeconfig Secrets
	Pod             string           // the replica's stable name
	Weight          float64          // scales this replica's share of projects; positive
	Timings         Timings          // NewTimings' or DefaultTimings', checked by Validate
	Clock           clock.WithTicker // default the real clock
	Scheme          *runtime.Scheme  // for project clusters
	ClusterOptions  []cluster.Option // applied to every project cluster built
	Registry        prometheus.Registerer
	Recorder        Recorder // when set, receives one Record per admitted unit of work
	Observer        Observer // when set, told of this replica's incarnations
	Logger          logr.Logger
	Exit            func()          // ends the process when a drain is overdue; default os.Exit(1)
	WarmKinds       []client.Object // kinds whose informers sync before controllers engage
}

// maxHandoversInFlight is how many planned hand-overs the coordinator runs at once.
const maxHandoversInFlight = 8

// Shard is one replica's coordinator, gating provider and per-project admission.
type Shard struct {
	opts   Options
	t      Timings
	clock  clock.WithTicker
	log    logr.Logger
	m      *metrics
	cs     kubernetes.Interface
	events record.EventRecorder

	observer *leaseObserver
	member   *membership

	mu             sync.Mutex
	awares         []multicluster.Aware
	indexers       []fieldIndex
	found          map[string]discovered // by Secret name
	holdings       map[string]*holding   // by project
	hubWriter      client.Client
	hubReader      client.Reader
	handOverStarts map[string]time.Time // planned hand-overs in progress: when each began, by project
	handedOff      map[string]handOff   // assignments this replica began handing over
	leading        *leadership          // this replica's current term as coordinator; nil when not leading
	claimFailures  claimFailures        // overdue claims this replica saw as coordinator
	undiscovered   map[string]time.Time // since when a Lease names us for a project not discovered
	discoveries    uint64               // Engage calls so far (discovered.gen)
	shutdownOnce   sync.Once
	viewStale      bool // noteViewFreshness last logged a stale view (holdings loop only)
	stopEvents     func()
	draining       atomic.Bool // shutting down: hand everything over
}

type fieldIndex struct {
	obj     client.Object
	field   string
	extract client.IndexerFunc
}

// discovered is a project Secret the inner provider found.
type discovered struct {
	project string
	config  *rest.Config
	ctx     context.Context
	gen     uint64 // numbers the discoveries; a holding built from an older one closes
}

// ErrValidityEnded refuses writes attempted after this replica's validity ended.
var ErrValidityEnded = errors.New("member validity ended")

// New builds a Shard (provider and coordinator); call SetHubClients once the manager exists.
func New(opts Options) (*Shard, error) {
	t := opts.Timings
	if err := t.Validate(); err != nil {
		return nil, err
	}
	if opts.Pod == "" || opts.Namespace == "" || opts.Hub == nil {
		return nil, errors.New("shard: pod, namespace and hub config are required")
	}
	if !ValidWeight(opts.Weight) {
		return nil, fmt.Errorf("shard: weight must be positive and finite, got %g", opts.Weight)
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Registry == nil {
		opts.Registry = prometheus.NewRegistry()
	}
	if opts.Exit == nil {
		opts.Exit = func() { os.Exit(1) }
	}
	// Renews get their own clientset, timing out at RenewDeadline (nextRenewAllowance in membership.go).
	renewCS, err := leaseClientset(opts.Hub, t.RenewDeadline, 20, 40)
	if err != nil {
		return nil, err
	}
	cs, err := leaseClientset(opts.Hub, t.CallTimeout, 100, 200)
	if err != nil {
		return nil, err
	}
	s := &Shard{
		opts: opts, t: t, clock: opts.Clock, log: opts.Logger.WithName("shard"), m: newMetrics(opts.Registry), cs: cs,
		observer:       newLeaseObserver(opts.Clock, t.LeaseDuration, t.RetryPeriod),
		found:          map[string]discovered{},
		holdings:       map[string]*holding{},
		handOverStarts: map[string]time.Time{},
		handedOff:      map[string]handOff{},
		claimFailures:  claimFailures{},
	}
	broadcaster := record.NewBroadcaster()
	s.stopEvents = broadcaster.Shutdown
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cs.CoreV1().Events("")})
	s.events = broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "anchorage-shard", Host: opts.Pod})
	s.member = &membership{
		pod: opts.Pod, weight: opts.Weight, t: t, clock: opts.Clock, leases: renewCS.CoordinationV1().Leases(opts.Namespace),
		log: s.log, m: s.m, observer: opts.Observer, onLapse: s.voidAll, onJoin: func(string) { poke(s.observer.notify) }, kick: make(chan struct{}, 1),
	}
	s.observer.watched = s.member.watched
	s.observer.log = s.log.WithName("lease-observer")
	return s, nil
}

func leaseClientset(hub *rest.Config, timeout time.Duration, qps float32, burst int) (kubernetes.Interface, error) {
	cfg := rest.CopyConfig(hub)
	cfg.Timeout, cfg.QPS, cfg.Burst = timeout, qps, burst
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("building hub clientset for Leases: %w", err)
	}
	return cs, nil
}

// eventf records an Event about writer's protocol write only while writer is valid.
func (s *Shard) eventf(writer string, obj runtime.Object, eventtype, reason, messageFmt string, args ...any) {
	if !s.member.valid(writer) {
		s.log.V(1).Info("Event dropped: its writer's validity ended", "reason", reason, "writer", writer)
		return
	}
	s.events.Eventf(obj, eventtype, reason, messageFmt, args...)
}

// SetHubClients gives the shard the manager's hub client and uncached reader.
func (s *Shard) SetHubClients(c client.Client, r client.Reader) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hubWriter, s.hubReader = guardedClient{Client: c, check: s.checkValid}, r
}

// Holder returns the current incarnation's identity ("" while not joined).
func (s *Shard) Holder() string {
	h, _ := s.member.current()
	return h
}

// Ready is a healthz checker that passes while this replica's validity has not ended.
func (s *Shard) Ready(_ *http.Request) error {
	if h, until := s.member.current(); h == "" || !s.clock.Now().Before(until) {
		return errors.New("member validity ended or not joined")
	}
	return nil
}

// Runnable runs the protocol; when ctx ends it hands every project over, then releases.
func (s *Shard) Runnable() manager.Runnable {
	return manager.RunnableFunc(func(ctx context.Context) error {
		inner, stopInner := context.WithCancel(context.Background())
		memberCtx, stopMember := context.WithCancel(inner)
		electionCtx, stopElection := context.WithCancel(inner)
		var wg, memberDone, electionDone sync.WaitGroup
		wg.Go(func() { s.observer.run(inner, s.cs, s.opts.Namespace) })
		wg.Go(func() { s.runHoldings(inner) })
		memberDone.Go(func() { s.member.run(memberCtx) })
		electionDone.Go(func() { s.runElection(electionCtx) })
		<-ctx.Done()
		s.Shutdown() // at once when the process already did it (internal/app Replica.Start)
		stopMember()
		memberDone.Wait()
		stopElection()
		electionDone.Wait()
		stopInner()
		wg.Wait()
		s.stopEvents()
		return nil
	})
}
