package gateway

import (
	"os"
	"path/filepath"
	"testing"

	"sigs.k8s.io/yaml"

	"anchorage/api/v1alpha"
)

// TestSampleProxyIsProgrammable: the HTTPProxy in config/samples is one the manager can
// program as written (the API server's acceptance of it is config's TestSample...):
// a listener per hostname, a route rule per proxy rule, a backend Service per endpoint.
func TestSampleProxyIsProgrammable(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "config", "samples", "networking_v1alpha_httpproxy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var p v1alpha.HTTPProxy
	if err := yaml.UnmarshalStrict(raw, &p); err != nil {
		t.Fatalf("config/samples HTTPProxy does not decode strictly: %v", err)
	}
	p.UID = "11111111-1111-1111-1111-111111111111"
	objs, err := buildProxyObjects(&p, nil, DefaultConfig().GatewayClassName, DefaultConfig().Platform)
	if err != nil {
		t.Fatalf("config/samples HTTPProxy cannot be programmed: %v", err)
	}
	hostnames := map[string]bool{}
	for _, l := range objs.Gateway.Spec.Listeners {
		if l.Hostname != nil {
			hostnames[string(*l.Hostname)] = true
		}
	}
	for _, h := range p.Spec.Hostnames {
		if !hostnames[string(h)] {
			t.Errorf("no listener for the sample's hostname %s; listeners %v", h, hostnames)
		}
	}
	if got, want := len(objs.Route.Spec.Rules), len(p.Spec.Rules); got != want {
		t.Errorf("route rules: got %d, want %d (one per proxy rule)", got, want)
	}
	if len(objs.Services) == 0 {
		t.Error("the sample's backends produced no Service")
	}
}
