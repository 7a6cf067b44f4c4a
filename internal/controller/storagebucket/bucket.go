package storagebucket

import (
	"context"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/reconcile"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
	stores "github.com/bucketkeeper/bucketkeeper/internal/store"
)

// reconcileBucket makes sure the bucket exists and belongs to this claim. Only a bucket
// carrying this claim's tags counts as "already done"; anything else is either adopted
// (when allowed) or left untouched with a condition that says why.
func (r *Reconciler) reconcileBucket(ctx context.Context, scope *bucketScope) error {
	sb := scope.sb
	if !scope.syncing {
		return nil // the last verdict stands (decideSync)
	}
	// From "does it exist" to "it is tagged ours", one claim at a time per name.
	defer r.names.lock(scope.store.Spec.Endpoint + "\x00" + scope.bucket)()

	tags, err := headBucket(ctx, scope.s3, scope.bucket)
	switch s3.KindOf(err) {
	case s3.KindNotFound:
		return r.createBucket(ctx, scope)
	case s3.KindAccessDenied:
		return reconcile.Terminalf(bkv1.ReasonBucketNameTaken, "bucket %q exists but these credentials may not access it: it belongs to another account", scope.bucket)
	}
	if err != nil {
		return reconcile.AsStepError(err, fmt.Sprintf("checking bucket %q", scope.bucket))
	}

	if tags == nil {
		if tags, err = scope.s3.GetBucketTagging(ctx, scope.bucket); err != nil {
			return reconcile.AsStepError(err, fmt.Sprintf("reading tags of bucket %q", scope.bucket))
		}
	}
	me := scope.owner
	switch me.of(tags, scope.store.Spec.Guardrails.AllowRebindToRecreatedNamespace) {
	case ownedByUs:
		if (tags[bkv1.TagCluster] == "" && me.cluster != "") || !me.recordsNamespace(tags) {
			// Tagged before cluster tags, or namespace UIDs, were recorded.
			if err := r.tagOwner(ctx, scope, tags); err != nil {
				return err
			}
		}
		reason, format := ownedReason(sb, scope.bucket)
		r.provisioned(scope, reason, format)
		return nil
	case released:
		if err := r.confirmNamespace(ctx, scope); err != nil {
			return err
		}
		// A copy a move left behind (Retain and Delete release it frozen and tagged
		// moved-to), or a source whose claim went during a cutover, still holds the
		// move's freeze, which the stores hold even the operator to: bound as it is,
		// neither the claim's keys nor its probe could write. It is to be this claim's
		// home now, so the freeze goes first (a crash before the tagging leaves a
		// thawed released bucket for the next pass to bind, never a bound one frozen
		// for good), and the moved-to tag with the tagging.
		if err := thawBucket(ctx, scope.s3, scope.bucket); err != nil {
			return err
		}
		tags = maps.Clone(tags)
		delete(tags, bkv1.TagMovedTo)
		if err := r.tagOwner(ctx, scope, tags); err != nil {
			return err
		}
		r.provisioned(scope, bkv1.ReasonBucketBound, "released bucket %q bound again to this StorageBucket")
		r.Recorder.Eventf(sb, nil, corev1.EventTypeNormal, bkv1.ReasonBucketBound, "Bind", "bound released bucket %s", scope.bucket)
		return nil
	case otherCluster:
		return reconcile.Terminalf(bkv1.ReasonOwnedByAnotherCluster, "bucket %q belongs to another cluster sharing this store; it is never taken over", scope.bucket)
	case ownedByOther:
		return reconcile.Terminalf(bkv1.ReasonOwnedByAnotherClaim, "bucket %q belongs to another StorageBucket; it is never taken over", scope.bucket)
	}

	// Unowned. Our own earlier create, interrupted before tagging, is finished now.
	if createIntended(sb, scope.bucket) {
		if err := r.tagOwner(ctx, scope, tags); err != nil {
			return err
		}
		r.provisioned(scope, bkv1.ReasonBucketCreated, createdMessage)
		r.Recorder.Eventf(sb, nil, corev1.EventTypeNormal, bkv1.ReasonBucketCreated, "Create", "created bucket %s", scope.bucket)
		return nil
	}
	if sb.Spec.Adoption != bkv1.AdoptionIfUnowned {
		return reconcile.Terminalf(bkv1.ReasonBucketNotOwned, "bucket %q already exists and was not created by bucketkeeper; set spec.adoption: IfUnowned to take it over, where the ObjectStore's guardrails allow adoption", scope.bucket)
	}
	if err := r.checkAdoptionAllowed(ctx, scope); err != nil {
		return err
	}
	if err := r.checkAdoptionOwner(ctx, scope); err != nil {
		return err
	}
	if err := r.tagOwner(ctx, scope, tags); err != nil {
		return err
	}
	r.provisioned(scope, bkv1.ReasonBucketAdopted, adoptedMessage)
	r.Recorder.Eventf(sb, nil, corev1.EventTypeNormal, bkv1.ReasonBucketAdopted, "Adopt", "adopted pre-existing bucket %s", scope.bucket)
	return nil
}

