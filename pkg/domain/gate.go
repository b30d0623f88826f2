package domain

import (
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/api/meta"

	"anchorage/api/v1alpha"
)

// Verdict is the gate's answer for one hostname.
type Verdict struct {
	// Verified: a Verified Domain covers the hostname; it may be programmed.
	Verified bool
	// Create is the name of the Domain to create for an unverified hostname no Domain
	// covers ("" when one does, or when the hostname is under no registrable domain).
	Create string
	// Message says, for an unverified hostname, what to verify and how.
	Message string
}

// Gate decides, for each hostname, whether a Verified Domain among domains (those of the
// proxy's namespace) equals it or is a parent of it; for one that is not, it names the
// Domain that would be and how to verify it, or the Domain to create. Pure.
func Gate(hostnames []string, domains []v1alpha.Domain) map[string]Verdict {
	out := make(map[string]Verdict, len(hostnames))
	for _, h := range hostnames {
		out[h] = gateOne(h, domains)
	}
	return out
}

func gateOne(host string, domains []v1alpha.Domain) Verdict {
	var covering []*v1alpha.Domain
	for i := range domains {
		// A terminating Domain covers nothing, nor does one nobody can own (a public
		// suffix): it must not stop the right Domain from being created.
		if _, err := Registrable(domains[i].Spec.DomainName); err == nil && Covers(domains[i].Spec.DomainName, host) && domains[i].DeletionTimestamp == nil {
			if meta.IsStatusConditionTrue(domains[i].Status.Conditions, v1alpha.DomainConditionVerified) {
				return Verdict{Verified: true}
			}
			covering = append(covering, &domains[i])
		}
	}
	if len(covering) == 0 {
		apex, err := Registrable(host)
		if err != nil {
			return Verdict{Message: fmt.Sprintf("hostname %s cannot be verified: %v", host, err)}
		}
		return Verdict{Create: apex, Message: fmt.Sprintf("hostname %s is not verified: Domain %s was created for it; publish the proof in its status.verification", host, apex)}
	}
	// The most specific Domain is the one to verify.
	d := slices.MaxFunc(covering, func(a, b *v1alpha.Domain) int { return len(a.Spec.DomainName) - len(b.Spec.DomainName) })
	return Verdict{Message: fmt.Sprintf("hostname %s is not verified: %s", host, howToVerify(d))}
}

// howToVerify says what the tenant does next for the pending Domain d.
func howToVerify(d *v1alpha.Domain) string {
	v := d.Status.Verification
	if v == nil || v.DNSRecord.Content == "" {
		return fmt.Sprintf("Domain %s (%s) is waiting for its verification token", d.Name, d.Spec.DomainName)
	}
	return fmt.Sprintf("verify Domain %s (%s): publish a TXT record %s with the content %s, or serve that content at %s",
		d.Name, d.Spec.DomainName, v.DNSRecord.Name, v.DNSRecord.Content, v.HTTPToken.URL)
}
