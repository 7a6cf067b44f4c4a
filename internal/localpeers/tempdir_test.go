package localpeers

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestSweepKillsTheOrphanedPeersOfADeadRun: a dead run's directory goes, and so does
// a process left running that names a path inside it (as an orphaned kube-apiserver
// names its --cert-dir); a process naming only a similar path is left alone.
func TestSweepKillsTheOrphanedPeersOfADeadRun(t *testing.T) {
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp(os.TempDir(), fmt.Sprintf("%s%d-", TempPrefix, dead.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	start := func(arg string) *exec.Cmd {
		cmd := exec.Command("sh", "-c", "sleep 300", arg)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // its sleep goes with it
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _, _ = cmd.Process.Wait() })
		return cmd
	}
	orphan := start("--cert-dir=" + filepath.Join(dir, "apiserver"))
	bystander := start(dir + "-other/apiserver")
	exited := make(chan error, 1)
	go func() { exited <- orphan.Wait() }()

	sweepStaleDirs()

	select {
	case <-exited:
	case <-time.After(time.Minute):
		t.Fatal("the dead run's orphaned process is still running after the sweep")
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the dead run's directory: %v, want it gone", err)
	}
	if !ProcessAlive(bystander.Process.Pid) {
		t.Error("a process naming another directory was killed")
	}
}
