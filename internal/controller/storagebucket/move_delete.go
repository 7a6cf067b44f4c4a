package storagebucket

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/types"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
)

// dropUnfinishedMove undoes the move of a claim being deleted before its cutover, so
// that its deletion policy finds the bucket where it lived and no half-copied bucket
// is left on the target: the mover stops and forgets, the source takes writes again,
// the target bucket is removed. A move past its cutover left the bucket on its new
// home, where the deletion policy applies; the source stays as a finished move keeps
// it. done is false while the target is still being emptied.
func (r *Reconciler) dropUnfinishedMove(ctx context.Context, sb *bkv1.StorageBucket) (bool, error) {
	m := sb.Status.Move
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
