package domain

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/miekg/dns"

	"anchorage/api/v1alpha"
	"anchorage/pkg/netpolicy"
)

// tokenBodyLimit bounds what is read of an HTTP token response: a token is 36 bytes.
const tokenBodyLimit = 1024

// Checker looks for a Domain's token, in DNS and over HTTP.
//
// Caveats, each a choice:
//   - Lookups go to Nameservers only, never to the replica's own resolver unless the
//     configuration says so (FromResolvConf), so which DNS view verifies a domain is
//     the operator's decision.
//   - The HTTP token's host is resolved through the same nameservers, and only an
//     address netpolicy passes is dialled (AllowPrivate for test rigs): the check is a
//     request the manager makes to a tenant's address, which must not reach the
//     platform's.
//   - A redirect is followed only to the same host, the body is read to tokenBodyLimit.
type Checker struct {
	// Nameservers are the host:port addresses asked, in order, until one answers.
	Nameservers []string
	// Timeout bounds each DNS exchange and the whole HTTP fetch.
	Timeout time.Duration
	// HTTPPort is the port the token URL is fetched from (80 but in test rigs).
	HTTPPort int
	// AllowPrivate lets the HTTP fetch dial loopback and private addresses.
	AllowPrivate bool
	// Denied are the platform's own networks, never dialled (netpolicy.Refused).
	Denied []netpolicy.DeniedNetwork
}

// FromResolvConf returns the nameservers of a resolv.conf file, as host:port.
func FromResolvConf(path string) ([]string, error) {
	cfg, err := dns.ClientConfigFromFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading nameservers from %s: %w", path, err)
	}
	var out []string
	for _, s := range cfg.Servers {
		out = append(out, net.JoinHostPort(s, cfg.Port))
	}
	return out, nil
}

// errTemporary marks a lookup no nameserver answered: retried, not a verdict.
var errTemporary = errors.New("no nameserver answered")

// lookup returns the answer records of type qtype for name; none is not an error.
func (c Checker) lookup(ctx context.Context, name string, qtype uint16) ([]dns.RR, error) {
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), qtype)
	var errs []error
	for _, ns := range c.Nameservers {
		for _, proto := range []string{"udp", "tcp"} {
			cl := &dns.Client{Net: proto, Timeout: c.Timeout}
			in, _, err := cl.ExchangeContext(ctx, m, ns)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s over %s: %w", ns, proto, err))
				break
			}
			if in.Truncated && proto == "udp" {
				continue
			}
			switch in.Rcode {
			case dns.RcodeSuccess, dns.RcodeNameError:
				return in.Answer, nil
			}
			errs = append(errs, fmt.Errorf("%s answered %s", ns, dns.RcodeToString[in.Rcode]))
			break
		}
	}
	if len(errs) == 0 {
		return nil, fmt.Errorf("%w: no nameservers are configured", errTemporary)
	}
	return nil, fmt.Errorf("%w: %w", errTemporary, errors.Join(errs...))
}

// TXT looks for the proof's TXT record.
func (c Checker) TXT(ctx context.Context, v *v1alpha.DomainVerificationStatus) Outcome {
	rrs, err := c.lookup(ctx, v.DNSRecord.Name, dns.TypeTXT)
	if err != nil {
		return Outcome{Reason: v1alpha.DomainReasonPendingVerification, Message: fmt.Sprintf("Looking up TXT %s failed, retrying: %v", v.DNSRecord.Name, err)}
	}
	var got []string
	for _, rr := range rrs {
		if t, ok := rr.(*dns.TXT); ok {
			got = append(got, strings.Join(t.Txt, ""))
		}
	}
	switch {
	case slices.Contains(got, v.DNSRecord.Content):
		return Outcome{Found: true, Reason: v1alpha.DomainReasonVerified, Message: "TXT record found"}
	case len(got) == 0:
		return Outcome{Reason: v1alpha.DomainReasonRecordNotFound, Message: fmt.Sprintf("No TXT record %s: publish one with the content %s", v.DNSRecord.Name, v.DNSRecord.Content)}
	}
	return Outcome{Reason: v1alpha.DomainReasonContentMismatch, Message: fmt.Sprintf("TXT record %s holds %q, not %s", v.DNSRecord.Name, strings.Join(got, ", "), v.DNSRecord.Content)}
}

