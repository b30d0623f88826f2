package harness

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"anchorage/internal/app"
	"anchorage/internal/testenv"
)

// auditPolicy records every write at Metadata level: enough to say who wrote what and
// when, without request bodies.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  verbs: ["create", "update", "patch", "delete", "deletecollection"]
- level: None
`

// secretReadsAuditRule records reads of Secrets too, at Metadata level (which Secret,
// by whom; never the data), for a test that must show whose Secrets were read.
const secretReadsAuditRule = `- level: Metadata
  resources: [{group: "", resources: ["secrets"]}]
`

// proxyReadsAuditRule records GETs of HTTPProxies, at Metadata level.
const proxyReadsAuditRule = `- level: Metadata
  verbs: ["get"]
  resources: [{group: "networking.datumapis.com", resources: ["httpproxies"]}]
`

// guardReadsAuditRule records the GETs of HTTPProxies, Gateways and HTTPRoutes (the
// objects the live guard reads), at Metadata level.
const guardReadsAuditRule = `- level: Metadata
  verbs: ["get"]
  resources: [{group: "networking.datumapis.com", resources: ["httpproxies"]}, {group: "gateway.networking.k8s.io", resources: ["gateways", "httproutes"]}]
`

// allRequestsAuditPolicy records every request, reads and watches included, at
// Metadata level (never a body): what a test counting requests by verb needs.
const allRequestsAuditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: None
  users: ["admin"]
  verbs: ["get", "list", "watch"]
- level: Metadata
`

// PlaneOptions configures a ControlPlane.
type PlaneOptions struct {
	// AuditAllRequests records every request (reads, lists and watches too) besides the
	// writes every plane records, for a run that counts requests by verb, except the
	// reads of the admin user (the harness's own client: a bench's polls are not what it
	// counts, and recording them cost the API server it measures). It supersedes
	// AuditSecretReads.
	AuditAllRequests bool
	// AuditSecretReads records every request on Secrets, reads included, besides the
	// writes every plane records. Off by default: tests that read the audit log for
	// writes would otherwise have to tell reads apart.
	AuditSecretReads bool
	// AuditProxyReads records the GETs of HTTPProxies too (who read which proxy, when),
	// for a run that ties a hub create to the live guard's read of its proxy.
	AuditProxyReads bool
	// AuditGuardReads records the GETs of HTTPProxies, Gateways and HTTPRoutes, for a
	// test that ties each hub create to the live guard's reads before it.
	AuditGuardReads bool
	// CRDs installed at start.
	CRDs []*apiextensionsv1.CustomResourceDefinition
	// GarbageCollector starts kube-controller-manager with the garbage collector and
	// namespace controllers, for tests that assert a cascade.
	GarbageCollector bool
	// Lean turns off what a plane does for itself while idle, for runs that start
	// many planes on few cores (the bench's data path runs 21): see leanAPIServerArgs
	// and leanEtcdArgs.
	Lean bool
}

// leanAPIServerArgs stop an API server's own periodic writes and bookkeeping that
// nothing here reads: the endpoints of the "kubernetes" Service (a lease written every
// 10 s), the server's identity Lease (every 10 s), and API Priority and Fairness (its
// configuration controller and queues; the plain in-flight limits apply instead).
// Measured on this 2-core machine, an idle plane's API server: 1.9 % of a core with
// the defaults, 1.5 % lean.
var leanAPIServerArgs = map[string]string{
	"endpoint-reconciler-type":     "none",
	"enable-priority-and-fairness": "false",
	"feature-gates":                "APIServerIdentity=false",
}

// leanEtcdArgs slow a single-member etcd's raft ticks fivefold (heartbeat every 500 ms
// instead of 100 ms; the election timeout keeps its tenfold ratio): with no
// peer there is nothing to heartbeat. Idle etcd: 1.05 % of a core by default, 0.78 %.
var leanEtcdArgs = map[string]string{
	"heartbeat-interval": "500",
	"election-timeout":   "5000",
}

// ControlPlane is one envtest API server (hub or project) with an audit log and,
// optionally, its garbage collector.
type ControlPlane struct {
	Name string
	Env  *envtest.Environment
	// Config is the admin (system:masters) REST config.
	Config *rest.Config
	// Client is an uncached admin client with anchorage's scheme.
	Client client.Client
	// AuditLogPath is the API server's audit log (JSON lines).
	AuditLogPath string

	dir  string
	kcm  *exec.Cmd
	once sync.Once

	// apiMu guards the kube-apiserver restart state below.
	apiMu sync.Mutex
	// apiPath and apiArgs are the kube-apiserver's binary and arguments, read from
	// /proc before the first kill (envtest keeps its process unexported).
	apiPath string
	apiArgs []string
	// apiDown is true between KillAPIServer and a successful StartAPIServer.
	apiDown bool
	// api is the kube-apiserver the harness started again; nil while envtest's own
	// process serves.
	api *apiServerProcess
}

