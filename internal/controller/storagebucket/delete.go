package storagebucket

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"time"

	"golang.org/x/time/rate"
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

// purgePagesPerPass bounds the work of one Purge reconcile (1000 versions a page), so a
// huge bucket reports progress and lets other objects through the queue in between.
const purgePagesPerPass = 5

// reconcileDelete carries out the deletion policy, then releases the finalizer. Only a
// bucket this claim owns is ever touched; one that is gone or not ours needs nothing.
func (r *Reconciler) reconcileDelete(ctx context.Context, sb *bkv1.StorageBucket, patcher *reconcile.StatusPatcher) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(sb, bkv1.Finalizer) {
		return ctrl.Result{}, nil
	}
	r.synced.forget(client.ObjectKeyFromObject(sb))

	done, err := r.deleteExternal(ctx, sb, patcher)
	if err != nil {
		se := reconcile.AsStepError(err, "carrying out the deletion policy")
		if se.Reason == bkv1.ReasonBucketNotEmpty {
			r.warnDeletionBlocked(patcher, sb, se)
		}
		reconcile.SetCondition(&sb.Status.Conditions, sb.Generation, bkv1.ConditionReady, metav1.ConditionFalse, se.Reason, se.Message+abandonHint)
		if se.Terminal {
			return ctrl.Result{RequeueAfter: r.SyncInterval}, nil
		}
		return ctrl.Result{}, se
	}
	if !done {
		// A purge paced by its store's purge budget waits for it (purgeSpender).
		return ctrl.Result{RequeueAfter: max(time.Second, r.purges.nextPassIn(sb.UID, r.Clock.Now()))}, nil
	}
	r.purges.forget(sb.UID)
	if err := r.deleteConnectionSecrets(ctx, sb); err != nil {
		return ctrl.Result{}, err
	}
	err = reconcile.PatchMetadata(ctx, r.Client, sb, func(o *bkv1.StorageBucket) { controllerutil.RemoveFinalizer(o, bkv1.Finalizer) })
	return ctrl.Result{}, client.IgnoreNotFound(err)
}

// abandonHint ends every message of a blocked deletion with the way out.
var abandonHint = fmt.Sprintf("; to abandon the bucket instead, annotate this StorageBucket %s=%s", bkv1.AnnotationDeletionPolicy, bkv1.DeletionPolicyOrphan)

