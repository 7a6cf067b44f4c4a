// Package controller groups the reconcilers, one package each, with their unit tests
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
// import each other. The suite that runs them together against real servers is
// test/integration.
package controller
