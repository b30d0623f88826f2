package harness

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"anchorage/internal/testenv"
)

// DNSEndpointGVK is external-dns's DNSEndpoint, for unstructured objects (go.mod does
// not require external-dns).
var DNSEndpointGVK = schema.GroupVersionKind{Group: "externaldns.k8s.io", Version: "v1alpha1", Kind: "DNSEndpoint"}

// ExternalDNSOptions configures StartExternalDNS.
type ExternalDNSOptions struct {
	// OwnerID marks the records this instance owns (its TXT registry). Default
	// "anchorage-test".
	OwnerID string
	// Interval between two synchronisations. Default one second: a test waits on
	// records, and a sync of a small API server and zone costs little.
	Interval time.Duration
	// Args are more flags for external-dns.
	Args []string
}

// ExternalDNS is external-dns (bin/external-dns, built by hack/build-external-dns.sh)
// running as a process: its source the DNSEndpoints of every namespace of one API
// server, its provider RFC 2136 writing to one DNSServer with the server's TSIG key,
// policy sync (a DNSEndpoint gone takes its records with it), ownership kept in TXT
// records.
type ExternalDNS struct {
	process *testProcess
}

// StartExternalDNS starts external-dns against the API server of cfg (which must serve
// the DNSEndpoint CRD, testenv.ExternalDNSCRDs) and server, and returns once it is
// alive; it stops when the test ends. It fails the test when the binary has not been
// built or external-dns does not come up within ctx.
func StartExternalDNS(ctx context.Context, t TB, cfg *rest.Config, server *DNSServer, opts ExternalDNSOptions) *ExternalDNS {
	t.Helper()
	bin, err := testenv.ExternalDNSBinary()
	if err != nil {
		t.Fatal(err)
	}
	if opts.OwnerID == "" {
		opts.OwnerID = "anchorage-test"
	}
	if opts.Interval == 0 {
		opts.Interval = time.Second
	}
	kubeconfig, err := writeKubeconfig(t.TempDir(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	host, port, err := net.SplitHostPort(server.Addr)
	if err != nil {
		t.Fatal(err)
	}
	metrics, err := freeLoopbackPort()
	if err != nil {
		t.Fatal(err)
	}
	metricsAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(metrics))
	args := append([]string{
		"--kubeconfig=" + kubeconfig,
		"--source=crd",
		"--crd-source-apiversion=" + DNSEndpointGVK.GroupVersion().String(),
		"--crd-source-kind=" + DNSEndpointGVK.Kind,
		"--provider=rfc2136",
		"--rfc2136-host=" + host,
		"--rfc2136-port=" + port,
		"--rfc2136-zone=" + strings.TrimSuffix(server.Zone, "."),
		"--rfc2136-tsig-keyname=" + server.TSIG.Name,
		"--rfc2136-tsig-secret=" + server.TSIG.Secret,
		"--rfc2136-tsig-secret-alg=" + server.TSIG.Algorithm,
		// Without zone transfers the provider cannot read the zone, so it would never
		// see a record to delete.
		"--rfc2136-tsig-axfr",
		"--domain-filter=" + strings.TrimSuffix(server.Zone, "."),
		"--registry=txt",
		"--txt-owner-id=" + opts.OwnerID,
		"--policy=sync",
		"--interval=" + opts.Interval.String(),
		"--metrics-address=" + metricsAddr,
	}, opts.Args...)
	p, err := startTestProcess(t, "external-dns", bin, nil, args...)
	if err != nil {
		t.Fatal(err)
	}
	healthz := "http://" + metricsAddr + "/healthz"
	if err := WaitFor(ctx, "external-dns", func(ctx context.Context) error { return probeOK(ctx, http.DefaultClient, healthz) }, p.exited); err != nil {
		t.Fatal(err)
	}
	return &ExternalDNS{process: p}
}

// Exited returns an error with the end of external-dns's log once it has exited, nil
// while it runs.
func (e *ExternalDNS) Exited() error { return e.process.exited() }
