package harness

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zapcore"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/yaml"

	"anchorage/internal/app"
	"anchorage/internal/testenv"
	"anchorage/pkg/config"
	"anchorage/pkg/shard"
)

// ErrKilled is what every API call of an abruptly stopped manager returns.
var ErrKilled = errors.New("harness: manager killed")

// ErrStuck, returned by a Fault with a duration, blocks the call for that long whatever
// its context says, then fails it.
var ErrStuck = errors.New("harness: call stuck")

// ManagerOptions configures one in-process manager.
type ManagerOptions struct {
	// Admin runs the manager on the hub as system:masters instead of a user bound only
	// to config/rbac's roles (the product's hub permissions, the default). Only for a
	// test that needs what the product never has; the project planes are reached with
	// the projects' kubeconfig users either way (Env.AddProject).
	Admin bool
	// Logger for the manager; default discards.
	Logger logr.Logger
	// Adjust is applied to the app options last.
	Adjust func(*app.Options)
	// HubFaults puts a FaultProxy (Manager.HubProxy) between the manager and the hub,
	// for faults the in-process Fault cannot make: a watch stream that stalls, answers
	// that come from a struggling server rather than from the client's own transport.
	HubFaults bool
}

// Manager is one anchorage replica running in the test process.
type Manager struct {
	Name     string
	User     string
	Replica  *app.Replica
	Registry *prometheus.Registry
	// HubProxy is the manager's way to the hub when started with HubFaults.
	HubProxy *FaultProxy
	// ResyncLog is the resync's observer (app.Options.ResyncObserver).
	ResyncLog *PassLog

	killed   atomic.Bool
	life     sync.Mutex          // guards what the replica tells of its life (app.Observer)
	incs     []shard.Incarnation // the shard's incarnations, in order
	stopped  time.Time           // when Start stopped the controllers
	fault    atomic.Pointer[Fault]
	cancel   context.CancelFunc
	done     chan error
	stopOnce sync.Once
	stopErr  error
}

// StartManagerT starts a manager for test t as StartManager does, fails t when it cannot,
// and stops it when t ends (a manager the test stopped or killed already is fine: Stop
// answers every later call with the first call's result).
func (e *Env) StartManagerT(t testing.TB, name string, opts ManagerOptions) *Manager {
	t.Helper()
	m, err := e.StartManager(context.Background(), name, opts)
	if err != nil {
		t.Fatalf("starting manager %s: %v", name, err)
	}
	t.Cleanup(func() { _ = m.Stop(30 * time.Second) })
	return m
}

// ClaimsNamespace is the hub namespace of e's hostname claims.
func (e *Env) ClaimsNamespace() string { return "claims-" + e.ProviderNamespace }

