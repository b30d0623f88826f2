package integration

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/multicluster-runtime/providers/kubeconfig"

	"anchorage/pkg/shard"
)

// TestAKubeconfigThatRunsAPluginIsRefused: a second project's Secret carries a
// kubeconfig whose user is an exec credential plugin that would leave a file behind.
// The plugin never runs (no file), the Secret gets a KubeconfigRefused Event naming the
// plugin, anchorage_project_kubeconfig_refused{secret} is 1, and the first project is
// programmed as usual.
func TestAKubeconfigThatRunsAPluginIsRefused(t *testing.T) {
	gt := newGatewayTest(t, planeA)
	g, ctx := gt.g, gt.ctx
	marker := filepath.Join(t.TempDir(), "plugin-ran")
	evil := "evil-" + rand.String(5)
	kc := clientcmdapi.NewConfig()
	kc.Clusters["p"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1"}
	kc.AuthInfos["u"] = &clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{
		APIVersion: "client.authentication.k8s.io/v1", Command: "/bin/sh", Args: []string{"-c", "touch " + marker},
		InteractiveMode: clientcmdapi.NeverExecInteractiveMode,
	}}
	kc.Contexts["c"] = &clientcmdapi.Context{Cluster: "p", AuthInfo: "u"}
	kc.CurrentContext = "c"
	raw, err := clientcmd.Write(*kc)
	g.Expect(err).NotTo(HaveOccurred())
	secret := &corev1.Secret{}
	secret.Namespace, secret.Name = gt.env.ProviderNamespace, evil
	secret.Labels = map[string]string{kubeconfig.DefaultKubeconfigSecretLabel: "true"}
	secret.Data = map[string][]byte{kubeconfig.DefaultKubeconfigSecretKey: raw}
	g.Expect(hub.Client.Create(ctx, secret)).To(Succeed())

	m := gt.startManager("kubeconfig")
	gt.createProxy(gt.newProxy("web", gatewayv1.Hostname("web-"+gt.project+".example.com")))
	gt.waitProgrammed("web")

	g.Eventually(func(g Gomega) {
		events := &corev1.EventList{}
		g.Expect(hub.Client.List(ctx, events, client.InNamespace(gt.env.ProviderNamespace))).To(Succeed())
		var found bool
		for _, e := range events.Items {
			if e.Reason == shard.ReasonKubeconfigRefused && e.InvolvedObject.Name == evil {
				g.Expect(e.Message).To(ContainSubstring("exec credential plugin (/bin/sh)"))
				found = true
			}
		}
		g.Expect(found).To(BeTrue(), "a KubeconfigRefused Event on the Secret")
		v, err := m.Gauge("anchorage_project_kubeconfig_refused", "secret", evil)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(v).To(Equal(1.0))
	}, gwProgrammedWithin, gwPoll).Should(Succeed())
	g.Consistently(func() bool {
		_, err := os.Stat(marker)
		return os.IsNotExist(err)
	}, 3*time.Second, 100*time.Millisecond).Should(BeTrue(), "the plugin never ran")
	g.Expect(discovered(m)).NotTo(ContainElement(evil), "the refused project is not discovered")
}