func (r *Reconciler) warnDeletionBlocked(patcher *reconcile.StatusPatcher, sb *bkv1.StorageBucket, se *reconcile.StepError) {
	if c := reconcile.FindCondition(sb.Status.Conditions, bkv1.ConditionReady); c != nil && c.Reason == se.Reason {
		return
	}
	patcher.AfterWrite(func() { r.Recorder.Eventf(sb, nil, corev1.EventTypeWarning, se.Reason, "Delete", "%s", se.Message) })
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

// deleteExternal returns true once nothing more needs doing on the store. It finds the
// bucket from status, the create intent, or (when a first pass was cut short before
// either was written) the name the claim would use, and acts only on a bucket whose tags
// say it is this object's, or that this object's intent proves it created.
func (r *Reconciler) deleteExternal(ctx context.Context, sb *bkv1.StorageBucket, patcher *reconcile.StatusPatcher) (bool, error) {
	if sb.Annotations[bkv1.AnnotationDeletionPolicy] == bkv1.DeletionPolicyOrphan {
		r.Recorder.Eventf(sb, nil, corev1.EventTypeWarning, bkv1.EventReasonBucketAbandoned, "Delete", "bucket %s abandoned on request (%s=%s); it was not contacted",
			knownBucket(sb), bkv1.AnnotationDeletionPolicy, bkv1.DeletionPolicyOrphan)
		return true, nil
	}
	known := knownBucket(sb)
	store := &bkv1.ObjectStore{}
	if err := r.Get(ctx, types.NamespacedName{Name: sb.Spec.ObjectStoreRef.Name}, store); err != nil {
		if !apierrors.IsNotFound(err) {
			return false, err
		}
		if known == "" || sb.Spec.DeletionPolicy == bkv1.DeletionPolicyRetain || sb.Spec.DeletionPolicy == "" {
			return true, nil // nothing was made, or nothing was to be deleted
		}
		return false, reconcile.Terminalf(bkv1.ReasonObjectStoreNotFound, "ObjectStore %q is gone, so bucket %q cannot be %s; recreate the store",
			sb.Spec.ObjectStoreRef.Name, known, deletionVerb(sb.Spec.DeletionPolicy))
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

	done, err := r.deleteOwnedBucket(ctx, sb, patcher, store, bucket, policy)
	if err != nil && (known == "" || policy == bkv1.DeletionPolicyRetain || policy == "") {
		// Retain never blocks on the store: the bucket stays either way, and a later
		// claim of the same cluster, namespace and name binds it again (see released).
		// Nor does a claim that never recorded a bucket (refused, or of another
		// account): only a status write lost after tagging leaves one behind, and the
		// same rule binds it again.
		r.Recorder.Eventf(sb, nil, corev1.EventTypeWarning, bkv1.EventReasonBucketNotReleased, "Delete", "bucket %s was left as it is: the store could not be asked (%s)",
			bucket, reconcile.AsStepError(err, "releasing").Reason)
		return true, nil
	}
	return done, err
}

// deleteOwnedBucket carries out policy on bucket if it is this object's.
func (r *Reconciler) deleteOwnedBucket(ctx context.Context, sb *bkv1.StorageBucket, patcher *reconcile.StatusPatcher, store *bkv1.ObjectStore, bucket string, policy bkv1.DeletionPolicy) (bool, error) {
	c, err := r.Stores.ClientForRegion(ctx, store, cmp.Or(sb.Status.Region, sb.Spec.Region), sb.Namespace)
	if err != nil {
		return false, err
	}
	tags, err := headBucket(ctx, c, bucket)
	if err != nil {
		if s3.KindOf(err) == s3.KindNotFound {
			return true, nil
		}
		return false, reconcile.AsStepError(err, fmt.Sprintf("checking bucket %q before deletion", bucket))
	}
	if tags == nil {
		if tags, err = c.GetBucketTagging(ctx, bucket); err != nil {
			return false, reconcile.AsStepError(err, fmt.Sprintf("reading tags of bucket %q before deletion", bucket))
		}
	}
	me, err := r.ownerOf(ctx, sb)
	if err != nil {
		return false, err
	}
	switch me.of(tags, store.Spec.Guardrails.AllowRebindToRecreatedNamespace) {
	case ownedByUs:
	case unowned:
		if !createIntended(sb, bucket) {
			r.Recorder.Eventf(sb, nil, corev1.EventTypeNormal, bkv1.EventReasonBucketLeftAlone, "Delete", "bucket %s is not owned by this StorageBucket and was left as it is", bucket)
			return true, nil
		}
		// Created by this object, which was deleted or stopped before tagging it.
	default:
		r.Recorder.Eventf(sb, nil, corev1.EventTypeNormal, bkv1.EventReasonBucketLeftAlone, "Delete", "bucket %s is not owned by this StorageBucket and was left as it is", bucket)
		return true, nil
	}

	switch policy {
	case bkv1.DeletionPolicyDelete:
		return r.deleteBucket(ctx, sb, c, bucket)
	case bkv1.DeletionPolicyPurge:
		if err := r.liftPolicyBeforePurge(ctx, sb, c, bucket); err != nil {
			return false, err
		}
		return r.purgeBucket(ctx, sb, patcher, c, bucket, purgeSpender{r.Stores.PurgeBudget(store), r.Clock.Now})
	default:
		return r.releaseBucket(ctx, sb, me, c, bucket, tags)
	}
}

// releaseBucket keeps the bucket but drops this object's UID from its tags, keeping its
// namespace's, so that only a new StorageBucket of this cluster with the same name in the
// same namespace (that namespace object, not a later one of its name) binds it again.
func (r *Reconciler) releaseBucket(ctx context.Context, sb *bkv1.StorageBucket, me owner, c s3.Client, bucket string, tags map[string]string) (bool, error) {
	released := withoutSystemTags(tags)
	delete(released, bkv1.TagUID)
	maps.Copy(released, me.releasedTags())
	if err := c.PutBucketTagging(ctx, bucket, released); err != nil {
		return false, reconcile.AsStepError(err, fmt.Sprintf("releasing bucket %q", bucket))
	}
	r.Recorder.Eventf(sb, nil, corev1.EventTypeNormal, bkv1.EventReasonBucketReleased, "Delete", "bucket %s retained and released for %s", bucket, claimOf(sb))
	return true, nil
}

func (r *Reconciler) deleteBucket(ctx context.Context, sb *bkv1.StorageBucket, c s3.Client, bucket string) (bool, error) {
	err := c.DeleteBucket(ctx, bucket)
	switch s3.KindOf(err) {
	case s3.KindNotFound:
		return true, nil
	case s3.KindNotEmpty:
		return false, &reconcile.StepError{Reason: bkv1.ReasonBucketNotEmpty, Err: err,
			Message: fmt.Sprintf("bucket %q is not empty; deletionPolicy Delete deletes only an empty bucket: empty it, or set deletionPolicy Purge to delete its contents too", bucket)}
	}
	if err != nil {
		return false, reconcile.AsStepError(err, fmt.Sprintf("deleting bucket %q", bucket))
	}
	r.Recorder.Eventf(sb, nil, corev1.EventTypeNormal, bkv1.EventReasonBucketDeleted, "Delete", "deleted bucket %s", bucket)
	return true, nil
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

// purgeBucket aborts incomplete multipart uploads and deletes every object version and
// delete marker, a few pages at a time, then the bucket. Each pass starts listing
// afresh, so an interrupted purge simply resumes. Progress goes to status and Events at
// most every purgeReportInterval (see purgeProgress), not on every pass.
func (r *Reconciler) purgeBucket(ctx context.Context, sb *bkv1.StorageBucket, patcher *reconcile.StatusPatcher, c s3.Client, bucket string, spend purgeSpender) (bool, error) {
	aborted, uploadsLeft, err := abortUploads(ctx, c, bucket, spend)
	if err != nil {
		return false, err
	}
	deleted, versionsLeft := 0, false
	var page *s3.PageToken
	for range purgePagesPerPass {
		// A listing and the deletion of its page: two requests.
		if !spend.take(2) {
			versionsLeft = true
			break
		}
		res, err := c.ListObjectVersions(ctx, bucket, page)
		if err != nil {
			return false, reconcile.AsStepError(err, fmt.Sprintf("listing objects of bucket %q to purge it", bucket))
		}
		ids := make([]s3.ObjectID, 0, len(res.Versions))
		for _, v := range res.Versions {
			ids = append(ids, s3.ObjectID{Key: v.Key, VersionID: v.VersionID})
		}
		if len(ids) > 0 {
			if err := c.DeleteObjects(ctx, bucket, ids); err != nil {
				return false, reconcile.AsStepError(err, fmt.Sprintf("purging objects of bucket %q", bucket))
			}
			deleted += len(ids)
		}
		if res.Next == nil {
			break
		}
		page, versionsLeft = res.Next, true
	}
	progress := r.purges.pass(sb.UID, deleted, aborted)
	r.purges.pace(sb.UID, spend.now().Add(spend.wait()))
	if deleted == 0 && aborted == 0 && !uploadsLeft && !versionsLeft {
		// The listings found nothing: the bucket should be empty now.
		err := c.DeleteBucket(ctx, bucket)
		switch s3.KindOf(err) {
		case s3.KindNotFound:
			r.purges.forget(sb.UID)
			return true, nil
		case s3.KindNotEmpty:
			// Written to since it was listed (or a store with hidden leftovers): the
			// next pass lists again. Not an error a person has to act on.
		default:
			if err != nil {
				return false, reconcile.AsStepError(err, fmt.Sprintf("deleting purged bucket %q", bucket))
			}
			r.purges.forget(sb.UID)
			r.Recorder.Eventf(sb, nil, corev1.EventTypeNormal, bkv1.EventReasonBucketDeleted, "Delete", "purged and deleted bucket %s (%s)", bucket, progress.totals())
			return true, nil
		}
	}
	if r.purges.reportDue(sb.UID, r.Clock.Now()) {
		msg := fmt.Sprintf("purging bucket %q: %s; %s", bucket, progress.totals(), progress.left(versionsLeft || uploadsLeft))
		reconcile.SetCondition(&sb.Status.Conditions, sb.Generation, bkv1.ConditionReady, metav1.ConditionFalse, bkv1.ReasonPurging, msg)
		patcher.AfterWrite(func() { r.Recorder.Eventf(sb, nil, corev1.EventTypeNormal, bkv1.ReasonPurging, "Delete", "%s", msg) })
	}
	return false, nil
}

// abortUploads aborts what the purge budget allows of one page of the bucket's
// incomplete multipart uploads: they hold data (and, on some stores, the bucket)
// although no listing of objects shows them. more says uploads remain. A store that
// cannot list uploads has none to abort.
func abortUploads(ctx context.Context, c s3.Client, bucket string, spend purgeSpender) (aborted int, more bool, err error) {
	if !spend.take(1) {
		return 0, true, nil
	}
	page, err := c.ListMultipartUploads(ctx, bucket, nil)
	if s3.KindOf(err) == s3.KindNotImplemented {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, reconcile.AsStepError(err, fmt.Sprintf("listing incomplete uploads of bucket %q to purge it", bucket))
	}
	for _, u := range page.Uploads {
		if !spend.take(1) {
			return aborted, true, nil
		}
		if err := c.AbortMultipartUpload(ctx, bucket, u.Key, u.UploadID); err != nil {
			return aborted, false, reconcile.AsStepError(err, fmt.Sprintf("aborting an incomplete upload in bucket %q", bucket))
		}
		aborted++
	}
	return aborted, page.Next != nil, nil
}

// purgeSpender takes a purge's requests from its store's purge budget (PurgeBudget):
// a pass sends what the budget has now and stops there; the next pass comes when it
// has some again. A nil budget takes everything.
type purgeSpender struct {
	budget *rate.Limiter
	now    func() time.Time
}

func (s purgeSpender) take(n int) bool {
	return s.budget == nil || s.budget.AllowN(s.now(), n)
}

// wait is how long until the budget has a pass's worth of requests again (zero: now).
func (s purgeSpender) wait() time.Duration {
	if s.budget == nil {
		return 0
	}
	now := s.now()
	r := s.budget.ReserveN(now, min(purgePassRequests, s.budget.Burst()))
	defer r.CancelAt(now)
	if !r.OK() {
		return 0
	}
	return r.DelayFrom(now)
}

// purgePassRequests is what a full pass sends besides its uploads' aborts: the listing
// of uploads and purgePagesPerPass listings of versions with a deletion each.
const purgePassRequests = 1 + 2*purgePagesPerPass

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
