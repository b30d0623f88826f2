package harness

import (
	"fmt"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"anchorage/internal/app"
)

// ClientFromKubeconfig builds an uncached client from kubeconfig bytes with a request
// timeout, so a cut connection fails fast instead of hanging the test.
func ClientFromKubeconfig(kc []byte, timeout time.Duration) (client.Client, error) {
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kc)
	if err != nil {
		return nil, fmt.Errorf("reading kubeconfig: %w", err)
	}
	cfg.Timeout = timeout
	c, err := client.New(cfg, client.Options{Scheme: app.Scheme()})
	if err != nil {
		return nil, fmt.Errorf("building a client for %s: %w", cfg.Host, err)
	}
	return c, nil
}
