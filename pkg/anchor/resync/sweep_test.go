package resync

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// hubKubeconfig returns a kubeconfig of the package's API server.
func hubKubeconfig(t *testing.T) []byte {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["hub"] = &clientcmdapi.Cluster{Server: hubConfig.Host, CertificateAuthorityData: hubConfig.CAData}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: hubConfig.CertData, ClientKeyData: hubConfig.KeyData, Token: hubConfig.BearerToken}
	cfg.Contexts["hub"] = &clientcmdapi.Context{Cluster: "hub", AuthInfo: "admin"}
	cfg.CurrentContext = "hub"
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// Finding 8: a project named by two Secrets is skipped and reported, never served by
// whichever Secret happens to be listed last; every plane carries the Secret it was
// built from.
func TestSweepPlanesSkipsProjectsNamedTwice(t *testing.T) {
	c := needHub(t)
	g := NewWithT(t)
	ctx := context.Background()
	ns := "prov-" + rand.String(6)
	g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	kc := hubKubeconfig(t)
	const annotation = "anchorage.datumapis.com/project"
	secret := func(name string, annotations map[string]string) *corev1.Secret {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{DefaultSecretLabel: "true"}, Annotations: annotations},
			Data: map[string][]byte{"kubeconfig": kc}}
		g.Expect(c.Create(ctx, s)).To(Succeed())
		return s
	}
	secret("proj", nil)
	secret("zz-proj", map[string]string{annotation: "proj"})
	single := secret("single", nil)
	reports, _, err := Sweep(ctx, SweepOptions{Hub: hubConfig, ProviderNamespace: ns, SecretProjectAnnotation: annotation, Resync: Options{MinAge: time.Hour}})
	g.Expect(err).NotTo(HaveOccurred())
	byProject := map[string]PassReport{}
	for _, r := range reports {
		byProject[r.Project] = r
	}
	g.Expect(byProject).To(HaveKey("proj"))
	g.Expect(byProject["proj"].Aborted).To(ContainSubstring("named by 2 kubeconfig Secrets (proj, zz-proj)"))
	g.Expect(byProject["single"].Aborted).To(BeEmpty())
	err = c.Get(ctx, client.ObjectKey{Namespace: ns, Name: PlaneIdentityName("proj")}, &corev1.ConfigMap{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "no plane recorded for a project named twice: %v", err)
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: PlaneIdentityName("single")}, &corev1.ConfigMap{})).To(Succeed())
	var out strings.Builder
	g.Expect(WriteTable(&out, reports, nil)).To(Succeed())
	g.Expect(out.String()).To(ContainSubstring("named by 2 kubeconfig Secrets"))
	_ = single
}

// Finding 8: a pass uses exactly the Secret that built its plane: a plane built from
// another Secret (one replaced since) proves nothing and records nothing.
func TestPassUsesTheSecretOfItsPlane(t *testing.T) {
	f := newPassFixture(t)
	g := f.g
	orphan := f.plant(f.owner("gone", uuid.NewUUID()))
	f.plane = Plane{Live: hub, Mapper: hub.RESTMapper(), SecretUID: uuid.NewUUID()}
	f.run()
	f.clock.Step(time.Minute)
	rep := f.run()
	g.Expect(rep.Plane).To(Equal(PlaneUnverified))
	g.Expect(f.exists(orphan)).To(BeTrue())
	err := hub.Get(f.ctx, client.ObjectKey{Namespace: f.provider, Name: PlaneIdentityName(f.project)}, &corev1.ConfigMap{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "nothing recorded from a plane of another Secret: %v", err)
}
