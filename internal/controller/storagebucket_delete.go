package controller

import (
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

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// purgePagesPerPass bounds the work of one Purge reconcile (1000 versions a page), so a
// huge bucket reports progress and lets other objects through the queue in between.
const purgePagesPerPass = 5

// reconcileDelete carries out the deletion policy, then releases the finalizer. Only a
// bucket this claim owns is ever touched; one that is gone or not ours needs nothing.
func (r *StorageBucketReconciler) reconcileDelete(ctx context.Context, sb *bkv1.StorageBucket, patcher *statusPatcher) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(sb, bkv1.Finalizer) {
		return ctrl.Result{}, nil
	}
	r.synced.forget(client.ObjectKeyFromObject(sb))

	done, err := r.deleteExternal(ctx, sb)
	if err != nil {
		se := asStepError(err, "carrying out the deletion policy")
		if se.Reason == bkv1.ReasonBucketNotEmpty {
			r.warnDeletionBlocked(patcher, sb, se)
		}
		setCondition(&sb.Status.Conditions, sb.Generation, bkv1.ConditionReady, metav1.ConditionFalse, se.Reason, se.Message)
		if se.Terminal {
			return ctrl.Result{RequeueAfter: r.SyncInterval}, nil
		}
		return ctrl.Result{}, se
	}
	if !done {
		return ctrl.Result{RequeueAfter: time.Second}, nil
	}
	if err := r.deleteConnectionSecrets(ctx, sb); err != nil {
		return ctrl.Result{}, err
	}
	err = patchMetadata(ctx, r.Client, sb, func(o *bkv1.StorageBucket) { controllerutil.RemoveFinalizer(o, bkv1.Finalizer) })
	return ctrl.Result{}, client.IgnoreNotFound(err)
}

func (r *StorageBucketReconciler) warnDeletionBlocked(patcher *statusPatcher, sb *bkv1.StorageBucket, se *stepError) {
	if c := findCondition(sb.Status.Conditions, bkv1.ConditionReady); c != nil && c.Reason == se.Reason {
		return
	}
	patcher.afterWrite(func() { r.Recorder.Eventf(sb, nil, corev1.EventTypeWarning, se.Reason, "Delete", "%s", se.Message) })
}

// deleteExternal returns true once nothing more needs doing on the store.
func (r *StorageBucketReconciler) deleteExternal(ctx context.Context, sb *bkv1.StorageBucket) (bool, error) {
	bucket := sb.Status.BucketName
	if bucket == "" {
		return true, nil // ownership of a bucket was never established
	}
	store := &bkv1.ObjectStore{}
	if err := r.Get(ctx, types.NamespacedName{Name: sb.Spec.ObjectStoreRef.Name}, store); err != nil {
		if apierrors.IsNotFound(err) {
			return false, terminalf(bkv1.ReasonObjectStoreNotFound, "ObjectStore %q is gone, so bucket %q cannot be %s; recreate the store, or remove the finalizer %s by hand to abandon the bucket",
				sb.Spec.ObjectStoreRef.Name, bucket, deletionVerb(sb.Spec.DeletionPolicy), bkv1.Finalizer)
		}
		return false, err
	}
	c, err := r.Stores.ClientFor(ctx, store)
	if err != nil {
		return false, err
	}
	if _, err := c.HeadBucket(ctx, bucket); err != nil {
		if s3.KindOf(err) == s3.KindNotFound {
			return true, nil
		}
		return false, asStepError(err, fmt.Sprintf("checking bucket %q before deletion", bucket))
	}
	tags, err := c.GetBucketTagging(ctx, bucket)
	if err != nil {
		return false, asStepError(err, fmt.Sprintf("reading tags of bucket %q before deletion", bucket))
	}
	if ownershipOf(tags, claimOf(sb), sb.UID) != ownedByUs {
		r.Recorder.Eventf(sb, nil, corev1.EventTypeNormal, "BucketLeftAlone", "Delete", "bucket %s is not owned by this StorageBucket and was left as it is", bucket)
		return true, nil
	}

	switch sb.Spec.DeletionPolicy {
	case bkv1.DeletionPolicyDelete:
		return r.deleteBucket(ctx, sb, c, bucket)
	case bkv1.DeletionPolicyPurge:
		return r.purgeBucket(ctx, sb, c, bucket)
	default:
		return r.releaseBucket(ctx, sb, c, bucket, tags)
	}
}