// StartManager starts a replica against e's hub as its own API user, with its own
// metrics registry, ports off and controller-name validation skipped.
func (e *Env) StartManager(ctx context.Context, name string, opts ManagerOptions) (*Manager, error) {
	m := &Manager{Name: name, User: "anchorage-" + name, Registry: prometheus.NewRegistry(), ResyncLog: NewPassLog(), done: make(chan error, 1)}
	var groups []string
	if opts.Admin {
		groups = []string{"system:masters"}
	}
	hubCfg, _, err := e.Hub.User(m.User, groups...)
	if err != nil {
		return nil, err
	}
	if !opts.Admin {
		if err := e.bindManagerRole(ctx, m.User); err != nil {
			return nil, err
		}
	}
	if opts.HubFaults {
		if m.HubProxy, err = NewFaultProxy(hubCfg, uint64(len(name))); err != nil {
			return nil, err
		}
		hubCfg = m.HubProxy.RESTConfig()
	}
	hubCfg.Wrap(m.transport(HubTraffic))
	log := opts.Logger
	if log.GetSink() == nil {
		log = LoggerFromEnv()
	}
	// Every setting a replica shares is the configuration file's default (pkg/config),
	// as a deployed replica without a --config gets it, but for the harness's own below.
	c := config.Default()
	hubCfg.QPS, hubCfg.Burst = c.Clients.Hub.QPS, c.Clients.Hub.Burst
	project := c.Clients.Project
	gw := c.GatewayConfig()
	// The harness's hubs run no edge controller unless a test starts an Edge and turns
	// this off. Claims are hub-wide: each environment has its own, so one test's
	// hostnames never collide with another's on the shared hub.
	gw.AssumeWrittenIsProgrammed, gw.HostnameClaimsNamespace = true, e.ClaimsNamespace()
	// Hostnames are not verified but in the tests of verified domains, which turn it on
	// and point the checker at their own DNS server (test/integration/domain_test.go).
	gw.VerifyHostnames = false
	o := app.Options{
		Hub:                hubCfg,
		ProviderNamespace:  e.ProviderNamespace,
		LeaseNamespace:     e.ProviderNamespace,
		Identity:           name,
		MetricsAddr:        "0",
		HealthAddr:         "0",
		Registry:           m.Registry,
		Logger:             log.WithValues("replica", name),
		HubCheckTimeout:    c.HubTimeout.Duration,
		ProjectCallTimeout: c.Sharding.ProjectCallTimeout.Duration,
		ProjectRESTOptions: []func(*rest.Config) error{func(c *rest.Config) error {
			c.QPS, c.Burst = project.QPS, project.Burst
			c.Wrap(m.transport(ProjectTraffic))
			return nil
		}},
		Timings: c.Timings(),
		Weight:  1,
		// A drain past its deadline "exits the process": here, an abrupt stop.
		Exit:           m.Kill,
		Observer:       m,
		Gateway:        gw,
		Resync:         c.ResyncOptions(),
		ResyncObserver: m.ResyncLog,
	}
	if opts.Adjust != nil {
		opts.Adjust(&o)
	}
	if m.Replica, err = app.New(ctx, o); err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithCancel(ctx)
	m.cancel = cancel
	go func() { m.done <- m.Replica.Start(runCtx) }()
	return m, nil
}

// Stop stops the manager gracefully and waits for it to return. It may be called more
// than once; later calls return the first result.
func (m *Manager) Stop(timeout time.Duration) error {
	m.cancel()
	m.stopOnce.Do(func() {
		select {
		case err := <-m.done:
			if !errors.Is(err, context.Canceled) {
				m.stopErr = err
			}
		case <-time.After(timeout):
			m.stopErr = fmt.Errorf("manager %s did not stop within %s", m.Name, timeout)
		}
		if m.HubProxy != nil {
			_ = m.HubProxy.Close()
		}
	})
	return m.stopErr
}

// Kill stops the manager abruptly: from this instant every API call it makes fails,
// so nothing it does afterwards reaches any API server; then its context is cancelled.
func (m *Manager) Kill() {
	m.killed.Store(true)
	m.cancel()
}

// Killed reports whether Kill was called.
func (m *Manager) Killed() bool { return m.killed.Load() }

// Traffic says which API server a request of a manager goes to.
type Traffic int

const (
	// HubTraffic is a request to the hub.
	HubTraffic Traffic = iota
	// ProjectTraffic is a request to a project plane.
	ProjectTraffic
)

// Fault decides, per request, an error to return instead of sending it, or a delay to
// add before the response is handed back (the request itself is sent at once).
type Fault func(t Traffic, r *http.Request) (responseDelay time.Duration, err error)

// SetFault installs f for every later request of m; nil removes it.
func (m *Manager) SetFault(f Fault) {
	if f == nil {
		m.fault.Store(nil)
		return
	}
	m.fault.Store(&f)
}

// PauseTraffic holds every request m starts from now on, unsent, until resume is
// called: the replica as the API servers see a paused process (SIGSTOP), while the test
// process goes on. Requests already sent complete. On resume each held request is sent
// then, unless its context ended meanwhile, in which case it fails unsent. That is what
// a woken process's transport does with a request whose deadline passed while it slept
// (net/http checks the context before sending), and it keeps this fault about the
// pause itself, not about HTTP/2's race between a closed context and a free stream. It
// replaces any fault installed with SetFault; resume removes it and may be called more
// than once.
func (m *Manager) PauseTraffic() (resume func()) {
	released := make(chan struct{})
	m.SetFault(func(_ Traffic, r *http.Request) (time.Duration, error) {
		<-released
		if err := r.Context().Err(); err != nil {
			return 0, err
		}
		return 0, nil
	})
	var once sync.Once
	return func() {
		once.Do(func() {
			m.SetFault(nil)
			close(released)
		})
	}
}

