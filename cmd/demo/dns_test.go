package main

import (
	"context"
	"testing"
	"time"

	"github.com/miekg/dns"
	. "github.com/onsi/gomega"

	"anchorage/api/v1alpha"
	"anchorage/pkg/domain"
)

// TestDNSServer checks the demo's nameserver as the replicas use it: pkg/domain's
// checker finds a published TXT record over it, reports a missing one, and the server
// answers over TCP too and refuses names outside its zones.
func TestDNSServer(t *testing.T) {
	g := NewWithT(t)
	s, err := startDNS(acmeDomain)
	g.Expect(err).NotTo(HaveOccurred())
	defer s.stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	ck := domain.Checker{Nameservers: []string{s.addr}, Timeout: 2 * time.Second, HTTPPort: 80}
	v := &v1alpha.DomainVerificationStatus{DNSRecord: v1alpha.DNSVerificationRecord{Name: "proof." + acmeDomain, Type: "TXT", Content: "token-1"}}
	g.Expect(ck.TXT(ctx, v).Reason).To(Equal(v1alpha.DomainReasonRecordNotFound))
	s.publish("Proof."+acmeDomain, "token-2")
	g.Expect(ck.TXT(ctx, v).Reason).To(Equal(v1alpha.DomainReasonContentMismatch))
	s.publish("proof."+acmeDomain, "token-1")
	g.Expect(ck.TXT(ctx, v).Found).To(BeTrue())
	g.Expect(s.questions("proof." + acmeDomain)).To(BeNumerically(">=", 3))

	for _, tc := range []struct {
		net, name string
		rcode     int
		answers   int
	}{
		{"tcp", "proof." + acmeDomain, dns.RcodeSuccess, 2},
		{"udp", "other." + acmeDomain, dns.RcodeNameError, 0},
		{"udp", acmeDomain, dns.RcodeSuccess, 0},
		{"udp", "example.com", dns.RcodeRefused, 0},
	} {
		m := new(dns.Msg)
		m.SetQuestion(dns.Fqdn(tc.name), dns.TypeTXT)
		in, _, err := (&dns.Client{Net: tc.net, Timeout: 2 * time.Second}).ExchangeContext(ctx, m, s.addr)
		g.Expect(err).NotTo(HaveOccurred(), "%s %s", tc.net, tc.name)
		g.Expect(in.Rcode).To(Equal(tc.rcode), "%s %s", tc.net, tc.name)
		g.Expect(in.Answer).To(HaveLen(tc.answers), "%s %s", tc.net, tc.name)
		g.Expect(in.Authoritative).To(Equal(tc.rcode != dns.RcodeRefused), "%s %s", tc.net, tc.name)
	}
}
