package shard

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"
)

const (
	// MemberLeasePrefix prefixes member Lease names; the pod name follows.
	MemberLeasePrefix = "anchorage-member-"
	// ProjectLeasePrefix prefixes project Lease names.
	ProjectLeasePrefix = "anchorage-project-"
	// CoordinatorLeaseName is the coordinator's election Lease.
	CoordinatorLeaseName = "anchorage-coordinator"

	// LabelRole marks anchorage Leases: "member" or "project".
	LabelRole = "anchorage.datumapis.com/lease-role"
	// LabelProject carries a label-safe form of the project name on project Leases.
	LabelProject = "anchorage.datumapis.com/project"
	// AnnotationProject: the real project name on project Leases and kubeconfig Secrets.
	AnnotationProject = "anchorage.datumapis.com/project"
	// AnnotationClaim is the holder's claim on a project Lease: "<holder>#<engagement>".
	AnnotationClaim = "anchorage.datumapis.com/claim"
	// AnnotationWeight on a member Lease scales its share of projects.
	AnnotationWeight = "anchorage.datumapis.com/weight"
	// AnnotationExpiredBy on a member Lease records which coordinator declared it expired.
	AnnotationExpiredBy = "anchorage.datumapis.com/expired-by"
	// AnnotationNextHolder on a project Lease asks for a planned hand-over to the named one.
	AnnotationNextHolder = "anchorage.datumapis.com/next-holder"
	// AnnotationDraining on a member Lease says its replica is shutting down.
	AnnotationDraining = "anchorage.datumapis.com/draining"

	roleMember  = "member"
	roleProject = "project"
)

var nonDNS = regexp.MustCompile(`[^a-z0-9-]+`)

// ProjectLeaseName is a DNS-safe, collision-free Lease name for a project: a readable
// prefix plus a hash of the real name.
func ProjectLeaseName(project string) string {
	sum := sha256.Sum256([]byte(project))
	readable := strings.Trim(nonDNS.ReplaceAllString(strings.ToLower(project), "-"), "-")
	// 18 (prefix) + 34 + 1 + 10 (hash) = 63: short enough for a label value too.
	if len(readable) > 34 {
		readable = strings.TrimRight(readable[:34], "-")
	}
	if readable == "" {
		return ProjectLeasePrefix + hex.EncodeToString(sum[:5])
	}
	return ProjectLeasePrefix + readable + "-" + hex.EncodeToString(sum[:5])
}

var nonLabel = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

// ProjectLabelValue is a label-safe form of a project name ("/" becomes "_"), hashed
// when too long.
func ProjectLabelValue(project string) string {
	v := nonLabel.ReplaceAllString(strings.ReplaceAll(project, "/", "_"), "-")
	if len(v) > 63 {
		sum := sha256.Sum256([]byte(project))
		v = v[:52] + "-" + hex.EncodeToString(sum[:5])
	}
	return strings.Trim(v, "-_.")
}

// MemberLeaseName is the member Lease of a pod.
func MemberLeaseName(pod string) string { return MemberLeasePrefix + pod }

// HolderIdentity joins a pod name and an incarnation.
func HolderIdentity(pod, incarnation string) string { return pod + "/" + incarnation }

// PodOf returns the pod part of a holder identity.
func PodOf(holder string) string {
	pod, _, _ := strings.Cut(holder, "/")
	return pod
}

// ClaimValue is the claim annotation for an engagement.
func ClaimValue(holder, engagement string) string { return holder + "#" + engagement }

// ClaimedBy reports whether a claim annotation was written by holder.
func ClaimedBy(claim, holder string) bool {
	return holder != "" && strings.HasPrefix(claim, holder+"#")
}

// ParseWeight reads a member weight annotation; empty means 1.
func ParseWeight(v string) (float64, error) {
	if v == "" {
		return 1, nil
	}
	var w float64
	if _, err := fmt.Sscanf(v, "%g", &w); err != nil || w <= 0 {
		return 0, fmt.Errorf("weight %q: want a positive number", v)
	}
	return w, nil
}
