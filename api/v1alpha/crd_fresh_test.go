package v1alpha_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"anchorage/internal/testenv"
)

// TestCRDIsFresh regenerates the CRDs and deepcopy code into a temporary directory and
// fails, naming the file, when the checked-in copies differ: an API change committed
// without `hack/manifests.sh` would otherwise ship a CRD that validates something else.
func TestCRDIsFresh(t *testing.T) {
	if testing.Short() {
		t.Skip("runs controller-gen; skipped in -short mode")
	}
	root := testenv.RepoRoot()
	out := t.TempDir()

	// Only the parts this package owns: the rbac part reads pkg/, which other changes
	// may leave mid-edit, and its freshness is not this package's to judge.
	cmd := exec.Command(filepath.Join(root, "hack", "manifests.sh"), "object", "crd")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "OUT_DIR="+out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("hack/manifests.sh failed: %v\n%s", err, b)
	}

	// Every freshly generated file must match its checked-in counterpart...
	var generated []string
	err := filepath.WalkDir(out, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(out, path)
		generated = append(generated, rel)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(generated) == 0 {
		t.Fatal("hack/manifests.sh generated nothing")
	}
	for _, rel := range generated {
		compareFile(t, filepath.Join(root, rel), filepath.Join(out, rel), rel)
	}

	// ...and no checked-in CRD may be left over from a kind that no longer exists.
	checkedIn, err := filepath.Glob(filepath.Join(root, "config", "crd", "bases", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range checkedIn {
		rel, _ := filepath.Rel(root, path)
		if _, err := os.Stat(filepath.Join(out, rel)); err != nil {
			t.Errorf("%s is checked in but no longer generated: delete it or run hack/manifests.sh", rel)
		}
	}
}

func compareFile(t *testing.T, checkedInPath, freshPath, rel string) {
	t.Helper()
	fresh, err := os.ReadFile(freshPath)
	if err != nil {
		t.Fatal(err)
	}
	checkedIn, err := os.ReadFile(checkedInPath)
	if err != nil {
		t.Errorf("%s is not checked in: run hack/manifests.sh (%v)", rel, err)
		return
	}
	if string(checkedIn) == string(fresh) {
		return
	}
	diff := cmp.Diff(strings.Split(string(checkedIn), "\n"), strings.Split(string(fresh), "\n"))
	const maxDiff = 4000
	if len(diff) > maxDiff {
		diff = diff[:maxDiff] + "\n... (diff truncated)"
	}
	t.Errorf("%s is stale: run hack/manifests.sh (-checked in +generated):\n%s", rel, diff)
}
