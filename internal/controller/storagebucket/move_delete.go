package storagebucket

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/reconcile"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// dropUnfinishedMove undoes the move of a claim being deleted before its cutover, so
// that its deletion policy finds the bucket where it lived and no half-copied bucket
// is left on the target: the mover stops and forgets, the source takes writes again,
// the target bucket is removed. A move past its cutover left the bucket on its new
// home, where the deletion policy applies; the source stays as a finished move keeps
// it. A target a cancelled move keeps goes too. done is false while the target is
// still being emptied.
func (r *Reconciler) dropUnfinishedMove(ctx context.Context, sb *bkv1.StorageBucket) (bool, error) {
	m := sb.Status.Move
	if m.KeptTarget() {
		return r.dropKeptTarget(ctx, sb, m)
	}
	if m.Terminal() || m.Phase == bkv1.MoveSwitching {
		return true, nil
	}
	if r.Mover != nil {
		if err := r.Mover.Forget(ctx, m.ID); err != nil {
			return false, err
		}
	}
	if m.FrozenAt != nil {
		home := &bkv1.ObjectStore{}
		if err := r.Get(ctx, types.NamespacedName{Name: m.From}, home); err != nil {
			return false, fmt.Errorf("reading ObjectStore %s to allow the writes of the source bucket again: %w", m.From, err)
		}
		c, _, err := r.bucketClient(ctx, sb, home)
		if err != nil {
			return false, err
		}
		if err := thawBucket(ctx, c, knownBucket(sb)); err != nil {
			return false, err
		}
		m.FrozenAt = nil
	}
	done, err := r.removeMoveTarget(ctx, sb, m)
	if err != nil || !done {
		return false, err
	}
	m.Phase, m.Message = bkv1.MoveAborted, "cancelled: the StorageBucket is being deleted; the target bucket was removed"
	return true, nil
}

// leftBehindAfter is the list of stores holding a copy a move left behind once a move
// from from to to is done: from joins it, and to, the bucket's home again, leaves it.
func leftBehindAfter(list []string, from, to string) []string {
	out := slices.DeleteFunc(slices.Clone(list), func(s string) bool { return s == to || s == from })
	return append(out, from)
}

// dropLeftBehind carries out the claim's deletion policy on the copies its finished
// moves left on their old homes (status.leftBehind), so that none outlives the claim
// tagged for it: Purge, where that store allows it, deletes each with every object
// and version (lifting its freeze first, as the stores hold their owner to it); any
// other policy releases it, frozen and tagged as moved, as Retain releases a bucket.
// A store gone, or a bucket gone or not this claim's, needs nothing. done is false
// while a purge goes on.
func (r *Reconciler) dropLeftBehind(ctx context.Context, sb *bkv1.StorageBucket) (bool, error) {
	bucket := knownBucket(sb)
	for len(sb.Status.LeftBehind) > 0 {
		name := sb.Status.LeftBehind[0]
		store := &bkv1.ObjectStore{}
		if err := r.Get(ctx, types.NamespacedName{Name: name}, store); err != nil {
			if !apierrors.IsNotFound(err) {
				return false, err
			}
		} else if done, err := r.dropLeftBehindOn(ctx, sb, store, bucket); err != nil || !done {
			return false, err
		}
		sb.Status.LeftBehind = sb.Status.LeftBehind[1:]
	}
	return true, nil
}

func (r *Reconciler) dropLeftBehindOn(ctx context.Context, sb *bkv1.StorageBucket, store *bkv1.ObjectStore, bucket string) (bool, error) {
	c, _, err := r.bucketClient(ctx, sb, store)
	if err != nil {
		return false, err
	}
	if sb.Spec.DeletionPolicy == bkv1.DeletionPolicyPurge && store.Spec.Guardrails.DeletionPolicyAllowed(bkv1.DeletionPolicyPurge) {
		if _, err := c.HeadBucket(ctx, bucket); s3.KindOf(err) != s3.KindNotFound {
			if err := thawBucket(ctx, c, bucket); err != nil {
				return false, err
			}
		}
		done, err := r.removeBucketOf(ctx, sb, store, c, bucket, string(sb.UID)+"/left-behind/"+store.Name)
		if done {
			r.Recorder.Eventf(sb, nil, corev1.EventTypeNormal, bkv1.EventReasonBucketDeleted, "Delete", "deleted bucket %s on ObjectStore %s, a copy a move left behind", bucket, store.Name)
		}
		return done, err
	}
	me, err := r.ownerOf(ctx, sb)
	if err != nil {
		return false, err
	}
	tags, err := headBucket(ctx, c, bucket)
	if err == nil && tags == nil {
		tags, err = c.GetBucketTagging(ctx, bucket)
	}
	switch {
	case s3.KindOf(err) == s3.KindNotFound:
		return true, nil
	case err != nil:
		return false, reconcile.AsStepError(err, fmt.Sprintf("reading the tags of bucket %q on ObjectStore %q, a copy a move left behind", bucket, store.Name))
	case me.of(tags, false) != ownedByUs:
		return true, nil
	}
	return r.releaseBucket(ctx, sb, me, c, bucket, tags)
}
