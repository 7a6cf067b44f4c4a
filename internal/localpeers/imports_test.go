package localpeers

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestProductImportsNoTestPackage: the binaries a user runs (the operator, the dev
// binary of make dev, the kubectl plugin) import no package under test/: what the dev
// binary needs of the peers is this package's, so a test harness change cannot reach a
// product and a product never links a test's fixtures.
func TestProductImportsNoTestPackage(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	const testTree = "github.com/bucketkeeper/bucketkeeper/test/"
	for _, dir := range []string{"cmd/bucketkeeper", "cmd/bucketkeeper-dev", "cmd/kubectl-bucketkeeper"} {
		cmd := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", ".")
		cmd.Dir = filepath.Join(root, dir)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list -deps in %s: %v", dir, err)
		}
		deps := strings.Fields(string(out))
		if len(deps) < 10 {
			t.Fatalf("go list -deps in %s listed %d packages: %q", dir, len(deps), deps)
		}
		for _, dep := range deps {
			if strings.HasPrefix(dep, testTree) {
				t.Errorf("%s imports %s", dir, dep)
			}
		}
	}
}
