package domain

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"anchorage/api/v1alpha"
)

// t0 is the tests' reference time.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// settings are the tests' verification settings: 5s for the first 5m, 1m up to 1h,
// then 10m; up to half an interval of jitter.
var settings = Settings{
	DNSRecordPrefix: "_anchorage-challenge",
	HTTPTokenPath:   "/.well-known/anchorage-challenge/",
	Retry: []RetryInterval{
		{Interval: 5 * time.Second, MaxElapsed: 5 * time.Minute},
		{Interval: time.Minute, MaxElapsed: time.Hour},
		{Interval: 10 * time.Minute},
	},
	Jitter: 0.5,
}

const testUID = types.UID("0b5e2b3c-8c9e-4a57-9d61-7a3f1c2d4e5f")

// newDomain is a Domain named after its domain name, created at created.
func newDomain(domainName string, created time.Time) *v1alpha.Domain {
	return &v1alpha.Domain{
		ObjectMeta: metav1.ObjectMeta{Name: domainName, Namespace: "team", UID: testUID, Generation: 3, CreationTimestamp: metav1.NewTime(created)},
		Spec:       v1alpha.DomainSpec{DomainName: domainName},
	}
}

// verified marks d Verified at at.
func verified(d *v1alpha.Domain, at time.Time) *v1alpha.Domain {
	meta.SetStatusCondition(&d.Status.Conditions, metav1.Condition{Type: v1alpha.DomainConditionVerified, Status: metav1.ConditionTrue, Reason: v1alpha.DomainReasonVerified, LastTransitionTime: metav1.NewTime(at)})
	return d
}

// condition returns d's condition typ, failing the test when it is missing.
func condition(t *testing.T, d *v1alpha.Domain, typ string) metav1.Condition {
	t.Helper()
	c := meta.FindStatusCondition(d.Status.Conditions, typ)
	if c == nil {
		t.Fatalf("no condition %s in %+v", typ, d.Status.Conditions)
		return metav1.Condition{}
	}
	return *c
}

func expectCondition(t *testing.T, d *v1alpha.Domain, typ string, status metav1.ConditionStatus, reason string) metav1.Condition {
	t.Helper()
	c := condition(t, d, typ)
	if c.Status != status || c.Reason != reason {
		t.Errorf("condition %s = %s/%s (%q), want %s/%s", typ, c.Status, c.Reason, c.Message, status, reason)
	}
	if c.ObservedGeneration != d.Generation {
		t.Errorf("condition %s observed generation %d, want %d", typ, c.ObservedGeneration, d.Generation)
	}
	return c
}

func TestRegistrable(t *testing.T) {
	cases := []struct {
		name string
		want string // "" for an error
	}{
		// Public suffixes: nobody can own them.
		{"com", ""},
		{"co.uk", ""},
		{"uk", ""},
		{"github.io", ""},
		{"io", ""},
		{"example", ""}, // not on the list: the default rule makes any TLD a suffix
		{"localhost", ""},
		{"CO.UK", ""},
		{"github.io.", ""},
		// Registrable names.
		{"acme.com", "acme.com"},
		{"www.acme.com", "acme.com"},
		{"a.b.c.acme.com", "acme.com"},
		{"acme.co.uk", "acme.co.uk"},
		{"shop.acme.co.uk", "acme.co.uk"},
		{"foo.github.io", "foo.github.io"},
		{"www.foo.github.io", "foo.github.io"},
		{"foo.example", "foo.example"},
		// Trailing dot and case.
		{"www.acme.com.", "acme.com"},
		{"WWW.Acme.COM", "acme.com"},
		{"Shop.ACME.co.uk.", "acme.co.uk"},
		// Garbage.
		{"", ""},
		{".", ""},
		{"..", ""},
		{".acme.com", ""},
		{"www..acme.com", ""},
		{"acme.com..", ""},
		{"192.0.2.1", ""},
		{"2001:db8::1", ""},
	}
	for _, c := range cases {
		got, err := Registrable(c.name)
		switch {
		case c.want == "" && err == nil:
			t.Errorf("Registrable(%q) = %q, want an error", c.name, got)
		case c.want == "" && !strings.Contains(err.Error(), c.name):
			t.Errorf("Registrable(%q)'s error %q does not name it", c.name, err)
		case c.want != "" && err != nil:
			t.Errorf("Registrable(%q): %v, want %q", c.name, err, c.want)
		case c.want != "" && got != c.want:
			t.Errorf("Registrable(%q) = %q, want %q", c.name, got, c.want)
		}
	}
}

