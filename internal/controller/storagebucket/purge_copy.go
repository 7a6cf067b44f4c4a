package storagebucket

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/defaults"
	"github.com/bucketkeeper/bucketkeeper/internal/reconcile"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// bucketCopy is a bucket of the claim's on a store it does not live on: a copy a
// finished move left on an old home, a finished move's source, the target of a move
// that did not finish.
type bucketCopy struct {
	store  *bkv1.ObjectStore
	c      s3.Client
	bucket string
	// key names it in this process's memory: its purge's progress, and when this
	// process deleted it.
	key string
	// what it is, for people: "a copy a move left behind".
	what string
	// why is what empties it, for people: "deletionPolicy Purge".
	why string
	// frozen: a move froze it (a source, a copy left behind). Its freeze is lifted for
	// each pass of the purge, as the stores hold the operator to it too, and put back
	// while locked versions keep the bucket: no key writes to a copy, however long it
	// stays. The target of a move that did not finish was never frozen.
	frozen bool
	// recorded: status.move.targetBucket says the move created it. Untagged, it is the
	// move's while it is empty (the move creates and tags its buckets before it copies
	// into them); any other untagged bucket is someone else's.
	recorded bool
}

// copyRemoval is what a pass of removeCopy came to.
type copyRemoval struct {
	// done: the bucket is gone (and stayed gone), not the claim's, or kept at the end
	// of a claim's wait for its locked versions.
	done bool
	// wait is when to look again.
	wait time.Duration
	// notOurs: the bucket is not the claim's (any more), and was left as it is.
	notOurs bool
	// locked says, for a live claim's copy that locked versions keep, what keeps it
	// and when it is looked at again ("": nothing does).
	locked string
}

