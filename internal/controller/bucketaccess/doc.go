// Package bucketaccess is the BucketAccess reconciler and its collector. A
// BucketAccess asks for a key to some of its namespace's StorageBuckets; this package
// owns the IAM user and key that answer it on the buckets' store, the Secret that
// hands the key over, the key's rotation, and every revocation: when the access goes,
// changes store, or its buckets are refused by a guardrail, and, through the
// collector, when none of that was seen (a finalizer stripped, a status never written).
// A key only ever reaches the buckets its access's current spec names that are Ready:
// the policy is narrowed to them before the access waits for anything.
//
//   - controller.go: the Reconciler and its pass, step by step (reconcile.Run).
//   - narrow.go: narrowing an issued identity's policy to the Ready buckets, and to
//     nothing on a store the access left.
//   - keys.go: issuing, verifying, rotating and deleting keys, resumable after a crash
//     from what the store lists.
//   - secret.go: the access's Secret, written only when its data changes.
//   - setup.go: the field index and the watches.
//   - collector.go: Collector, the periodic sweep of this cluster's IAM users on each
//     IAM store, deleting those no live BucketAccess grants there.
//   - orphans.go: the collector's verdict on one listed user.
//
// It reads StorageBuckets (their status names the bucket and its Ready verdict) but
// imports no other reconciler.
package bucketaccess
