package harness

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// TSIGKey is a shared secret that signs DNS messages (RFC 8945), spelt as Knot's
// configuration and external-dns's --rfc2136-tsig-* flags take it.
type TSIGKey struct {
	// Name is the key's name, a fully qualified domain name.
	Name string
	// Algorithm is e.g. "hmac-sha256".
	Algorithm string
	// Secret is the base64 of the key.
	Secret string
}

// DNSServer is Knot DNS, Debian's knotd (hack/install-dns-server.sh installs it),
// authoritative for one zone on a loopback port, accepting dynamic updates (RFC 2136)
// and zone transfers signed with TSIG: the server external-dns's RFC 2136 provider
// writes to.
type DNSServer struct {
	// Addr is "127.0.0.1:<port>", UDP and TCP.
	Addr string
	// Zone is the zone's name, fully qualified ("platform.test.").
	Zone string
	// TSIG signs the updates and transfers the server accepts.
	TSIG TSIGKey

	process *testProcess
}

// dnsServerStartAttempts bounds the restarts on a port another process took between
// freeLoopbackPort and knotd's bind.
const dnsServerStartAttempts = 3

// StartDNSServer starts knotd serving zone (its SOA and NS, nothing else) from a
// directory of its own, as the test's user (no systemd, no privilege), and stops it when
// the test ends. It returns once the server answers for the zone over UDP and TCP.
func StartDNSServer(t TB, zone string) *DNSServer {
	t.Helper()
	bin, err := knotdBinary()
	if err != nil {
		t.Fatal(err)
	}
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		t.Fatal(err)
	}
	s := &DNSServer{Zone: dns.Fqdn(zone), TSIG: TSIGKey{Name: "anchorage-test.", Algorithm: "hmac-sha256", Secret: base64.StdEncoding.EncodeToString(secret)}}
	for attempt := 1; ; attempt++ {
		err := s.start(t, bin)
		if err == nil {
			return s
		}
		if attempt == dnsServerStartAttempts {
			t.Fatalf("starting knotd: %v", err)
		}
	}
}

// start runs knotd on a fresh port and waits until it answers.
func (s *DNSServer) start(t TB, bin string) error {
	// knotd's own directory (zone file, journal, control socket) is outside t.TempDir:
	// a test's long temp path would overflow a Unix socket's path.
	dir, err := os.MkdirTemp("", "knotd-")
	if err != nil {
		return err
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	port, err := freeLoopbackPort()
	if err != nil {
		return err
	}
	s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	conf := filepath.Join(dir, "knot.conf")
	if err := os.WriteFile(conf, []byte(s.knotConfig(dir, port)), 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, strings.TrimSuffix(s.Zone, ".")+".zone"), []byte(s.zoneFile()), 0o600); err != nil {
		return err
	}
	if s.process, err = startTestProcess(t, "knotd", bin, nil, "-c", conf); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return WaitFor(ctx, "knotd", s.answers, s.process.exited)
}

// answers checks the server answers the zone's SOA over UDP and over TCP.
func (s *DNSServer) answers(ctx context.Context) error {
	for _, network := range []string{"udp", "tcp"} {
		m, err := s.exchange(ctx, network, s.Zone, dns.TypeSOA)
		if err != nil {
			return err
		}
		if m.Rcode != dns.RcodeSuccess || len(m.Answer) == 0 {
			return fmt.Errorf("SOA %s over %s: %s, %d answers", s.Zone, network, dns.RcodeToString[m.Rcode], len(m.Answer))
		}
	}
	return nil
}

// Query asks the server for name's records of type qtype (dns.TypeA, ...) over UDP and
// returns its response; NXDOMAIN is a response, not an error.
func (s *DNSServer) Query(ctx context.Context, name string, qtype uint16) (*dns.Msg, error) {
	return s.exchange(ctx, "udp", name, qtype)
}

func (s *DNSServer) exchange(ctx context.Context, network, name string, qtype uint16) (*dns.Msg, error) {
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), qtype)
	c := &dns.Client{Net: network, Timeout: 2 * time.Second}
	r, _, err := c.ExchangeContext(ctx, m, s.Addr)
	if err != nil {
		return nil, fmt.Errorf("asking %s for %s %s over %s: %w", s.Addr, name, dns.TypeToString[qtype], network, err)
	}
	return r, nil
}

// Exited returns an error with the end of knotd's log once it has exited, nil while it
// runs.
func (s *DNSServer) Exited() error { return s.process.exited() }

// knotConfig is knotd's configuration: everything in dir, listening on port, the key,
// and the zone updatable and transferable with that key only. The zone file is never
// written back (zonefile-sync -1): updates live in the journal, which is enough for a
// server that lives as long as one test.
func (s *DNSServer) knotConfig(dir string, port int) string {
	return fmt.Sprintf(`server:
    rundir: %[1]q
    listen: 127.0.0.1@%[2]d
log:
  - target: stderr
    any: info
database:
    storage: %[1]q
key:
  - id: %[3]s
    algorithm: %[4]s
    secret: %[5]s
acl:
  - id: tsig
    key: %[3]s
    action: [update, transfer]
template:
  - id: default
    storage: %[1]q
    file: "%%s.zone"
    zonefile-sync: -1
zone:
  - domain: %[6]s
    acl: tsig
`, dir, port, s.TSIG.Name, s.TSIG.Algorithm, s.TSIG.Secret, s.Zone)
}

// zoneFile is the zone as it starts: its SOA (short timers: nothing caches in a test),
// and a nameserver with its address.
func (s *DNSServer) zoneFile() string {
	return fmt.Sprintf(`$ORIGIN %[1]s
$TTL 60
@  SOA ns.%[1]s hostmaster.%[1]s 1 60 60 3600 60
@  NS  ns.%[1]s
ns A   127.0.0.1
`, s.Zone)
}

// knotdBinary finds Debian's knotd, which lives in /usr/sbin, outside a non-root PATH.
func knotdBinary() (string, error) {
	if path, err := exec.LookPath("knotd"); err == nil {
		return path, nil
	}
	const sbin = "/usr/sbin/knotd"
	if _, err := os.Stat(sbin); err == nil {
		return sbin, nil
	}
	return "", errors.New("knotd (Knot DNS) is not installed (run hack/install-dns-server.sh, or make test, which installs Debian's knot)")
}
