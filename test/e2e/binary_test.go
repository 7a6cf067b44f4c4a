package e2e_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// buildOperator builds the operator's binary into dir and writes a kubeconfig for the
// test's control plane (as its admin) beside it.
func buildOperator(t *testing.T, dir string) (bin, kubeconfig string) {
	t.Helper()
	root, err := testenv.RepoRoot()
	must(t, err)
	bin = filepath.Join(dir, "bucketkeeper")
	build := exec.Command("go", "build", "-o", bin, "./cmd/bucketkeeper")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/bucketkeeper: %v\n%s", err, out)
	}
	kubeconfig = filepath.Join(dir, "kubeconfig")
	must(t, testenv.WriteKubeconfig(kubeconfig, "envtest", "default", cfg))
	return bin, kubeconfig
}

// binary is one replica of the operator running as its own process.
type binary struct {
	*testenv.Process
	log string
}

// startBinary starts a replica with its output in logPath and the extra flags. It is
// killed with the test process (Pdeathsig) and stopped by PID when the test ends,
// failed or not.
func startBinary(t *testing.T, bin, kubeconfig, logPath string, extra ...string) *binary {
	t.Helper()
	p := launchBinary(t, bin, kubeconfig, logPath, extra...)
	t.Cleanup(func() { p.stop(t) })
	return p
}

// launchBinary starts a replica; stopping it is the caller's.
func launchBinary(t *testing.T, bin, kubeconfig, logPath string, extra ...string) *binary {
	t.Helper()
	args := append([]string{"--kubeconfig", kubeconfig,
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0",
		"--zap-log-level", "info"}, extra...)
	proc, err := testenv.StartProcess(bin, args, nil, "", logPath)
	if err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	return &binary{Process: proc, log: logPath}
}

// stop stops the replica by its PID, and prints its log's tail when the test failed.
func (p *binary) stop(t *testing.T) {
	if err := p.Stop(); err != nil {
		t.Error(err)
	}
	if t.Failed() {
		t.Logf("--- %s (PID %d), tail ---\n%s", filepath.Base(p.log), p.PID(), testenv.Tail(p.logText(), 6000))
	}
}

func (p *binary) logText() string {
	b, _ := os.ReadFile(p.log)
	return string(b)
}

func (p *binary) logHas(re *regexp.Regexp) bool { return re.MatchString(p.logText()) }
