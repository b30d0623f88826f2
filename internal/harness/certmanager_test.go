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

// TestCertManagerIssuesFromACAClusterIssuer: cert-manager's own controller, run against
// an API server serving the hub's CRDs (cert-manager's without its webhook), takes a Certificate from a CA
// ClusterIssuer to Ready, and the Secret it writes holds a certificate for the name,
// signed by that CA, with its key.
func TestCertManagerIssuesFromACAClusterIssuer(t *testing.T) {
	ctx, cfg, c := testHub(t, 90*time.Second)
	g := NewWithT(t)
	cm := StartCertManager(ctx, t, cfg, CertManagerOptions{})
	ca, err := CreateCAClusterIssuer(ctx, c, "test-ca", cm.ClusterResourceNamespace)
	g.Expect(err).NotTo(HaveOccurred())

	g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"}})).To(Succeed())
	cert := &unstructured.Unstructured{}
	cert.SetGroupVersionKind(gateway.CertificateGVK)
	cert.SetNamespace("team")
	cert.SetName("a")
	cert.Object["spec"] = map[string]any{
		"secretName": "a-tls",
		"dnsNames":   []any{"a.example.test"},
		"issuerRef":  map[string]any{"kind": "ClusterIssuer", "name": "test-ca"},
	}
	g.Expect(c.Create(ctx, cert)).To(Succeed())

	waitCtx, cancelWait := context.WithTimeout(ctx, 60*time.Second)
	defer cancelWait()
	_, err = WaitForReady(waitCtx, c, gateway.CertificateGVK, client.ObjectKey{Namespace: "team", Name: "a"}, cm.Exited)
	g.Expect(err).NotTo(HaveOccurred())

	secret := &corev1.Secret{}
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: "team", Name: "a-tls"}, secret)).To(Succeed())
	pair, err := tls.X509KeyPair(secret.Data[corev1.TLSCertKey], secret.Data[corev1.TLSPrivateKeyKey])
	g.Expect(err).NotTo(HaveOccurred(), "the Secret holds a certificate and its key")
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	g.Expect(err).NotTo(HaveOccurred())
	_, err = leaf.Verify(x509.VerifyOptions{DNSName: "a.example.test", Roots: ca.Pool()})
	g.Expect(err).NotTo(HaveOccurred(), "the certificate is for a.example.test and signed by the CA")
	g.Expect(secret.Data["ca.crt"]).To(Equal(ca.CertPEM), "cert-manager names the CA beside the certificate")
}
