package storagebucket

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/reconcile"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// reconcileDelete carries out the deletion policy, then releases the finalizer. Only a
// bucket this claim owns is ever touched; one that is not ours needs nothing, and one
// the store says is not there needs nothing once no CreateBucket of this claim can
// still make it (creates.go). Whatever it decides is announced by an Event; while it
// cannot finish, Ready says why and what to do.
//
// The claim's buckets go in order: the target of a move that did not finish, the
// copies its finished moves left behind, then its home. Each is emptied by the same
// purge (purgePass), which meets locked versions the same way whatever the bucket, and
// the claim's wait for them is bounded once for all of them (deletionBlocked). The
// Orphan annotation leaves every one as it is, on every store: the mover of an
// unfinished move stops, and nothing is sent to any store.
func (r *Reconciler) reconcileDelete(ctx context.Context, sb *bkv1.StorageBucket, patcher *reconcile.StatusPatcher) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(sb, bkv1.Finalizer) {
		return ctrl.Result{}, nil
	}
	r.synced.forget(client.ObjectKeyFromObject(sb))

	if sb.Annotations[bkv1.AnnotationDeletionPolicy] == bkv1.DeletionPolicyOrphan {
		if err := r.stopMover(ctx, sb); err != nil {
			r.blockDeletion(patcher, sb, reconcile.AsStepError(err, "stopping the bucket's unfinished move"), "; the bucket is abandoned once it stopped, and the operator retries")
			return ctrl.Result{}, err
		}
		r.Recorder.Eventf(sb, nil, corev1.EventTypeWarning, bkv1.EventReasonBucketAbandoned, "Delete", "bucket %s abandoned on request (%s=%s); it was not contacted",
			knownBucket(sb), bkv1.AnnotationDeletionPolicy, bkv1.DeletionPolicyOrphan)
		return r.deletionDone(ctx, sb, patcher)
	}
	steps := []struct {
		doing string
		run   func(context.Context, *bkv1.StorageBucket, *reconcile.StatusPatcher) (bool, time.Duration, error)
	}{
		{"undoing the bucket's unfinished move", r.dropUnfinishedMove},
		{"carrying out the deletion policy on the copies the bucket's moves left behind", r.dropLeftBehind},
		{"carrying out the deletion policy", r.deleteExternal},
	}
	for _, step := range steps {
		done, retryIn, err := step.run(ctx, sb, patcher)
		if err != nil {
			se := reconcile.AsStepError(err, step.doing)
			r.blockDeletion(patcher, sb, se, abandonHint)
			if se.Terminal {
				return ctrl.Result{RequeueAfter: r.SyncInterval}, nil
			}
			return ctrl.Result{}, se
		}
		if !done {
			// A purge paced by its store's purge budget (purgeSpender) or waiting for
			// locked versions, a bucket that must stay gone, or a CreateBucket that may
			// still land, is waited for.
			return ctrl.Result{RequeueAfter: max(time.Second, retryIn)}, nil
		}
	}
	return r.deletionDone(ctx, sb, patcher)
}

// deletionDone ends a deletion with nothing more to do on the stores: the connection
// Secrets go, then the finalizer.
func (r *Reconciler) deletionDone(ctx context.Context, sb *bkv1.StorageBucket, patcher *reconcile.StatusPatcher) (ctrl.Result, error) {
	r.purges.forget(sb.UID)
	if m := sb.Status.Move; m != nil { // what its last move's clean-up left in memory
		r.purges.forget(types.UID(m.ID))
		r.purges.forget(types.UID(m.ID + "/source"))
	}
	// The deletion waits no more: its series goes now, not when the object is gone.
	r.unblocked(client.ObjectKeyFromObject(sb))
	if err := r.deleteConnectionSecrets(ctx, sb); err != nil {
		r.blockDeletion(patcher, sb, reconcile.AsStepError(err, "deleting the connection Secret"), "; the bucket is done with, and the operator retries")
		return ctrl.Result{}, err
	}
	err := reconcile.PatchMetadata(ctx, r.Client, sb, func(o *bkv1.StorageBucket) { controllerutil.RemoveFinalizer(o, bkv1.Finalizer) })
	if client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, err
	}
	r.creates.forget(client.ObjectKeyFromObject(sb)) // its deletion is done: nothing left for vanished
	return ctrl.Result{}, nil
}