func (m *Manager) transport(t Traffic) func(http.RoundTripper) http.RoundTripper {
	return func(rt http.RoundTripper) http.RoundTripper { return &faultyTransport{m: m, traffic: t, next: rt} }
}

// faultyTransport applies the manager's kill switch and fault to each request.
type faultyTransport struct {
	m       *Manager
	traffic Traffic
	next    http.RoundTripper
}

func (f *faultyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if f.m.killed.Load() {
		return nil, ErrKilled
	}
	var delay time.Duration
	if fault := f.m.fault.Load(); fault != nil {
		d, err := (*fault)(f.traffic, r)
		if errors.Is(err, ErrStuck) {
			// A call stuck where no context reaches it (a library ignoring cancellation).
			time.Sleep(d)
			return nil, err
		}
		if err != nil {
			return nil, err
		}
		delay = d
	}
	resp, err := f.next.RoundTrip(r)
	if delay > 0 && err == nil {
		// The request has reached the server; its answer comes late. A caller whose
		// context ends first sees a timeout although the request may have committed.
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			_ = resp.Body.Close()
			return nil, r.Context().Err()
		}
	}
	return resp, err
}

// WrappedRoundTripper lets client-go reach the real transport to cancel requests.
func (f *faultyTransport) WrappedRoundTripper() http.RoundTripper { return f.next }

// bindManagerRole binds user, on the hub, to the roles generated into config/rbac/role.yaml: the
// ClusterRole cluster-wide, and each namespaced Role in this Env's provider (and lease)
// namespace, where the deployment's kustomization would put it.
func (e *Env) bindManagerRole(ctx context.Context, user string) error {
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "rbac", "role.yaml"))
	if err != nil {
		return fmt.Errorf("reading generated RBAC: %w", err)
	}
	subjects := []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}}
	for _, doc := range strings.Split(string(data), "\n---") {
		var meta struct{ Kind string }
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			return fmt.Errorf("parsing config/rbac/role.yaml: %w", err)
		}
		switch meta.Kind {
		case "ClusterRole":
			role := &rbacv1.ClusterRole{}
			if err := yaml.Unmarshal([]byte(doc), role); err != nil {
				return err
			}
			if err := e.Hub.Client.Create(ctx, role); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("creating ClusterRole %s: %w", role.Name, err)
			}
			binding := &rbacv1.ClusterRoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: user},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
				Subjects:   subjects,
			}
			if err := e.Hub.Client.Create(ctx, binding); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("binding %s to %s: %w", user, role.Name, err)
			}
		case "Role":
			role := &rbacv1.Role{}
			if err := yaml.Unmarshal([]byte(doc), role); err != nil {
				return err
			}
			role.Namespace = e.ProviderNamespace
			if err := e.Hub.Client.Create(ctx, role); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("creating Role %s: %w", role.Name, err)
			}
			binding := &rbacv1.RoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: user + "-" + role.Name, Namespace: e.ProviderNamespace},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
				Subjects:   subjects,
			}
			if err := e.Hub.Client.Create(ctx, binding); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("binding %s to %s: %w", user, role.Name, err)
			}
		}
	}
	// The authorizer learns of new bindings through its own watch: wait until it has,
	// so the manager's first requests are not refused (a refused Lease write at start
	// would only delay the join, but would show in timing-sensitive tests).
	return WaitAllowed(ctx, e.Hub, user, authorizationv1.ResourceAttributes{
		Namespace: e.ProviderNamespace, Verb: "get", Group: "coordination.k8s.io", Resource: "leases",
	})
}

// LoggerFromEnv is the logger of managers started without one, and of the test binary:
// it discards logs unless ANCHORAGE_TEST_LOG is set (to a verbosity, e.g. 1), so a
// passing suite stays quiet and a failing one can be rerun with logs.
func LoggerFromEnv() logr.Logger {
	v := os.Getenv("ANCHORAGE_TEST_LOG")
	if v == "" {
		return logr.Discard()
	}
	level, _ := strconv.Atoi(v)
	return zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.Level(-level)))
}
