package storagebucket

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/defaults"
	"github.com/bucketkeeper/bucketkeeper/internal/mover"
	"github.com/bucketkeeper/bucketkeeper/internal/reconcile"
)

// A cutover whose final passes never find both sides equal was written to under the
// freeze: by a key the store's freeze does not stop (on MinIO, one bucketkeeper did not
// issue). Freezing again at once would pause the applications over and over and run
// pass after pass, so the freeze is lifted, the move goes back to copying after a
// wait that doubles with each such cutover (CutoverAttempts, CutoverRetryAt in status,
// so a restarted operator keeps it), and the claim says why (WritesDuringFreeze).

// judgeFinalPass decides on a finished final pass: verified, the bucket's home
// switches; objects that will not copy, or MoveMaxFinalPasses passes that never found
// both sides equal, lift the freeze, as what will not copy in seconds keeps no
// application waiting; else the next final pass runs, the keys frozen again first (an
// access's policy written meanwhile without the freeze).
func (r *Reconciler) judgeFinalPass(ctx context.Context, scope *bucketScope, t *moveTargetScope, m *bkv1.MoveStatus, fz keyFreezer, p mover.Progress) moveStep {
	if p.Failures.Count > 0 {
		if err := r.thawSource(ctx, scope, fz); err != nil {
			return moveWait(m, err)
		}
		m.FrozenAt = nil
		r.yieldSlot(ctx, scope, m) // admitted again, it catches up
		return moveStep{requeue: r.SyncInterval, err: reconcile.Terminalf(bkv1.ReasonMoveFailed,
			"%d objects could not be copied to ObjectStore %q, so the move did not cut over and the source takes writes again: %s", p.Failures.Count, m.To, p.Failures)}
	}
	if !p.Verified && m.Pass+1-m.CutoverPass >= defaults.MoveMaxFinalPasses {
		return r.liftFreeze(ctx, scope, m, fz, p)
	}
	if !p.Verified {
		if err := fz.freeze(ctx, scope.sb, scope.bucket); err != nil {
			return moveWait(m, err)
		}
		m.Pass++
		m.Message = fmt.Sprintf("the final pass found %d keys unequal (%s); verifying again", p.Differences.Count, p.Differences)
		return moveStep{requeue: time.Millisecond}
	}
	now := metav1.NewTime(r.Clock.Now())
	scope.sb.Status.ObjectStore = m.To
	if t.bucket != scope.bucket { // renamed (spec.move.bucketName: Lane): the Secrets follow
		m.SourceBucket, scope.sb.Status.BucketName = scope.bucket, t.bucket
		scope.sb.Status.LeftBehind = renameLeftBehind(scope.sb.Status.LeftBehind, scope.bucket, t.bucket)
	}
	scope.sb.Status.Carried = m.Carried // the old home's record is of the old home
	m.Phase, m.SwitchedAt, m.Message = bkv1.MoveSwitching, &now, "verified; switching the Secrets to the target"
	r.Recorder.Eventf(scope.sb, nil, corev1.EventTypeNormal, bkv1.ReasonMoving, "Move", "every object verified on ObjectStore %s: the bucket lives there now", m.To)
	return moveStep{requeue: time.Millisecond}
}

// thawSource lifts the freeze from the source bucket's policy and its keys.
func (r *Reconciler) thawSource(ctx context.Context, scope *bucketScope, fz keyFreezer) error {
	if err := thawBucket(ctx, scope.s3, scope.bucket); err != nil {
		return err
	}
	return fz.thaw(ctx, scope.sb, scope.bucket)
}

// thawKeys lifts the freeze from the keys of the bucket's home store.
func (r *Reconciler) thawKeys(ctx context.Context, scope *bucketScope) error {
	fz, err := r.freezerFor(ctx, scope.store)
	if err != nil {
		return err
	}
	return fz.thaw(ctx, scope.sb, scope.bucket)
}

// liftFreeze ends a cutover whose final passes found the bucket written under the
// freeze: the source takes writes again, the move gives its slots back and waits
// (cutoverWait) before it copies and cuts over again.
func (r *Reconciler) liftFreeze(ctx context.Context, scope *bucketScope, m *bkv1.MoveStatus, fz keyFreezer, p mover.Progress) moveStep {
	if err := r.thawSource(ctx, scope, fz); err != nil {
		return moveWait(m, err)
	}
	m.FrozenAt = nil
	m.CutoverAttempts++
	wait := cutoverBackoff(m.CutoverAttempts)
	at := metav1.NewTime(r.Clock.Now().Add(wait)).Rfc3339Copy()
	m.CutoverRetryAt = &at
	r.yieldSlot(ctx, scope, m) // admitted again after the wait, it catches up
	r.Recorder.Eventf(scope.sb, nil, corev1.EventTypeWarning, bkv1.ReasonWritesDuringFreeze, "Move",
		"%d final passes found keys unequal on ObjectStore %s (%s): the bucket was written under the freeze; writes are allowed again and the move copies again after %s",
		defaults.MoveMaxFinalPasses, m.To, p.Differences, at.UTC().Format(time.RFC3339))
	return moveStep{requeue: wait, err: writesDuringFreeze(m, fz, fmt.Sprintf("%d final passes found keys unequal on ObjectStore %q (%s)", defaults.MoveMaxFinalPasses, m.To, p.Differences))}
}

// cutoverWait holds a move whose last cutover was written under the freeze until
// CutoverRetryAt, saying why; wait says it holds.
func (r *Reconciler) cutoverWait(ctx context.Context, scope *bucketScope, m *bkv1.MoveStatus) (moveStep, bool) {
	if m.CutoverRetryAt == nil {
		return moveStep{}, false
	}
	left := m.CutoverRetryAt.Sub(r.Clock.Now())
	if left <= 0 {
		return moveStep{}, false
	}
	fz, err := r.freezerFor(ctx, scope.store)
	if err != nil {
		return moveWait(m, err), true
	}
	return moveStep{requeue: left, err: writesDuringFreeze(m, fz, "the last cutover's final passes found keys unequal")}, true
}

// writesDuringFreeze is the claim's condition while a move waits after a cutover that
// was written under the freeze: what happened, which keys the store's freeze does not
// stop, and when it tries again.
func writesDuringFreeze(m *bkv1.MoveStatus, fz keyFreezer, what string) *reconcile.StepError {
	return reconcile.Terminalf(bkv1.ReasonWritesDuringFreeze,
		"%s: writes continued during the freeze (%s); the source takes writes again, and the move copies and cuts over again after %s (cutover %d; each waits longer)",
		what, fz.unstopped(), m.CutoverRetryAt.UTC().Format(time.RFC3339), m.CutoverAttempts)
}

// cutoverBackoff is the wait after the attempts-th cutover written under the freeze.
func cutoverBackoff(attempts int32) time.Duration {
	wait := defaults.MoveCutoverRetry
	for i := int32(1); i < attempts && wait < defaults.MoveCutoverRetryMax; i++ {
		wait *= 2
	}
	return min(wait, defaults.MoveCutoverRetryMax)
}