func TestCovers(t *testing.T) {
	cases := []struct {
		domain, host string
		want         bool
	}{
		{"acme.com", "acme.com", true},
		{"acme.com", "www.acme.com", true},
		{"acme.com", "a.b.c.acme.com", true},
		{"www.acme.com", "www.acme.com", true},
		{"www.acme.com", "api.www.acme.com", true},
		{"ACME.com", "www.Acme.COM", true},
		{"acme.com", "ACME.COM", true},
		// A child does not cover its parent, nor a sibling.
		{"www.acme.com", "acme.com", false},
		{"www.acme.com", "api.acme.com", false},
		// Suffix-string tricks.
		{"acme.com", "evilacme.com", false},
		{"acme.com", "www.evilacme.com", false},
		{"cme.com", "acme.com", false},
		{"acme.com", "acme.com.evil.net", false},
		{"acme.com", "acme.co", false},
		// Empty names cover nothing.
		{"", "acme.com", false},
		{"", "", false},
		{"acme.com", "", false},
	}
	for _, c := range cases {
		if got := Covers(c.domain, c.host); got != c.want {
			t.Errorf("Covers(%q, %q) = %t, want %t", c.domain, c.host, got, c.want)
		}
	}
}

func TestToState(t *testing.T) {
	now := t0.Add(time.Hour)
	withProof := func(name string, next time.Time) *v1alpha.Domain {
		d := newDomain(name, t0)
		IssueProof(d, settings, "tok", t0)
		d.Status.Verification.NextVerificationAttempt = metav1.NewTime(next)
		return d
	}
	cases := []struct {
		reason string
		d      *v1alpha.Domain
		want   State
	}{
		{"verified", verified(newDomain("acme.com", t0), t0), Verified},
		{"verified, with a leftover proof", verified(withProof("acme.com", now.Add(-time.Minute)), t0), Verified},
		{"a public suffix", newDomain("co.uk", t0), Invalid},
		{"a public suffix with a proof due", withProof("github.io", now.Add(-time.Minute)), Invalid},
		{"no status", newDomain("acme.com", t0), NeedsProof},
		{"a verification without a token", func() *v1alpha.Domain {
			d := newDomain("acme.com", t0)
			d.Status.Verification = &v1alpha.DomainVerificationStatus{NextVerificationAttempt: metav1.NewTime(now.Add(time.Hour))}
			return d
		}(), NeedsProof},
		{"Verified=False, no proof", func() *v1alpha.Domain {
			d := newDomain("acme.com", t0)
			meta.SetStatusCondition(&d.Status.Conditions, metav1.Condition{Type: v1alpha.DomainConditionVerified, Status: metav1.ConditionFalse, Reason: v1alpha.DomainReasonPendingVerification})
			return d
		}(), NeedsProof},
		{"next check later", withProof("acme.com", now.Add(time.Second)), Waiting},
		{"next check now", withProof("acme.com", now), Due},
		{"next check past", withProof("acme.com", now.Add(-time.Second)), Due},
		{"next check unset (the previous manager's proof)", func() *v1alpha.Domain {
			d := newDomain("www.acme.com", t0)
			d.Status.Verification = &v1alpha.DomainVerificationStatus{DNSRecord: v1alpha.DNSVerificationRecord{Name: "x.www.acme.com", Type: "TXT", Content: "old"}}
			return d
		}(), Due},
	}
	for _, c := range cases {
		if got := ToState(c.d, now); got != c.want {
			t.Errorf("%s: ToState = %s, want %s", c.reason, got, c.want)
		}
	}
}

