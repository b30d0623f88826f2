package testenv_test

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"anchorage/internal/testenv"
)

// TestBuiltVersionsMatchServedCRDs: the cert-manager and external-dns the hack/ scripts
// build are the releases whose CRDs the hub serves, so a test never runs a controller
// against another version's schema.
func TestBuiltVersionsMatchServedCRDs(t *testing.T) {
	for _, w := range []struct{ dir, module, version string }{
		{"cert-manager", "github.com/cert-manager/cert-manager", testenv.CertManagerVersion},
		{"external-dns", "sigs.k8s.io/external-dns", testenv.ExternalDNSVersion},
	} {
		path := filepath.Join(testenv.RepoRoot(), "hack", w.dir, "go.mod")
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		// A require line, in a block or not: "<module> <version>".
		m := regexp.MustCompile(`(?m)^\s*(?:require\s+)?` + regexp.QuoteMeta(w.module) + `\s+(\S+)`).FindSubmatch(data)
		found := ""
		if m != nil {
			found = string(m[1])
		}
		if found != w.version {
			t.Errorf("%s requires %s %q; the hub serves the CRDs of %s", path, w.module, found, w.version)
		}
	}
}
