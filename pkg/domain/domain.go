// Package domain proves that a project owns the domains its hostnames are under, before
// any of them reaches the hub (docs/design.md, Verified domains).
//
// The protocol, per Domain:
//
//  1. A Domain whose name is no registrable domain (a public suffix such as com, co.uk
//     or github.io) gets ValidDomain=False and is never checked: nobody can own it.
//  2. A valid, unverified Domain without a proof gets one token, once: a TXT record
//     (<prefix>.<domain>) and an HTTP URL (http://<domain>/<path>/<uid>) that both must
//     carry it. A Domain the previous manager wrote keeps the token it holds.
//  3. While it is pending, the token is looked for when status.verification's
//     nextVerificationAttempt is due, through the configured nameservers, then at the
//     URL; the next attempt is set by the retry schedule (the longer it has been pending,
//     the longer the interval).
//  4. Either found: Verified=True, the proof is cleared, and it is not checked again
//     (the previous manager's rule: ownership once proven stays proven).
//
// The gate (Gate) is the other half: a hostname is programmed only while a Verified
// Domain in the proxy's namespace equals it or is a parent of it.
package domain

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"golang.org/x/net/publicsuffix"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"anchorage/api/v1alpha"
)

// RetryInterval is one step of the schedule: Interval applies while a Domain has been
// pending at most MaxElapsed (zero: without bound, the last step).
type RetryInterval struct {
	Interval   time.Duration
	MaxElapsed time.Duration
}

// Settings are the verification's settings (pkg/config: domainVerification).
type Settings struct {
	// DNSRecordPrefix is the TXT record's first label: <prefix>.<domainName>.
	DNSRecordPrefix string
	// HTTPTokenPath is the token URL's path before the Domain's UID.
	HTTPTokenPath string
	// Retry is the schedule of checks while a Domain is pending; its last step has no
	// MaxElapsed.
	Retry []RetryInterval
	// Jitter is the largest fraction added at random to an interval.
	Jitter float64
}

// retryAfter is the interval of the schedule's step for a Domain pending elapsed.
func (s Settings) retryAfter(elapsed time.Duration, rnd func() float64) time.Duration {
	var d time.Duration
	for _, step := range s.Retry {
		d = step.Interval
		if step.MaxElapsed == 0 || elapsed <= step.MaxElapsed {
			break
		}
	}
	return d + time.Duration(s.Jitter*rnd()*float64(d))
}

// Registrable returns the registrable domain (eTLD+1) name is under, or why there is
// none: a public suffix cannot be owned, so it can never be verified.
func Registrable(name string) (string, error) {
	n := strings.TrimSuffix(strings.ToLower(name), ".")
	apex, err := publicsuffix.EffectiveTLDPlusOne(n)
	if err != nil {
		return "", fmt.Errorf("%s is a public suffix or not a domain name, which nobody can own: %w", name, err)
	}
	return apex, nil
}

// Covers reports whether a Domain named domainName covers host: equal, or a parent.
func Covers(domainName, host string) bool {
	d, h := strings.ToLower(domainName), strings.ToLower(host)
	return d != "" && (h == d || strings.HasSuffix(h, "."+d))
}

// State is where a Domain is in the protocol.
type State string

const (
	// Invalid: no registrable domain; never checked.
	Invalid State = "Invalid"
	// NeedsProof: valid and pending, with no token yet.
	NeedsProof State = "NeedsProof"
	// Waiting: pending, its next check not due yet.
	Waiting State = "Waiting"
	// Due: pending, its next check due.
	Due State = "Due"
	// Verified: ownership proven.
	Verified State = "Verified"
)

// ToState reads d's state at now.
func ToState(d *v1alpha.Domain, now time.Time) State {
	switch {
	case meta.IsStatusConditionTrue(d.Status.Conditions, v1alpha.DomainConditionVerified):
		return Verified
	case func() error { _, err := Registrable(d.Spec.DomainName); return err }() != nil:
		return Invalid
	case d.Status.Verification == nil || d.Status.Verification.DNSRecord.Content == "":
		return NeedsProof
	case d.Status.Verification.NextVerificationAttempt.After(now):
		return Waiting
	default:
		return Due
	}
}

// Outcome is one check's result, as its condition reads.
type Outcome struct {
	Found   bool
	Reason  string
	Message string
}