func TestValidate(t *testing.T) {
	cases := []struct {
		name      string
		wantValid bool
		wantApex  bool
	}{
		{"acme.com", true, true},
		{"www.acme.com", true, false},
		{"acme.co.uk", true, true},
		{"shop.acme.co.uk", true, false},
		{"foo.github.io", true, true},
		{"co.uk", false, false},
		{"github.io", false, false},
	}
	for _, c := range cases {
		d := newDomain(c.name, t0)
		if got := Validate(d, t0); got != c.wantValid {
			t.Errorf("Validate(%s) = %t, want %t", c.name, got, c.wantValid)
		}
		if d.Status.Apex != c.wantApex {
			t.Errorf("Validate(%s): Apex = %t, want %t", c.name, d.Status.Apex, c.wantApex)
		}
		if c.wantValid {
			expectCondition(t, d, v1alpha.DomainConditionValidDomain, metav1.ConditionTrue, v1alpha.DomainReasonValid)
			continue
		}
		cond := expectCondition(t, d, v1alpha.DomainConditionValidDomain, metav1.ConditionFalse, v1alpha.DomainReasonInvalidDomain)
		if !strings.Contains(cond.Message, c.name) {
			t.Errorf("Validate(%s): message %q does not name the domain", c.name, cond.Message)
		}
	}

	// An invalid Domain's next check is cleared; its proof otherwise stays.
	d := newDomain("github.io", t0)
	IssueProof(d, settings, "tok", t0)
	if Validate(d, t0.Add(time.Minute)) {
		t.Fatal("Validate(github.io) = true")
	}
	if v := d.Status.Verification; v == nil || !v.NextVerificationAttempt.IsZero() {
		t.Errorf("an invalid Domain's verification is %+v, want its next attempt cleared", v)
	}
	if ToState(d, t0.Add(time.Hour)) != Invalid {
		t.Errorf("ToState after Validate = %s, want Invalid", ToState(d, t0.Add(time.Hour)))
	}

	// Validating again does not move the transition time.
	d = newDomain("acme.com", t0)
	Validate(d, t0)
	Validate(d, t0.Add(time.Hour))
	if c := condition(t, d, v1alpha.DomainConditionValidDomain); !c.LastTransitionTime.Time.Equal(t0) {
		t.Errorf("ValidDomain transitioned at %s, want %s", c.LastTransitionTime, t0)
	}
}

func TestIssueProof(t *testing.T) {
	cases := []struct {
		path    string
		wantURL string
	}{
		{"/.well-known/anchorage-challenge/", "http://www.acme.com/.well-known/anchorage-challenge/" + string(testUID)},
		{".well-known/anchorage-challenge", "http://www.acme.com/.well-known/anchorage-challenge/" + string(testUID)},
		{"/a/b", "http://www.acme.com/a/b/" + string(testUID)},
	}
	for _, c := range cases {
		s := settings
		s.HTTPTokenPath = c.path
		d := newDomain("www.acme.com", t0.Add(-time.Hour))
		if !Validate(d, t0) || ToState(d, t0) != NeedsProof {
			t.Fatalf("a new Domain is %s, want NeedsProof", ToState(d, t0))
		}
		IssueProof(d, s, "the-token", t0)
		v := d.Status.Verification
		if v == nil {
			t.Fatal("IssueProof left no verification")
		}
		wantRecord := v1alpha.DNSVerificationRecord{Name: "_anchorage-challenge.www.acme.com", Type: "TXT", Content: "the-token"}
		if v.DNSRecord != wantRecord {
			t.Errorf("DNS record = %+v, want %+v", v.DNSRecord, wantRecord)
		}
		wantToken := v1alpha.HTTPVerificationToken{URL: c.wantURL, Body: "the-token"}
		if v.HTTPToken != wantToken {
			t.Errorf("path %q: HTTP token = %+v, want %+v", c.path, v.HTTPToken, wantToken)
		}
		if !v.NextVerificationAttempt.Time.Equal(t0) {
			t.Errorf("next attempt %s, want at once (%s)", v.NextVerificationAttempt, t0)
		}
		if v.LastVerificationAttempt != nil {
			t.Errorf("last attempt %s before any", v.LastVerificationAttempt)
		}
		cond := expectCondition(t, d, v1alpha.DomainConditionVerified, metav1.ConditionFalse, v1alpha.DomainReasonPendingVerification)
		for _, want := range []string{wantRecord.Name, "the-token", c.wantURL} {
			if !strings.Contains(cond.Message, want) {
				t.Errorf("Verified's message %q does not say %q", cond.Message, want)
			}
		}
		expectCondition(t, d, v1alpha.DomainConditionVerifiedDNS, metav1.ConditionFalse, v1alpha.DomainReasonPendingVerification)
		expectCondition(t, d, v1alpha.DomainConditionVerifiedHTTP, metav1.ConditionFalse, v1alpha.DomainReasonPendingVerification)
		expectCondition(t, d, v1alpha.DomainConditionValidDomain, metav1.ConditionTrue, v1alpha.DomainReasonValid)
		// Once issued, the Domain needs no other: the token is issued once.
		if got := ToState(d, t0); got != Due {
			t.Errorf("after IssueProof, ToState = %s, want Due", got)
		}
		if got := ToState(d, t0.Add(-time.Second)); got != Waiting {
			t.Errorf("after IssueProof, ToState a second earlier = %s, want Waiting", got)
		}
	}
}

