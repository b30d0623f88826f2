package domain

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"anchorage/api/v1alpha"
)

// pending is a valid Domain with a proof issued, token tok.
func pending(name, tok string) v1alpha.Domain {
	d := newDomain(name, t0)
	d.Name = "d-" + strings.ReplaceAll(name, ".", "-")
	Validate(d, t0)
	IssueProof(d, settings, tok, t0)
	return *d
}

func verifiedDomain(name string) v1alpha.Domain {
	d := pending(name, "tok-"+name)
	Record(&d, settings, Outcome{Found: true, Reason: v1alpha.DomainReasonVerified}, Outcome{}, t0, nil)
	return d
}

func terminating(d v1alpha.Domain) v1alpha.Domain {
	d.DeletionTimestamp = &metav1.Time{Time: t0}
	d.Finalizers = []string{"x"}
	return d
}

func TestGate(t *testing.T) {
	cases := []struct {
		reason       string
		host         string
		domains      []v1alpha.Domain
		wantVerified bool
		wantCreate   string
		// wantMessage are strings the message holds (none when verified).
		wantMessage []string
		// notMessage are strings it must not hold.
		notMessage []string
	}{
		{reason: "verified parent", host: "www.acme.com", domains: []v1alpha.Domain{verifiedDomain("acme.com")}, wantVerified: true},
		{reason: "verified grandparent", host: "a.b.acme.com", domains: []v1alpha.Domain{verifiedDomain("acme.com")}, wantVerified: true},
		{reason: "verified exact", host: "www.acme.com", domains: []v1alpha.Domain{verifiedDomain("www.acme.com")}, wantVerified: true},
		{reason: "verified apex exact", host: "acme.com", domains: []v1alpha.Domain{verifiedDomain("acme.com")}, wantVerified: true},
		{reason: "verified exact, case", host: "WWW.Acme.com", domains: []v1alpha.Domain{verifiedDomain("www.acme.com")}, wantVerified: true},
		{reason: "verified parent among pending ones", host: "a.www.acme.com",
			domains:      []v1alpha.Domain{pending("a.www.acme.com", "t1"), verifiedDomain("acme.com"), pending("www.acme.com", "t2")},
			wantVerified: true},
		{reason: "verified sub-domain of an unverified parent does not cover the parent", host: "acme.com",
			domains:     []v1alpha.Domain{verifiedDomain("www.acme.com"), pending("acme.com", "tok-apex")},
			wantMessage: []string{"acme.com", "d-acme-com", "_anchorage-challenge.acme.com", "tok-apex", "http://acme.com/.well-known/anchorage-challenge/" + string(testUID)}},
		{reason: "verified sibling", host: "api.acme.com", domains: []v1alpha.Domain{verifiedDomain("www.acme.com")},
			wantCreate: "acme.com", wantMessage: []string{"api.acme.com", "acme.com"}},
		{reason: "verified look-alike", host: "www.evilacme.com", domains: []v1alpha.Domain{verifiedDomain("acme.com")},
			wantCreate: "evilacme.com", wantMessage: []string{"www.evilacme.com", "evilacme.com"}},
		{reason: "unverified covering Domain", host: "shop.acme.co.uk", domains: []v1alpha.Domain{pending("acme.co.uk", "the-token")},
			wantMessage: []string{"shop.acme.co.uk", "d-acme-co-uk", "_anchorage-challenge.acme.co.uk", "the-token", "http://acme.co.uk/.well-known/anchorage-challenge/" + string(testUID)}},
		{reason: "the most specific covering Domain is named", host: "a.www.acme.com",
			domains:     []v1alpha.Domain{pending("acme.com", "tok-apex"), pending("www.acme.com", "tok-www"), pending("b.www.acme.com", "tok-b")},
			wantMessage: []string{"d-www-acme-com", "_anchorage-challenge.www.acme.com", "tok-www", "http://www.acme.com/"},
			notMessage:  []string{"tok-apex", "tok-b", "d-acme-com"}},
		{reason: "the most specific covering Domain is named, in any order", host: "a.www.acme.com",
			domains:     []v1alpha.Domain{pending("www.acme.com", "tok-www"), pending("acme.com", "tok-apex")},
			wantMessage: []string{"d-www-acme-com", "tok-www"}, notMessage: []string{"tok-apex"}},
		{reason: "a covering Domain without its proof yet", host: "www.acme.com",
			domains:     []v1alpha.Domain{*newDomain("acme.com", t0)},
			wantMessage: []string{"www.acme.com", "acme.com", "waiting"}},
		{reason: "no Domain", host: "www.acme.com", wantCreate: "acme.com", wantMessage: []string{"www.acme.com", "acme.com"}},
		{reason: "no Domain, apex", host: "acme.com", wantCreate: "acme.com", wantMessage: []string{"acme.com"}},
		{reason: "no Domain, under a multi-label suffix", host: "shop.acme.co.uk", wantCreate: "acme.co.uk", wantMessage: []string{"acme.co.uk"}},
		{reason: "no Domain, under a private suffix", host: "www.foo.github.io", wantCreate: "foo.github.io", wantMessage: []string{"foo.github.io"}},
		{reason: "no Domain, upper case", host: "WWW.ACME.COM", wantCreate: "acme.com", wantMessage: []string{"WWW.ACME.COM"}},
		{reason: "a public suffix", host: "github.io", wantMessage: []string{"github.io", "cannot be verified"}},
		{reason: "a public suffix, with Domains", host: "co.uk", domains: []v1alpha.Domain{verifiedDomain("acme.co.uk")},
			wantMessage: []string{"co.uk", "cannot be verified"}},
		{reason: "a terminating verified Domain does not cover", host: "www.acme.com",
			domains:    []v1alpha.Domain{terminating(verifiedDomain("acme.com"))},
			wantCreate: "acme.com", wantMessage: []string{"www.acme.com"}},
		{reason: "a terminating verified exact Domain does not cover", host: "www.acme.com",
			domains:     []v1alpha.Domain{terminating(verifiedDomain("www.acme.com")), pending("acme.com", "tok-apex")},
			wantMessage: []string{"d-acme-com", "tok-apex"}},
		{reason: "a terminating verified Domain beside a verified parent", host: "www.acme.com",
			domains:      []v1alpha.Domain{terminating(verifiedDomain("www.acme.com")), verifiedDomain("acme.com")},
			wantVerified: true},
	}
	for _, c := range cases {
		got := Gate([]string{c.host}, c.domains)
		if len(got) != 1 {
			t.Errorf("%s: Gate returned %d verdicts, want 1: %+v", c.reason, len(got), got)
			continue
		}
		v, ok := got[c.host]
		if !ok {
			t.Errorf("%s: no verdict for %s: %+v", c.reason, c.host, got)
			continue
		}
		if v.Verified != c.wantVerified || v.Create != c.wantCreate {
			t.Errorf("%s: verdict %+v, want Verified=%t Create=%q", c.reason, v, c.wantVerified, c.wantCreate)
		}
		if c.wantVerified && v.Message != "" {
			t.Errorf("%s: a verified hostname has the message %q", c.reason, v.Message)
		}
		if !c.wantVerified && v.Message == "" {
			t.Errorf("%s: an unverified hostname has no message", c.reason)
		}
		for _, s := range c.wantMessage {
			if !strings.Contains(v.Message, s) {
				t.Errorf("%s: message %q does not say %q", c.reason, v.Message, s)
			}
		}
		for _, s := range c.notMessage {
			if strings.Contains(v.Message, s) {
				t.Errorf("%s: message %q says %q", c.reason, v.Message, s)
			}
		}
	}
}