// abandonHint ends every message of a blocked deletion with the way out.
var abandonHint = fmt.Sprintf("; to abandon the bucket instead, annotate this StorageBucket %s=%s", bkv1.AnnotationDeletionPolicy, bkv1.DeletionPolicyOrphan)

// blockDeletion says on Ready why the deletion cannot finish yet and what to do about
// it (hint), and announces it by a Warning Event when the reason is new.
func (r *Reconciler) blockDeletion(patcher *reconcile.StatusPatcher, sb *bkv1.StorageBucket, se *reconcile.StepError, hint string) {
	msg := se.Message + hint
	if c := reconcile.FindCondition(sb.Status.Conditions, bkv1.ConditionReady); c == nil || c.Reason != se.Reason {
		patcher.AfterWrite(func() { r.Recorder.Eventf(sb, nil, corev1.EventTypeWarning, se.Reason, "Delete", "%s", msg) })
	}
	reconcile.SetCondition(&sb.Status.Conditions, sb.Generation, bkv1.ConditionReady, metav1.ConditionFalse, se.Reason, msg)
}

// knownBucket is the bucket this object knows it bound or set out to create: status
// first, then the create intent this very object recorded. Neither lives where a
// tenant can write.
func knownBucket(sb *bkv1.StorageBucket) string {
	if sb.Status.BucketName != "" {
		return sb.Status.BucketName
	}
	if intent := sb.Status.CreateIntent; intent != nil && intent.UID == sb.UID {
		return intent.BucketName
	}
	return ""
}

// deleteExternal returns true once nothing more needs doing on the store, and
// otherwise when to look again. It finds the bucket from status, the create intent, or
// (when a first pass was cut short before either was written) the name the claim would
// use, and acts only on a bucket whose tags say it is this object's, or that this
// object's intent proves it created.
//
// "Could not ask the store" is never taken for "nothing there": a Delete or Purge waits
// until the store answers (or the claim is annotated to abandon the bucket). Only
// Retain goes on without an answer, as the bucket stays either way.
func (r *Reconciler) deleteExternal(ctx context.Context, sb *bkv1.StorageBucket, patcher *reconcile.StatusPatcher) (bool, time.Duration, error) {
	known := knownBucket(sb)
	store := &bkv1.ObjectStore{}
	if err := r.Get(ctx, types.NamespacedName{Name: sb.HomeStore()}, store); err != nil {
		if !apierrors.IsNotFound(err) {
			return false, 0, err
		}
		if known == "" || sb.Spec.DeletionPolicy == bkv1.DeletionPolicyRetain || sb.Spec.DeletionPolicy == "" {
			// Nothing was made, or nothing was to be deleted; and with the store gone
			// there is no one left to ask.
			r.Recorder.Eventf(sb, nil, corev1.EventTypeWarning, bkv1.EventReasonBucketNotReleased, "Delete", "ObjectStore %s is gone: bucket %s, if any, was left as it is",
				sb.HomeStore(), cmp.Or(known, "(none recorded)"))
			return true, 0, nil
		}
		return false, 0, reconcile.Terminalf(bkv1.ReasonObjectStoreNotFound, "ObjectStore %q is gone, so bucket %q cannot be %s; recreate the store",
			sb.HomeStore(), known, deletionVerb(sb.Spec.DeletionPolicy))
	}
	bucket := known
	if bucket == "" {
		bucket = bucketNameFor(sb, store)
	}
	policy := sb.Spec.DeletionPolicy
	if !store.Spec.Guardrails.DeletionPolicyAllowed(policy) {
		r.Recorder.Eventf(sb, nil, corev1.EventTypeWarning, bkv1.ReasonDeletionPolicyNotAllowed, "Delete",
			"deletionPolicy %s is not allowed on ObjectStore %s; the bucket is retained", policy, store.Name)
		policy = bkv1.DeletionPolicyRetain
	}

	done, retryIn, err := r.deleteOwnedBucket(ctx, sb, patcher, store, bucket, policy)
	if err != nil && (policy == bkv1.DeletionPolicyRetain || policy == "") && !mayBeUntagged(sb, bucket) {
		// Retain never blocks on the store: the bucket stays either way, and a later
		// claim of the same cluster, namespace and name binds it again (see released).
		// But for a bucket this claim created and may not have tagged yet: left so, no
		// claim could ever bind or delete it, so Retain waits to release it as Delete
		// waits to delete it.
		r.Recorder.Eventf(sb, nil, corev1.EventTypeWarning, bkv1.EventReasonBucketNotReleased, "Delete", "bucket %s was left as it is: the store could not be asked (%s)",
			bucket, reconcile.AsStepError(err, "releasing").Reason)
		return true, 0, nil
	}
	return done, retryIn, err
}

