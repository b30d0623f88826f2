package v1alpha

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Domain condition types. A hostname reaches the hub only while a Domain in the proxy's
// namespace that equals it or is a parent of it has Verified=True (docs/design.md,
// Verified domains).
const (
	// DomainConditionVerified is True once ownership was proven, by DNS or HTTP.
	DomainConditionVerified = "Verified"
	// DomainConditionVerifiedDNS reports the latest TXT record check.
	DomainConditionVerifiedDNS = "VerifiedDNS"
	// DomainConditionVerifiedHTTP reports the latest HTTP token check.
	DomainConditionVerifiedHTTP = "VerifiedHTTP"
	// DomainConditionValidDomain is False for a name that is no registrable domain (a
	// public suffix such as com, co.uk or github.io): it is never verified.
	DomainConditionValidDomain = "ValidDomain"
)

// Domain condition reasons: the previous manager's strings, so its stored Domains read
// the same here.
const (
	DomainReasonPendingVerification = "PendingVerification"
	DomainReasonRecordNotFound      = "RecordNotFound"
	DomainReasonContentMismatch     = "VerificationRecordContentMismatch"
	DomainReasonUnexpectedResponse  = "UnexpectedResponse"
	DomainReasonInternalError       = "InternalError"
	DomainReasonVerified            = "Verified"
	DomainReasonInvalidDomain       = "InvalidApex"
	DomainReasonValid               = "Valid"
)

// Domain is a domain name a project claims to own. Until it is Verified (a TXT record
// or an HTTP token the project publishes), no hostname under it is programmed.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Domain Name",type="string",JSONPath=".spec.domainName"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
// +kubebuilder:printcolumn:name="Verified",type="string",JSONPath=`.status.conditions[?(@.type=="Verified")].status`
// +kubebuilder:printcolumn:name="Verification Message",type="string",JSONPath=`.status.conditions[?(@.type=="Verified")].message`,priority=1
type Domain struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +kubebuilder:validation:Required
	Spec   DomainSpec   `json:"spec,omitempty"`
	Status DomainStatus `json:"status,omitempty"`
}

// DomainSpec names the domain.
type DomainSpec struct {
	// DomainName is the fully qualified domain name, lower case, at least two labels.
	// It cannot be changed: a token proves ownership of one name.
	//
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +kubebuilder:validation:XValidation:message="A domain name is immutable and cannot be changed after creation",rule="oldSelf == '' || self == oldSelf"
	// +kubebuilder:validation:XValidation:message="Must have at least two segments separated by dots",rule="self.indexOf('.') != -1"
	DomainName string `json:"domainName"`

	// DesiredRegistrationRefreshAttempt asks for the registration data to be read
	// again at or after this time (the previous manager's field, kept so its Domains
	// read back whole; this manager reads no registration data).
	//
	// +optional
	DesiredRegistrationRefreshAttempt *metav1.Time `json:"desiredRegistrationRefreshAttempt,omitempty"`
}

