// Package invariants is the one checker of what must hold whenever bucketkeeper has
// settled, whatever happened before: creates, edits, deletions, finalizers stripped by a
// tenant, namespaces deleted, the operator killed, stores unreachable. It reads the
// cluster and every store as their admin would and reports each breach as a Violation
// naming the invariant, the object and what was found. The soak (test/soak) runs it
// after every round; the tests of this package and of test/soak prove it finds each kind
// of breach, so that a clean result means something.
//
// The invariants (DESIGN.md section 9, issue 39):
//   - BucketOwned: every bucket tagged with this cluster's id belongs to a live
//     StorageBucket (the UID in its bucketkeeper.io/uid tag), or was released by a
//     Retain deletion (that tag names no claim), or was kept by a gone claim that the
//     caller says was deleted with Retain or had its finalizer stripped (Retained). On a store whose view knows the
//     buckets that are not the operator's (StoreView.Foreign), an untagged bucket is
//     one the operator made, and must be a live claim's, not yet tagged. A live
//     claim's bucket is on the store it lives on (status.objectStore), the store it
//     moves to, or an old home a finished move left a frozen copy on
//     (status.leftBehind).
//   - ClaimBound: a Ready StorageBucket's bucket exists on its store, tagged for it.
//   - IdentityGranted: every IAM user of this cluster (iam.OwnedUserName) belongs to a
//     live BucketAccess, holds only the keys its status names, and its policies reach
//     only what the access grants now: buckets of Ready StorageBuckets on this store, in a
//     namespace the store admits, with the actions of the grant's mode.
//     So does every IAM role of this cluster (keyless access): it belongs to a live
//     keyless BucketAccess that grants on this store, or records this very role.
//   - CopyAccounted: a bucket of this cluster that a move froze (its policy holds the
//     MoveFreezeSid statement) or tagged bucketkeeper.io/moved-to belongs to a live
//     claim that records it (status.leftBehind, or the source of its move under way),
//     or is released; a gone claim's is a leak, whatever its deletion policy.
//   - MoverOwned: every mover Job, Secret and ConfigMap in the mover namespace (the
//     caller names it: MoverNamespace) belongs to a live claim's current move that has
//     not ended.
//   - SecretOwned: every Secret the operator wrote (labelled app.kubernetes.io/managed-by)
//     is controlled by a live StorageBucket or BucketAccess that still names it.
//   - DeletionExplained: no StorageBucket or BucketAccess waits on the operator's
//     finalizer without a Ready=False condition that says why, and, for a
//     StorageBucket, what to do (the deletion-policy annotation that abandons it).
//
// Check is read-only: it never writes to the cluster or a store.
package invariants
