// Package soak_test runs bucketkeeper's soak: random creates, edits and deletions of
// StorageBuckets and BucketAccesses across tenants and the three stores (SeaweedFS,
// Versity, Ceph RGW), finalizers stripped, namespaces deleted, the operator's binary
// SIGKILLed and stores made unreachable at random moments; after each round the system
// settles and test/invariants must find nothing. The short form (a fixed seed, then a
// random one) runs in make test; make soak runs the long form and writes its summary
// under bench/results/ (see soak_test.go for the knobs).
//
// The package also proves, on the real servers, that the checker finds each kind of
// breach (checker_test.go): a checker that cannot fail is worthless.
package soak_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bucketkeeper/bucketkeeper/internal/operator"
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

var (
	// cfg is the control plane's admin (system:masters): the soak acts as tenants, as
	// the platform team and as Kubernetes' own controllers with it.
	cfg *rest.Config
	k8s client.Client
	// servers are one store of each kind, in testenv's order.
	servers []*testenv.S3Server
	// operatorBin is cmd/bucketkeeper, built once for the package.
	operatorBin string
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	ctrl.SetLogger(logr.Discard()) // the in-process clients log nothing; the operator logs to its files
	cp, err := testenv.StartControlPlane()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer stop("control plane", cp.Stop)
	cfg = cp.Config
	var closeServers func()
	servers, closeServers, err = testenv.StartS3Servers(testenv.SeaweedFS, testenv.Versity, testenv.RGW)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer closeServers()
	if k8s, err = client.New(cfg, client.Options{Scheme: operator.Scheme()}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	dir, err := os.MkdirTemp("", "bucketkeeper-soak-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if operatorBin, err = buildOperator(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// buildOperator builds cmd/bucketkeeper into dir, as the failover test does.
func buildOperator(dir string) (string, error) {
	root, err := testenv.RepoRoot()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "bucketkeeper")
	build := exec.Command(goCommand(), "build", "-o", bin, "./cmd/bucketkeeper")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/bucketkeeper: %v\n%s", err, out)
	}
	return bin, nil
}

// goCommand is the go make runs ($GO), else the one on PATH.
func goCommand() string {
	if g := os.Getenv("GO"); g != "" {
		return g
	}
	return "go"
}

func stop(what string, f func() error) {
	if err := f(); err != nil {
		fmt.Fprintf(os.Stderr, "stopping %s: %v\n", what, err)
	}
}