// mayBeUntagged says whether bucket may be one this claim's CreateBucket made that its
// ownership tags never reached: created by its intent, and not yet recorded as the
// claim's bucket in status.bucketName (which only a tagged bucket is; the condition
// Provisioned is no proof, as an unready store turns it False).
func mayBeUntagged(sb *bkv1.StorageBucket, bucket string) bool {
	return createIntended(sb, bucket) && sb.Status.BucketName != bucket
}

// deleteOwnedBucket carries out policy on bucket if it is this object's.
func (r *Reconciler) deleteOwnedBucket(ctx context.Context, sb *bkv1.StorageBucket, patcher *reconcile.StatusPatcher, store *bkv1.ObjectStore, bucket string, policy bkv1.DeletionPolicy) (bool, time.Duration, error) {
	c, err := r.Stores.ClientForRegion(ctx, store, cmp.Or(sb.Status.Region, sb.Spec.Region), sb.Namespace)
	if err != nil {
		return false, 0, err
	}
	tags, err := headBucket(ctx, c, bucket)
	if err != nil {
		return r.unreadable(sb, patcher, bucket, err, "checking bucket %q before deletion")
	}
	if tags == nil {
		if tags, err = c.GetBucketTagging(ctx, bucket); err != nil {
			return r.unreadable(sb, patcher, bucket, err, "reading tags of bucket %q before deletion")
		}
	}
	me, err := r.ownerOf(ctx, sb)
	if err != nil {
		return false, 0, err
	}
	switch me.of(tags, store.Spec.Guardrails.AllowRebindToRecreatedNamespace) {
	case ownedByUs:
	case unowned:
		if !createIntended(sb, bucket) {
			r.leftAlone(sb, bucket, "is not owned by this StorageBucket")
			return true, 0, nil
		}
		// Created by this object, which was deleted or stopped before tagging it.
	default:
		r.leftAlone(sb, bucket, "is not owned by this StorageBucket")
		return true, 0, nil
	}

	job := purgeJob{key: sb.UID, c: c, bucket: bucket, spend: purgeSpender{budget: r.Stores.PurgeBudget(store), now: r.Clock.Now}, lock: r.purgeLockOf(sb, store, me, c, bucket, tags)}
	switch policy {
	case bkv1.DeletionPolicyDelete:
		return r.deleteBucket(ctx, sb, patcher, job)
	case bkv1.DeletionPolicyPurge:
		if err := r.liftPolicyBeforePurge(ctx, sb, c, bucket); err != nil {
			return false, 0, err
		}
		done, err := r.purgeBucket(ctx, sb, patcher, job)
		if err != nil || !done {
			return false, r.purges.nextPassIn(sb.UID, r.Clock.Now()), err
		}
		return r.gone(sb, patcher, bucket, fmt.Sprintf("purged bucket %q", bucket))
	default:
		done, err := r.releaseBucket(ctx, sb, me, c, bucket, tags)
		return done, 0, err
	}
}

