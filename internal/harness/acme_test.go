package harness

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"anchorage/pkg/gateway"
)

// TestCertManagerOrdersFromPebble: cert-manager's controller registers an ACME account
// with Pebble, orders a certificate for a Certificate of an ACME ClusterIssuer, passes
// its HTTP-01 self-check against the harness's stand-in solver, and the Certificate
// becomes Ready with a certificate for the name that Pebble's CA issued.
func TestCertManagerOrdersFromPebble(t *testing.T) {
	ctx, cfg, c := testHub(t, 2*time.Minute)
	g := NewWithT(t)
	pebble := StartPebble(ctx, t)
	cm := StartCertManager(ctx, t, cfg, CertManagerOptions{HTTP01Solver: StartHTTP01Solver(t, c)})
	g.Expect(CreateACMEClusterIssuer(ctx, c, "pebble", pebble)).To(Succeed())

	g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"}})).To(Succeed())
	cert := &unstructured.Unstructured{}
	cert.SetGroupVersionKind(gateway.CertificateGVK)
	cert.SetNamespace("team")
	cert.SetName("a")
	cert.Object["spec"] = map[string]any{
		"secretName": "a-tls",
		"dnsNames":   []any{"a.example.test"},
		"issuerRef":  map[string]any{"kind": "ClusterIssuer", "name": "pebble"},
	}
	g.Expect(c.Create(ctx, cert)).To(Succeed())

	waitCtx, cancelWait := context.WithTimeout(ctx, 60*time.Second)
	defer cancelWait()
	_, err := WaitForReady(waitCtx, c, gateway.CertificateGVK, client.ObjectKey{Namespace: "team", Name: "a"}, cm.Exited, pebble.Exited)
	g.Expect(err).NotTo(HaveOccurred())

	secret := &corev1.Secret{}
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: "team", Name: "a-tls"}, secret)).To(Succeed())
	pair, err := tls.X509KeyPair(secret.Data[corev1.TLSCertKey], secret.Data[corev1.TLSPrivateKeyKey])
	g.Expect(err).NotTo(HaveOccurred(), "the Secret holds a certificate chain and its key")
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	g.Expect(err).NotTo(HaveOccurred())
	intermediates := x509.NewCertPool()
	for _, der := range pair.Certificate[1:] {
		ic, err := x509.ParseCertificate(der)
		g.Expect(err).NotTo(HaveOccurred())
		intermediates.AddCert(ic)
	}
	roots, err := pebble.Roots(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = leaf.Verify(x509.VerifyOptions{DNSName: "a.example.test", Roots: roots, Intermediates: intermediates})
	g.Expect(err).NotTo(HaveOccurred(), "the certificate is for a.example.test and chains to Pebble's root")
}
