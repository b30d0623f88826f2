package harness

import (
	"context"
	"fmt"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/miekg/dns"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestExternalDNSWritesAndRemovesRecords: external-dns, run against an API server
// serving the hub's CRDs, writes a DNSEndpoint's A and AAAA records to Knot DNS through
// TSIG-signed dynamic updates, and removes them once the DNSEndpoint is deleted.
func TestExternalDNSWritesAndRemovesRecords(t *testing.T) {
	ctx, cfg, c := testHub(t, 3*time.Minute)
	g := NewWithT(t)
	server := StartDNSServer(t, "platform.test.")
	edns := StartExternalDNS(ctx, t, cfg, server, ExternalDNSOptions{})

	g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"}})).To(Succeed())
	ep := &unstructured.Unstructured{}
	ep.SetGroupVersionKind(DNSEndpointGVK)
	ep.SetNamespace("team")
	ep.SetName("x")
	ep.Object["spec"] = map[string]any{"endpoints": []any{
		map[string]any{"dnsName": "x.platform.test", "recordType": "A", "targets": []any{"192.0.2.10"}, "recordTTL": int64(30)},
		map[string]any{"dnsName": "x.platform.test", "recordType": "AAAA", "targets": []any{"2001:db8::10"}, "recordTTL": int64(30)},
	}}
	g.Expect(c.Create(ctx, ep)).To(Succeed())

	want := map[uint16][]string{dns.TypeA: {"192.0.2.10"}, dns.TypeAAAA: {"2001:db8::10"}}
	waitCtx, cancelWait := context.WithTimeout(ctx, 60*time.Second)
	defer cancelWait()
	g.Expect(WaitFor(waitCtx, "x.platform.test's records", func(ctx context.Context) error {
		return recordsAre(ctx, server, "x.platform.test", want)
	}, edns.Exited, server.Exited)).To(Succeed())

	g.Expect(c.Delete(ctx, ep)).To(Succeed())
	gone := map[uint16][]string{dns.TypeA: nil, dns.TypeAAAA: nil}
	waitCtx, cancelWait = context.WithTimeout(ctx, 60*time.Second)
	defer cancelWait()
	g.Expect(WaitFor(waitCtx, "x.platform.test's records gone", func(ctx context.Context) error {
		return recordsAre(ctx, server, "x.platform.test", gone)
	}, edns.Exited, server.Exited)).To(Succeed())
}

// recordsAre checks the server answers each query type for name with exactly the
// addresses in want; nil wants no answer (NXDOMAIN or an empty answer).
func recordsAre(ctx context.Context, server *DNSServer, name string, want map[uint16][]string) error {
	for qtype, addrs := range want {
		m, err := server.Query(ctx, name, qtype)
		if err != nil {
			return err
		}
		got := answerAddrs(m)
		if !slices.Equal(got, addrs) {
			return fmt.Errorf("%s %s: %s %v, want %v", name, dns.TypeToString[qtype], dns.RcodeToString[m.Rcode], got, addrs)
		}
	}
	return nil
}

// answerAddrs returns the addresses of a response's A and AAAA answers, sorted.
func answerAddrs(m *dns.Msg) []string {
	var out []string
	for _, rr := range m.Answer {
		var ip net.IP
		switch rr := rr.(type) {
		case *dns.A:
			ip = rr.A
		case *dns.AAAA:
			ip = rr.AAAA
		default:
			continue
		}
		out = append(out, ip.String())
	}
	slices.Sort(out)
	return out
}
