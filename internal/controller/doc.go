// Package controller holds, in its external test package, the suite that runs the
// reconcilers together against a real kube-apiserver and etcd and real S3 and IAM
// servers (SeaweedFS, Versity, Ceph RGW): every test here starts them once, in
// TestMain. The reconcilers live below, one package each, with their unit tests
// beside them, which start no server:
//
//   - storagebucket: a StorageBucket's bucket, configuration, Secret, probe and
//     deletion;
//   - bucketaccess: a BucketAccess's IAM user, key and Secret, and the collector of
//     users no access grants;
//   - objectstore: a store's health, its IAM check and its finalizer.
//
// They share internal/reconcile (the pass, status patch, verdicts, watches, cache)
// and internal/store (per-store clients, slots, Leases, IAM drivers), and never
// import each other.
package controller