func fixed(vals ...float64) func() float64 {
	return func() float64 {
		v := vals[0]
		if len(vals) > 1 {
			vals = vals[1:]
		}
		return v
	}
}

func TestRecordFound(t *testing.T) {
	found := Outcome{Found: true, Reason: v1alpha.DomainReasonVerified, Message: "found"}
	notFound := Outcome{Reason: v1alpha.DomainReasonRecordNotFound, Message: "nothing there"}
	cases := []struct {
		reason    string
		dns, http Outcome
		wantHow   string
	}{
		{"by DNS", found, notFound, "TXT record _anchorage-challenge.www.acme.com"},
		{"by DNS, HTTP ignored", found, Outcome{Reason: v1alpha.DomainReasonUnexpectedResponse}, "TXT record _anchorage-challenge.www.acme.com"},
		{"by DNS and HTTP", found, found, "TXT record _anchorage-challenge.www.acme.com"},
		{"by HTTP", notFound, found, "HTTP token at http://www.acme.com/.well-known/anchorage-challenge/" + string(testUID)},
		{"by HTTP, DNS failed", Outcome{Reason: v1alpha.DomainReasonPendingVerification, Message: "SERVFAIL"}, found, "HTTP token at http://"},
	}
	for _, c := range cases {
		d := newDomain("www.acme.com", t0)
		Validate(d, t0)
		IssueProof(d, settings, "tok", t0)
		now := t0.Add(time.Minute)
		next := Record(d, settings, c.dns, c.http, now, fixed(0))
		if !next.IsZero() {
			t.Errorf("%s: Record = %s, want zero", c.reason, next)
		}
		cond := expectCondition(t, d, v1alpha.DomainConditionVerified, metav1.ConditionTrue, v1alpha.DomainReasonVerified)
		if !strings.Contains(cond.Message, c.wantHow) {
			t.Errorf("%s: Verified's message %q does not say %q", c.reason, cond.Message, c.wantHow)
		}
		if !cond.LastTransitionTime.Time.Equal(now) {
			t.Errorf("%s: Verified transitioned at %s, want %s", c.reason, cond.LastTransitionTime, now)
		}
		if d.Status.Verification != nil {
			t.Errorf("%s: verification %+v left, want it cleared", c.reason, d.Status.Verification)
		}
		for _, typ := range []string{v1alpha.DomainConditionVerifiedDNS, v1alpha.DomainConditionVerifiedHTTP} {
			if c := meta.FindStatusCondition(d.Status.Conditions, typ); c != nil {
				t.Errorf("condition %s left: %+v", typ, c)
			}
		}
		expectCondition(t, d, v1alpha.DomainConditionValidDomain, metav1.ConditionTrue, v1alpha.DomainReasonValid)
		if ToState(d, now) != Verified {
			t.Errorf("%s: ToState = %s, want Verified", c.reason, ToState(d, now))
		}
	}
}

func TestRecordNotFound(t *testing.T) {
	d := newDomain("www.acme.com", t0)
	IssueProof(d, settings, "tok", t0)
	now := t0.Add(time.Minute)
	dns := Outcome{Reason: v1alpha.DomainReasonContentMismatch, Message: "holds something else"}
	http := Outcome{Reason: v1alpha.DomainReasonUnexpectedResponse, Message: "HTTP 500"}
	next := Record(d, settings, dns, http, now, fixed(0))
	if want := now.Add(5 * time.Second); !next.Equal(want) {
		t.Errorf("Record = %s, want %s", next, want)
	}
	v := d.Status.Verification
	if v == nil {
		t.Fatal("Record cleared the verification of a Domain not found")
	}
	if !v.NextVerificationAttempt.Time.Equal(next) {
		t.Errorf("next attempt %s, want %s", v.NextVerificationAttempt, next)
	}
	if v.LastVerificationAttempt == nil || !v.LastVerificationAttempt.Time.Equal(now) {
		t.Errorf("last attempt %v, want %s", v.LastVerificationAttempt, now)
	}
	if v.DNSRecord.Content != "tok" || v.HTTPToken.Body != "tok" {
		t.Errorf("the token changed: %+v", v)
	}
	c := expectCondition(t, d, v1alpha.DomainConditionVerifiedDNS, metav1.ConditionFalse, v1alpha.DomainReasonContentMismatch)
	if c.Message != dns.Message {
		t.Errorf("VerifiedDNS message %q, want %q", c.Message, dns.Message)
	}
	c = expectCondition(t, d, v1alpha.DomainConditionVerifiedHTTP, metav1.ConditionFalse, v1alpha.DomainReasonUnexpectedResponse)
	if c.Message != http.Message {
		t.Errorf("VerifiedHTTP message %q, want %q", c.Message, http.Message)
	}
	c = expectCondition(t, d, v1alpha.DomainConditionVerified, metav1.ConditionFalse, v1alpha.DomainReasonPendingVerification)
	if !c.LastTransitionTime.Time.Equal(t0) {
		t.Errorf("Verified transitioned at %s, want still %s", c.LastTransitionTime, t0)
	}
	if ToState(d, now) != Waiting || ToState(d, next) != Due {
		t.Errorf("after Record, ToState = %s then %s, want Waiting then Due", ToState(d, now), ToState(d, next))
	}
}

