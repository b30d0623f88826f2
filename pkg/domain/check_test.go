package domain

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"anchorage/api/v1alpha"
)

// zone is a test nameserver's data; names are lower case and fully qualified.
type zone struct {
	txt   map[string][][]string // each record's strings
	a     map[string][]string
	aaaa  map[string][]string
	cname map[string]string // answered with the CNAME and the target's records
	// empty names exist with no records (NOERROR, no answer).
	empty map[string]bool
	// rcode forces an answer code for a name, any type.
	rcode map[string]int
	// truncUDP names are answered over UDP with TC set and no records.
	truncUDP map[string]bool
	// silent names are never answered.
	silent map[string]bool

	mu      sync.Mutex
	queries []string // "udp TXT name."
}

func (z *zone) asked() []string {
	z.mu.Lock()
	defer z.mu.Unlock()
	return append([]string(nil), z.queries...)
}

func (z *zone) ServeDNS(w dns.ResponseWriter, r *dns.Msg) {
	q := r.Question[0]
	network := w.LocalAddr().Network()
	name := strings.ToLower(q.Name)
	z.mu.Lock()
	z.queries = append(z.queries, network+" "+dns.TypeToString[q.Qtype]+" "+name)
	z.mu.Unlock()
	if z.silent[name] {
		return
	}
	m := new(dns.Msg)
	m.SetReply(r)
	m.Authoritative = true
	if rc, ok := z.rcode[name]; ok {
		m.Rcode = rc
		_ = w.WriteMsg(m)
		return
	}
	if network == "udp" && z.truncUDP[name] {
		m.Truncated = true
		_ = w.WriteMsg(m)
		return
	}
	owner := q.Name
	if target, ok := z.cname[name]; ok {
		m.Answer = append(m.Answer, &dns.CNAME{Hdr: dns.RR_Header{Name: owner, Rrtype: dns.TypeCNAME, Class: dns.ClassINET, Ttl: 60}, Target: target})
		name, owner = target, target
	}
	exists := z.empty[name]
	hdr := func(t uint16) dns.RR_Header {
		return dns.RR_Header{Name: owner, Rrtype: t, Class: dns.ClassINET, Ttl: 60}
	}
	if recs, ok := z.txt[name]; ok {
		exists = true
		if q.Qtype == dns.TypeTXT {
			for _, rec := range recs {
				m.Answer = append(m.Answer, &dns.TXT{Hdr: hdr(dns.TypeTXT), Txt: rec})
			}
		}
	}
	if ips, ok := z.a[name]; ok {
		exists = true
		if q.Qtype == dns.TypeA {
			for _, ip := range ips {
				m.Answer = append(m.Answer, &dns.A{Hdr: hdr(dns.TypeA), A: net.ParseIP(ip)})
			}
		}
	}
	if ips, ok := z.aaaa[name]; ok {
		exists = true
		if q.Qtype == dns.TypeAAAA {
			for _, ip := range ips {
				m.Answer = append(m.Answer, &dns.AAAA{Hdr: hdr(dns.TypeAAAA), AAAA: net.ParseIP(ip)})
			}
		}
	}
	if !exists && len(m.Answer) == 0 {
		m.Rcode = dns.RcodeNameError
	}
	if network == "udp" {
		m.Truncate(dns.MinMsgSize) // as a real server does: TC when it does not fit
	}
	_ = w.WriteMsg(m)
}

// serveDNS starts a nameserver for z on 127.0.0.1, UDP and TCP on one port; it returns
// its host:port.
func serveDNS(t *testing.T, z *zone) string {
	t.Helper()
	var pc net.PacketConn
	var l net.Listener
	for i := 0; ; i++ {
		var err error
		if pc, err = net.ListenPacket("udp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		if l, err = net.Listen("tcp", pc.LocalAddr().String()); err == nil {
			break
		}
		_ = pc.Close()
		if i == 20 {
			t.Fatalf("no port free for both UDP and TCP: %v", err)
		}
	}
	for _, srv := range []*dns.Server{{PacketConn: pc, Handler: z}, {Listener: l, Handler: z}} {
		started := make(chan struct{})
		srv.NotifyStartedFunc = func() { close(started) }
		go func() { _ = srv.ActivateAndServe() }()
		<-started
		t.Cleanup(func() { _ = srv.Shutdown() })
	}
	return pc.LocalAddr().String()
}

