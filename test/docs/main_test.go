package docs

import (
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// One control plane, started by the first test that needs it (the samples), serves the
// package; the other tests read files only, so `make docs` starts none.
var (
	cpOnce sync.Once
	cp     *testenv.ControlPlane
	cpErr  error
)

func controlPlane(t *testing.T) *testenv.ControlPlane {
	t.Helper()
	cpOnce.Do(func() { cp, cpErr = testenv.StartControlPlane() })
	if cpErr != nil {
		t.Fatalf("start control plane: %v", cpErr)
	}
	return cp
}

func TestMain(m *testing.M) {
	code := m.Run()
	if cp != nil {
		if err := cp.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping control plane:", err)
			code = 1
		}
	}
	os.Exit(code)
}