func TestRecordSchedule(t *testing.T) {
	cases := []struct {
		reason  string
		created time.Time
		issued  time.Time // the proof, and so Verified=False's transition
		now     time.Time
		want    time.Duration // before jitter
	}{
		{"just issued", t0, t0, t0, 5 * time.Second},
		{"pending 1m", t0, t0, t0.Add(time.Minute), 5 * time.Second},
		{"pending exactly 5m", t0, t0, t0.Add(5 * time.Minute), 5 * time.Second},
		{"pending 5m1s", t0, t0, t0.Add(5*time.Minute + time.Second), time.Minute},
		{"pending 1h", t0, t0, t0.Add(time.Hour), time.Minute},
		{"pending 1h1s", t0, t0, t0.Add(time.Hour + time.Second), 10 * time.Minute},
		{"pending a week", t0, t0, t0.Add(7 * 24 * time.Hour), 10 * time.Minute},
		// Pending since the proof was issued, not since the Domain was created.
		{"created long before its proof", t0.Add(-30 * 24 * time.Hour), t0, t0.Add(time.Minute), 5 * time.Second},
		{"created 2h before its proof", t0.Add(-2 * time.Hour), t0, t0.Add(10 * time.Minute), time.Minute},
		// A Verified=False older than the Domain (restored status): since its creation.
		{"condition older than the Domain", t0, t0.Add(-30 * 24 * time.Hour), t0.Add(time.Minute), 5 * time.Second},
		{"condition older than the Domain, pending 10m", t0, t0.Add(-30 * 24 * time.Hour), t0.Add(10 * time.Minute), time.Minute},
	}
	for _, c := range cases {
		for _, r := range []float64{0, 0.999} {
			d := newDomain("www.acme.com", c.created)
			IssueProof(d, settings, "tok", c.issued)
			nf := Outcome{Reason: v1alpha.DomainReasonRecordNotFound}
			next := Record(d, settings, nf, nf, c.now, fixed(r))
			got := next.Sub(c.now)
			lo, hi := c.want, c.want+time.Duration(settings.Jitter*float64(c.want))
			if r == 0 && got != lo {
				t.Errorf("%s: with no jitter, next in %s, want %s", c.reason, got, lo)
			}
			if r > 0 && (got <= lo || got >= hi) {
				t.Errorf("%s: with jitter %.3f, next in %s, want in (%s, %s)", c.reason, r, got, lo, hi)
			}
			if want := c.want + time.Duration(settings.Jitter*r*float64(c.want)); got != want {
				t.Errorf("%s: with jitter %.3f, next in %s, want %s", c.reason, r, got, want)
			}
		}
	}

	// No jitter configured: the interval as is, whatever rnd draws.
	s := settings
	s.Jitter = 0
	d := newDomain("www.acme.com", t0)
	IssueProof(d, s, "tok", t0)
	nf := Outcome{Reason: v1alpha.DomainReasonRecordNotFound}
	if got := Record(d, s, nf, nf, t0, fixed(0.999)).Sub(t0); got != 5*time.Second {
		t.Errorf("without jitter, next in %s, want 5s", got)
	}

	// A schedule whose every step is bounded keeps its last step past the bounds.
	s.Retry = []RetryInterval{{Interval: time.Second, MaxElapsed: time.Minute}, {Interval: 7 * time.Second, MaxElapsed: time.Hour}}
	d = newDomain("www.acme.com", t0)
	IssueProof(d, s, "tok", t0)
	if got := Record(d, s, nf, nf, t0.Add(2*time.Hour), nil).Sub(t0.Add(2 * time.Hour)); got != 7*time.Second {
		t.Errorf("past every bound, next in %s, want the last step's 7s", got)
	}
}
