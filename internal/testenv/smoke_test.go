package testenv_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"anchorage/internal/testenv"
)

// TestControlPlaneSmoke proves the offline chain end to end: the binaries built by
// hack/build-k8s.sh start, report their real version, and serve reads and writes.
func TestControlPlaneSmoke(t *testing.T) {
	g := NewWithT(t)
	dir, err := testenv.BinaryDir()
	g.Expect(err).NotTo(HaveOccurred())

	env := &envtest.Environment{BinaryAssetsDirectory: dir}
	cfg, err := env.Start()
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = env.Stop() })

	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	g.Expect(err).NotTo(HaveOccurred())
	info, err := dc.ServerVersion()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(info.GitVersion).To(Equal("v" + testenv.KubernetesVersion))

	c, err := client.New(cfg, client.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	ctx := context.Background()

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "smoke", Namespace: "default"}, Data: map[string]string{"k": "v"}}
	g.Expect(c.Create(ctx, cm)).To(Succeed())
	var gotCM corev1.ConfigMap
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(cm), &gotCM)).To(Succeed())
	g.Expect(gotCM.Data).To(HaveKeyWithValue("k", "v"))

	holder := "smoke/1"
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "smoke", Namespace: "default"}, Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder}}
	g.Expect(c.Create(ctx, lease)).To(Succeed())
	var gotLease coordinationv1.Lease
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(lease), &gotLease)).To(Succeed())
	g.Expect(*gotLease.Spec.HolderIdentity).To(Equal(holder))
}
