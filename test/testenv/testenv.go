// Package testenv is the harness every test suite of the project shares: it finds
// the repository, builds or locates the real test peers (kube-apiserver, etcd,
// SeaweedFS weed, Versity S3 Gateway, Debian roots holding Ceph RGW and moto), and runs
// them as child processes that listen on loopback only and cannot outlive the test
// binary. For the install test it also runs a whole single-node cluster (Cluster: the
// kubelet, kube-proxy, containerd and runc in namespaces of the node's own).
//
// Why real servers instead of fakes: the operator's behaviour on the wire (error
// codes, ownership rules, outages) is exactly what its tests must pin down, and
// fakes only encode what we already believe.
//
// Cleanup is layered so that a crashed or killed test run leaves nothing behind:
//   - every child gets Pdeathsig=SIGKILL and its own process group, and is
//     stopped by PID (the whole group), never by name;
//   - every temporary directory is named bucketkeeper-test-<owner pid>-*, and each
//     start sweeps such directories whose owner process is gone.
package testenv

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// rootModule is the module path whose go.mod marks the repository root; nested
// modules (hack/peers/*) have go.mod files too and must be walked past.
const rootModule = "github.com/bucketkeeper/bucketkeeper"

// RepoRoot returns the directory holding the root go.mod, walking up from the
// working directory (go test runs each package in its own source directory).
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && modulePath(b) == rootModule {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("testenv: no go.mod of module %s above the working directory", rootModule)
		}
		dir = parent
	}
}

func modulePath(gomod []byte) string {
	sc := bufio.NewScanner(bytes.NewReader(gomod))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	return ""
}

// peersEnv names a directory of prebuilt peers; set it to skip hack/peers/build.sh
// (e.g. in CI images that ship the binaries).
const peersEnv = "BUCKETKEEPER_PEERS_BIN"

var (
	peersMu    sync.Mutex
	peersBuilt = map[string]string{} // peer set -> bin dir, so build.sh runs once per set
)

// PeersBinDir returns the directory holding the kube-apiserver, etcd, weed and
// versitygw executables: $BUCKETKEEPER_PEERS_BIN if set, else the output of
// hack/peers/build.sh, which builds whatever is missing (minutes when cold, its
// progress is streamed to stderr) and otherwise returns at once.
func PeersBinDir() (string, error) {
	return peersBinDir()
}

// peersBinDir builds only the named peers (all when none are named): an S3 test
// should not wait nine minutes for a kube-apiserver it never runs. build.sh
// returns the same directory whatever it built.
func peersBinDir(peers ...string) (string, error) {
	if dir := os.Getenv(peersEnv); dir != "" {
		return dir, nil
	}
	key := strings.Join(peers, " ")
	peersMu.Lock()
	defer peersMu.Unlock()
	if dir, ok := peersBuilt[key]; ok {
		return dir, nil
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	cmd := exec.Command(filepath.Join(root, "hack", "peers", "build.sh"), peers...)
	cmd.Dir = root
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("testenv: hack/peers/build.sh %s: %w", key, err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	dir := strings.TrimSpace(lines[len(lines)-1])
	if dir == "" {
		return "", fmt.Errorf("testenv: hack/peers/build.sh printed no bin directory")
	}
	peersBuilt[key] = dir
	return dir, nil
}

// missingPeers returns the named peers that hack/peers/build.sh would have to build
// (none when $BUCKETKEEPER_PEERS_BIN names a prebuilt directory). It asks build.sh
// --dir, which only computes the cache directory; on any doubt it reports nothing
// missing, since the answer only decides whether to announce a build.
func missingPeers(peers ...string) []string {
	if os.Getenv(peersEnv) != "" {
		return nil
	}
	root, err := RepoRoot()
	if err != nil {
		return nil
	}
	cmd := exec.Command(filepath.Join(root, "hack", "peers", "build.sh"), "--dir")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return nil
	}
	dir := strings.TrimSpace(string(out))
	var missing []string
	for _, p := range peers {
		if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
			missing = append(missing, p)
		}
	}
	return missing
}

// peerArtifacts names what build.sh links into the bin directory for a peer that
// is no single executable: rgw and moto are root filesystems.
var peerArtifacts = map[string]string{"rgw": "rgw-root", "moto": "moto-root", "node": "node-root"}