// downNameserver is the address of a UDP and TCP port nothing listens on.
func downNameserver(t *testing.T) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := pc.LocalAddr().String()
	_ = pc.Close()
	return addr
}

// proof is the verification of a Domain www.acme.com with the token tok.
func proof(tok string) *v1alpha.DomainVerificationStatus {
	d := newDomain("www.acme.com", t0)
	IssueProof(d, settings, tok, t0)
	return d.Status.Verification
}

const recordName = "_anchorage-challenge.www.acme.com."

func TestCheckerTXT(t *testing.T) {
	many := make([][]string, 40)
	for i := range many {
		many[i] = []string{fmt.Sprintf("unrelated-record-%02d-%s", i, strings.Repeat("x", 40))}
	}
	many = append(many, []string{"tok"})
	cases := []struct {
		reason     string
		z          *zone
		wantFound  bool
		wantReason string
		wantMsg    []string
		wantTCP    bool // the record was asked over TCP too
	}{
		{reason: "the only record", z: &zone{txt: map[string][][]string{recordName: {{"tok"}}}}, wantFound: true, wantReason: v1alpha.DomainReasonVerified},
		{reason: "found among several", z: &zone{txt: map[string][][]string{recordName: {{"v=spf1 -all"}, {"tok"}, {"other"}}}}, wantFound: true, wantReason: v1alpha.DomainReasonVerified},
		{reason: "a record of several strings", z: &zone{txt: map[string][][]string{recordName: {{"to", "k"}}}}, wantFound: true, wantReason: v1alpha.DomainReasonVerified},
		{reason: "through a CNAME", z: &zone{cname: map[string]string{recordName: "tok.verify.example.net."}, txt: map[string][][]string{"tok.verify.example.net.": {{"tok"}}}}, wantFound: true, wantReason: v1alpha.DomainReasonVerified},
		{reason: "NXDOMAIN", z: &zone{txt: map[string][][]string{"www.acme.com.": {{"tok"}}}},
			wantReason: v1alpha.DomainReasonRecordNotFound, wantMsg: []string{"_anchorage-challenge.www.acme.com", "tok"}},
		{reason: "NOERROR, no TXT", z: &zone{a: map[string][]string{recordName: {"192.0.2.1"}}},
			wantReason: v1alpha.DomainReasonRecordNotFound, wantMsg: []string{"_anchorage-challenge.www.acme.com", "tok"}},
		{reason: "NOERROR, empty", z: &zone{empty: map[string]bool{recordName: true}}, wantReason: v1alpha.DomainReasonRecordNotFound},
		{reason: "the wrong content", z: &zone{txt: map[string][][]string{recordName: {{"nope"}, {"tok2"}}}},
			wantReason: v1alpha.DomainReasonContentMismatch, wantMsg: []string{"nope", "tok2", "tok"}},
		{reason: "a prefix of the token", z: &zone{txt: map[string][][]string{recordName: {{"to"}}}}, wantReason: v1alpha.DomainReasonContentMismatch},
		{reason: "the token in a longer record", z: &zone{txt: map[string][][]string{recordName: {{"tok tok"}}}}, wantReason: v1alpha.DomainReasonContentMismatch},
		{reason: "SERVFAIL", z: &zone{rcode: map[string]int{recordName: dns.RcodeServerFailure}},
			wantReason: v1alpha.DomainReasonPendingVerification, wantMsg: []string{"SERVFAIL", "_anchorage-challenge.www.acme.com"}},
		{reason: "REFUSED", z: &zone{rcode: map[string]int{recordName: dns.RcodeRefused}}, wantReason: v1alpha.DomainReasonPendingVerification, wantMsg: []string{"REFUSED"}},
		{reason: "truncated over UDP", z: &zone{truncUDP: map[string]bool{recordName: true}, txt: map[string][][]string{recordName: {{"tok"}}}},
			wantFound: true, wantReason: v1alpha.DomainReasonVerified, wantTCP: true},
		{reason: "too large for UDP", z: &zone{txt: map[string][][]string{recordName: many}}, wantFound: true, wantReason: v1alpha.DomainReasonVerified, wantTCP: true},
	}
	for _, c := range cases {
		ns := serveDNS(t, c.z)
		ck := Checker{Nameservers: []string{ns}, Timeout: 2 * time.Second}
		o := ck.TXT(context.Background(), proof("tok"))
		if o.Found != c.wantFound || o.Reason != c.wantReason {
			t.Errorf("%s: %+v, want Found=%t Reason=%s", c.reason, o, c.wantFound, c.wantReason)
		}
		for _, s := range c.wantMsg {
			if !strings.Contains(o.Message, s) {
				t.Errorf("%s: message %q does not say %q", c.reason, o.Message, s)
			}
		}
		asked := c.z.asked()
		if len(asked) == 0 || asked[0] != "udp TXT "+recordName {
			t.Errorf("%s: asked %q, want UDP first", c.reason, asked)
		}
		tcp := false
		for _, q := range asked {
			tcp = tcp || q == "tcp TXT "+recordName
		}
		if tcp != c.wantTCP {
			t.Errorf("%s: asked %q; over TCP: %t, want %t", c.reason, asked, tcp, c.wantTCP)
		}
	}
}

