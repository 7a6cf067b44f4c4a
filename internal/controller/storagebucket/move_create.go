package storagebucket

import (
	"context"
	"fmt"
	"time"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/reconcile"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// The target bucket of a move is created as a claim's bucket is (bucket.go,
// creates.go): status.move.targetBucket is written before CreateBucket is sent, and
// the answer is read as carefully. No store here takes tags with CreateBucket, so
// between the create and the ownership tags the bucket is proved the move's by that
// record alone; the record says the move meant to create the bucket, not that it did.
// So a bucket of that name that someone else made in between (with the operator's own
// credentials, or on Versity with any: both answer BucketAlreadyOwnedByYou; Ceph RGW
// answers its owner 200 OK) or after a crash (the next pass finds it untagged) is
// taken only if it is as the move's own would be: empty, for the move tags its bucket
// before it copies anything into it.

// createMoveTarget sends the target's CreateBucket and reads its answer: nil when the
// bucket may be the one this move created (its tags and contents decide next), a
// MoveNotAllowed refusal when the answer says the bucket is someone else's, with
// status.move.targetBucket cleared so that no later step, an abort's cleanup
// included, ever touches it. sentBefore says the record was there before this pass:
// a CreateBucket of an earlier pass, or of an earlier process, may have been sent.
func (r *Reconciler) createMoveTarget(ctx context.Context, t *moveTargetScope, m *bkv1.MoveStatus, create func(ctx context.Context, bucket, region string) error, sentBefore bool) error {
	earlier := r.moveCreateMayLand(m.ID, sentBefore)
	err := create(ctx, t.bucket, t.region)
	landBy := earlier
	if s3.Unanswered(err) {
		landBy = later(landBy, r.Clock.Now().Add(r.createSettleTime()))
	}
	r.moveCreates.Store(m.ID, landBy)
	switch s3.KindOf(err) {
	case s3.KindBucketNameTaken:
		// Another account's: no create of this move can make a bucket it owns.
		m.TargetBucket = ""
		r.moveCreates.Delete(m.ID)
		return reconcile.Terminalf(bkv1.ReasonMoveNotAllowed, "bucket name %q is taken on ObjectStore %q by another account", t.bucket, t.store.Name)
	case s3.KindAlreadyOwnedByYou:
		if earlier.After(r.Clock.Now()) {
			// Most likely an earlier CreateBucket of this move whose answer was lost,
			// landing after our HEAD: the record stays, and the next pass finds the
			// bucket untagged and takes it if it is as that create left it.
			return reconcile.AsStepError(err, fmt.Sprintf("bucket %q appeared on ObjectStore %q while creating it, where an earlier CreateBucket of this move went unanswered", t.bucket, t.store.Name))
		}
		// Made by someone else between our HEAD and our CREATE: not this move's work.
		m.TargetBucket = ""
		r.moveCreates.Delete(m.ID)
		return reconcile.Terminalf(bkv1.ReasonMoveNotAllowed, "bucket %q appeared on ObjectStore %q while the move was creating it, made by someone else: a move never writes into a bucket it did not create", t.bucket, t.store.Name)
	}
	if err != nil {
		return reconcile.AsStepError(err, fmt.Sprintf("creating bucket %q on ObjectStore %q", t.bucket, t.store.Name))
	}
	return nil
}

// moveCreateMayLand is until when an earlier CreateBucket of the move's target may
// still be carried out: as this process saw its own end (moveCreates), or, for one an
// earlier process may have sent (sentBefore, and none sent here), a call deadline and
// the settle time from now: when it was sent is not known.
func (r *Reconciler) moveCreateMayLand(moveID string, sentBefore bool) time.Time {
	if v, ok := r.moveCreates.Load(moveID); ok {
		return v.(time.Time)
	}
	if sentBefore {
		return r.Clock.Now().Add(r.callDeadline() + r.createSettleTime())
	}
	return time.Time{}
}

// freshMoveTarget refuses an untagged target bucket that holds anything, object
// versions or incomplete uploads: the bucket this move created is tagged before
// anything is copied into it, so such a bucket is someone else's (or was written by
// someone else), whatever status.move.targetBucket says. The record is cleared: the
// bucket is never tagged, written, emptied or deleted by this move.
func freshMoveTarget(ctx context.Context, t *moveTargetScope, m *bkv1.MoveStatus) error {
	page, err := t.s3.ListObjectVersions(ctx, t.bucket, nil)
	if err != nil {
		return reconcile.AsStepError(err, fmt.Sprintf("listing the untagged bucket %q of ObjectStore %q", t.bucket, t.store.Name))
	}
	held := len(page.Versions) > 0
	if !held {
		uploads, err := t.s3.ListMultipartUploads(ctx, t.bucket, nil)
		if err != nil && s3.KindOf(err) != s3.KindNotImplemented {
			return reconcile.AsStepError(err, fmt.Sprintf("listing the incomplete uploads of the untagged bucket %q of ObjectStore %q", t.bucket, t.store.Name))
		}
		held = len(uploads.Uploads) > 0
	}
	if !held {
		return nil
	}
	m.TargetBucket = ""
	return reconcile.Terminalf(bkv1.ReasonMoveNotAllowed, "bucket %q on ObjectStore %q has no owner's tags and holds objects: the move did not create it (its own is tagged before anything is copied into it), and a move never writes into a bucket it did not create", t.bucket, t.store.Name)
}