// unreadable decides on a bucket the store would not show: one it says is not there
// is absent (see absent); one these credentials may not even see cannot be one this
// object created or bound unless it recorded so, and is left alone; anything else is
// a question the store did not answer, and the deletion waits for its answer.
func (r *Reconciler) unreadable(sb *bkv1.StorageBucket, patcher *reconcile.StatusPatcher, bucket string, err error, doing string) (bool, time.Duration, error) {
	switch s3.KindOf(err) {
	case s3.KindNotFound:
		return r.absent(sb, patcher, bucket)
	case s3.KindAccessDenied:
		if knownBucket(sb) == "" {
			// Creating, adopting or binding a bucket all need access to it, and each
			// records the bucket in status (the intent before CreateBucket).
			r.leftAlone(sb, bucket, "exists, but these credentials may not access it: this StorageBucket never created or bound it")
			return true, 0, nil
		}
	}
	return false, 0, reconcile.AsStepError(err, fmt.Sprintf(doing, bucket))
}

func (r *Reconciler) leftAlone(sb *bkv1.StorageBucket, bucket, why string) {
	r.Recorder.Eventf(sb, nil, corev1.EventTypeNormal, bkv1.EventReasonBucketLeftAlone, "Delete", "bucket %s %s and was left as it is", bucket, why)
}

// absent concludes a deletion whose bucket the store says is not there: nothing to
// delete, once no CreateBucket of this object can still make it.
func (r *Reconciler) absent(sb *bkv1.StorageBucket, patcher *reconcile.StatusPatcher, bucket string) (bool, time.Duration, error) {
	if wait := r.awaitLateCreate(sb, patcher, bucket, fmt.Sprintf("bucket %q is not on the store", bucket)); wait > 0 {
		return false, wait, nil
	}
	r.Recorder.Eventf(sb, nil, corev1.EventTypeNormal, bkv1.EventReasonBucketAbsent, "Delete", "bucket %s is not on the store: nothing to delete", bucket)
	return true, 0, nil
}

// gone concludes a deletion that deleted the bucket (done says what was done), once no
// CreateBucket of this object can make it again.
func (r *Reconciler) gone(sb *bkv1.StorageBucket, patcher *reconcile.StatusPatcher, bucket, done string) (bool, time.Duration, error) {
	if wait := r.awaitLateCreate(sb, patcher, bucket, done); wait > 0 {
		return false, wait, nil
	}
	return true, 0, nil
}

// awaitLateCreate returns how long a CreateBucket of sb that went unanswered may still
// land (zero: none can), and while one may, says so on Ready (state is what the
// deletion found) and announces it when that is new.
func (r *Reconciler) awaitLateCreate(sb *bkv1.StorageBucket, patcher *reconcile.StatusPatcher, bucket, state string) time.Duration {
	landBy := r.createsLandBy(sb)
	wait := landBy.Sub(r.Clock.Now())
	if wait <= 0 {
		return 0
	}
	msg := fmt.Sprintf("%s, but a CreateBucket of it sent at %s went unanswered and the store may still carry it out until %s; the deletion looks again then",
		state, sb.Status.CreateIntent.SentAt.UTC().Format(time.RFC3339), landBy.UTC().Truncate(time.Second).Add(time.Second).Format(time.RFC3339))
	if c := reconcile.FindCondition(sb.Status.Conditions, bkv1.ConditionReady); c == nil || c.Reason != bkv1.ReasonCreateUnanswered {
		patcher.AfterWrite(func() {
			r.Recorder.Eventf(sb, nil, corev1.EventTypeNormal, bkv1.ReasonCreateUnanswered, "Delete", "%s", msg)
		})
	}
	reconcile.SetCondition(&sb.Status.Conditions, sb.Generation, bkv1.ConditionReady, metav1.ConditionFalse, bkv1.ReasonCreateUnanswered, msg)
	return wait
}

// releaseBucket keeps the bucket but drops this object's UID from its tags, keeping its
// namespace's, so that only a new StorageBucket of this cluster with the same name in the
// same namespace (that namespace object, not a later one of its name) binds it again.
func (r *Reconciler) releaseBucket(ctx context.Context, sb *bkv1.StorageBucket, me owner, c s3.Client, bucket string, tags map[string]string) (bool, error) {
	released := withoutSystemTags(tags)
	delete(released, bkv1.TagUID)
	maps.Copy(released, me.releasedTags())
	if to, ok := tags[bkv1.TagMovedTo]; ok {
		released[bkv1.TagMovedTo] = to // a copy a move left behind says so still
	}
	if err := c.PutBucketTagging(ctx, bucket, released); err != nil {
		return false, reconcile.AsStepError(err, fmt.Sprintf("releasing bucket %q", bucket))
	}
	r.Recorder.Eventf(sb, nil, corev1.EventTypeNormal, bkv1.EventReasonBucketReleased, "Delete", "bucket %s retained and released for %s", bucket, claimOf(sb))
	return true, nil
}

