package harness

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
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

// allRequestsAuditPolicy records every request, reads and watches included, at
// Metadata level (never a body): what a test counting requests by verb needs.
const allRequestsAuditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
`

// PlaneOptions configures a ControlPlane.
type PlaneOptions struct {
	// AuditAllRequests records every request (reads, lists and watches too) besides the
	// writes every plane records, for a run that counts requests by verb. It supersedes
	// AuditSecretReads.
	AuditAllRequests bool
	// AuditSecretReads records every request on Secrets, reads included, besides the
	// writes every plane records. Off by default: tests that read the audit log for
	// writes would otherwise have to tell reads apart.
	AuditSecretReads bool
	// CRDs installed at start.
	CRDs []*apiextensionsv1.CustomResourceDefinition
	// GarbageCollector starts kube-controller-manager with the garbage collector and
	// namespace controllers, for tests that assert a cascade.
	GarbageCollector bool
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
	policyText := auditPolicy
	if opts.AuditSecretReads {
		// Before the final "level: None": the first matching rule wins.
		policyText = strings.Replace(auditPolicy, "- level: None\n", secretReadsAuditRule+"- level: None\n", 1)
	}
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
	}
	args := p.Env.ControlPlane.GetAPIServer().Configure()
	args.Set("audit-policy-file", policy)
	args.Set("audit-log-path", p.AuditLogPath)
	args.Set("audit-log-mode", "blocking")
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
		err = p.Env.Stop()
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
	var out []T
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 1<<20), 16<<20)
	for s.Scan() {
		var e T
		if err := json.Unmarshal(s.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("%s: parsing audit line: %w", path, err)
		}
		out = append(out, e)
	}
	return out, s.Err()
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
