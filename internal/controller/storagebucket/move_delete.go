package storagebucket

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/reconcile"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// unfinished says whether the claim's move stopped short of its cutover: its target is
// a half-copied bucket, and its source still the bucket's home.
func unfinished(m *bkv1.MoveStatus) bool {
	return !m.Terminal() && m.Phase != bkv1.MoveSwitching
}

// stopMover stops the mover of the claim's move, if one may run, and forgets its
// checkpoints (a cancelled move's too, kept to resume it). Nothing is sent to either store: what the move made stays as it is (the
// Orphan annotation).
func (r *Reconciler) stopMover(ctx context.Context, sb *bkv1.StorageBucket) error {
	m := sb.Status.Move
	if (m.Terminal() && !m.KeptTarget()) || r.Mover == nil {
		return nil
	}
	if err := r.Mover.Forget(ctx, m.ID); err != nil {
		return err
	}
	r.moveTargets.Delete(m.ID)
	return nil
}

// dropUnfinishedMove undoes the move of a claim being deleted before its cutover, so
// that its deletion policy finds the bucket where it lived and no half-copied bucket
// is left on the target: the mover stops and forgets, the source takes writes again,
// the target bucket is removed (removeCopy: only the claim's, emptied as a purge
// empties, its locked versions waited for within the claim's bound). A target a
// cancelled move keeps goes the same way. A move past its cutover left the bucket on
// its new home, where the deletion policy applies; the source stays as a finished
// move keeps it. done is false while the target is still being emptied.
func (r *Reconciler) dropUnfinishedMove(ctx context.Context, sb *bkv1.StorageBucket, patcher *reconcile.StatusPatcher) (bool, time.Duration, error) {
	m := sb.Status.Move
	kept := m.KeptTarget()
	if !unfinished(m) && !kept {
		return true, 0, nil
	}
	if err := r.stopMover(ctx, sb); err != nil {
		return false, 0, err
	}
	if m.FrozenAt != nil {
		if err := r.thawHome(ctx, sb, m.From); err != nil {
			return false, 0, err
		}
		m.FrozenAt = nil
	}
	if m.TargetBucket != "" {
		store := &bkv1.ObjectStore{}
		if err := r.Get(ctx, types.NamespacedName{Name: m.To}, store); err != nil {
			if !apierrors.IsNotFound(err) {
				return false, 0, err
			}
		} else {
			c, _, err := r.bucketClient(ctx, sb, store)
			if err != nil {
				return false, 0, err
			}
			removal, err := r.removeCopy(ctx, sb, patcher, bucketCopy{store: store, c: c, bucket: m.TargetBucket, key: m.ID,
				what: "the target of a move that did not finish", why: "the deletion of the StorageBucket", recorded: true})
			if err != nil || !removal.done {
				return false, removal.wait, err
			}
		}
	}
	if kept {
		m.TargetKeptOn, m.TargetKeptUntil = "", nil
		m.Message = "cancelled: the StorageBucket is being deleted; the target bucket the cancelled move kept was removed"
		return true, 0, nil
	}
	m.Phase, m.Message = bkv1.MoveAborted, "cancelled: the StorageBucket is being deleted; the target bucket was removed"
	return true, 0, nil
}

// thawHome lets the writes of the claim's bucket on its home store again, after an
// unfinished move froze them, if that bucket is still the claim's: a bucket of its name
// made since by someone else is left as it is. A home store gone needs nothing.
func (r *Reconciler) thawHome(ctx context.Context, sb *bkv1.StorageBucket, storeName string) error {
	home := &bkv1.ObjectStore{}
	if err := r.Get(ctx, types.NamespacedName{Name: storeName}, home); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("reading ObjectStore %s to allow the writes of the source bucket again: %w", storeName, err)
	}
	c, _, err := r.bucketClient(ctx, sb, home)
	if err != nil {
		return err
	}
	bucket := knownBucket(sb)
	if _, ours, err := r.ourBucket(ctx, sb, c, bucket); err != nil || !ours {
		return err
	}
	return thawBucket(ctx, c, bucket)
}

// ourBucket reads bucket's tags and says whether it is this claim's, of this cluster.
// A bucket the store says is not there is not.
func (r *Reconciler) ourBucket(ctx context.Context, sb *bkv1.StorageBucket, c s3.Client, bucket string) (map[string]string, bool, error) {
	me, err := r.ownerOf(ctx, sb)
	if err != nil {
		return nil, false, err
	}
	tags, err := headBucket(ctx, c, bucket)
	if err == nil && tags == nil {
		tags, err = c.GetBucketTagging(ctx, bucket)
	}
	switch {
	case s3.KindOf(err) == s3.KindNotFound:
		return nil, false, nil
	case err != nil:
		return nil, false, reconcile.AsStepError(err, fmt.Sprintf("reading the tags of bucket %q", bucket))
	}
	return tags, me.of(tags, false) == ownedByUs, nil
}

// dropLeftBehind carries out the claim's deletion policy on the copies its finished
// moves left on their old homes (status.leftBehind), so that none outlives the claim
// tagged for it: Purge, where that store allows it, deletes each with every object
// and version (removeCopy: its freeze lifted, as the stores hold their owner to it,
// its locked versions waited for within the claim's bound, then the copy kept, frozen,
// released and tagged for the store's admin); any other policy releases it, frozen and
// tagged as moved, as Retain releases a bucket. A store gone, or a bucket gone or not
// this claim's, needs nothing. done is false while a purge goes on.
func (r *Reconciler) dropLeftBehind(ctx context.Context, sb *bkv1.StorageBucket, patcher *reconcile.StatusPatcher) (bool, time.Duration, error) {
	home := knownBucket(sb)
	for len(sb.Status.LeftBehind) > 0 {
		cp := parseLeftBehind(sb.Status.LeftBehind[0], home) // its name there: a move may have renamed the bucket since
		store := &bkv1.ObjectStore{}
		if err := r.Get(ctx, types.NamespacedName{Name: cp.store}, store); err != nil {
			if !apierrors.IsNotFound(err) {
				return false, 0, err
			}
		} else if done, wait, err := r.dropLeftBehindOn(ctx, sb, patcher, store, cp.bucket); err != nil || !done {
			return false, wait, err
		}
		sb.Status.LeftBehind = sb.Status.LeftBehind[1:]
	}
	return true, 0, nil
}

func (r *Reconciler) dropLeftBehindOn(ctx context.Context, sb *bkv1.StorageBucket, patcher *reconcile.StatusPatcher, store *bkv1.ObjectStore, bucket string) (bool, time.Duration, error) {
	c, _, err := r.bucketClient(ctx, sb, store)
	if err != nil {
		return false, 0, err
	}
	if sb.Spec.DeletionPolicy == bkv1.DeletionPolicyPurge && store.Spec.Guardrails.DeletionPolicyAllowed(bkv1.DeletionPolicyPurge) {
		removal, err := r.removeCopy(ctx, sb, patcher, bucketCopy{store: store, c: c, bucket: bucket, key: string(sb.UID) + "/left-behind/" + store.Name,
			what: "a copy a move left behind", frozen: true})
		return removal.done, removal.wait, err
	}
	tags, ours, err := r.ourBucket(ctx, sb, c, bucket)
	if err != nil || !ours {
		return err == nil, 0, err
	}
	me, err := r.ownerOf(ctx, sb)
	if err != nil {
		return false, 0, err
	}
	done, err := r.releaseBucket(ctx, sb, me, c, bucket, tags)
	return done, 0, err
}
