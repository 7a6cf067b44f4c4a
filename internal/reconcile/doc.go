// Package reconcile is the machinery every reconciler of bucketkeeper shares, so
// that a pass of any kind starts, fails and writes its status the same way:
//
//   - run.go: Run, the prologue of every reconcile (read afresh, one deferred
//     status patch, the finalizer first, then the kind's Lifecycle step).
//   - status.go: StatusPatcher, one status write per pass that skips a status
//     that did not change; SetCondition and PatchMetadata.
//   - outcome.go: StepError, what a failed step means (terminal or retried, and the
//     reason a person reads), and SummarizeFailure, which turns it into conditions.
//   - verdicts.go: the one table of what each kind of S3 failure, and each reason a
//     store is not Ready, means for conditions, probes and health checks.
//   - conditions.go: small condition helpers.
//   - watch.go: the field indexes, the work queue's rate limiter and the predicates
//     every controller watches with.
//   - cache.go, intern.go: what the manager's cache keeps of StorageBuckets and of
//     Secrets (bounded summaries, interned strings), and the digest that tells a
//     cached connection Secret's data from the data a pass would write.
//
// It knows the API types, S3 error kinds and the per-store error (internal/store),
// never a reconciler.
package reconcile
