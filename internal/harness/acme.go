package harness

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"anchorage/internal/testenv"
)

// challengePath is where an ACME HTTP-01 challenge's key is served (RFC 8555, 8.3).
const challengePath = "/.well-known/acme-challenge/"

// HTTP01Solver answers ACME HTTP-01 challenges in place of the solver Pods cert-manager
// creates for them, which nothing runs here (an API server has no kubelet): a GET of
// challengePath<token>, on any host, gets the key of the Challenge with that token and
// that host's name. cert-manager's self-check, which must pass before cert-manager asks
// the ACME server to validate, fetches http://<name>/... on port 80; it reaches the
// solver instead as its HTTP proxy (CertManagerOptions.HTTP01Solver), so no name needs
// to resolve and no privileged port is bound. Go's clients never proxy a loopback
// address, so cert-manager still reaches the API server and Pebble directly.
type HTTP01Solver struct {
	// URL is the solver's address as a proxy URL, http://127.0.0.1:<port>.
	URL string
}

// challengeListGVK lists cert-manager's ACME Challenges.
var challengeListGVK = schema.GroupVersionKind{Group: "acme.cert-manager.io", Version: "v1", Kind: "ChallengeList"}

// StartHTTP01Solver serves the keys of the Challenges c reads until the test ends.
func StartHTTP01Solver(t testing.TB, c client.Reader) *HTTP01Solver {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, ok := strings.CutPrefix(r.URL.Path, challengePath)
		if !ok {
			http.NotFound(w, r)
			return
		}
		key, err := challengeKey(r.Context(), c, r.Host, token)
		if err != nil {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		_, _ = io.WriteString(w, key)
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return &HTTP01Solver{URL: "http://" + l.Addr().String()}
}

// challengeKey returns the key of the Challenge for host (its name, without a port)
// with token.
func challengeKey(ctx context.Context, c client.Reader, host, token string) (string, error) {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(challengeListGVK)
	if err := c.List(ctx, list); err != nil {
		return "", err
	}
	for _, ch := range list.Items {
		field := func(name string) string {
			v, _, _ := unstructured.NestedString(ch.Object, "spec", name)
			return v
		}
		if field("type") == "HTTP-01" && field("token") == token && field("dnsName") == host {
			return field("key"), nil
		}
	}
	return "", fmt.Errorf("no HTTP-01 Challenge for %s with token %s", host, token)
}

// Pebble is Let's Encrypt's ACME test server (bin/pebble, built by
// hack/build-pebble.sh) on loopback ports, told to find every challenge valid
// (PEBBLE_VA_ALWAYS_VALID): what is real is cert-manager's side, its ACME account,
// order, challenges with their self-check, and the certificate Pebble's CA issues.
type Pebble struct {
	// DirectoryURL is the ACME directory, https://127.0.0.1:<port>/dir.
	DirectoryURL string
	// TLSCA signed Pebble's serving certificate: an ACME issuer's caBundle.
	TLSCA *CA

	managementURL string
	process       *testProcess
}

// StartPebble starts Pebble and returns once its directory answers; it stops when the
// test ends.
func StartPebble(ctx context.Context, t testing.TB) *Pebble {
	t.Helper()
	bin, err := testenv.PebbleBinary()
	if err != nil {
		t.Fatal(err)
	}
	p, conf, err := newPebbleConfig(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	env := []string{"PEBBLE_VA_ALWAYS_VALID=1", "PEBBLE_VA_NOSLEEP=1", "PEBBLE_WFE_NONCEREJECT=0"}
	if p.process, err = startTestProcess(t, "pebble", bin, env, "-config", conf); err != nil {
		t.Fatal(err)
	}
	hc := p.httpClient()
	if err := WaitFor(ctx, "pebble", func(ctx context.Context) error { return probeOK(ctx, hc, p.DirectoryURL) }, p.process.exited); err != nil {
		t.Fatal(err)
	}
	return p
}

// newPebbleConfig writes Pebble's configuration and serving key pair in dir, with free
// loopback ports, and returns the Pebble it describes and the configuration's path.
func newPebbleConfig(dir string) (*Pebble, string, error) {
	ca, err := NewCA("pebble-tls")
	if err != nil {
		return nil, "", err
	}
	certPEM, keyPEM, err := ca.IssueServing()
	if err != nil {
		return nil, "", err
	}
	certPath, keyPath := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certPath, certPEM, 0o600); err != nil {
		return nil, "", err
	}
	if err := os.WriteFile(keyPath, keyPEM, 0o600); err != nil {
		return nil, "", err
	}
	var addrs [2]string
	for i := range addrs {
		port, err := freeLoopbackPort()
		if err != nil {
			return nil, "", err
		}
		addrs[i] = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	}
	conf := map[string]any{"pebble": map[string]any{
		"listenAddress": addrs[0], "managementListenAddress": addrs[1],
		"certificate": certPath, "privateKey": keyPath,
		"keyAlgorithm": "ecdsa",
	}}
	data, err := json.Marshal(conf)
	if err != nil {
		return nil, "", err
	}
	path := filepath.Join(dir, "pebble.json")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return nil, "", err
	}
	return &Pebble{DirectoryURL: "https://" + addrs[0] + "/dir", TLSCA: ca, managementURL: "https://" + addrs[1]}, path, nil
}

// httpClient trusts Pebble's serving certificate.
func (p *Pebble) httpClient() *http.Client {
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: p.TLSCA.Pool()}}}
}

// Roots returns the root of the CA Pebble issues from (made at its start), from its
// management interface: what a certificate it issued verifies against.
func (p *Pebble) Roots(ctx context.Context) (*x509.CertPool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.managementURL+"/roots/0", nil)
	if err != nil {
		return nil, err
	}
	resp, err := p.httpClient().Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if resp.StatusCode != http.StatusOK || !pool.AppendCertsFromPEM(body) {
		return nil, fmt.Errorf("pebble's root: %s: %.200s", resp.Status, body)
	}
	return pool, nil
}

// Exited returns an error with the end of Pebble's log once it has exited, nil while it
// runs.
func (p *Pebble) Exited() error { return p.process.exited() }

// CreateACMEClusterIssuer creates the ClusterIssuer name ordering from Pebble with an
// HTTP-01 solver, its ACME account key in the Secret <name>-account (in cert-manager's
// cluster resource namespace, which cert-manager writes). It does not wait for the
// account to be registered.
func CreateACMEClusterIssuer(ctx context.Context, c client.Client, name string, p *Pebble) error {
	issuer := &unstructured.Unstructured{}
	issuer.SetGroupVersionKind(ClusterIssuerGVK)
	issuer.SetName(name)
	issuer.Object["spec"] = map[string]any{"acme": map[string]any{
		"server":              p.DirectoryURL,
		"caBundle":            base64.StdEncoding.EncodeToString(p.TLSCA.CertPEM),
		"privateKeySecretRef": map[string]any{"name": name + "-account"},
		"solvers":             []any{map[string]any{"http01": map[string]any{"ingress": map[string]any{}}}},
	}}
	if err := c.Create(ctx, issuer); err != nil {
		return fmt.Errorf("creating the ClusterIssuer %s: %w", name, err)
	}
	return nil
}