// The Provisioned messages of a bucket this claim created or adopted: the pass that did
// it and a retry that finds its tags already there (ownedReason) say the same.
const (
	createdMessage = "bucket %q created"
	adoptedMessage = "pre-existing bucket %q adopted"
)

// ownedReason says why a bucket already tagged as this claim's is provisioned, for a
// Provisioned condition not yet true (a true one keeps its reason: provisioned). The pass
// that tagged it recorded no reason when its status write lost to a newer copy of the
// object (a conflict, then a retry that finds the tags already there), yet the status it
// started from still tells: this object's create intent, or its consent to adopt.
func ownedReason(sb *bkv1.StorageBucket, bucket string) (reason, format string) {
	switch {
	case createIntended(sb, bucket):
		return bkv1.ReasonBucketCreated, createdMessage
	case sb.Spec.Adoption == bkv1.AdoptionIfUnowned:
		return bkv1.ReasonBucketAdopted, adoptedMessage
	}
	return bkv1.ReasonBucketBound, "bucket %q is owned by this StorageBucket"
}

// createIntended says whether this very object (not an earlier one of the same name)
// recorded, in its status, that it was about to create bucket.
func createIntended(sb *bkv1.StorageBucket, bucket string) bool {
	intent := sb.Status.CreateIntent
	return intent != nil && intent.BucketName == bucket && intent.UID == sb.UID
}

func (r *Reconciler) createBucket(ctx context.Context, scope *bucketScope) error {
	sb := scope.sb
	if scope.adoptOnly {
		return reconcile.Terminalf(bkv1.ReasonBucketNameNotAllowed, "bucket %q does not exist, and a name outside namespace %q's lane may adopt an existing bucket but not create one (guardrails.allowBucketNamesOutsideNamespace is off)",
			scope.bucket, sb.Namespace)
	}
	recreating := sb.Status.BucketName == scope.bucket && reconcile.ConditionIsTrue(sb.Status.Conditions, bkv1.ConditionProvisioned)
	if !recreating {
		if err := refuseNewBucketOn(scope.store); err != nil {
			return err
		}
	}
	// An earlier CreateBucket of this claim whose answer was lost may still land.
	earlier := r.createsLandBy(sb)

	// Recorded in status, which tenants cannot write, and written now rather than at
	// the end of the pass, before every CreateBucket: once one is sent, a crash or a
	// deletion must still find the proof that the bucket is this object's work, and
	// when it was sent (until when it may still appear, see creates.go).
	sentAt := metav1.NewTime(r.Clock.Now()).Rfc3339Copy()
	sb.Status.CreateIntent = &bkv1.CreateIntent{BucketName: scope.bucket, UID: sb.UID, ObjectStore: scope.store.Name, SentAt: &sentAt}
	if err := scope.patcher.WriteNow(ctx); err != nil {
		return fmt.Errorf("recording the intent to create bucket %q: %w", scope.bucket, err)
	}

	r.creates.sending(client.ObjectKeyFromObject(sb), sb)
	err := createBucketCall(scope)(ctx, scope.bucket, scope.region)
	landBy := earlier
	if s3.Unanswered(err) {
		landBy = later(landBy, r.Clock.Now().Add(r.createSettleTime()))
	}
	r.creates.ended(client.ObjectKeyFromObject(sb), sb.UID, sentAt.Time, landBy)
	switch s3.KindOf(err) {
	case s3.KindBucketNameTaken:
		// Another account's: nothing was created, and no earlier create of ours can
		// make a bucket that account owns.
		sb.Status.CreateIntent = nil
		return reconcile.Terminalf(bkv1.ReasonBucketNameTaken, "bucket name %q is taken by another account; choose another spec.bucketName", scope.bucket)
	case s3.KindAlreadyOwnedByYou:
		if earlier.After(r.Clock.Now()) {
			// Most likely this object's own earlier CreateBucket, whose answer was
			// lost, landing after our HEAD: the intent stays, and the next pass finds
			// the bucket untagged and finishes the creation.
			return reconcile.AsStepError(err, fmt.Sprintf("bucket %q appeared while creating it, where an earlier CreateBucket of this StorageBucket went unanswered", scope.bucket))
		}
		// Created by someone else with these credentials between our HEAD and CREATE:
		// not our work, so the intent goes, and the next pass decides by tags as for
		// any existing bucket.
		sb.Status.CreateIntent = nil
		return reconcile.AsStepError(err, fmt.Sprintf("bucket %q appeared while creating it", scope.bucket))
	}
	if err != nil {
		return reconcile.AsStepError(err, fmt.Sprintf("creating bucket %q in region %q", scope.bucket, scope.region))
	}
	answered(sb.Status.CreateIntent, landBy, r.Clock.Now())
	if err := r.tagOwner(ctx, scope, nil); err != nil {
		return err
	}
	scope.created = true
	if recreating {
		r.provisioned(scope, bkv1.ReasonBucketRecreated, "bucket %q had disappeared and was created again")
		r.Recorder.Eventf(sb, nil, corev1.EventTypeWarning, bkv1.ReasonBucketRecreated, "Create", "bucket %s had disappeared from the store and was created again (empty)", scope.bucket)
		return nil
	}
	r.provisioned(scope, bkv1.ReasonBucketCreated, createdMessage)
	r.Recorder.Eventf(sb, nil, corev1.EventTypeNormal, bkv1.ReasonBucketCreated, "Create", "created bucket %s in region %s", scope.bucket, scope.region)
	return nil
}