// condition sets typ on d from o at now.
func setCondition(d *v1alpha.Domain, typ string, ok bool, reason, msg string, now time.Time) {
	status := metav1.ConditionFalse
	if ok {
		status = metav1.ConditionTrue
	}
	meta.SetStatusCondition(&d.Status.Conditions, metav1.Condition{
		Type: typ, Status: status, Reason: reason, Message: msg,
		ObservedGeneration: d.Generation, LastTransitionTime: metav1.NewTime(now),
	})
}

// Validate sets ValidDomain and Apex; it reports whether the Domain can be verified.
// An invalid Domain's next check is cleared.
func Validate(d *v1alpha.Domain, now time.Time) bool {
	apex, err := Registrable(d.Spec.DomainName)
	if err != nil {
		setCondition(d, v1alpha.DomainConditionValidDomain, false, v1alpha.DomainReasonInvalidDomain, err.Error(), now)
		if d.Status.Verification != nil {
			d.Status.Verification.NextVerificationAttempt = metav1.Time{}
		}
		return false
	}
	setCondition(d, v1alpha.DomainConditionValidDomain, true, v1alpha.DomainReasonValid, "The domain is registrable", now)
	d.Status.Apex = apex == strings.ToLower(d.Spec.DomainName)
	return true
}

// IssueProof gives a pending Domain without one its proof, token, checked at once.
func IssueProof(d *v1alpha.Domain, s Settings, token string, now time.Time) {
	d.Status.Verification = &v1alpha.DomainVerificationStatus{
		DNSRecord:               v1alpha.DNSVerificationRecord{Name: s.DNSRecordPrefix + "." + d.Spec.DomainName, Type: "TXT", Content: token},
		HTTPToken:               v1alpha.HTTPVerificationToken{URL: fmt.Sprintf("http://%s/%s/%s", d.Spec.DomainName, strings.Trim(s.HTTPTokenPath, "/"), d.UID), Body: token},
		NextVerificationAttempt: metav1.NewTime(now),
	}
	pending := fmt.Sprintf("Publish a TXT record %s with the content %s, or serve it at %s", d.Status.Verification.DNSRecord.Name, token, d.Status.Verification.HTTPToken.URL)
	setCondition(d, v1alpha.DomainConditionVerified, false, v1alpha.DomainReasonPendingVerification, pending, now)
	setCondition(d, v1alpha.DomainConditionVerifiedDNS, false, v1alpha.DomainReasonPendingVerification, "Not checked yet", now)
	setCondition(d, v1alpha.DomainConditionVerifiedHTTP, false, v1alpha.DomainReasonPendingVerification, "Not checked yet", now)
}

// Record writes one attempt's outcomes (http is ignored when dns found the token) and
// returns when to check next (zero once Verified). rnd draws the jitter in [0, 1).
func Record(d *v1alpha.Domain, s Settings, dns, http Outcome, now time.Time, rnd func() float64) time.Time {
	if rnd == nil {
		rnd = rand.Float64
	}
	v := d.Status.Verification
	v.LastVerificationAttempt = &metav1.Time{Time: now}
	setCondition(d, v1alpha.DomainConditionVerifiedDNS, dns.Found, dns.Reason, dns.Message, now)
	if !dns.Found {
		setCondition(d, v1alpha.DomainConditionVerifiedHTTP, http.Found, http.Reason, http.Message, now)
	}
	if dns.Found || http.Found {
		how := "TXT record " + v.DNSRecord.Name
		if !dns.Found {
			how = "HTTP token at " + v.HTTPToken.URL
		}
		setCondition(d, v1alpha.DomainConditionVerified, true, v1alpha.DomainReasonVerified, "Ownership proven by the "+how, now)
		d.Status.Verification = nil
		meta.RemoveStatusCondition(&d.Status.Conditions, v1alpha.DomainConditionVerifiedDNS)
		meta.RemoveStatusCondition(&d.Status.Conditions, v1alpha.DomainConditionVerifiedHTTP)
		return time.Time{}
	}
	since := d.CreationTimestamp.Time
	if c := meta.FindStatusCondition(d.Status.Conditions, v1alpha.DomainConditionVerified); c != nil && c.LastTransitionTime.After(since) {
		since = c.LastTransitionTime.Time // pending since then
	}
	next := now.Add(s.retryAfter(now.Sub(since), rnd))
	v.NextVerificationAttempt = metav1.NewTime(next)
	return next
}
