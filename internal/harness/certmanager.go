package harness

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"anchorage/internal/testenv"
)

// CertManagerControllers are the controllers of cert-manager's controller a test runs:
// those that take a Certificate to a Secret through a CertificateRequest (trigger, key
// manager, request manager, approver, issuing, readiness, revision manager), the
// issuers' readiness, and the CA, self-signed and ACME signers with the ACME Orders and
// Challenges. Left out: the ingress and gateway shims, metrics, Vault and Venafi.
var CertManagerControllers = []string{
	"issuers", "clusterissuers",
	"certificates-trigger", "certificates-key-manager", "certificates-request-manager",
	"certificates-issuing", "certificates-readiness", "certificates-revision-manager",
	"certificaterequests-approver",
	"certificaterequests-issuer-ca", "certificaterequests-issuer-selfsigned",
	"certificaterequests-issuer-acme", "orders", "challenges",
}

// DefaultClusterResourceNamespace is where cert-manager reads a ClusterIssuer's Secrets
// in tests (the CA's key pair, an ACME account key).
const DefaultClusterResourceNamespace = "cert-manager"

// CertManagerOptions configures StartCertManager.
type CertManagerOptions struct {
	// ClusterResourceNamespace holds the Secrets ClusterIssuers name; it is created if
	// missing. Default DefaultClusterResourceNamespace.
	ClusterResourceNamespace string
	// Controllers to run; default CertManagerControllers.
	Controllers []string
	// HTTP01Solver, when set, answers the self-check of ACME HTTP-01 challenges: it is
	// the controller's HTTP proxy (HTTP_PROXY).
	HTTP01Solver *HTTP01Solver
	// Args are more flags for the controller.
	Args []string
}

// CertManager is cert-manager's controller (bin/cert-manager-controller, built by
// hack/build-cert-manager.sh) running as a process against one API server, cluster-wide
// and without leader election. No webhook runs: the API server serves cert-manager's
// CRDs (testenv.CertManagerCRDs) with their schemas only, so what the webhook would
// have refused is not refused here.
type CertManager struct {
	// ClusterResourceNamespace is where it reads ClusterIssuers' Secrets.
	ClusterResourceNamespace string

	process *testProcess
}

// StartCertManager starts cert-manager's controller against the API server of cfg
// (which must serve testenv.CertManagerCRDs) and returns once it is alive; it stops
// when the test ends. It fails the test when the binary has not been built or the
// controller does not come up within ctx.
func StartCertManager(ctx context.Context, t TB, cfg *rest.Config, opts CertManagerOptions) *CertManager {
	t.Helper()
	bin, err := testenv.CertManagerBinary()
	if err != nil {
		t.Fatal(err)
	}
	if opts.ClusterResourceNamespace == "" {
		opts.ClusterResourceNamespace = DefaultClusterResourceNamespace
	}
	if opts.Controllers == nil {
		opts.Controllers = CertManagerControllers
	}
	if err := ensureNamespace(ctx, cfg, opts.ClusterResourceNamespace); err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := writeKubeconfig(t.TempDir(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	healthz, err := freeLoopbackPort()
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{
		"--kubeconfig=" + kubeconfig,
		"--leader-elect=false",
		"--controllers=" + strings.Join(opts.Controllers, ","),
		"--cluster-resource-namespace=" + opts.ClusterResourceNamespace,
		"--metrics-listen-address=127.0.0.1:0",
		"--internal-healthz-listen-address=127.0.0.1:" + strconv.Itoa(healthz),
		// How long after a failed ACME self-check the next one runs: 10 s by default,
		// for DNS propagation on the Internet; nothing propagates here.
		"--dns01-check-retry-period=1s",
	}, opts.Args...)
	var env []string
	if opts.HTTP01Solver != nil {
		env = append(env, "HTTP_PROXY="+opts.HTTP01Solver.URL)
	}
	p, err := startTestProcess(t, "cert-manager-controller", bin, env, args...)
	if err != nil {
		t.Fatal(err)
	}
	livez := "http://127.0.0.1:" + strconv.Itoa(healthz) + "/livez"
	if err := WaitFor(ctx, "cert-manager's controller", func(ctx context.Context) error { return probeOK(ctx, http.DefaultClient, livez) }, p.exited); err != nil {
		t.Fatal(err)
	}
	return &CertManager{ClusterResourceNamespace: opts.ClusterResourceNamespace, process: p}
}

// Exited returns an error with the end of the controller's log once it has exited, nil
// while it runs: a wait on its work can give up early with the reason.
func (m *CertManager) Exited() error { return m.process.exited() }

// CA is a self-signed certificate authority, as a CA issuer holds it.
type CA struct {
	Cert    *x509.Certificate
	CertPEM []byte
	KeyPEM  []byte
}

// Pool returns a pool holding only the CA, to verify what it signed.
func (ca *CA) Pool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	return pool
}

