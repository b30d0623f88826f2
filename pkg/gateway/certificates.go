package gateway

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// Re-issuing a failed Certificate (the previous manager's certificateReissuance): a
// Certificate that cert-manager gave up on (Ready=False with status.lastFailureTime)
// waits in cert-manager's exponential backoff, up to a day, though the cause (DNS not
// yet pointed at the edge, a rate limit) is often gone in minutes. So a Certificate
// failed for at least ReissueAfter is deleted and written anew, which starts a fresh
// order, at most ReissueLimit times (counted on the Certificate, ReissuesAnnotation);
// past that cert-manager's own backoff applies. The count only grows: a Certificate
// that keeps failing costs ReissueLimit extra orders over its life, no more.
const (
	ReissueAfter       = 5 * time.Minute
	ReissueLimit       = 3
	ReissuesAnnotation = "anchorage.datumapis.com/certificate-reissues"
)

// ListenerIssuerOption is the listener TLS option naming the issuer of its Certificate
// (the previous manager's); "auto", or none, is Config.CertificateIssuer.
const ListenerIssuerOption = "gateway.networking.datumapis.com/certificate-issuer"

// ReasonUnsupportedIssuer: a listener names an issuer the operator did not map
// (gateway.clusterIssuers).
const ReasonUnsupportedIssuer = "UnsupportedIssuer"

// issuers picks each listener's issuer: the one its ListenerIssuerOption names through
// mapped, or fallback for none or "auto".
type issuers struct {
	fallback IssuerRef
	mapped   map[string]string
}

// of returns l's issuer, and false when l names one not mapped.
func (is issuers) of(l gatewayv1.Listener) (IssuerRef, bool) {
	var name gatewayv1.AnnotationValue
	if l.TLS != nil {
		name = l.TLS.Options[ListenerIssuerOption]
	}
	if mapped, ok := is.mapped[string(name)]; ok {
		return IssuerRef{Name: mapped, Kind: "ClusterIssuer", Group: "cert-manager.io"}, true
	}
	return is.fallback, name == "" || name == "auto"
}

// refusals refuses the hostnames of gw's terminating listeners that name an
// issuer not mapped: nothing is ordered from an issuer the operator did not offer.
func (is issuers) refusals(gw *gatewayv1.Gateway) refusedHostnames {
	refused := refusedHostnames{}
	for _, l := range gw.Spec.Listeners {
		if _, ok := is.of(l); !ok && terminates(l) {
			refused[*l.Hostname] = refusal{ReasonUnsupportedIssuer, fmt.Sprintf("listener %s names the issuer %q (TLS option %s), which is not one of gateway.clusterIssuers: %s",
				l.Name, l.TLS.Options[ListenerIssuerOption], ListenerIssuerOption, strings.Join(slices.Sorted(maps.Keys(is.mapped)), ", "))}
		}
	}
	return refused
}

// certState is what writeCertificates found, for the CertificatesReady condition.
type certState struct {
	ready, pending []string
	failed         []string // Ready=False after a failure, with cert-manager's message
}

// certificateState reads one Certificate's readiness: ready; failed (with why and since
// when: cert-manager set status.lastFailureTime); or pending.
func certificateState(c *unstructured.Unstructured) (ready bool, failedSince time.Time, why string) {
	conds, _, _ := unstructured.NestedSlice(c.Object, "status", "conditions")
	for _, raw := range conds {
		cond, _ := raw.(map[string]any)
		if cond["type"] != "Ready" {
			continue
		}
		if cond["status"] == "True" {
			return true, time.Time{}, ""
		}
		why, _ = cond["message"].(string)
	}
	if s, ok, _ := unstructured.NestedString(c.Object, "status", "lastFailureTime"); ok {
		if t, err := time.Parse(time.RFC3339, s); err == nil {
			return false, t, why
		}
	}
	return false, time.Time{}, why
}

// reissues is how many times c was re-issued.
func reissues(c *unstructured.Unstructured) int {
	n, _ := strconv.Atoi(c.GetAnnotations()[ReissuesAnnotation])
	return n
}

// dueForReissue reports whether existing, a Certificate failed since failedSince, is to
// be deleted and written anew at now.
func dueForReissue(existing *unstructured.Unstructured, failedSince, now time.Time) bool {
	return !failedSince.IsZero() && now.Sub(failedSince) >= ReissueAfter && reissues(existing) < ReissueLimit
}

// writeCertificates writes one Certificate per certificate listener of programmable,
// re-issues a failed one when due, deletes the owner's Certificates no listener needs,
// and returns their readiness.
func (r *GatewayReconciler) writeCertificates(ctx context.Context, w hubWriter, programmable *gatewayv1.Gateway, canonical string, now time.Time) (certState, error) {
	var st certState
	certs, err := downstreamCertificates(programmable, w.ns, r.issuers(), r.certificates(canonical))
	if err != nil {
		return st, err
	}
	want := map[string]bool{}
	for _, c := range certs {
		want[c.GetName()] = true
		written, err := w.apply(ctx, kindCertificate, c, setCertificateSpec)
		if err != nil {
			return st, err
		}
		existing := written.(*unstructured.Unstructured)
		ready, failedSince, why := certificateState(existing)
		if !ready && dueForReissue(existing, failedSince, now) {
			if existing, err = r.reissue(ctx, w, existing, c); err != nil {
				return st, err
			}
			ready, failedSince, why = certificateState(existing)
		}
		switch {
		case ready:
			st.ready = append(st.ready, c.GetName())
		case !failedSince.IsZero():
			st.failed = append(st.failed, fmt.Sprintf("%s (%s)", c.GetName(), why))
		default:
			st.pending = append(st.pending, c.GetName())
		}
	}
	stale, err := w.certificates(ctx)
	if err != nil {
		return st, err
	}
	for _, c := range stale {
		if !want[c.GetName()] {
			if err := w.deleteIfAttached(ctx, kindCertificate, c); err != nil {
				return st, err
			}
		}
	}
	return st, nil
}

func (r *GatewayReconciler) issuers() issuers {
	return issuers{fallback: r.Config.CertificateIssuer, mapped: r.Config.ClusterIssuers}
}

// reissue deletes existing (proven on the anchor, UID-preconditioned) and writes desired
// anew with the re-issue count one higher, which starts a fresh order.
func (r *GatewayReconciler) reissue(ctx context.Context, w hubWriter, existing, desired *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	if err := w.deleteIfAttached(ctx, kindCertificate, existing); err != nil {
		return nil, err
	}
	fresh := desired.DeepCopy()
	fresh.SetAnnotations(map[string]string{ReissuesAnnotation: strconv.Itoa(reissues(existing) + 1)})
	written, err := w.apply(ctx, kindCertificate, fresh, setCertificateSpec)
	if err != nil {
		return nil, err
	}
	r.Metrics.certificateReissued()
	return written.(*unstructured.Unstructured), nil
}

// certificatesVerdict is the CertificatesReady condition of st (the previous manager's
// reasons): True when every listener's Certificate is Ready.
func certificatesVerdict(st certState) verdict {
	switch {
	case len(st.failed) > 0:
		return verdict{false, "CertificatesFailed", "Certificates failed: " + strings.Join(st.failed, ", ")}
	case len(st.pending) > 0:
		return verdict{false, "CertificatesPending", "Waiting for Certificates: " + strings.Join(st.pending, ", ")}
	}
	return verdict{true, "AllCertificatesReady", fmt.Sprintf("%d Certificates ready", len(st.ready))}
}