// TestCheckerTXTNameservers: nameservers are asked in order until one answers; none
// answering is no verdict.
func TestCheckerTXTNameservers(t *testing.T) {
	good := &zone{txt: map[string][][]string{recordName: {{"tok"}}}}
	failing := &zone{rcode: map[string]int{recordName: dns.RcodeServerFailure}}
	silent := &zone{silent: map[string]bool{recordName: true}}
	goodNS, failingNS, silentNS, down := serveDNS(t, good), serveDNS(t, failing), serveDNS(t, silent), downNameserver(t)
	cases := []struct {
		reason     string
		ns         []string
		wantFound  bool
		wantReason string
	}{
		{"down", []string{down}, false, v1alpha.DomainReasonPendingVerification},
		{"silent", []string{silentNS}, false, v1alpha.DomainReasonPendingVerification},
		{"down, SERVFAIL, silent", []string{down, failingNS, silentNS}, false, v1alpha.DomainReasonPendingVerification},
		{"none", nil, false, v1alpha.DomainReasonPendingVerification},
		{"down, then one that answers", []string{down, goodNS}, true, v1alpha.DomainReasonVerified},
		{"SERVFAIL, then one that answers", []string{failingNS, goodNS}, true, v1alpha.DomainReasonVerified},
		{"silent, then one that answers", []string{silentNS, goodNS}, true, v1alpha.DomainReasonVerified},
	}
	for _, c := range cases {
		ck := Checker{Nameservers: c.ns, Timeout: 300 * time.Millisecond}
		start := time.Now()
		o := ck.TXT(context.Background(), proof("tok"))
		if o.Found != c.wantFound || o.Reason != c.wantReason {
			t.Errorf("%s: %+v, want Found=%t Reason=%s", c.reason, o, c.wantFound, c.wantReason)
		}
		if !o.Found && !strings.Contains(o.Message, "retrying") {
			t.Errorf("%s: message %q does not say it is retried", c.reason, o.Message)
		}
		if el := time.Since(start); el > 2*time.Second {
			t.Errorf("%s: took %s", c.reason, el)
		}
	}
	// A nameserver that answered with SERVFAIL is not asked again over TCP.
	for _, q := range failing.asked() {
		if strings.HasPrefix(q, "tcp ") {
			t.Errorf("SERVFAIL over UDP was retried over TCP: %q", failing.asked())
		}
	}
	// Nor is one that stayed silent: the next nameserver is.
	for _, q := range silent.asked() {
		if strings.HasPrefix(q, "tcp ") {
			t.Errorf("a silent nameserver was asked again over TCP: %q", silent.asked())
		}
	}
}

// httpRig is a nameserver and an HTTP server for the token URL's host.
type httpRig struct {
	z    *zone
	ck   Checker
	mu   sync.Mutex
	hits []string // "host path"
}