// NewCA returns a fresh self-signed CA valid for a day.
func NewCA(commonName string) (*CA, error) {
	key, tmpl, err := newKeyAndTemplate(commonName)
	if err != nil {
		return nil, err
	}
	tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature
	certPEM, keyPEM, err := signPEM(tmpl, tmpl, key, key)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(certPEM)
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, CertPEM: certPEM, KeyPEM: keyPEM}, nil
}

// IssueServing returns a serving certificate the CA signed for the loopback address
// and "localhost", valid for a day, and its key, both PEM: for a TLS server a test
// runs (Pebble), which clients then trust through the CA alone.
func (ca *CA) IssueServing() (certPEM, keyPEM []byte, err error) {
	key, tmpl, err := newKeyAndTemplate("localhost")
	if err != nil {
		return nil, nil, err
	}
	tmpl.DNSNames = []string{"localhost"}
	tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	block, _ := pem.Decode(ca.KeyPEM)
	caKey, err := x509.ParseECPrivateKey(block.Bytes)
	if err != nil {
		return nil, nil, err
	}
	return signPEM(tmpl, ca.Cert, key, caKey)
}

// newKeyAndTemplate returns a fresh P-256 key and a certificate template for it named
// commonName, with a random serial, valid from an hour ago for a day.
func newKeyAndTemplate(commonName string) (*ecdsa.PrivateKey, *x509.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, nil, err
	}
	return key, &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: commonName},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
	}, nil
}

// signPEM signs tmpl's certificate for key with parent and parentKey, and returns it and
// key as PEM.
func signPEM(tmpl, parent *x509.Certificate, key, parentKey *ecdsa.PrivateKey) (certPEM, keyPEM []byte, err error) {
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}

// ClusterIssuerGVK is cert-manager's ClusterIssuer, for unstructured objects (go.mod does
// not require cert-manager, so its types are not at hand).
var ClusterIssuerGVK = schema.GroupVersionKind{Group: "cert-manager.io", Version: "v1", Kind: "ClusterIssuer"}

// CreateCAClusterIssuer creates a fresh CA, its key pair as the Secret <name>-ca in
// namespace (a TLS Secret, what a CA issuer reads; namespace must be cert-manager's
// cluster resource namespace) and the ClusterIssuer name signing with it, and returns
// the CA. It does not wait for the issuer to be Ready.
func CreateCAClusterIssuer(ctx context.Context, c client.Client, name, namespace string) (*CA, error) {
	ca, err := NewCA(name)
	if err != nil {
		return nil, err
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-ca", Namespace: namespace},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{corev1.TLSCertKey: ca.CertPEM, corev1.TLSPrivateKeyKey: ca.KeyPEM},
	}
	if err := c.Create(ctx, secret); err != nil {
		return nil, fmt.Errorf("creating the CA Secret %s/%s: %w", namespace, secret.Name, err)
	}
	issuer := &unstructured.Unstructured{}
	issuer.SetGroupVersionKind(ClusterIssuerGVK)
	issuer.SetName(name)
	issuer.Object["spec"] = map[string]any{"ca": map[string]any{"secretName": secret.Name}}
	if err := c.Create(ctx, issuer); err != nil {
		return nil, fmt.Errorf("creating the ClusterIssuer %s: %w", name, err)
	}
	return ca, nil
}

// ensureNamespace creates namespace through cfg unless it exists.
func ensureNamespace(ctx context.Context, cfg *rest.Config, namespace string) error {
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
	if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", namespace, err)
	}
	return nil
}