// StartControlPlane starts an API server and etcd from the binaries hack/build-k8s.sh
// built, with auditing on.
func StartControlPlane(name string, opts PlaneOptions) (*ControlPlane, error) {
	bins, err := testenv.BinaryDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "anchorage-"+name+"-")
	if err != nil {
		return nil, err
	}
	policy := filepath.Join(dir, "audit-policy.yaml")
	// Extra rules go before the final "level: None": the first matching rule wins.
	var extra string
	if opts.AuditSecretReads {
		extra += secretReadsAuditRule
	}
	if opts.AuditGuardReads {
		extra += guardReadsAuditRule
	} else if opts.AuditProxyReads {
		extra += proxyReadsAuditRule
	}
	policyText := strings.Replace(auditPolicy, "- level: None\n", extra+"- level: None\n", 1)
	if opts.AuditAllRequests {
		policyText = allRequestsAuditPolicy
	}
	if err := os.WriteFile(policy, []byte(policyText), 0o600); err != nil {
		return nil, err
	}
	p := &ControlPlane{Name: name, dir: dir, AuditLogPath: filepath.Join(dir, "audit.log")}
	p.Env = &envtest.Environment{
		BinaryAssetsDirectory: bins,
		CRDs:                  opts.CRDs,
		ErrorIfCRDPathMissing: true,
		// envtest's 20 s per component is too short where several API servers start
		// at once on two cores (the bench's data path starts 20 planes, 4 at a time):
		// one that took longer failed a whole `make bench` run. The same bound as a
		// restarted API server's (apiServerStartTimeout).
		ControlPlaneStartTimeout: apiServerStartTimeout,
	}
	args := p.Env.ControlPlane.GetAPIServer().Configure()
	args.Set("audit-policy-file", policy)
	args.Set("audit-log-path", p.AuditLogPath)
	args.Set("audit-log-mode", "blocking")
	if opts.Lean {
		for k, v := range leanAPIServerArgs {
			args.Set(k, v)
		}
		p.Env.ControlPlane.Etcd = &envtest.Etcd{}
		etcdArgs := p.Env.ControlPlane.Etcd.Configure()
		for k, v := range leanEtcdArgs {
			etcdArgs.Set(k, v)
		}
	}
	if p.Config, err = p.Env.Start(); err != nil {
		return nil, fmt.Errorf("starting %s control plane: %w", name, err)
	}
	if p.Client, err = client.New(p.Config, client.Options{Scheme: app.Scheme()}); err != nil {
		_ = p.Stop()
		return nil, err
	}
	if opts.GarbageCollector {
		if err := p.startControllerManager(bins); err != nil {
			_ = p.Stop()
			return nil, err
		}
	}
	return p, nil
}

// Stop stops the control plane and everything the harness started beside it.
func (p *ControlPlane) Stop() error {
	var err error
	p.once.Do(func() {
		if p.kcm != nil && p.kcm.Process != nil {
			_ = p.kcm.Process.Kill()
			_ = p.kcm.Wait()
		}
		// A restarted kube-apiserver is the harness's, not envtest's: envtest's Stop
		// finds its own process gone and returns, so stop ours before etcd goes.
		apiErr := p.stopRestartedAPIServer()
		err = errors.Join(apiErr, p.Env.Stop())
		_ = os.RemoveAll(p.dir)
	})
	return err
}

// User creates an API user with the given groups and returns its REST config and a
// kubeconfig for it. Each manager gets its own user, so the audit log names the writer.
func (p *ControlPlane) User(name string, groups ...string) (*rest.Config, []byte, error) {
	u, err := p.Env.AddUser(envtest.User{Name: name, Groups: groups}, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("adding user %s: %w", name, err)
	}
	kc, err := u.KubeConfig()
	if err != nil {
		return nil, nil, err
	}
	return u.Config(), kc, nil
}