func (r *httpRig) requests() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.hits...)
}

// newHTTPRig serves h; www.acme.com and other.example.com resolve to 127.0.0.1.
func newHTTPRig(t *testing.T, h http.HandlerFunc) *httpRig {
	t.Helper()
	r := &httpRig{z: &zone{
		a: map[string][]string{
			"www.acme.com.":          {"127.0.0.1"},
			"other.example.com.":     {"127.0.0.1"},
			"private.acme.com.":      {"10.1.2.3", "127.0.0.1"},
			"servfail-v6.acme.com.":  {"127.0.0.1"},
			"v6.acme.com.":           {},
			"cgnat.acme.com.":        {"100.64.1.1"},
			"mapped-loop.acme.com.":  {},
			"link-local.acme.com.":   {"169.254.169.254"},
			"no-address.acme.com.":   {},
			"mixed-public.acme.com.": {"192.168.1.1"},
		},
		aaaa: map[string][]string{
			"v6.acme.com.":          {"::1"},
			"mapped-loop.acme.com.": {"::ffff:127.0.0.1"},
		},
		rcode: map[string]int{"servfail.acme.com.": dns.RcodeServerFailure},
	}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.hits = append(r.hits, req.Host+" "+req.URL.Path)
		r.mu.Unlock()
		h(w, req)
	}))
	t.Cleanup(srv.Close)
	r.ck = Checker{Nameservers: []string{serveDNS(t, r.z)}, Timeout: 2 * time.Second, HTTPPort: srv.Listener.Addr().(*net.TCPAddr).Port, AllowPrivate: true}
	return r
}

const tokenPath = "/.well-known/anchorage-challenge/" + string(testUID)

// serveToken serves body with status at the token path, 404 elsewhere.
func serveToken(status int, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != tokenPath {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}
}

func TestCheckerToken(t *testing.T) {
	cases := []struct {
		reason     string
		h          http.HandlerFunc
		wantFound  bool
		wantReason string
		wantMsg    []string
		wantHits   []string
	}{
		{reason: "served", h: serveToken(200, "tok"), wantFound: true, wantReason: v1alpha.DomainReasonVerified, wantHits: []string{"www.acme.com " + tokenPath}},
		{reason: "served with a trailing newline", h: serveToken(200, "tok\n"), wantFound: true, wantReason: v1alpha.DomainReasonVerified},
		{reason: "served with CRLF", h: serveToken(200, "tok\r\n"), wantFound: true, wantReason: v1alpha.DomainReasonVerified},
		{reason: "404", h: serveToken(404, "tok"), wantReason: v1alpha.DomainReasonRecordNotFound, wantMsg: []string{"404", "http://www.acme.com" + tokenPath, "tok"}},
		{reason: "500", h: serveToken(500, "tok"), wantReason: v1alpha.DomainReasonUnexpectedResponse, wantMsg: []string{"500"}},
		{reason: "403", h: serveToken(403, ""), wantReason: v1alpha.DomainReasonUnexpectedResponse, wantMsg: []string{"403"}},
		{reason: "204", h: serveToken(204, ""), wantReason: v1alpha.DomainReasonUnexpectedResponse, wantMsg: []string{"204"}},
		{reason: "the wrong token", h: serveToken(200, "tok2"), wantReason: v1alpha.DomainReasonContentMismatch},
		{reason: "an empty body", h: serveToken(200, ""), wantReason: v1alpha.DomainReasonContentMismatch},
		{reason: "the token in a page", h: serveToken(200, "<html>tok</html>"), wantReason: v1alpha.DomainReasonContentMismatch},
		{reason: "the token, then more than 1 KiB", h: serveToken(200, "tok\n"+strings.Repeat("x", 2048)), wantReason: v1alpha.DomainReasonContentMismatch},
		{reason: "redirected on the same host", h: func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == tokenPath {
				http.Redirect(w, r, "/moved/token", http.StatusFound)
				return
			}
			if r.URL.Path == "/moved/token" {
				_, _ = w.Write([]byte("tok\n"))
				return
			}
			http.NotFound(w, r)
		}, wantFound: true, wantReason: v1alpha.DomainReasonVerified, wantHits: []string{"www.acme.com " + tokenPath, "www.acme.com /moved/token"}},
		{reason: "redirected on the same host, absolute", h: func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == tokenPath {
				http.Redirect(w, r, "http://www.acme.com/moved", http.StatusMovedPermanently)
				return
			}
			_, _ = w.Write([]byte("tok"))
		}, wantFound: true, wantReason: v1alpha.DomainReasonVerified, wantHits: []string{"www.acme.com " + tokenPath, "www.acme.com /moved"}},
		{reason: "redirected to another host", h: func(w http.ResponseWriter, r *http.Request) {
			if r.Host == "www.acme.com" {
				http.Redirect(w, r, "http://other.example.com/token", http.StatusFound)
				return
			}
			_, _ = w.Write([]byte("tok"))
		}, wantMsg: []string{"other.example.com", "only the domain itself"}, wantHits: []string{"www.acme.com " + tokenPath}},
		{reason: "redirected around on the same host", h: func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, r.URL.Path+"x", http.StatusFound)
		}, wantMsg: []string{"redirected"}},
	}
	for _, c := range cases {
		rig := newHTTPRig(t, c.h)
		o := rig.ck.Token(context.Background(), proof("tok"))
		if o.Found != c.wantFound || (c.wantReason != "" && o.Reason != c.wantReason) {
			t.Errorf("%s: %+v, want Found=%t Reason=%s", c.reason, o, c.wantFound, c.wantReason)
		}
		for _, s := range c.wantMsg {
			if !strings.Contains(o.Message, s) {
				t.Errorf("%s: message %q does not say %q", c.reason, o.Message, s)
			}
		}
		if c.wantHits != nil && fmt.Sprint(rig.requests()) != fmt.Sprint(c.wantHits) {
			t.Errorf("%s: the server saw %q, want %q", c.reason, rig.requests(), c.wantHits)
		}
	}
}

