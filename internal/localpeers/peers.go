package localpeers

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// PeersEnv names a directory of prebuilt peers; set it to skip hack/peers/build.sh
// (e.g. in CI images that ship the binaries).
const PeersEnv = "BUCKETKEEPER_PEERS_BIN"

var (
	peersMu    sync.Mutex
	peersBuilt = map[string]string{} // peer set -> bin dir, so build.sh runs once per set
)

// BinDir returns the directory holding the named peers' executables (all peers when
// none are named): $BUCKETKEEPER_PEERS_BIN if set, else the output of
// hack/peers/build.sh, which builds whatever of them is missing (minutes when cold, its
// progress is streamed to stderr) and otherwise returns at once. Only the named ones
// are built: an S3 test should not wait nine minutes for a kube-apiserver it never
// runs; build.sh returns the same directory whatever it built.
func BinDir(peers ...string) (string, error) {
	if dir := os.Getenv(PeersEnv); dir != "" {
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
		return "", fmt.Errorf("localpeers: hack/peers/build.sh %s: %w", key, err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	dir := strings.TrimSpace(lines[len(lines)-1])
	if dir == "" {
		return "", fmt.Errorf("localpeers: hack/peers/build.sh printed no bin directory")
	}
	peersBuilt[key] = dir
	return dir, nil
}

// Missing returns the named peers that hack/peers/build.sh would have to build
// (none when $BUCKETKEEPER_PEERS_BIN names a prebuilt directory). It asks build.sh
// --dir, which only computes the cache directory; on any doubt it reports nothing
// missing, since the answer only decides whether to announce a build.
func Missing(peers ...string) []string {
	if os.Getenv(PeersEnv) != "" {
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

// Binary returns the path of one peer executable (or root filesystem),
// building it when needed.
func Binary(name string) (string, error) {
	dir, err := BinDir(name)
	if err != nil {
		return "", err
	}
	file := name
	if a, ok := peerArtifacts[name]; ok {
		file = a
	}
	p := filepath.Join(dir, file)
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("localpeers: peer %s missing: %w", name, err)
	}
	return p, nil
}