// KubeconfigVia returns kubeconfig bytes for cfg with its server replaced by addr
// ("host:port"), to reach the API server through a TCPProxy.
func KubeconfigVia(cfg *rest.Config, addr string) ([]byte, error) {
	server := cfg.Host
	if addr != "" {
		u, err := url.Parse(cfg.Host)
		if err != nil {
			return nil, err
		}
		u.Host = addr
		server = u.String()
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["c"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["u"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	kc.CurrentContext = "c"
	return clientcmd.Write(*kc)
}

// startControllerManager runs kube-controller-manager with only the garbage collector
// and namespace controllers: envtest runs no controllers, and the anchor design rests on
// the hub's garbage collector.
func (p *ControlPlane) startControllerManager(bins string) error {
	_, kc, err := p.User("kube-controller-manager", "system:masters")
	if err != nil {
		return err
	}
	kcPath := filepath.Join(p.dir, "kcm.kubeconfig")
	if err := os.WriteFile(kcPath, kc, 0o600); err != nil {
		return err
	}
	logf, err := os.Create(filepath.Join(p.dir, "kcm.log"))
	if err != nil {
		return err
	}
	p.kcm = exec.Command(filepath.Join(bins, "kube-controller-manager"),
		"--kubeconfig="+kcPath,
		"--controllers=garbagecollector,namespace",
		"--leader-elect=false",
		"--secure-port=0",
		"--use-service-account-credentials=false",
	)
	p.kcm.Stdout, p.kcm.Stderr = logf, logf
	if err := p.kcm.Start(); err != nil {
		return fmt.Errorf("starting kube-controller-manager: %w", err)
	}
	return nil
}

// AuditEvent is the part of an audit.k8s.io/v1 Event the tests read.
type AuditEvent struct {
	Verb string `json:"verb"`
	// UserAgent names the replica even where replicas share a user (app.UserAgent).
	UserAgent string `json:"userAgent"`
	User      struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef struct {
		Resource  string `json:"resource"`
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
		APIGroup  string `json:"apiGroup"`
	} `json:"objectRef"`
	ResponseStatus struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	RequestReceivedTimestamp time.Time `json:"requestReceivedTimestamp"`
	StageTimestamp           time.Time `json:"stageTimestamp"`
}

// AuditEvents reads the audit log written so far.
func (p *ControlPlane) AuditEvents() ([]AuditEvent, error) {
	return ReadAuditLog(p.AuditLogPath, 0)
}

// ReadAuditLog reads the audit events of the log at path from byte offset on.
func ReadAuditLog(path string, offset int64) ([]AuditEvent, error) {
	return ReadJSONLines[AuditEvent](path, offset)
}

// ReadJSONLines decodes each line of the file at path, from byte offset on, as a T: an
// audit log read into whichever fields the caller needs.
func ReadJSONLines[T any](path string, offset int64) ([]T, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return nil, err
	}
	// Only whole lines: the API server may be writing the last one as it is read, and
	// a line without its newline is left for the next read rather than failing this one.
	var out []T
	r := bufio.NewReaderSize(f, 1<<20)
	for {
		line, err := r.ReadBytes('\n')
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		var e T
		if err := json.Unmarshal(line, &e); err != nil {
			return nil, fmt.Errorf("%s: parsing audit line: %w", path, err)
		}
		out = append(out, e)
	}
}

// WaitForAPI polls until the server answers a read through c, or ctx ends.
func WaitForAPI(ctx context.Context, c client.Client, obj client.Object, key client.ObjectKey) error {
	for {
		err := c.Get(ctx, key, obj)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return errors.Join(ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// apiServerStartTimeout bounds StartAPIServer's wait for /readyz when ctx allows
// longer: a server that has not answered by then will not.
const apiServerStartTimeout = 60 * time.Second

// apiServerStopTimeout is how long Stop gives a restarted kube-apiserver between
// SIGTERM and SIGKILL, as envtest gives its own.
const apiServerStopTimeout = 20 * time.Second

// apiServerProcess is a kube-apiserver the harness started (after a kill).
type apiServerProcess struct {
	cmd *exec.Cmd
	// done is closed once cmd.Wait returned: the process is gone and reaped.
	done chan struct{}
	log  *os.File
}

// KillAPIServer SIGKILLs the plane's kube-apiserver, as a crash or an OOM kill would:
// no graceful shutdown, open connections dropped. etcd keeps running. When it returns
// the process is gone and its port free; StartAPIServer brings the server back.
func (p *ControlPlane) KillAPIServer() error {
	p.apiMu.Lock()
	defer p.apiMu.Unlock()
	if p.apiDown {
		return fmt.Errorf("%s: kube-apiserver already killed", p.Name)
	}
	if err := p.killAPIServer(); err != nil {
		return fmt.Errorf("%s: killing kube-apiserver: %w", p.Name, err)
	}
	p.apiDown = true
	return waitPortFree(p.apiServerAddr(), 10*time.Second)
}

// StartAPIServer starts the killed kube-apiserver again with the same binary and
// arguments, so the same port, etcd, certificates and authenticated users, and the
// same audit log (kube-apiserver opens it for appending). It returns once /readyz
// answers OK to the admin config; on failure the server stays down.
func (p *ControlPlane) StartAPIServer(ctx context.Context) error {
	p.apiMu.Lock()
	defer p.apiMu.Unlock()
	if !p.apiDown {
		return fmt.Errorf("%s: kube-apiserver is running (KillAPIServer first)", p.Name)
	}
	logPath := filepath.Join(p.dir, "apiserver.log")
	proc, err := startAPIServerProcess(p.apiPath, p.apiArgs, logPath)
	if err != nil {
		return fmt.Errorf("%s: starting kube-apiserver: %w", p.Name, err)
	}
	ctx, cancel := context.WithTimeout(ctx, apiServerStartTimeout)
	defer cancel()
	if err := p.waitReady(ctx, proc.done); err != nil {
		proc.kill()
		return fmt.Errorf("%s: restarted kube-apiserver not ready: %w; log tail:\n%s", p.Name, err, fileTail(logPath, 2048))
	}
	p.api, p.apiDown = proc, false
	return nil
}

// RestartAPIServer is KillAPIServer, a pause of down, then StartAPIServer. If ctx
// ends during the pause the server stays down.
func (p *ControlPlane) RestartAPIServer(ctx context.Context, down time.Duration) error {
	if err := p.KillAPIServer(); err != nil {
		return err
	}
	select {
	case <-time.After(down):
	case <-ctx.Done():
		return fmt.Errorf("%s: kube-apiserver left down: %w", p.Name, ctx.Err())
	}
	return p.StartAPIServer(ctx)
}

// killAPIServer SIGKILLs whichever kube-apiserver serves now: the harness's own after
// an earlier restart, else envtest's, found in /proc, whose command line it keeps for
// StartAPIServer.
func (p *ControlPlane) killAPIServer() error {
	if p.api != nil {
		p.api.kill()
		p.api = nil
		return nil
	}
	pid, err := findChildAPIServer(os.Getpid(), p.Env.ControlPlane.APIServer.SecureServing.Port, p.Env.ControlPlane.APIServer.CertDir)
	if err != nil {
		return err
	}
	if p.apiPath, p.apiArgs, err = processCommand(pid); err != nil {
		return err
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return err
	}
	// envtest's Wait reaps it and records it exited, so envtest's Stop later skips it.
	return waitProcessGone(pid, 10*time.Second)
}

// stopRestartedAPIServer stops the kube-apiserver the harness started, if any,
// gracefully as envtest stops its own.
func (p *ControlPlane) stopRestartedAPIServer() error {
	p.apiMu.Lock()
	defer p.apiMu.Unlock()
	if p.api == nil {
		return nil
	}
	proc := p.api
	p.api = nil
	defer proc.log.Close()
	_ = proc.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-proc.done:
		return nil
	case <-time.After(apiServerStopTimeout):
		proc.kill()
		return fmt.Errorf("%s: restarted kube-apiserver did not stop within %s of SIGTERM; killed", p.Name, apiServerStopTimeout)
	}
}

func (p *ControlPlane) apiServerAddr() string {
	return p.Env.ControlPlane.APIServer.SecureServing.HostPort()
}

// waitReady polls /readyz with the admin config until it answers OK, the process
// exits or ctx ends.
func (p *ControlPlane) waitReady(ctx context.Context, exited <-chan struct{}) error {
	hc, err := rest.HTTPClientFor(p.Config)
	if err != nil {
		return err
	}
	defer hc.CloseIdleConnections()
	u, err := url.Parse(p.Config.Host)
	if err != nil {
		return err
	}
	u.Path = "/readyz"
	for {
		last := probeOK(ctx, hc, u.String())
		if last == nil {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("kube-apiserver exited (last probe: %w)", last)
		case <-ctx.Done():
			return errors.Join(ctx.Err(), last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// probeOK GETs u and returns nil on 200 OK.
func probeOK(ctx context.Context, hc *http.Client, u string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s: %s", u, resp.Status, body)
	}
	return nil
}

// startAPIServerProcess starts path with args, its output appended to logPath, in its
// own process group as envtest starts it (a terminal's Ctrl-C reaches the test first).
// The environment is the test process's, which envtest passed on too.
func startAPIServerProcess(path string, args []string, logPath string) (*apiServerProcess, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return nil, err
	}
	proc := &apiServerProcess{cmd: cmd, done: make(chan struct{}), log: logf}
	go func() {
		_ = cmd.Wait()
		close(proc.done)
	}()
	return proc, nil
}

// kill SIGKILLs the process and waits until it is reaped.
func (a *apiServerProcess) kill() {
	_ = a.cmd.Process.Signal(syscall.SIGKILL)
	<-a.done
	_ = a.log.Close()
}

// findChildAPIServer returns the pid of parent's child kube-apiserver serving port
// with certDir: the plane's own, among the other planes' of the same test process.
func findChildAPIServer(parent int, port, certDir string) (int, error) {
	found, err := childProcesses(parent, func(argv []string) bool { return isPlaneAPIServer(argv, port, certDir) })
	if err != nil {
		return 0, err
	}
	if len(found) != 1 {
		return 0, fmt.Errorf("want one kube-apiserver child of %d with --secure-port=%s --cert-dir=%s, found %v", parent, port, certDir, found)
	}
	return found[0], nil
}

// childProcesses returns the pids of parent's children whose command line matches.
func childProcesses(parent int, match func(argv []string) bool) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var found []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // gone meanwhile
		}
		if ppid, err := parentPID(string(stat)); err != nil || ppid != parent {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if match(splitCmdline(cmdline)) {
			found = append(found, pid)
		}
	}
	return found, nil
}

// processCommand returns a process's executable and arguments, to start it again.
// The executable comes from /proc/<pid>/exe, absolute whatever argv[0] said.
func processCommand(pid int) (string, []string, error) {
	dir := filepath.Join("/proc", strconv.Itoa(pid))
	exe, err := os.Readlink(filepath.Join(dir, "exe"))
	if err != nil {
		return "", nil, err
	}
	cmdline, err := os.ReadFile(filepath.Join(dir, "cmdline"))
	if err != nil {
		return "", nil, err
	}
	argv := splitCmdline(cmdline)
	if len(argv) == 0 {
		return "", nil, fmt.Errorf("process %d has an empty command line", pid)
	}
	return exe, argv[1:], nil
}

// parentPID reads the parent pid from a /proc/<pid>/stat line. The command name in
// parentheses may hold spaces and parentheses, so fields count from its last ')'.
func parentPID(stat string) (int, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("no command name in stat %q", stat)
	}
	fields := strings.Fields(stat[i+1:])
	if len(fields) < 2 {
		return 0, fmt.Errorf("no parent pid in stat %q", stat)
	}
	return strconv.Atoi(fields[1])
}

// splitCmdline splits /proc/<pid>/cmdline, NUL-terminated arguments, into argv.
func splitCmdline(b []byte) []string {
	s := strings.TrimSuffix(string(b), "\x00")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\x00")
}

// isPlaneAPIServer says whether argv runs kube-apiserver with the given secure port
// and cert dir. envtest passes every flag as one "--name=value" argument.
func isPlaneAPIServer(argv []string, port, certDir string) bool {
	if len(argv) == 0 || filepath.Base(argv[0]) != "kube-apiserver" {
		return false
	}
	var portOK, dirOK bool
	for _, a := range argv[1:] {
		portOK = portOK || a == "--secure-port="+port
		dirOK = dirOK || a == "--cert-dir="+certDir
	}
	return portOK && dirOK
}

// waitProcessGone polls until /proc no longer lists pid (it exited and was reaped).
func waitProcessGone(pid int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if _, err := os.Stat(filepath.Join("/proc", strconv.Itoa(pid))); errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("process %d still present %s after SIGKILL", pid, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitPortFree polls until addr can be bound again, so a restart does not race the
// dying server's listener. Like kube-apiserver's, Go's listener sets SO_REUSEADDR:
// closed connections in TIME_WAIT do not block it.
func waitPortFree(addr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		l, err := net.Listen("tcp", addr)
		if err == nil {
			return l.Close()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("port %s still taken %s after the kill: %w", addr, timeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// fileTail returns up to n bytes from the end of the file at path.
func fileTail(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > n {
		_, _ = f.Seek(-n, io.SeekEnd)
	}
	b, _ := io.ReadAll(f)
	return string(b)
}
