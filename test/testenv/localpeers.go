package testenv

import (
	"testing"

	"k8s.io/client-go/rest"

	"github.com/bucketkeeper/bucketkeeper/internal/localpeers"
)

// The peers' machinery lives in internal/localpeers, which the dev binary shares
// without importing a test package; the suites know it by these names.

// ControlPlane is a real etcd + kube-apiserver with the project's CRDs installed.
type ControlPlane = localpeers.ControlPlane

// ControlPlaneOptions adjust StartControlPlaneWith.
type ControlPlaneOptions = localpeers.ControlPlaneOptions

// RepoRoot returns the directory holding the root go.mod.
func RepoRoot() (string, error) { return localpeers.RepoRoot() }

// PeersBinDir returns the directory holding every peer, building what is missing.
func PeersBinDir() (string, error) { return localpeers.BinDir() }

// StartControlPlane starts etcd and kube-apiserver and installs the CRDs.
func StartControlPlane() (*ControlPlane, error) { return localpeers.StartControlPlane() }

// StartControlPlaneWith is StartControlPlane with options.
func StartControlPlaneWith(opts ControlPlaneOptions) (*ControlPlane, error) {
	return localpeers.StartControlPlaneWith(opts)
}

// WriteKubeconfig writes a kubeconfig for cfg (see localpeers.WriteKubeconfig).
func WriteKubeconfig(path, name, namespace string, cfg *rest.Config) error {
	return localpeers.WriteKubeconfig(path, name, namespace, cfg)
}

// ProcessExited reports whether pid has exited (a zombie nobody reaped yet counts).
func ProcessExited(pid int) bool { return localpeers.ProcessExited(pid) }

// NewControlPlane is StartControlPlane for a test: it fails the test on error and
// stops the control plane when the test ends.
func NewControlPlane(tb testing.TB) *ControlPlane {
	tb.Helper()
	c, err := StartControlPlane()
	if err != nil {
		tb.Fatalf("start control plane: %v", err)
	}
	tb.Cleanup(func() {
		if err := c.Stop(); err != nil {
			tb.Errorf("stop control plane: %v", err)
		}
	})
	return c
}
