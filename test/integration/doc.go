// Package integration is the suite that runs the reconcilers together, in one manager
// built as the binary builds it, against a real kube-apiserver and etcd and real S3 and
// IAM servers (SeaweedFS, Versity, Ceph RGW, and moto for AWS): TestMain starts them
// once for every test here (testenv.StartSuite, shared with test/e2e).
//
// make test runs it race-instrumented, in three suites side by side: the tests that
// mostly wait on the operator's own timers (intervals, backoff, key grace, restarts)
// are named TestPaced... and run in a suite of their own, so their waiting overlaps
// with the others' work, and so do the tests of moves, named TestMove... A new test
// that waits more than it works takes the prefix TestPaced.
package integration