// removeCopy empties and deletes a bucket of the claim's that is not its home, a pass
// at a time. Every pass reads the bucket's tags before anything else and touches only a
// bucket tagged as this claim's, of this cluster, or the untagged bucket the move
// recorded creating while it is empty: anything else (someone else's bucket of the same
// name, made since) is left as it is, and the copy counts as done with. The bucket's
// freeze is lifted and it is purged as the home bucket is (purgePass: the store's purge
// budget, object locks). A pass that ends with nothing left but locked versions puts the
// freeze back; for a claim being deleted (patcher set) that blocks its deletion, with
// its bound (deletionBlocked: the copy is kept, frozen and released when the claim stops
// waiting); a live claim waits as long as the lock lasts, a pass when the first version
// unlocks (lockedWake), and nothing is sent before then. done comes once the bucket
// stays gone for MoveTargetSettle after this process deleted it (a write a stopped mover
// sent may still be carried out, and SeaweedFS makes the bucket again for it).
func (r *Reconciler) removeCopy(ctx context.Context, sb *bkv1.StorageBucket, patcher *reconcile.StatusPatcher, cp bucketCopy) (copyRemoval, error) {
	key, now := types.UID(cp.key), r.Clock.Now()
	if patcher == nil {
		if wait := r.purges.nextPassIn(key, now); wait > 0 {
			return copyRemoval{wait: wait}, nil
		}
	}
	me, err := r.ownerOf(ctx, sb)
	if err != nil {
		return copyRemoval{}, err
	}
	tags, err := headBucket(ctx, cp.c, cp.bucket)
	if s3.KindOf(err) == s3.KindNotFound {
		if at, ok := r.moveTargetsRemoved.Load(cp.key); ok {
			if wait := at.(time.Time).Add(defaults.MoveTargetSettle).Sub(now); wait > 0 {
				return copyRemoval{wait: wait}, nil
			}
		}
		r.moveTargetsRemoved.Delete(cp.key)
		r.purges.forget(key)
		return copyRemoval{done: true}, nil
	}
	if err == nil && tags == nil {
		tags, err = cp.c.GetBucketTagging(ctx, cp.bucket)
	}
	if err != nil {
		return copyRemoval{}, reconcile.AsStepError(err, fmt.Sprintf("checking bucket %q of ObjectStore %q", cp.bucket, cp.store.Name))
	}
	where := copyWhere(cp.store.Name, cp.what)
	switch me.of(tags, false) {
	case ownedByUs:
	case unowned:
		if !cp.recorded {
			return r.notOurCopy(sb, cp, where, key)
		}
		page, err := cp.c.ListObjectVersions(ctx, cp.bucket, nil)
		if err != nil {
			return copyRemoval{}, reconcile.AsStepError(err, fmt.Sprintf("listing the untagged bucket %q of ObjectStore %q", cp.bucket, cp.store.Name))
		}
		if len(page.Versions) > 0 {
			return r.notOurCopy(sb, cp, where, key)
		}
	default:
		return r.notOurCopy(sb, cp, where, key)
	}

	if cp.frozen {
		if err := thawBucket(ctx, cp.c, cp.bucket); err != nil {
			return copyRemoval{}, err
		}
	}
	job := purgeJob{key: key, c: cp.c, bucket: cp.bucket, where: where, why: cp.why,
		spend: purgeSpender{budget: r.Stores.PurgeBudget(cp.store), now: r.Clock.Now}, lock: r.purgeLockOf(sb, cp.store, me, cp.c, cp.bucket, tags)}
	res, err := r.purgePass(ctx, job)
	if err != nil {
		return copyRemoval{}, err
	}
	switch res.outcome {
	case purgeGone:
		r.purges.forget(key)
		r.moveTargetsRemoved.Store(cp.key, now)
		r.Recorder.Eventf(sb, nil, corev1.EventTypeNormal, bkv1.EventReasonBucketDeleted, "Delete", "deleted bucket %s%s (%s)", cp.bucket, where, res.progress.totals())
		return copyRemoval{wait: defaults.MoveTargetSettle}, nil
	case purgeLocked:
		if cp.frozen {
			if err := freezeBucket(ctx, cp.c, cp.bucket); err != nil {
				return copyRemoval{}, err
			}
		}
		if patcher == nil {
			wake := r.lockedWake(res.locked, now)
			r.purges.pace(key, wake)
			return copyRemoval{wait: wake.Sub(now), locked: lockedMessage(cp.bucket, where, res.locked, job.lock.bypass, wake)}, nil
		}
		done, err := r.deletionBlocked(ctx, sb, patcher, bkv1.DeletionPolicyPurge, job, res.locked)
		return copyRemoval{done: done, wait: r.purges.nextPassIn(key, now)}, err
	}
	if patcher != nil && r.purges.reportDue(key, now) {
		msg := fmt.Sprintf("purging bucket %q%s: %s; %s", cp.bucket, where, res.progress.totals(), res.progress.left(res.more))
		reconcile.SetCondition(&sb.Status.Conditions, sb.Generation, bkv1.ConditionReady, metav1.ConditionFalse, bkv1.ReasonPurging, msg)
		patcher.AfterWrite(func() { r.Recorder.Eventf(sb, nil, corev1.EventTypeNormal, bkv1.ReasonPurging, "Delete", "%s", msg) })
	}
	return copyRemoval{wait: r.purges.nextPassIn(key, now)}, nil
}

// notOurCopy leaves a bucket that is not the claim's as it is: the copy the claim had
// there is gone, and a bucket of its name made since is someone else's.
func (r *Reconciler) notOurCopy(sb *bkv1.StorageBucket, cp bucketCopy, where string, key types.UID) (copyRemoval, error) {
	r.purges.forget(key)
	r.moveTargetsRemoved.Delete(cp.key)
	r.leftAlone(sb, cp.bucket, where+", is not this StorageBucket's")
	return copyRemoval{done: true, notOurs: true}, nil
}

// copyWhere is what follows a copy's name in messages: its store and what it is.
func copyWhere(store, what string) string { return fmt.Sprintf(" on ObjectStore %q, %s", store, what) }

// lockedMessage says what keeps a live claim's copy and when it is looked at again; it
// starts with lockedHead.
func lockedMessage(bucket, where string, t lockTally, bypass bool, wake time.Time) string {
	return fmt.Sprintf("%s %d object versions an object lock keeps (%s)%s; its deletion is tried again at %s",
		lockedHead(bucket, where), t.versions, t.describe(), t.unlocking(bypass), wake.UTC().Format(time.RFC3339))
}

func lockedHead(bucket, where string) string { return fmt.Sprintf("bucket %q%s holds", bucket, where) }