// TestCheckerTokenLimit: a body is read to 1 KiB and no further, so a server that sends
// its first KiB and then stalls does not hold the check.
func TestCheckerTokenLimit(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	rig := newHTTPRig(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("tok" + strings.Repeat(" ", 1100)))
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	rig.ck.Timeout = 5 * time.Second
	start := time.Now()
	o := rig.ck.Token(context.Background(), proof("tok2"))
	if o.Found || o.Reason != v1alpha.DomainReasonContentMismatch {
		t.Errorf("%+v, want a content mismatch", o)
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Errorf("took %s: the body was read past its limit", el)
	}
}

// TestCheckerTokenTimeout: a server that never answers is no verdict, within Timeout.
func TestCheckerTokenTimeout(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	rig := newHTTPRig(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	rig.ck.Timeout = 300 * time.Millisecond
	start := time.Now()
	o := rig.ck.Token(context.Background(), proof("tok"))
	if o.Found || o.Reason != v1alpha.DomainReasonPendingVerification || !strings.Contains(o.Message, "retrying") {
		t.Errorf("%+v, want pending", o)
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Errorf("took %s, want about the timeout", el)
	}
}

// TestCheckerTokenAddresses: the host is resolved through the nameservers and dialled on
// HTTPPort; only public addresses unless AllowPrivate.
func TestCheckerTokenAddresses(t *testing.T) {
	cases := []struct {
		reason       string
		url          string
		allowPrivate bool
		wantFound    bool
		wantReason   string
		wantMsg      []string
	}{
		{reason: "loopback, allowed", url: "http://www.acme.com" + tokenPath, allowPrivate: true, wantFound: true, wantReason: v1alpha.DomainReasonVerified},
		{reason: "loopback, refused", url: "http://www.acme.com" + tokenPath, wantReason: v1alpha.DomainReasonPendingVerification, wantMsg: []string{"www.acme.com", "127.0.0.1", "may not reach"}},
		{reason: "private and loopback, refused", url: "http://private.acme.com" + tokenPath, wantReason: v1alpha.DomainReasonPendingVerification, wantMsg: []string{"10.1.2.3", "127.0.0.1", "may not reach"}},
		{reason: "CGNAT, refused", url: "http://cgnat.acme.com" + tokenPath, wantReason: v1alpha.DomainReasonPendingVerification, wantMsg: []string{"100.64.1.1", "may not reach"}},
		{reason: "link-local (metadata), refused", url: "http://link-local.acme.com" + tokenPath, wantReason: v1alpha.DomainReasonPendingVerification, wantMsg: []string{"169.254.169.254", "may not reach"}},
		{reason: "v6 loopback, refused", url: "http://v6.acme.com" + tokenPath, wantReason: v1alpha.DomainReasonPendingVerification, wantMsg: []string{"::1", "may not reach"}},
		{reason: "v4-mapped loopback, refused", url: "http://mapped-loop.acme.com" + tokenPath, wantReason: v1alpha.DomainReasonPendingVerification, wantMsg: []string{"127.0.0.1", "may not reach"}},
		{reason: "an IP literal, refused", url: "http://127.0.0.1" + tokenPath, wantReason: v1alpha.DomainReasonPendingVerification, wantMsg: []string{"may not reach"}},
		{reason: "an IP literal, allowed", url: "http://127.0.0.1" + tokenPath, allowPrivate: true, wantFound: true, wantReason: v1alpha.DomainReasonVerified},
		// The URL is in the Domain's status, which a tenant can write on its plane.
		{reason: "a public name as userinfo before a loopback literal, refused", url: "http://www.acme.com@127.0.0.1" + tokenPath, wantReason: v1alpha.DomainReasonPendingVerification, wantMsg: []string{"127.0.0.1", "may not reach"}},
		{reason: "an IPv6 loopback literal, refused", url: "http://[::1]" + tokenPath, wantReason: v1alpha.DomainReasonPendingVerification, wantMsg: []string{"::1", "may not reach"}},
		{reason: "the metadata address, IPv4-mapped, refused", url: "http://[::ffff:a9fe:a9fe]" + tokenPath, wantReason: v1alpha.DomainReasonPendingVerification, wantMsg: []string{"169.254.169.254", "may not reach"}},
		{reason: "a numeric spelling is a name to look up, not an address", url: "http://2130706433" + tokenPath, wantReason: v1alpha.DomainReasonPendingVerification, wantMsg: []string{"no A or AAAA"}},
		{reason: "a URL port is not the port dialled", url: "http://www.acme.com:1" + tokenPath, allowPrivate: true, wantFound: true, wantReason: v1alpha.DomainReasonVerified},
		{reason: "no address", url: "http://no-address.acme.com" + tokenPath, allowPrivate: true, wantReason: v1alpha.DomainReasonPendingVerification, wantMsg: []string{"no A or AAAA"}},
		{reason: "NXDOMAIN", url: "http://nowhere.acme.com" + tokenPath, allowPrivate: true, wantReason: v1alpha.DomainReasonPendingVerification, wantMsg: []string{"no A or AAAA"}},
		{reason: "SERVFAIL", url: "http://servfail.acme.com" + tokenPath, allowPrivate: true, wantReason: v1alpha.DomainReasonPendingVerification, wantMsg: []string{"SERVFAIL"}},
		{reason: "not a URL", url: "http://%zz/", allowPrivate: true, wantReason: v1alpha.DomainReasonInternalError},
		{reason: "no host", url: "/just/a/path", allowPrivate: true, wantReason: v1alpha.DomainReasonInternalError},
	}
	for _, c := range cases {
		rig := newHTTPRig(t, func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("tok\n")) })
		rig.ck.AllowPrivate = c.allowPrivate
		v := proof("tok")
		v.HTTPToken.URL = c.url
		o := rig.ck.Token(context.Background(), v)
		if o.Found != c.wantFound || o.Reason != c.wantReason {
			t.Errorf("%s: %+v, want Found=%t Reason=%s", c.reason, o, c.wantFound, c.wantReason)
		}
		for _, s := range c.wantMsg {
			if !strings.Contains(o.Message, s) {
				t.Errorf("%s: message %q does not say %q", c.reason, o.Message, s)
			}
		}
		if !c.wantFound && len(rig.requests()) != 0 {
			t.Errorf("%s: the server saw %q, want nothing", c.reason, rig.requests())
		}
	}
}
