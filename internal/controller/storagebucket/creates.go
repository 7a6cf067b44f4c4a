package storagebucket

import (
	"cmp"
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/defaults"
	"github.com/bucketkeeper/bucketkeeper/internal/memo"
	"github.com/bucketkeeper/bucketkeeper/internal/reconcile"
)

// Unanswered creates.
//
// A CreateBucket whose answer was lost (a timeout, a dropped connection, a server
// error) may have been carried out, and may still be: the request can sit in the store,
// or in a proxy in front of it, after the operator stopped waiting. A deletion that
// then finds no bucket has not seen that there is nothing to delete, only that nothing
// is there yet. So a deletion concludes "absent" only once no CreateBucket of the claim
// can land any more (createsLandBy), and a bucket it deleted before then is looked for
// again then: the late create would have made it anew.
//
// What this process saw is in createMemo: when each CreateBucket it sent ended, and
// whether the store answered it. A CreateBucket sent by another process (before a
// restart or a leader change) is bounded from status: its intent's sentAt is recorded
// before sending, the caller gives up one call deadline later at the latest, and the
// store carries it out, if ever, within CreateSettleTime after that.
//
// Vanished claims.
//
// The API server may remove a claim whose finalizer it reported added, when the
// claim's deletion raced the finalizer (kubernetes/kubernetes#77988): no deletion pass
// ever runs for it. The create intent cannot be recorded on a claim already gone
// (StatusPatcher.WriteNow says so, and nothing is sent), but the claim can go after the
// intent was written. So the memo also keeps, from just before each CreateBucket, what
// the claim's deletion needs; when the claim turns out gone, its reconcile carries out
// the deletion policy from there (vanished), as its deletion pass would have.

// createMemo keeps, per claim this process sent a CreateBucket for, until when one that
// went unanswered may still land, and what the claim's deletion needs.
type createMemo struct {
	records memo.Map[types.NamespacedName, createRecord]
}

type createRecord struct {
	uid types.UID
	// sentAt is the intent's sentAt of the latest CreateBucket recorded (to the second,
	// as status holds it).
	sentAt time.Time
	// landBy is when no CreateBucket recorded can land any more; zero when every one
	// was answered.
	landBy time.Time
	// claim is what the claim's deletion reads of it (deletionCopy), as it was when
	// the latest CreateBucket was sent.
	claim *bkv1.StorageBucket
}

// sending records, before a CreateBucket is sent for it, what the claim's deletion needs.
func (m *createMemo) sending(key types.NamespacedName, sb *bkv1.StorageBucket) {
	m.records.Update(key, func(rec createRecord, _ bool) (createRecord, bool) {
		if rec.uid != sb.UID {
			rec = createRecord{uid: sb.UID}
		}
		rec.claim = deletionCopy(sb)
		return rec, true
	})
}

// ended records the end of the CreateBucket sent at sentAt: after it, creates of the
// claim may land until landBy (zero: none can). An earlier create's later landBy stays.
func (m *createMemo) ended(key types.NamespacedName, uid types.UID, sentAt, landBy time.Time) {
	m.records.Update(key, func(rec createRecord, _ bool) (createRecord, bool) {
		if rec.uid != uid {
			rec = createRecord{uid: uid}
		}
		rec.sentAt, rec.landBy = sentAt, later(rec.landBy, landBy)
		return rec, true
	})
}

func (m *createMemo) get(key types.NamespacedName, uid types.UID) (createRecord, bool) {
	rec, ok := m.records.Get(key)
	return rec, ok && rec.uid == uid
}

// claim is the copy of the claim of key recorded before its latest CreateBucket.
func (m *createMemo) claim(key types.NamespacedName) (*bkv1.StorageBucket, bool) {
	rec, ok := m.records.Get(key)
	if !ok || rec.claim == nil {
		return nil, false
	}
	return rec.claim.DeepCopy(), true
}

func (m *createMemo) forget(key types.NamespacedName) { m.records.Delete(key) }

// deletionCopy is what the deletion of sb reads of it: its identity, the deletion
// policy and its annotation, where the bucket is, and the create intent.
func deletionCopy(sb *bkv1.StorageBucket) *bkv1.StorageBucket {
	c := &bkv1.StorageBucket{ObjectMeta: metav1.ObjectMeta{Namespace: sb.Namespace, Name: sb.Name, UID: sb.UID, Generation: sb.Generation}}
	c.SetGroupVersionKind(bkv1.GroupVersion.WithKind("StorageBucket"))
	if v, ok := sb.Annotations[bkv1.AnnotationDeletionPolicy]; ok {
		c.Annotations = map[string]string{bkv1.AnnotationDeletionPolicy: v}
	}
	c.Spec.ObjectStoreRef, c.Spec.BucketName, c.Spec.Region, c.Spec.DeletionPolicy = sb.Spec.ObjectStoreRef, sb.Spec.BucketName, sb.Spec.Region, sb.Spec.DeletionPolicy
	c.Status.BucketName, c.Status.Region, c.Status.CreateIntent = sb.Status.BucketName, sb.Status.Region, sb.Status.CreateIntent.DeepCopy()
	c.Status.ObjectStore, c.Status.Move = sb.Status.ObjectStore, sb.Status.Move.DeepCopy()
	c.Spec.Move = sb.Spec.Move.DeepCopy()
	controllerutil.AddFinalizer(c, bkv1.Finalizer)
	return c
}