// confirmNamespace reads the claim's namespace from the API server before a released
// bucket is bound again: the cached namespace may still be an earlier one of the same
// name, just deleted, whose retained buckets are not this one's to take.
func (r *Reconciler) confirmNamespace(ctx context.Context, scope *bucketScope) error {
	if scope.store.Spec.Guardrails.AllowRebindToRecreatedNamespace {
		return nil
	}
	ns := &corev1.Namespace{}
	if err := r.Stores.APIReader.Get(ctx, types.NamespacedName{Name: scope.sb.Namespace}, ns); err != nil {
		return err
	}
	if ns.UID != scope.owner.namespace {
		return fmt.Errorf("namespace %s is not the one the cache holds yet; will retry", scope.sb.Namespace)
	}
	return nil
}

// tagOwner adds the ownership tags, keeping the tags already there; the configuration
// step then brings the rest of the tags in line with the spec.
func (r *Reconciler) tagOwner(ctx context.Context, scope *bucketScope, existing map[string]string) error {
	tags := withoutSystemTags(existing)
	maps.Copy(tags, scope.sb.Spec.Tags)
	maps.Copy(tags, scope.owner.tags())
	if len(tags) > bkv1.MaxBucketTags {
		// Checked here, before anything is written: a pre-existing bucket's own tags
		// are kept, and with the spec's and the ownership tags they may not fit.
		return reconcile.Terminalf(bkv1.ReasonInvalidTags, "bucket %q would carry %d tags (its own, the spec's and the ownership tags); S3 allows %d: remove tags from the spec or from the bucket",
			scope.bucket, len(tags), bkv1.MaxBucketTags)
	}
	if err := scope.s3.PutBucketTagging(ctx, scope.bucket, tags); err != nil {
		return reconcile.AsStepError(err, fmt.Sprintf("tagging bucket %q as owned by %s", scope.bucket, claimOf(scope.sb)))
	}
	return nil
}

// provisioned records ownership in status. An already-true Provisioned condition keeps
// its reason, so steady-state reconciles leave the status unchanged.
func (r *Reconciler) provisioned(scope *bucketScope, reason, format string) {
	sb := scope.sb
	sb.Status.ObjectStore = scope.store.Name // where it lives: only a move changes it
	sb.Status.BucketName = scope.bucket
	sb.Status.Region = scope.region
	sb.Status.Endpoint = stores.Endpoint(scope.store, scope.region)
	if reason == bkv1.ReasonBucketBound && reconcile.ConditionIsTrue(sb.Status.Conditions, bkv1.ConditionProvisioned) {
		c := reconcile.FindCondition(sb.Status.Conditions, bkv1.ConditionProvisioned)
		reconcile.SetCondition(&sb.Status.Conditions, sb.Generation, bkv1.ConditionProvisioned, metav1.ConditionTrue, c.Reason, c.Message)
		return
	}
	reconcile.SetCondition(&sb.Status.Conditions, sb.Generation, bkv1.ConditionProvisioned, metav1.ConditionTrue, reason, fmt.Sprintf(format, scope.bucket))
}

// headBucket says whether the bucket exists and the operator may reach it: a
// HeadBucket, and where the store refuses that (AccessDenied), a read of the bucket's
// tags, which it then returns (nil when it did not read them). A HEAD is authorized as
// s3:ListBucket, a data action a tenant's policy may deny everyone (requests without
// TLS, from outside a network), and SeaweedFS and Ceph RGW hold the operator's own
// credentials to that Deny; the tags are configuration, which no policy the guardrails
// accept denies. So only a bucket the operator's credentials may not reach at all
// (another account's) refuses both, and a missing one answers NotFound to either.
func headBucket(ctx context.Context, c s3.Client, bucket string) (map[string]string, error) {
	_, err := c.HeadBucket(ctx, bucket)
	if s3.KindOf(err) != s3.KindAccessDenied {
		return nil, err
	}
	tags, terr := c.GetBucketTagging(ctx, bucket)
	if s3.KindOf(terr) == s3.KindAccessDenied {
		return nil, err // the HEAD's own answer
	}
	return tags, terr
}