// releaseBucket keeps the bucket but drops this object's UID from its tags, so that only
// a new StorageBucket with the same namespace and name can bind it again.
func (r *StorageBucketReconciler) releaseBucket(ctx context.Context, sb *bkv1.StorageBucket, c s3.Client, bucket string, tags map[string]string) (bool, error) {
	released := maps.Clone(tags)
	delete(released, bkv1.TagUID)
	if err := c.PutBucketTagging(ctx, bucket, released); err != nil {
		return false, asStepError(err, fmt.Sprintf("releasing bucket %q", bucket))
	}
	r.Recorder.Eventf(sb, nil, corev1.EventTypeNormal, "BucketReleased", "Delete", "bucket %s retained and released for %s", bucket, claimOf(sb))
	return true, nil
}

func (r *StorageBucketReconciler) deleteBucket(ctx context.Context, sb *bkv1.StorageBucket, c s3.Client, bucket string) (bool, error) {
	err := c.DeleteBucket(ctx, bucket)
	switch s3.KindOf(err) {
	case s3.KindNotFound:
		return true, nil
	case s3.KindNotEmpty:
		return false, &stepError{Reason: bkv1.ReasonBucketNotEmpty, Err: err,
			Message: fmt.Sprintf("bucket %q is not empty; deletionPolicy Delete only deletes empty buckets: empty it, or set deletionPolicy: Purge", bucket)}
	}
	if err != nil {
		return false, asStepError(err, fmt.Sprintf("deleting bucket %q", bucket))
	}
	r.Recorder.Eventf(sb, nil, corev1.EventTypeNormal, "BucketDeleted", "Delete", "deleted bucket %s", bucket)
	return true, nil
}

// purgeBucket deletes every object version and delete marker a few pages at a time, then
// the bucket. Each pass starts listing afresh, so an interrupted purge simply resumes.
func (r *StorageBucketReconciler) purgeBucket(ctx context.Context, sb *bkv1.StorageBucket, c s3.Client, bucket string) (bool, error) {
	deleted := 0
	var page *s3.PageToken
	for range purgePagesPerPass {
		res, err := c.ListObjectVersions(ctx, bucket, page)
		if err != nil {
			return false, asStepError(err, fmt.Sprintf("listing objects of bucket %q to purge it", bucket))
		}
		ids := make([]s3.ObjectID, 0, len(res.Versions))
		for _, v := range res.Versions {
			ids = append(ids, s3.ObjectID{Key: v.Key, VersionID: v.VersionID})
		}
		if len(ids) > 0 {
			if err := c.DeleteObjects(ctx, bucket, ids); err != nil {
				return false, asStepError(err, fmt.Sprintf("purging objects of bucket %q", bucket))
			}
			deleted += len(ids)
		}
		if res.Next == nil {
			if deleted == 0 {
				return r.deleteBucket(ctx, sb, c, bucket)
			}
			break // the next pass lists again and confirms the bucket is empty
		}
		page = res.Next
	}
	msg := fmt.Sprintf("purging bucket %q: deleted %d object versions in this pass, more may remain", bucket, deleted)
	setCondition(&sb.Status.Conditions, sb.Generation, bkv1.ConditionReady, metav1.ConditionFalse, bkv1.ReasonPurging, msg)
	r.Recorder.Eventf(sb, nil, corev1.EventTypeNormal, bkv1.ReasonPurging, "Delete", "%s", msg)
	return false, nil
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
