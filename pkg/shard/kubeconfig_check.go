package shard

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// ErrUnsafeKubeconfig marks a kubeconfig refused for what it would run or read.
var ErrUnsafeKubeconfig = errors.New("kubeconfig refused")

// RefuseUnsafeRESTConfig refuses a config that runs a plugin, reads a file or uses a proxy.
func RefuseUnsafeRESTConfig(c *rest.Config) error {
	var why []string
	if c.ExecProvider != nil {
		why = append(why, "an exec credential plugin")
	}
	if c.AuthProvider != nil {
		why = append(why, "an auth-provider")
	}
	for _, f := range []struct{ what, path string }{
		{"tokenFile", c.BearerTokenFile}, {"client-certificate", c.CertFile}, {"client-key", c.KeyFile}, {"certificate-authority", c.CAFile},
	} {
		if f.path != "" {
			why = append(why, fmt.Sprintf("a file path (%s)", f.what))
		}
	}
	if c.Proxy != nil {
		why = append(why, "a proxy-url")
	}
	if len(why) > 0 {
		return fmt.Errorf("%w: it has %s; give credentials and certificates inline (token, client-certificate-data, client-key-data, certificate-authority-data)", ErrUnsafeKubeconfig, strings.Join(why, ", "))
	}
	return nil
}

// UnsafeKubeconfig returns, sorted, what a parsed kubeconfig would run or read.
func UnsafeKubeconfig(cfg *clientcmdapi.Config) []string {
	var why []string
	for name, a := range cfg.AuthInfos {
		if a.Exec != nil {
			why = append(why, fmt.Sprintf("user %s: an exec credential plugin (%s)", name, a.Exec.Command))
		}
		if a.AuthProvider != nil {
			why = append(why, fmt.Sprintf("user %s: an auth-provider (%s)", name, a.AuthProvider.Name))
		}
		for what, path := range map[string]string{"tokenFile": a.TokenFile, "client-certificate": a.ClientCertificate, "client-key": a.ClientKey} {
			if path != "" {
				why = append(why, fmt.Sprintf("user %s: a file path (%s)", name, what))
			}
		}
	}
	for name, c := range cfg.Clusters {
		if c.CertificateAuthority != "" {
			why = append(why, fmt.Sprintf("cluster %s: a file path (certificate-authority)", name))
		}
		if c.ProxyURL != "" {
			why = append(why, fmt.Sprintf("cluster %s: a proxy-url", name))
		}
	}
	sort.Strings(why)
	return why
}

// ReasonKubeconfigRefused is the reason of the Event on a refused kubeconfig Secret.
const ReasonKubeconfigRefused = "KubeconfigRefused"

// KubeconfigCheck reports refused kubeconfigs by Event and anchorage_project_kubeconfig_refused.
type KubeconfigCheck struct {
	Reader  client.Reader
	Events  events.EventRecorder
	Refused *prometheus.GaugeVec
	Key     string // the data key holding the kubeconfig
}

// NewKubeconfigRefusedGauge registers the gauge KubeconfigCheck sets.
func NewKubeconfigRefusedGauge(reg prometheus.Registerer) (*prometheus.GaugeVec, error) {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "anchorage_project_kubeconfig_refused",
		Help: "1 for a project Secret whose kubeconfig is refused: it runs a credential plugin, reads a file or names a proxy.",
	}, []string{"secret"})
	if err := reg.Register(g); err != nil {
		return nil, fmt.Errorf("registering anchorage_project_kubeconfig_refused: %w", err)
	}
	return g, nil
}

// SetupWithManager runs the check on the hub's Secrets carrying label in namespace.
func (k *KubeconfigCheck) SetupWithManager(mgr manager.Manager, namespace, label string) error {
	selected := predicate.NewPredicateFuncs(func(o client.Object) bool {
		_, ok := o.GetLabels()[label]
		return o.GetNamespace() == namespace && ok
	})
	return builder.ControllerManagedBy(mgr).Named("kubeconfig-check").
		For(&corev1.Secret{}, builder.WithPredicates(selected)).Complete(k)
}

// Reconcile checks one Secret.
func (k *KubeconfigCheck) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	s := &corev1.Secret{}
	if err := k.Reader.Get(ctx, req.NamespacedName, s); err != nil {
		if apierrors.IsNotFound(err) {
			k.Refused.DeleteLabelValues(req.Name)
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, err
	}
	cfg, err := clientcmd.Load(s.Data[k.Key])
	if err != nil { // unparseable: the provider reports it
		return reconcile.Result{}, nil
	}
	why := UnsafeKubeconfig(cfg)
	if len(why) == 0 {
		k.Refused.WithLabelValues(s.Name).Set(0)
		return reconcile.Result{}, nil
	}
	k.Refused.WithLabelValues(s.Name).Set(1)
	k.Events.Eventf(s, nil, corev1.EventTypeWarning, ReasonKubeconfigRefused, "Engaging",
		"The project's kubeconfig is refused, its project is not engaged: it has %s; give credentials and certificates inline", strings.Join(why, "; "))
	return reconcile.Result{}, nil
}

// RefuseRedirects is a REST option of the project clients: a redirect is an error.
func RefuseRedirects(c *rest.Config) error {
	c.Wrap(func(rt http.RoundTripper) http.RoundTripper { return noRedirects{rt} })
	return nil
}

type noRedirects struct{ next http.RoundTripper }

func (n noRedirects) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := n.next.RoundTrip(req)
	if err != nil || resp.StatusCode < 300 || resp.StatusCode > 399 {
		return resp, err
	}
	_ = resp.Body.Close()
	return nil, fmt.Errorf("%s %s: the plane answered %d, a redirect to %q, which is not followed", req.Method, req.URL.Redacted(), resp.StatusCode, resp.Header.Get("Location"))
}

// WrappedRoundTripper lets client-go's transport debugging see through the wrapper.
func (n noRedirects) WrappedRoundTripper() http.RoundTripper { return n.next }
