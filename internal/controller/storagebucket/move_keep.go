package storagebucket

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/defaults"
)

// A move cancelled after its plan keeps what it copied for CancelledMoveKeep: its
// target bucket, and its checkpoints (with the equivalences that let a copy pass find
// equal what it verified). Toggling spec.objectStoreRef away and back then resumes the
// same move, queued again for its slot, at a copy pass that copies only what is not
// on the target yet, instead of starting over. Once the keep time is over, when the
// claim asks for a third store, when the target's store goes away, or when the claim
// is deleted (dropUnfinishedMove), the target is emptied and deleted and the
// checkpoints forgotten, as a cancel without keeping does at once. The source takes
// writes again at the cancel, kept target or not.

// cancelledMoveKeep is CancelledMoveKeep, or its default.
func (r *Reconciler) cancelledMoveKeep() time.Duration {
	if r.CancelledMoveKeep > 0 {
		return r.CancelledMoveKeep
	}
	return defaults.CancelledMoveTargetKeep
}

// keepsTarget says whether cancelling m keeps its target: a move that finished its
// plan may have copied objects worth keeping; a runner that forgets nothing is needed
// to keep its checkpoints.
func (r *Reconciler) keepsTarget(m *bkv1.MoveStatus) bool {
	return r.Mover != nil && m.Pass >= 2
}

// resumable says whether a move from from to to is m, cancelled with its target kept
// and asked again within the keep time.
func (r *Reconciler) resumable(m *bkv1.MoveStatus, from, to string) bool {
	return m.KeptTarget() && m.From == from && m.To == to && m.TargetKeptUntil != nil && r.Clock.Now().Before(m.TargetKeptUntil.Time)
}

// keepTarget looks after a cancelled move's kept target while the claim wants its
// bucket at home: removed once the keep time is over or its store goes away, looked
// at again then.
func (r *Reconciler) keepTarget(ctx context.Context, scope *bucketScope) moveStep {
	m := scope.sb.Status.Move
	if now := r.Clock.Now(); m.TargetKeptUntil != nil && now.Before(m.TargetKeptUntil.Time) && !r.storeGoing(ctx, m.TargetKeptOn) {
		return moveStep{requeue: m.TargetKeptUntil.Sub(now)}
	}
	if done, err := r.dropKeptTarget(ctx, scope.sb, m); err != nil || !done {
		return moveWait(m, err)
	}
	return moveStep{}
}

// storeGoing says whether the ObjectStore is gone or being deleted: its deletion waits
// for the kept target (usersOf), which is then not kept any longer.
func (r *Reconciler) storeGoing(ctx context.Context, name string) bool {
	store := &bkv1.ObjectStore{}
	err := r.Get(ctx, types.NamespacedName{Name: name}, store)
	return apierrors.IsNotFound(err) || (err == nil && store.DeletionTimestamp != nil)
}

// dropKeptTarget removes a cancelled move's kept target bucket and forgets its
// checkpoints; done says the target is gone.
func (r *Reconciler) dropKeptTarget(ctx context.Context, sb *bkv1.StorageBucket, m *bkv1.MoveStatus) (bool, error) {
	if r.Mover != nil {
		if err := r.Mover.Forget(ctx, m.ID); err != nil {
			return false, err
		}
	}
	done, err := r.removeMoveTarget(ctx, sb, m)
	if err != nil || !done {
		return false, err
	}
	m.TargetKeptOn, m.TargetKeptUntil = "", nil
	m.Message = "cancelled: the source is as it was; the target bucket was removed"
	r.Recorder.Eventf(sb, nil, corev1.EventTypeNormal, bkv1.ReasonMoveAborted, "Move", "the target bucket the cancelled move to ObjectStore %s kept was removed", m.To)
	return true, nil
}