// DomainStatus is what was observed about the domain.
type DomainStatus struct {
	// Verification is what the project publishes to prove ownership, and when it is
	// checked next; it is cleared once the domain is Verified.
	//
	// +optional
	Verification *DomainVerificationStatus `json:"verification,omitempty"`
	// Registration is the registry's data about the domain, as the previous manager
	// stored it.
	//
	// +optional
	Registration *Registration `json:"registration,omitempty"`
	// Nameservers are the domain's authoritative nameservers, as the previous manager
	// stored them.
	//
	// +optional
	Nameservers []Nameserver `json:"nameservers,omitempty"`
	// Apex is true when spec.domainName is the registrable domain itself (eTLD+1).
	//
	// +optional
	Apex bool `json:"apex,omitempty"`
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// DomainVerificationStatus is the proof asked of the project, one token published either
// way, and the check's schedule.
type DomainVerificationStatus struct {
	DNSRecord DNSVerificationRecord `json:"dnsRecord,omitempty"`
	HTTPToken HTTPVerificationToken `json:"httpToken,omitempty"`
	// NextVerificationAttempt is when the token is looked for next.
	NextVerificationAttempt metav1.Time `json:"nextVerificationAttempt,omitempty"`
	// LastVerificationAttempt is when it was last looked for.
	//
	// +optional
	LastVerificationAttempt *metav1.Time `json:"lastVerificationAttempt,omitempty"`
}

// DNSVerificationRecord is the TXT record that proves ownership.
type DNSVerificationRecord struct {
	Name    string `json:"name"`
	Type    string `json:"type"`
	Content string `json:"content"`
}

// HTTPVerificationToken is the body the domain serves at URL to prove ownership.
type HTTPVerificationToken struct {
	URL  string `json:"url"`
	Body string `json:"body"`
}

// Registration is the registry's data about a domain (RDAP or WHOIS), in the previous
// manager's shape.
type Registration struct {
	Domain           string         `json:"domain,omitempty"`
	RegistryDomainID string         `json:"registryDomainID,omitempty"`
	Handle           string         `json:"handle,omitempty"`
	Source           string         `json:"source,omitempty"`
	Registrar        *RegistrarInfo `json:"registrar,omitempty"`
	Registry         *RegistryInfo  `json:"registry,omitempty"`
	CreatedAt        *metav1.Time   `json:"createdAt,omitempty"`
	UpdatedAt        *metav1.Time   `json:"updatedAt,omitempty"`
	ExpiresAt        *metav1.Time   `json:"expiresAt,omitempty"`
	Statuses         []string       `json:"statuses,omitempty"`
	DNSSEC           *DNSSECInfo    `json:"dnssec,omitempty"`
	Contacts         *ContactSet    `json:"contacts,omitempty"`
	Abuse            *AbuseContact  `json:"abuse,omitempty"`
	// +optional
	NextRefreshAttempt metav1.Time `json:"nextRefreshAttempt,omitempty"`
	// +optional
	LastRefreshAttempt metav1.Time `json:"lastRefreshAttempt,omitempty"`
}

// RegistrarInfo names a domain's registrar.
type RegistrarInfo struct {
	IANAID string `json:"ianaID,omitempty"`
	Name   string `json:"name,omitempty"`
	URL    string `json:"url,omitempty"`
}

// RegistryInfo names a domain's registry.
type RegistryInfo struct {
	Name string `json:"name,omitempty"`
	URL  string `json:"url,omitempty"`
}

// Nameserver is one authoritative nameserver and its addresses.
type Nameserver struct {
	Hostname string         `json:"hostname"`
	IPs      []NameserverIP `json:"ips,omitempty"`
}

// NameserverIP is one address of a nameserver.
type NameserverIP struct {
	Address        string `json:"address"`
	RegistrantName string `json:"registrantName,omitempty"`
}

// DNSSECInfo says whether the domain is signed.
type DNSSECInfo struct {
	Enabled *bool      `json:"enabled,omitempty"`
	DS      []DSRecord `json:"ds,omitempty"`
}

// DSRecord is one delegation signer record.
type DSRecord struct {
	KeyTag     uint16 `json:"keyTag"`
	Algorithm  uint8  `json:"algorithm"`
	DigestType uint8  `json:"digestType"`
	Digest     string `json:"digest"`
}

// ContactSet holds a domain's contacts.
type ContactSet struct {
	Registrant *Contact `json:"registrant,omitempty"`
	Admin      *Contact `json:"admin,omitempty"`
	Tech       *Contact `json:"tech,omitempty"`
}

// Contact is one contact of a domain.
type Contact struct {
	Organization string `json:"organization,omitempty"`
	Email        string `json:"email,omitempty"`
	Phone        string `json:"phone,omitempty"`
}

// AbuseContact is where a domain's abuse is reported.
type AbuseContact struct {
	Email string `json:"email,omitempty"`
	Phone string `json:"phone,omitempty"`
}

// DomainList is a list of Domains.
//
// +kubebuilder:object:root=true
type DomainList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Domain `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Domain{}, &DomainList{})
}