// deleteBucket deletes the bucket if it is empty, and never anything in it. A bucket
// that is not empty waits for its owner to empty it (BucketNotEmpty), unless an object
// lock keeps versions in it, which nobody may delete until the lock ends: then the
// deletion is blocked as a Purge's is, with the same bound (deletionBlocked).
func (r *Reconciler) deleteBucket(ctx context.Context, sb *bkv1.StorageBucket, patcher *reconcile.StatusPatcher, job purgeJob) (bool, time.Duration, error) {
	bucket := job.bucket
	err := job.c.DeleteBucket(ctx, bucket)
	switch s3.KindOf(err) {
	case s3.KindNotFound:
		return r.absent(sb, patcher, bucket)
	case s3.KindNotEmpty:
		locked, lerr := surveyLocks(ctx, job, r.Clock.Now())
		if lerr != nil {
			return false, 0, lerr
		}
		if locked.versions > 0 {
			done, err := r.deletionBlocked(ctx, sb, patcher, bkv1.DeletionPolicyDelete, job, locked)
			return done, r.purges.nextPassIn(job.key, r.Clock.Now()), err
		}
		return false, 0, &reconcile.StepError{Reason: bkv1.ReasonBucketNotEmpty, Err: err,
			Message: fmt.Sprintf("bucket %q is not empty; deletionPolicy Delete deletes only an empty bucket: empty it, or set deletionPolicy Purge to delete its contents too", bucket)}
	}
	if err != nil {
		return false, 0, reconcile.AsStepError(err, fmt.Sprintf("deleting bucket %q", bucket))
	}
	r.Recorder.Eventf(sb, nil, corev1.EventTypeNormal, bkv1.EventReasonBucketDeleted, "Delete", "deleted bucket %s", bucket)
	return r.gone(sb, patcher, bucket, fmt.Sprintf("deleted bucket %q", bucket))
}

func deletionVerb(p bkv1.DeletionPolicy) string {
	switch p {
	case bkv1.DeletionPolicyDelete:
		return "deleted"
	case bkv1.DeletionPolicyPurge:
		return "purged"
	default:
		return "released"
	}
}

// liftPolicyBeforePurge deletes the bucket policy the operator set before a purge's
// first pass. A tenant's Deny of the data actions a purge lists and deletes with
// (s3:ListBucketVersions, s3:DeleteObject, s3:DeleteObjectVersion), for everyone or
// for requests without TLS, say, would otherwise refuse the operator on stores that
// apply bucket policies to its own credentials, and the claim could never be deleted.
// The policy goes with the bucket anyway. A policy the operator never set (on an
// adopted bucket) stays: a Deny there is the platform team's. A store that refuses the
// deletion (a Deny of s3:DeleteBucketPolicy written before the guardrails refused one)
// does not stop the purge: it tries, and its condition says what the store refused.
func (r *Reconciler) liftPolicyBeforePurge(ctx context.Context, sb *bkv1.StorageBucket, c s3.Client, bucket string) error {
	managed := managedConfigOf(sb, bucket)
	if !managed.exclusive && !managed.applied.Policy || r.purges.policyLifted(sb.UID) {
		return nil
	}
	err := c.DeleteBucketPolicy(ctx, bucket)
	switch kind := s3.KindOf(err); {
	case err == nil, kind == s3.KindNotImplemented, kind == s3.KindNotFound:
	case kind == s3.KindAccessDenied:
		log.FromContext(ctx).Info("the store refused the deletion of the bucket's policy before its purge; purging under it", "bucket", bucket, "error", err)
	default:
		return reconcile.AsStepError(err, fmt.Sprintf("deleting the policy of bucket %q to purge it", bucket))
	}
	r.purges.liftPolicy(sb.UID)
	return nil
}
