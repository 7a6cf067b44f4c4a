// Package mover is the data plane of moving a bucket to another store: it copies a
// bucket's objects (or every version and delete marker) from one S3-compatible store
// to another, verifies them, and keeps copying what changes until the controller
// stops the source's writes for the cutover. The reconcile loop is to never copy a
// byte: it starts passes through a [Runner] ([Jobs]: an Indexed Job of
// `bucketkeeper mover` pods per pass, or [InProcess] where there is no kubelet) and
// reads where they are from checkpoints (the StorageBucket controller's move*.go
// files).
//
// A move is a sequence of passes over the source's key space, split into shards (key
// ranges) that run side by side:
//
//   - plan.go: a Plan pass lists the source once, records its totals and cuts the key
//     space into shards of about equal work (a bounded sample of the listing).
//   - pass.go: a Copy pass walks both buckets' listings of its shard side by side in
//     key order and hands each key that differs to a worker; repeated, each pass copies
//     what changed since the last (new, replaced, deleted). A Final pass adds a
//     verifying listing, which is all a Verify pass does. listing.go pages through a
//     key range a page ahead; tracker.go turns out-of-order completions into the
//     cursor a resumed pass starts after.
//   - copy.go, parts.go: one object by size: small ones through memory, larger
//     single-part ones streamed GET into PUT, large and multipart ones part by part,
//     with the source's part sizes when it tells them. Metadata and tags travel with
//     the write. versions.go: one key's history, oldest first. lock.go: in a bucket
//     with object lock, each version's retention and legal hold, written with it and
//     checked after the write; lockread.go: what reading them costs, a final pass
//     comparing every version's lock on both sides. keys.go: the keys a path would
//     turn into others, which fail by name instead of being written.
//   - equivalence.go: for objects whose target ETag differs from the source's by
//     construction, a record made after a checked copy, so that the listing still
//     finds them equal.
//   - checkpoint.go, checkpoint_configmap.go: what a shard has done, in a ConfigMap of
//     the operator's namespace (why there: see ConfigMapCheckpoints), so a mover killed
//     anywhere resumes without copying again what is verified.
//   - retry.go: what a failure means: wait out a store that is down, record a key that
//     cannot be copied (the pass goes on, the move cannot cut over), stop the pass on
//     what no retry fixes.
//   - progress.go: a pass's shards summed for status and metrics.
//   - runner.go: the Runner interface and the in-process runner; jobs.go: the Jobs
//     runner (a pass's Indexed Job, its spec, the move's keys); clients.go: the
//     stores' clients and the credentials, which never travel in a Spec.
//
// # Verification
//
// Every byte written is checked against what was read: a small object's write carries
// the Content-MD5 of the bytes read, a streamed one the source's ETag as Content-MD5
// (the MD5 of its bytes: the target refuses anything else), and every part's ETag the
// target answers must be the MD5 the mover computed while streaming it. Reads name
// what the listing said (If-Match on the ETag, or the version ID), so an object
// replaced meanwhile is left to the next pass rather than copied half old. An object
// is verified when the target lists it with the source's size and ETag, or with the
// ETag an equivalence recorded; a Final pass is verified only when a listing of both
// sides, after its copies, finds every key equal and no key failed.
//
// # Memory
//
// One mover holds at most Limits.Concurrency objects of at most Limits.SmallObject
// bytes (default 8 × 1 MiB), streams everything larger through 32 KiB buffers, and
// holds two listing pages per side (2 × 1,000 entries) and the keys in flight,
// whatever the objects' sizes: MemoryBound, 42 MiB of heap by default, which the
// mover subcommand sets as the runtime's soft limit. make bench's move scenario
// measures a mover's peak RSS copying against the same process only listing both
// buckets (bench/results/move.md). One key's history (VersionsAll) is held
// whole, at most 100,000 versions (about 20 MiB).
//
// # What a source must answer
//
// ListObjectsV2 with start-after (ListObjectVersions with key-marker, to move every
// version), GetObject with Range and If-Match (and versionId), GetObjectTagging,
// HeadObject (with partNumber to learn a multipart object's part sizes; without it
// the mover uses its own), HeadBucket. The target: HeadBucket, PutObject with
// Content-MD5, x-amz-tagging and an unsigned payload for streamed bodies,
// CreateMultipartUpload, UploadPart, ListParts, CompleteMultipartUpload,
// AbortMultipartUpload, ListMultipartUploads, DeleteObjects, DeleteObject,
// GetBucketVersioning. Incomplete multipart uploads of the source are not copied. A
// move of object lock also reads GetObjectRetention and GetObjectLegalHold (and
// HeadObject's x-amz-object-lock-* headers) on both sides, GetObjectLockConfiguration
// of the target, and writes the x-amz-object-lock-* headers, PutObjectRetention and
// PutObjectLegalHold there.
package mover
