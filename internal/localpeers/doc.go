// Package localpeers runs the project's real peers on this machine: it finds the
// repository, builds or locates the peer executables (kube-apiserver, etcd, SeaweedFS
// weed, Versity, the Debian roots of Ceph RGW and moto) through hack/peers/build.sh,
// and starts a control plane (etcd and kube-apiserver with the project's CRDs) as child
// processes that listen on loopback only.
//
// It is what the dev binary (make dev) and the test harness (test/testenv) both need of
// the peers, so that the product binary imports no test package.
//
// Every temporary directory is named bucketkeeper-test-<owner pid>-*, and each new one
// sweeps such directories whose owner process is gone: a run killed before its cleanup
// leaves nothing behind for long.
package localpeers
