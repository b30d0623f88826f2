package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"

	"anchorage/internal/testenv"
	"anchorage/pkg/shard"
)

// TestDeletingSweepIsRefusedWhileReplicasRun runs `manager sweep` in-process against a
// real API server: a valid member Lease refuses `--once --delete`, naming the pod and the
// two ways out; --force proceeds; a dry run is never refused; an expired Lease does not
// block.
func TestDeletingSweepIsRefusedWhileReplicasRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an API server")
	}
	g := NewWithT(t)
	cfg := testenv.StartAPIServer(t)
	cs, err := kubernetes.NewForConfig(cfg)
	g.Expect(err).NotTo(HaveOccurred())
	ctx := t.Context()
	const ns = "sweep-refusal"
	_, err = cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	kubeconfig := writeKubeconfig(t, cfg)

	inNamespace := func(leases string) string {
		return writeConfig(t, ourConfig+"providerNamespace: "+ns+"\nleaseNamespace: "+leases+"\nresync: {confirmAfter: 1s}\n")
	}
	sweep := func(extra ...string) (string, error) {
		var out, errOut bytes.Buffer
		root := newRootCommand(defaultRunners)
		args := []string{"--kubeconfig=" + kubeconfig, "sweep", "--once"}
		if !strings.HasPrefix(extra[len(extra)-1], "--config=") {
			extra = append(extra, inNamespace(ns))
		}
		root.SetArgs(append(args, extra...))
		root.SetOut(&out)
		root.SetErr(&errOut)
		err := root.ExecuteContext(ctx)
		return out.String(), err
	}

	live := memberLease(ns, "manager-0", time.Now(), 15)
	_, err = cs.CoordinationV1().Leases(ns).Create(ctx, live, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	expired := memberLease(ns, "manager-1", time.Now().Add(-time.Hour), 15)
	_, err = cs.CoordinationV1().Leases(ns).Create(ctx, expired, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())

	_, err = sweep("--delete")
	g.Expect(err).To(HaveOccurred(), "a deleting sweep while a replica holds a valid member Lease")
	g.Expect(err.Error()).To(ContainSubstring("manager-0"), "the refusal names the running replica")
	g.Expect(err.Error()).NotTo(ContainSubstring("manager-1"), "an expired Lease names no running replica")
	g.Expect(err.Error()).To(ContainSubstring("scale the Deployment to 0, or pass --force"))

	_, err = sweep("--dry-run")
	g.Expect(err).NotTo(HaveOccurred(), "a dry run needs no --force")
	_, err = sweep("--delete", "--force")
	g.Expect(err).NotTo(HaveOccurred(), "--force proceeds")

	// The replica stops: its Lease lapses. Only the expired one is left.
	g.Expect(cs.CoordinationV1().Leases(ns).Delete(ctx, live.Name, metav1.DeleteOptions{})).To(Succeed())
	_, err = sweep("--delete")
	g.Expect(err).NotTo(HaveOccurred(), "an expired member Lease does not block")

	// The lease namespace is where member Leases are looked for.
	_, err = cs.CoordinationV1().Leases(ns).Create(ctx, memberLease(ns, "manager-2", time.Now(), 15), metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = sweep("--delete", inNamespace("default"))
	g.Expect(err).NotTo(HaveOccurred(), "no member Lease in leaseNamespace")
	_, err = sweep("--delete", inNamespace(ns))
	g.Expect(err).To(MatchError(ContainSubstring("manager-2")))
}

// memberLease is a member Lease as a replica writes it, last renewed at renewed.
func memberLease(ns, pod string, renewed time.Time, seconds int32) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: shard.MemberLeaseName(pod), Labels: map[string]string{shard.LabelRole: shard.RoleMember}},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptr.To(shard.HolderIdentity(pod, "1")),
			LeaseDurationSeconds: ptr.To(seconds),
			RenewTime:            &metav1.MicroTime{Time: renewed},
		},
	}
}

// writeKubeconfig writes cfg as a kubeconfig file, as an operator would pass it.
func writeKubeconfig(t *testing.T, cfg *rest.Config) string {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["hub"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts["hub"] = &clientcmdapi.Context{Cluster: "hub", AuthInfo: "admin"}
	kc.CurrentContext = "hub"
	path := filepath.Join(t.TempDir(), "hub.kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}