// TestGateInvalidCoveringDomain: a Domain nobody can own (a public suffix) covers
// nothing, so the right one is still created.
func TestGateInvalidCoveringDomain(t *testing.T) {
	for host, want := range map[string]string{"foo.github.io": "foo.github.io", "shop.acme.co.uk": "acme.co.uk"} {
		suffix := strings.SplitN(host, ".", 2)[1]
		if host == "shop.acme.co.uk" {
			suffix = "co.uk"
		}
		d := newDomain(suffix, t0)
		Validate(d, t0)
		v := Gate([]string{host}, []v1alpha.Domain{*d})[host]
		if v.Verified || v.Create != want || !strings.Contains(v.Message, want) {
			t.Errorf("%s under Domain %s: verdict %+v, want Create %s", host, suffix, v, want)
		}
	}
}

// TestGateForgedPublicSuffix: a Domain nobody can own covers nothing even when its
// status says Verified (a tenant writes its own Domain's status on its plane), however
// the suffix is spelled.
func TestGateForgedPublicSuffix(t *testing.T) {
	for _, tc := range []struct{ suffix, host, create string }{
		{"github.io", "foo.github.io", "foo.github.io"},
		{"CO.UK", "shop.acme.co.uk", "acme.co.uk"},
		{"com.", "www.acme.com", "acme.com"},
		{"uk", "shop.acme.co.uk", "acme.co.uk"},
		{"example", "www.acme.example", "acme.example"},
	} {
		d := verified(newDomain(tc.suffix, t0), t0)
		v := Gate([]string{tc.host}, []v1alpha.Domain{*d})[tc.host]
		if v.Verified || v.Create != tc.create {
			t.Errorf("%s under a Domain %q written Verified: verdict %+v, want unverified, Create %s", tc.host, tc.suffix, v, tc.create)
		}
	}
}

// TestGateMany: one verdict per hostname, each on its own.
func TestGateMany(t *testing.T) {
	domains := []v1alpha.Domain{verifiedDomain("acme.com"), pending("beta.net", "tok-beta")}
	got := Gate([]string{"www.acme.com", "api.acme.com", "www.beta.net", "gamma.org", "com"}, domains)
	want := map[string]struct {
		verified bool
		create   string
	}{
		"www.acme.com": {true, ""},
		"api.acme.com": {true, ""},
		"www.beta.net": {false, ""},
		"gamma.org":    {false, "gamma.org"},
		"com":          {false, ""},
	}
	if len(got) != len(want) {
		t.Errorf("%d verdicts, want %d: %+v", len(got), len(want), got)
	}
	for h, w := range want {
		if v := got[h]; v.Verified != w.verified || v.Create != w.create {
			t.Errorf("%s: verdict %+v, want Verified=%t Create=%q", h, v, w.verified, w.create)
		}
	}
	if !strings.Contains(got["www.beta.net"].Message, "tok-beta") {
		t.Errorf("www.beta.net: message %q does not give the token", got["www.beta.net"].Message)
	}
	if len(Gate(nil, domains)) != 0 {
		t.Error("Gate of no hostnames returned verdicts")
	}
}
