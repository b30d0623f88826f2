package shard

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

func TestRefuseUnsafeRESTConfig(t *testing.T) {
	proxy := func(*http.Request) (*url.URL, error) { return nil, nil }
	cases := []struct {
		reason string
		cfg    rest.Config
		want   string // substring; "" for accepted
	}{
		{"inline credentials", rest.Config{Host: "https://plane", BearerToken: "t", TLSClientConfig: rest.TLSClientConfig{CAData: []byte("ca"), CertData: []byte("c"), KeyData: []byte("k")}}, ""},
		{"an exec plugin", rest.Config{ExecProvider: &clientcmdapi.ExecConfig{Command: "/bin/sh"}}, "an exec credential plugin"},
		{"an auth-provider", rest.Config{AuthProvider: &clientcmdapi.AuthProviderConfig{Name: "gcp"}}, "an auth-provider"},
		{"a token file", rest.Config{BearerTokenFile: "/var/run/secrets/token"}, "tokenFile"},
		{"a client certificate file", rest.Config{TLSClientConfig: rest.TLSClientConfig{CertFile: "/etc/cert", KeyFile: "/etc/key"}}, "client-certificate"},
		{"a CA file", rest.Config{TLSClientConfig: rest.TLSClientConfig{CAFile: "/etc/ca"}}, "certificate-authority"},
		{"a key file alone", rest.Config{TLSClientConfig: rest.TLSClientConfig{KeyFile: "/etc/key"}}, "client-key"},
		{"a token file beside an inline token", rest.Config{BearerToken: "t", BearerTokenFile: "/var/run/secrets/token"}, "tokenFile"},
		{"a CA file beside inline CA data", rest.Config{TLSClientConfig: rest.TLSClientConfig{CAData: []byte("ca"), CAFile: "/etc/ca"}}, "certificate-authority"},
		{"a proxy", rest.Config{Proxy: proxy}, "proxy-url"},
	}
	for _, tc := range cases {
		err := RefuseUnsafeRESTConfig(&tc.cfg)
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: refused: %v", tc.reason, err)
			}
			continue
		}
		if !errors.Is(err, ErrUnsafeKubeconfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want a refusal naming %q", tc.reason, err, tc.want)
		}
	}
}

func TestUnsafeKubeconfig(t *testing.T) {
	parse := func(s string) *clientcmdapi.Config {
		cfg, err := clientcmd.Load([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	const head = "apiVersion: v1\nkind: Config\ncurrent-context: c\ncontexts: [{name: c, context: {cluster: p, user: u}}]\n"
	cases := []struct {
		reason, kubeconfig string
		want               []string
	}{
		{"inline", head + "clusters: [{name: p, cluster: {server: 'https://plane', certificate-authority-data: Y2E=}}]\nusers: [{name: u, user: {token: t}}]\n", nil},
		{"exec", head + "clusters: [{name: p, cluster: {server: 'https://plane'}}]\nusers: [{name: u, user: {exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/touch, args: [/tmp/pwned]}}}]\n",
			[]string{"user u: an exec credential plugin (/bin/touch)"}},
		{"an auth-provider", head + "clusters: [{name: p, cluster: {server: 'https://plane'}}]\nusers: [{name: u, user: {auth-provider: {name: oidc, config: {idp-issuer-url: 'https://idp'}}}}]\n",
			[]string{"user u: an auth-provider (oidc)"}},
		{"a plugin in a user the current context does not name", head + "clusters: [{name: p, cluster: {server: 'https://plane'}}]\nusers: [{name: u, user: {token: t}}, {name: spare, user: {exec: {apiVersion: client.authentication.k8s.io/v1, command: curl}}}]\n",
			[]string{"user spare: an exec credential plugin (curl)"}},
		{"a SOCKS proxy", head + "clusters: [{name: p, cluster: {server: 'https://plane', proxy-url: 'socks5://127.0.0.1:1080'}}]\nusers: [{name: u, user: {token: t}}]\n",
			[]string{"cluster p: a proxy-url"}},
		{"files and a proxy", head + "clusters: [{name: p, cluster: {server: 'https://plane', certificate-authority: /etc/ca, proxy-url: 'http://127.0.0.1:3128'}}]\nusers: [{name: u, user: {tokenFile: /etc/token, client-certificate: /etc/c, client-key: /etc/k}}]\n",
			[]string{"cluster p: a file path (certificate-authority)", "cluster p: a proxy-url", "user u: a file path (client-certificate)", "user u: a file path (client-key)", "user u: a file path (tokenFile)"}},
	}
	for _, tc := range cases {
		got := UnsafeKubeconfig(parse(tc.kubeconfig))
		if strings.Join(got, "|") != strings.Join(tc.want, "|") {
			t.Errorf("%s: got %q, want %q", tc.reason, got, tc.want)
		}
	}
}

// A plane that answers with a redirect is not followed, whatever its code, and whether
// it points elsewhere or back at the plane itself.
func TestRefuseRedirects(t *testing.T) {
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		t.Error("the redirect was followed")
	}))
	defer elsewhere.Close()
	for _, code := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		for _, target := range []string{elsewhere.URL, ""} {
			plane := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/followed" {
					t.Errorf("%d to the plane itself was followed", code)
				}
				http.Redirect(w, r, target+"/followed", code)
			}))
			cfg := &rest.Config{Host: plane.URL, BearerToken: "secret"}
			if err := RefuseRedirects(cfg); err != nil {
				t.Fatal(err)
			}
			c, err := rest.HTTPClientFor(cfg)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := c.Get(plane.URL + "/api")
			if err == nil {
				resp.Body.Close()
				t.Errorf("%d to %q: got %d, want an error", code, target+"/followed", resp.StatusCode)
			} else if !strings.Contains(err.Error(), "a redirect to") {
				t.Errorf("%d: error %v, want it to name the redirect", code, err)
			}
			plane.Close()
		}
	}
}
