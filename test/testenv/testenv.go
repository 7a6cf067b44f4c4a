// Package testenv is the harness every test suite of the project shares: it finds
// the repository, builds or locates the real test peers (kube-apiserver, etcd,
// SeaweedFS weed, Versity S3 Gateway, MinIO, Debian roots holding Ceph RGW and moto), and runs
// them as child processes that listen on loopback only and cannot outlive the test
// binary. For the install test it also runs a whole single-node cluster (Cluster: the
// kubelet, kube-proxy, containerd and runc in namespaces of the node's own). For keyless
// access it serves a control plane's ServiceAccount token issuer over HTTPS on port 443
// of a loopback address, under a name only the RGW gateway resolves (Issuer).
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
	"context"
	"os"
	"strings"
	"time"
)

// childEnv is the environment for peers: the test process's, minus variables
// that would silently change a peer's credentials or configuration (weed reads
// AWS_ACCESS_KEY_ID as an extra admin identity, WEED_* as config, versitygw reads
// ROOT_*/VGW_*, Ceph's programs CEPH_CONF and CEPH_ARGS, MinIO MINIO_* and its client's
// MC_*), plus TMPDIR pointing
// inside the peer's own temp dir so anything a peer writes to os.TempDir() is
// removed with it.
func childEnv(tmp string, extra ...string) []string {
	drop := []string{"AWS_", "WEED_", "S3_", "ROOT_", "VGW_", "CEPH_", "MINIO_", "MC_", "TMPDIR="}
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