// peerBinary returns the path of one peer executable (or root filesystem),
// building it when needed.
func peerBinary(name string) (string, error) {
	dir, err := peersBinDir(name)
	if err != nil {
		return "", err
	}
	file := name
	if a, ok := peerArtifacts[name]; ok {
		file = a
	}
	p := filepath.Join(dir, file)
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("testenv: peer %s missing: %w", name, err)
	}
	return p, nil
}

// tempPrefix starts the name of every temporary directory this package makes.
// The owner PID in the name lets a later run find and remove the leftovers of a
// run that was killed before its cleanup ran.
const tempPrefix = "bucketkeeper-test-"

// cleanupList is a file inside a temp dir listing extra paths outside it (such as
// the unix sockets weed insists on creating in /tmp) that must go with the dir.
const cleanupList = ".cleanup-paths"

// newTempDir makes a fresh bucketkeeper-test-<pid>-* directory, sweeping dead
// runs' directories first.
func newTempDir() (string, error) {
	sweepStaleDirs()
	return os.MkdirTemp(os.TempDir(), fmt.Sprintf("%s%d-", tempPrefix, os.Getpid()))
}

// sweepStaleDirs removes temp dirs (and the paths they list) whose owner process
// no longer exists.
func sweepStaleDirs() {
	entries, err := os.ReadDir(os.TempDir())
	if err != nil {
		return
	}
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), tempPrefix)
		if !ok || !e.IsDir() {
			continue
		}
		pidStr, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidStr)
		if err != nil || pid <= 0 || pid == os.Getpid() || processAlive(pid) {
			continue
		}
		_ = removeTempDir(filepath.Join(os.TempDir(), e.Name()))
	}
}

// removeTempDir removes dir and every path listed in its cleanup list.
func removeTempDir(dir string) error {
	if b, err := os.ReadFile(filepath.Join(dir, cleanupList)); err == nil {
		for _, p := range strings.Split(string(b), "\n") {
			switch p = strings.TrimSpace(p); {
			case p == "":
			case strings.HasPrefix(p, "/sys/fs/cgroup/"): // a test node's cgroup root
				_ = removeCgroupTree(p)
			default:
				_ = os.Remove(p)
			}
		}
	}
	return os.RemoveAll(dir)
}

// addCleanupPaths records paths outside dir that removeTempDir must delete.
func addCleanupPaths(dir string, paths ...string) error {
	f, err := os.OpenFile(filepath.Join(dir, cleanupList), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	_, err = io.WriteString(f, strings.Join(paths, "\n")+"\n")
	return errors.Join(err, f.Close())
}

// processAlive reports whether pid exists (EPERM means it exists but is not ours).
func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// logSince returns what a log file holds from offset off on, at most 1 MiB: a
// process's start, which comes first, fits well within it.
func logSince(path string, off int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	b, _ := io.ReadAll(io.NewSectionReader(f, off, 1<<20))
	return string(b)
}

// logTail returns the last lines of a log file, for error messages.
func logTail(path string) string {
	const maxBytes = 6 << 10
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	off := max(st.Size()-maxBytes, 0)
	b := make([]byte, st.Size()-off)
	n, _ := f.ReadAt(b, off)
	b = b[:n]
	if off > 0 {
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 40 {
		lines = lines[len(lines)-40:]
	}
	return strings.Join(lines, "\n")
}

// childEnv is the environment for peers: the test process's, minus variables
// that would silently change a peer's credentials or configuration (weed reads
// AWS_ACCESS_KEY_ID as an extra admin identity, WEED_* as config, versitygw reads
// ROOT_*/VGW_*, Ceph's programs CEPH_CONF and CEPH_ARGS), plus TMPDIR pointing
// inside the peer's own temp dir so anything a peer writes to os.TempDir() is
// removed with it.
func childEnv(tmp string, extra ...string) []string {
	drop := []string{"AWS_", "WEED_", "S3_", "ROOT_", "VGW_", "CEPH_", "TMPDIR="}
	var env []string
outer:
	for _, kv := range os.Environ() {
		for _, p := range drop {
			if strings.HasPrefix(kv, p) {
				continue outer
			}
		}
		env = append(env, kv)
	}
	env = append(env, "TMPDIR="+tmp)
	return append(env, extra...)
}

// Poll calls cond every 200ms until it returns nil, or until ctx ends, returning cond's
// last error: a test waits for a fact this way, never for a time.
func Poll(ctx context.Context, cond func() error) error {
	for {
		err := cond()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(200 * time.Millisecond):
		}
	}
}
