// The tenants' DNS: a nameserver on loopback, authoritative for the demo's domains,
// that the replicas verify Domains through (domainVerification.nameservers). The demo
// publishes a TXT record in it as a tenant would at their DNS provider.

package main

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
)

// The demo's domains: each project proves it owns its own. acme's proxies serve
// hostnames under acmeDomain, initech's under initechDomain. Neither .example name is
// a public suffix, so each is a registrable domain (publicsuffix.EffectiveTLDPlusOne).
const (
	acmeDomain    = "acme.example"
	initechDomain = "initech.example"
)

// dnsServer answers, over UDP and TCP on one loopback port, for the zones it is
// authoritative for: the TXT records published into it, NXDOMAIN for other names in
// its zones, REFUSED for names outside them. It counts the TXT questions per name.
type dnsServer struct {
	addr  string
	zones []string

	mu      sync.Mutex
	txt     map[string][]string // by fully qualified, lower-case name
	asked   map[string]int      // TXT questions, by fully qualified, lower-case name
	servers []*dns.Server
}

// startDNS serves zones on 127.0.0.1 at a port free for both UDP and TCP.
func startDNS(zones ...string) (*dnsServer, error) {
	s := &dnsServer{txt: map[string][]string{}, asked: map[string]int{}}
	for _, z := range zones {
		s.zones = append(s.zones, dns.Fqdn(strings.ToLower(z)))
	}
	var errs []error
	for range 20 {
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("starting the DNS server: %w", err)
		}
		addr := pc.LocalAddr().String()
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			// The port is free for UDP but not for TCP: another one.
			errs = append(errs, err)
			pc.Close()
			continue
		}
		s.addr = addr
		udp := &dns.Server{PacketConn: pc, Handler: s}
		tcp := &dns.Server{Listener: ln, Handler: s}
		s.servers = []*dns.Server{udp, tcp}
		started := make(chan struct{}, 2)
		for _, srv := range s.servers {
			srv.NotifyStartedFunc = func() { started <- struct{}{} }
			go func() { _ = srv.ActivateAndServe() }()
		}
		for range s.servers {
			select {
			case <-started:
			case <-time.After(10 * time.Second):
				s.stop()
				return nil, errors.New("the DNS server did not start within 10s")
			}
		}
		return s, nil
	}
	return nil, fmt.Errorf("no loopback port free for both UDP and TCP: %w", errors.Join(errs...))
}

// stop shuts both servers down.
func (s *dnsServer) stop() {
	for _, srv := range s.servers {
		_ = srv.Shutdown()
	}
}

// publish adds a TXT record, as a tenant does at their DNS provider.
func (s *dnsServer) publish(name, content string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := dns.Fqdn(strings.ToLower(name))
	s.txt[n] = append(s.txt[n], content)
}

// questions returns how many TXT questions for name the server has answered.
func (s *dnsServer) questions(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.asked[dns.Fqdn(strings.ToLower(name))]
}

// zoneOf returns the zone name is in, "" if none of the server's.
func (s *dnsServer) zoneOf(name string) string {
	for _, z := range s.zones {
		if name == z || strings.HasSuffix(name, "."+z) {
			return z
		}
	}
	return ""
}

// ServeDNS answers one query.
func (s *dnsServer) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	m := new(dns.Msg)
	m.SetReply(req)
	if len(req.Question) != 1 {
		m.SetRcode(req, dns.RcodeFormatError)
		_ = w.WriteMsg(m)
		return
	}
	q := req.Question[0]
	name := strings.ToLower(q.Name)
	zone := s.zoneOf(name)
	if zone == "" {
		m.SetRcode(req, dns.RcodeRefused)
		_ = w.WriteMsg(m)
		return
	}
	m.Authoritative = true
	s.mu.Lock()
	records, exists := s.txt[name]
	if q.Qtype == dns.TypeTXT {
		s.asked[name]++
	}
	s.mu.Unlock()
	if q.Qtype == dns.TypeTXT {
		for _, content := range records {
			m.Answer = append(m.Answer, &dns.TXT{
				Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: 1},
				Txt: []string{content},
			})
		}
	}
	switch {
	case len(m.Answer) > 0:
	case exists || name == zone:
		// The name exists without a record of this type: NOERROR, no answer.
		m.Ns = append(m.Ns, s.soa(zone))
	default:
		m.Rcode = dns.RcodeNameError
		m.Ns = append(m.Ns, s.soa(zone))
	}
	_ = w.WriteMsg(m)
}

// soa is the zone's SOA record, for the authority section of negative answers (a
// minimum TTL of 1s: a tenant's record is seen at the next check).
func (s *dnsServer) soa(zone string) dns.RR {
	return &dns.SOA{
		Hdr: dns.RR_Header{Name: zone, Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: 1},
		Ns:  "ns." + zone, Mbox: "hostmaster." + zone,
		Serial: 1, Refresh: 3600, Retry: 600, Expire: 86400, Minttl: 1,
	}
}
