package storagebucket

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
)

// hasSourceDue says whether a finished move's source waits to be deleted.
func hasSourceDue(sb *bkv1.StorageBucket) bool {
	_, due := sourceDue(sb)
	return due
}

// sourceDeletionDue says whether a finished move's source is to be deleted now: a
// pass that only probes would not get to it.
func sourceDeletionDue(sb *bkv1.StorageBucket, now time.Time) bool {
	at, due := sourceDue(sb)
	return due && !now.Before(at)
}

// deleteSource deletes the bucket a finished move left on its old store, once
// spec.move.deleteSourceAfter has passed since the cutover, as a copy a move left
// behind is purged (removeCopy): only the bucket tagged as this claim's is touched, its
// freeze lifted (the stores hold their owner to it too), every object and version
// deleted a page a pass, then the bucket. A bucket of its name that is not the claim's
// is left as it is, and the claim's own copy counts as gone. Versions an object lock
// keeps are waited for as long as the lock lasts, the source frozen again meanwhile and
// still listed in status.leftBehind: nothing is sent to its store until the first of
// them unlocks (at least a sync interval later), the move's message says so, and a
// DeletionBlocked Event when it starts.
func (r *Reconciler) deleteSource(ctx context.Context, scope *bucketScope) moveStep {
	sb, m := scope.sb, scope.sb.Status.Move
	at, _ := sourceDue(sb)
	if wait := at.Sub(r.Clock.Now()); wait > 0 {
		return moveStep{requeue: wait}
	}
	source := &bkv1.ObjectStore{}
	if err := r.Get(ctx, types.NamespacedName{Name: m.From}, source); err != nil {
		return moveWait(m, fmt.Errorf("reading ObjectStore %s to delete the moved bucket's source: %w", m.From, err))
	}
	c, _, err := r.bucketClient(ctx, sb, source)
	if err != nil {
		return moveWait(m, err)
	}
	const what = "the source of the move"
	bucket := sourceBucketOf(sb, m) // its name there, before a move that renamed it
	removal, err := r.removeCopy(ctx, sb, nil, bucketCopy{store: source, c: c, bucket: bucket, key: m.ID + "/source",
		what: what, why: "spec.move.deleteSourceAfter", frozen: true})
	if err != nil {
		return moveWait(m, err)
	}
	if removal.locked != "" {
		if !strings.HasPrefix(m.Message, lockedHead(bucket, copyWhere(m.From, what))) { // announced when it starts
			msg := removal.locked
			scope.patcher.AfterWrite(func() {
				r.Recorder.Eventf(sb, nil, corev1.EventTypeWarning, bkv1.ReasonDeletionBlocked, "Move", "%s", msg)
			})
		}
		m.Message = removal.locked
	}
	if !removal.done {
		return moveStep{requeue: max(removal.wait, time.Second)}
	}
	m.SourceDeleted = true
	sb.Status.LeftBehind = withoutLeftBehind(sb.Status.LeftBehind, m.From, bucket, knownBucket(sb))
	if removal.notOurs {
		m.Message = fmt.Sprintf("moved from ObjectStore %s; the bucket of its name there is no longer this claim's and was left as it is", m.From)
		return moveStep{}
	}
	m.Message = fmt.Sprintf("moved from ObjectStore %s; the source bucket was deleted %s after the cutover", m.From, sb.Spec.Move.DeleteSourceAfter.Duration)
	r.Recorder.Eventf(sb, nil, corev1.EventTypeNormal, bkv1.ReasonMoved, "Move", "deleted bucket %s on ObjectStore %s, the source of the move", bucket, m.From)
	return moveStep{}
}
