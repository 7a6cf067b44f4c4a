package localpeers

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// TempPrefix starts the name of every temporary directory made here and by the test
// harness.
// The owner PID in the name lets a later run find and remove the leftovers of a
// run that was killed before its cleanup ran.
const TempPrefix = "bucketkeeper-test-"

// CleanupList is a file inside a temp dir listing extra paths outside it (such as
// the unix sockets weed insists on creating in /tmp) that must go with the dir.
const CleanupList = ".cleanup-paths"

// NewTempDir makes a fresh bucketkeeper-test-<pid>-* directory, sweeping dead
// runs' directories first.
func NewTempDir() (string, error) {
	sweepStaleDirs()
	return os.MkdirTemp(os.TempDir(), fmt.Sprintf("%s%d-", TempPrefix, os.Getpid()))
}

// sweepStaleDirs removes temp dirs (and the paths they list) whose owner process
// no longer exists.
func sweepStaleDirs() {
	entries, err := os.ReadDir(os.TempDir())
	if err != nil {
		return
	}
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), TempPrefix)
		if !ok || !e.IsDir() {
			continue
		}
		pidStr, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidStr)
		if err != nil || pid <= 0 || pid == os.Getpid() || ProcessAlive(pid) {
			continue
		}
		dir := filepath.Join(os.TempDir(), e.Name())
		killProcessesNaming(dir)
		_ = RemoveTempDir(dir)
	}
}

// killProcessesNaming kills every process whose command line names dir or a path
// inside it: the peers of a run killed before its cleanup that did not die with it
// (envtest starts kube-apiserver without a parent-death signal).
func killProcessesNaming(dir string) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		for _, arg := range strings.Split(string(cmdline), "\x00") {
			if _, value, _ := strings.Cut(arg, "="); value == dir || strings.HasPrefix(value, dir+"/") ||
				arg == dir || strings.HasPrefix(arg, dir+"/") {
				_ = syscall.Kill(pid, syscall.SIGKILL)
				break
			}
		}
	}
}

// RemoveTempDir removes dir and every path listed in its cleanup list.
func RemoveTempDir(dir string) error {
	if b, err := os.ReadFile(filepath.Join(dir, CleanupList)); err == nil {
		for _, p := range strings.Split(string(b), "\n") {
			switch p = strings.TrimSpace(p); {
			case p == "":
			case strings.HasPrefix(p, "/sys/fs/cgroup/"): // a test node's cgroup root
				_ = RemoveCgroupTree(p)
			default:
				_ = os.Remove(p)
			}
		}
	}
	return os.RemoveAll(dir)
}

// AddCleanupPaths records paths outside dir that RemoveTempDir must delete.
func AddCleanupPaths(dir string, paths ...string) error {
	f, err := os.OpenFile(filepath.Join(dir, CleanupList), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	_, err = io.WriteString(f, strings.Join(paths, "\n")+"\n")
	return errors.Join(err, f.Close())
}

// ProcessAlive reports whether pid exists (EPERM means it exists but is not ours).
func ProcessAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// RemoveCgroupTree removes a cgroup directory and every cgroup below it, deepest first
// (a cgroup goes only once empty; its processes may take a moment to die).
func RemoveCgroupTree(dir string) error {
	var dirs []string
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	deadline := time.Now().Add(10 * time.Second)
	for i := len(dirs) - 1; i >= 0; i-- {
		for {
			err := os.Remove(dirs[i])
			if err == nil || os.IsNotExist(err) {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("localpeers: remove cgroup %s: %w", dirs[i], err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return nil
}
