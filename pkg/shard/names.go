package shard

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
)

const (
	MemberLeasePrefix    = "anchorage-member-"  // then the pod name
	ProjectLeasePrefix   = "anchorage-project-" // of project Lease names
	CoordinatorLeaseName = "anchorage-coordinator"

	LabelRole            = "anchorage.datumapis.com/lease-role"  // "member" or "project"
	LabelProject         = "anchorage.datumapis.com/project"     // label-safe project name, on project Leases
	AnnotationProject    = "anchorage.datumapis.com/project"     // the real project name, on project Leases and Secrets
	AnnotationClaim      = "anchorage.datumapis.com/claim"       // "<holder>#<engagement>", on project Leases
	AnnotationWeight     = "anchorage.datumapis.com/weight"      // a member's share of projects
	AnnotationExpiredBy  = "anchorage.datumapis.com/expired-by"  // the coordinator that expired a member
	AnnotationNextHolder = "anchorage.datumapis.com/next-holder" // asks for a planned hand-over to it
	AnnotationDraining   = "anchorage.datumapis.com/draining"    // on a member Lease: shutting down

	RoleMember  = "member" // the LabelRole value of member Leases
	roleProject = "project"
)

var nonDNS = regexp.MustCompile(`[^a-z0-9-]+`)

// ProjectLeaseName is a DNS-safe, collision-free Lease name for a project.
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

// ProjectLabelValue is a label-safe project name ("/" becomes "_"), hashed when too long.
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

// ParseWeight reads a member weight annotation; empty means 1. NaN and infinities are
// refused: either would win or lose every project's rank whatever the other weights.
func ParseWeight(v string) (float64, error) {
	if v == "" {
		return 1, nil
	}
	w, err := strconv.ParseFloat(v, 64)
	if err != nil || !ValidWeight(w) {
		return 0, fmt.Errorf("weight %q: want a positive number", v)
	}
	return w, nil
}

// ValidWeight reports whether w is a weight a member may have: positive and finite.
func ValidWeight(w float64) bool { return w > 0 && !math.IsInf(w, 1) }
