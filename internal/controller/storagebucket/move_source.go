package storagebucket

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
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
// spec.move.deleteSourceAfter has passed since the cutover: its freeze is lifted
// (the stores hold their owner to it too), every object and version deleted a page a
// pass, then the bucket. Only the bucket tagged as this claim's is touched.
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
	if _, err := c.HeadBucket(ctx, scope.bucket); s3.KindOf(err) != s3.KindNotFound {
		if err := thawBucket(ctx, c, scope.bucket); err != nil {
			return moveWait(m, err)
		}
	}
	done, err := r.removeBucketOf(ctx, sb, source, c, scope.bucket, m.ID+"/source")
	if err != nil || !done {
		return moveWait(m, err)
	}
	m.SourceDeleted = true
	sb.Status.LeftBehind = slices.DeleteFunc(sb.Status.LeftBehind, func(s string) bool { return s == m.From })
	m.Message = fmt.Sprintf("moved from ObjectStore %s; the source bucket was deleted %s after the cutover", m.From, sb.Spec.Move.DeleteSourceAfter.Duration)
	r.Recorder.Eventf(sb, nil, corev1.EventTypeNormal, bkv1.ReasonMoved, "Move", "deleted bucket %s on ObjectStore %s, the source of the move", scope.bucket, m.From)
	return moveStep{}
}
