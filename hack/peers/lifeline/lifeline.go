//go:build linux

// Package lifeline ties a test peer's life to the process that started it.
//
// envtest starts etcd and kube-apiserver itself, so the test harness cannot set
// SysProcAttr.Pdeathsig on them. A test binary killed by a timeout or SIGKILL would
// then leave both running. Each peer wrapper calls Bind first thing instead: the
// kernel sends SIGTERM to the peer when its parent dies, whatever killed it.
package lifeline

import (
	"os"
	"syscall"
)

// Bind asks the kernel to send SIGTERM to this process when its parent exits, and
// exits at once when the parent is already gone (re-parented before Bind ran).
// BUCKETKEEPER_PEER_DETACH=1 opts out, for a peer deliberately left running.
func Bind() {
	if os.Getenv("BUCKETKEEPER_PEER_DETACH") == "1" {
		return
	}
	parent := os.Getppid()
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_PDEATHSIG, uintptr(syscall.SIGTERM), 0); errno != 0 {
		return
	}
	if parent == 1 || os.Getppid() != parent {
		os.Exit(1)
	}
}