// Token fetches the proof's HTTP token.
func (c Checker) Token(ctx context.Context, v *v1alpha.DomainVerificationStatus) Outcome {
	u, err := url.Parse(v.HTTPToken.URL)
	if err != nil || u.Hostname() == "" {
		return Outcome{Reason: v1alpha.DomainReasonInternalError, Message: fmt.Sprintf("The token URL %q is not a URL", v.HTTPToken.URL)}
	}
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	client := &http.Client{
		Transport: &http.Transport{DialContext: c.dial, DisableKeepAlives: true},
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if req.URL.Hostname() != u.Hostname() || len(via) >= 5 {
				return fmt.Errorf("redirected to %s: only the domain itself may serve its token", req.URL.Redacted())
			}
			return nil
		},
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, v.HTTPToken.URL, nil)
	if err != nil {
		return Outcome{Reason: v1alpha.DomainReasonInternalError, Message: err.Error()}
	}
	resp, err := client.Do(req)
	if err != nil {
		return Outcome{Reason: v1alpha.DomainReasonPendingVerification, Message: fmt.Sprintf("Fetching %s failed, retrying: %v", v.HTTPToken.URL, err)}
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, tokenBodyLimit))
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return Outcome{Reason: v1alpha.DomainReasonRecordNotFound, Message: fmt.Sprintf("%s answered 404: serve the content %s there", v.HTTPToken.URL, v.HTTPToken.Body)}
	case resp.StatusCode != http.StatusOK:
		return Outcome{Reason: v1alpha.DomainReasonUnexpectedResponse, Message: fmt.Sprintf("%s answered HTTP %d", v.HTTPToken.URL, resp.StatusCode)}
	case strings.TrimSpace(string(body)) == v.HTTPToken.Body:
		return Outcome{Found: true, Reason: v1alpha.DomainReasonVerified, Message: "HTTP token found"}
	}
	return Outcome{Reason: v1alpha.DomainReasonContentMismatch, Message: fmt.Sprintf("%s serves something other than %s", v.HTTPToken.URL, v.HTTPToken.Body)}
}

// dial resolves addr's host through the nameservers and dials the first address it may.
func (c Checker) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	var addrs []netip.Addr
	if ip, err := netip.ParseAddr(host); err == nil {
		addrs = append(addrs, ip)
	} else {
		var lookupErrs []error // one family failing does not hide the other's addresses
		for _, qtype := range []uint16{dns.TypeA, dns.TypeAAAA} {
			rrs, err := c.lookup(ctx, host, qtype)
			if err != nil {
				lookupErrs = append(lookupErrs, err)
				continue
			}
			for _, rr := range rrs {
				switch r := rr.(type) {
				case *dns.A:
					addrs = append(addrs, netip.AddrFrom4([4]byte(r.A.To4())))
				case *dns.AAAA:
					addrs = append(addrs, netip.AddrFrom16([16]byte(r.AAAA.To16())))
				}
			}
		}
		if len(addrs) == 0 && len(lookupErrs) > 0 {
			return nil, errors.Join(lookupErrs...)
		}
	}
	var d net.Dialer
	var refused []string
	var dialErrs []error
	for _, a := range addrs {
		if why := netpolicy.Refused(a.String(), c.Denied); why != "" && !c.AllowPrivate {
			refused = append(refused, why)
			continue
		}
		conn, err := d.DialContext(ctx, network, net.JoinHostPort(a.String(), strconv.Itoa(c.HTTPPort)))
		if err == nil {
			return conn, nil
		}
		dialErrs = append(dialErrs, err)
	}
	switch {
	case len(dialErrs) > 0:
		return nil, errors.Join(dialErrs...)
	case len(refused) > 0:
		return nil, fmt.Errorf("%s resolves only to addresses the manager may not reach: %s", host, strings.Join(refused, "; "))
	}
	return nil, fmt.Errorf("%s has no A or AAAA record", host)
}