// vanished carries out the deletion policy of a claim that is gone although this
// process sent a CreateBucket for it and its deletion pass never ran (see the top of
// this file): the claim went without its finalizer being honoured. Done, or nothing to
// do, it returns a zero result; otherwise the reconcile retries, and what is remembered
// of the claim stays until then.
func (r *Reconciler) vanished(ctx context.Context, key types.NamespacedName) (ctrl.Result, error) {
	sb, ok := r.creates.claim(key)
	if !ok {
		return ctrl.Result{}, nil
	}
	// The cache says it is gone; the API server says whether this claim (its UID) is.
	live := &bkv1.StorageBucket{}
	if err := r.Stores.APIReader.Get(ctx, key, live); err == nil && live.UID == sb.UID {
		return ctrl.Result{RequeueAfter: reconcile.ConflictRetryDelay}, nil // the cache is behind
	} else if err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, err
	}
	log.FromContext(ctx).Info("the StorageBucket went without its deletion pass after a CreateBucket was sent for it; carrying out its deletion policy",
		"uid", sb.UID, "deletionPolicy", sb.Spec.DeletionPolicy)
	// Never written: the object is gone. Its conditions only carry the Events.
	patcher := reconcile.NewStatusPatcher(r.Client, sb, func(sb *bkv1.StorageBucket) any { return sb.Status }, nil)
	done, retryIn, err := r.deleteExternal(ctx, sb, patcher)
	if err != nil {
		return ctrl.Result{}, reconcile.AsStepError(err, "carrying out the deletion policy of a StorageBucket that went without its deletion pass")
	}
	if !done {
		return ctrl.Result{RequeueAfter: max(time.Second, retryIn)}, nil
	}
	r.creates.forget(key)
	return ctrl.Result{}, nil
}

// createsLandBy is the moment after which no CreateBucket of sb can be carried out any
// more; a zero or past time when none can.
func (r *Reconciler) createsLandBy(sb *bkv1.StorageBucket) time.Time {
	intent := sb.Status.CreateIntent
	if intent == nil || intent.UID != sb.UID || intent.SentAt == nil {
		// No CreateBucket recorded (an intent of a version before sentAt is taken as
		// settled: it was written before this process could have sent anything).
		return time.Time{}
	}
	rec, seen := r.creates.get(client.ObjectKeyFromObject(sb), sb.UID)
	if seen && !rec.sentAt.Before(intent.SentAt.Time) {
		return rec.landBy // this process sent the latest one and saw it end
	}
	if intent.Answered {
		// The latest one was answered, and the process that saw it recorded until when
		// an earlier one, unanswered, may still land.
		if intent.LandBy == nil {
			return time.Time{}
		}
		return intent.LandBy.Time
	}
	// Sent by another process, or by this one before a restart. sentAt is recorded to
	// the second, before the request: it went out within a call deadline after.
	bound := intent.SentAt.Add(time.Second + r.callDeadline() + r.createSettleTime())
	if seen && rec.landBy.After(bound) {
		return rec.landBy
	}
	return bound
}

// callDeadline bounds every S3 call: the per-call timeout, else the reconcile's.
func (r *Reconciler) callDeadline() time.Duration {
	var perCall time.Duration
	if r.Stores != nil {
		perCall = r.Stores.RequestTimeout
	}
	return cmp.Or(perCall, r.ReconcileTimeout, defaults.S3RequestTimeout)
}

func (r *Reconciler) createSettleTime() time.Duration {
	return cmp.Or(r.CreateSettleTime, defaults.CreateSettleTime)
}

// later is the later of two moments.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// answered records on intent that the store answered its CreateBucket, and until when an
// earlier one that went unanswered may still land (landBy, rounded up to the second that
// status holds; dropped when already past at now).
func answered(intent *bkv1.CreateIntent, landBy, now time.Time) {
	intent.Answered, intent.LandBy = true, nil
	if landBy.After(now) {
		t := metav1.NewTime(landBy.Truncate(time.Second).Add(time.Second))
		intent.LandBy = &t
	}
}
