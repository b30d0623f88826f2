package gateway

import (
	"testing"
	"time"

	"github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

func withIssuerOption(l gatewayv1.Listener, name string) gatewayv1.Listener {
	l.TLS = l.TLS.DeepCopy()
	if l.TLS == nil {
		l.TLS = &gatewayv1.ListenerTLSConfig{}
	}
	l.TLS.Options = map[gatewayv1.AnnotationKey]gatewayv1.AnnotationValue{ListenerIssuerOption: gatewayv1.AnnotationValue(name)}
	return l
}

func TestIssuerOfAListener(t *testing.T) {
	fallback := IssuerRef{Name: "letsencrypt-prod", Kind: "ClusterIssuer", Group: "cert-manager.io"}
	is := issuers{fallback: fallback, mapped: map[string]string{"staging": "letsencrypt-staging", "auto": "letsencrypt-prod"}}
	l := httpsListener("web", "https-a", "a.example.com")
	for _, tc := range []struct {
		name   string
		l      gatewayv1.Listener
		want   string
		mapped bool
	}{
		{name: "no option: the default", l: l, want: "letsencrypt-prod", mapped: true},
		{name: "auto, mapped", l: withIssuerOption(l, "auto"), want: "letsencrypt-prod", mapped: true},
		{name: "another mapped issuer", l: withIssuerOption(l, "staging"), want: "letsencrypt-staging", mapped: true},
		{name: "one the operator did not map", l: withIssuerOption(l, "someone-elses-ca"), want: "letsencrypt-prod", mapped: false},
	} {
		got, ok := is.of(tc.l)
		g := gomega.NewWithT(t)
		g.Expect(got.Name).To(gomega.Equal(tc.want), tc.name)
		g.Expect(ok).To(gomega.Equal(tc.mapped), tc.name)
	}
	auto := issuers{fallback: fallback}
	_, ok := auto.of(withIssuerOption(l, "auto"))
	gomega.NewWithT(t).Expect(ok).To(gomega.BeTrue(), "auto is the default issuer even when no map names it")

	gw := upstreamGateway(withIssuerOption(l, "someone-elses-ca"), httpsListener("web", "https-b", "b.example.com"), withIssuerOption(listenerOn("plain", 80, "c.example.com"), "x"))
	refused := is.refusals(gw)
	g := gomega.NewWithT(t)
	g.Expect(refused).To(gomega.HaveLen(1), "only a terminating listener naming an unmapped issuer")
	g.Expect(refused["a.example.com"].reason).To(gomega.Equal(ReasonUnsupportedIssuer))
	g.Expect(refused["a.example.com"].why).To(gomega.ContainSubstring("someone-elses-ca"))
}

func certificateWith(ready string, failedAgo time.Duration, reissued string, now time.Time) *unstructured.Unstructured {
	c := newCertificate("web-https-a", hubNS, "a.example.com", IssuerRef{Name: "le"})
	status := map[string]any{}
	if ready != "" {
		status["conditions"] = []any{map[string]any{"type": "Ready", "status": ready, "message": "the order failed"}}
	}
	if failedAgo > 0 {
		status["lastFailureTime"] = now.Add(-failedAgo).UTC().Format(time.RFC3339)
	}
	c.Object["status"] = status
	if reissued != "" {
		c.SetAnnotations(map[string]string{ReissuesAnnotation: reissued})
	}
	return c
}

func TestCertificateReadinessAndReissue(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name          string
		cert          *unstructured.Unstructured
		ready, failed bool
		dueForReissue bool
	}{
		{name: "ready", cert: certificateWith("True", 0, "", now), ready: true},
		{name: "issuing, no failure yet", cert: certificateWith("False", 0, "", now)},
		{name: "no status yet", cert: certificateWith("", 0, "", now)},
		{name: "failed a minute ago: cert-manager's retry first", cert: certificateWith("False", time.Minute, "", now), failed: true},
		{name: "failed five minutes ago: re-issued", cert: certificateWith("False", ReissueAfter, "", now), failed: true, dueForReissue: true},
		{name: "failed long ago, re-issued twice: once more", cert: certificateWith("False", time.Hour, "2", now), failed: true, dueForReissue: true},
		{name: "failed long ago, re-issued three times: cert-manager's backoff", cert: certificateWith("False", time.Hour, "3", now), failed: true},
	} {
		ready, failedSince, why := certificateState(tc.cert)
		g := gomega.NewWithT(t)
		g.Expect(ready).To(gomega.Equal(tc.ready), tc.name)
		g.Expect(!failedSince.IsZero()).To(gomega.Equal(tc.failed), tc.name)
		if tc.failed {
			g.Expect(why).To(gomega.Equal("the order failed"), tc.name)
		}
		g.Expect(dueForReissue(tc.cert, failedSince, now)).To(gomega.Equal(tc.dueForReissue), tc.name)
	}
}

func TestCertificatesVerdict(t *testing.T) {
	g := gomega.NewWithT(t)
	g.Expect(certificatesVerdict(certState{ready: []string{"a"}})).To(gomega.Equal(verdict{true, "AllCertificatesReady", "1 Certificates ready"}))
	g.Expect(certificatesVerdict(certState{}).ok).To(gomega.BeTrue(), "no Certificate to wait for")
	v := certificatesVerdict(certState{ready: []string{"a"}, pending: []string{"b"}})
	g.Expect(v.ok).To(gomega.BeFalse())
	g.Expect(v.reason).To(gomega.Equal("CertificatesPending"))
	g.Expect(v.message).To(gomega.ContainSubstring("b"))
	v = certificatesVerdict(certState{pending: []string{"b"}, failed: []string{"c (the order failed)"}})
	g.Expect(v.reason).To(gomega.Equal("CertificatesFailed"), "a failure outranks a wait")
	g.Expect(v.message).To(gomega.ContainSubstring("c (the order failed)"))
}
