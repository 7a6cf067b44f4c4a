package storagebucket

import (
	"context"
	"errors"
	"fmt"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/mover"
	"github.com/bucketkeeper/bucketkeeper/internal/reconcile"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// A bucket with object lock moves with its lock: the target bucket is created with
// object lock and given the source's object lock configuration, default retention
// included, before the first object is copied (ensureMoveTarget); every version and
// delete marker is copied, each version with its retention and legal hold
// (mover.LockRules); and a move toward a store that cannot hold the lock is refused
// before anything is created there: the target's guardrails.objectLock must allow the
// bucket's default retention (moveTarget) and every version's retention (the plan
// reads them all, planMove), and the store must create the bucket locked.

// hasObjectLock says whether the claim's bucket has object lock: asked for, or found
// on it by the last sync.
func hasObjectLock(sb *bkv1.StorageBucket) bool {
	return sb.Spec.ObjectLock != nil || sb.Status.ObjectLock != nil
}

// checkMoveLock is the target's object lock guardrail's verdict on the bucket's
// default retention as its store reported it (status.objectLock: an adopted bucket's
// may be none the spec names); the spec's is checkGuardrails'.
func checkMoveLock(sb *bkv1.StorageBucket, target *bkv1.ObjectStore) *reconcile.StepError {
	if sb.Status.ObjectLock == nil {
		return nil
	}
	return checkMoveRetention(sb.Status.ObjectLock.DefaultRetention, target)
}

// checkMoveRetention refuses a default retention the target's guardrails do not allow.
func checkMoveRetention(r *bkv1.ObjectLockRetention, target *bkv1.ObjectStore) *reconcile.StepError {
	if r == nil {
		return nil
	}
	rails := &target.Spec.Guardrails.ObjectLock
	if !rails.ModeAllowed(r.Mode) {
		return reconcile.Terminalf(bkv1.ReasonObjectLockNotAllowed, "the bucket's default retention (%s) has a mode ObjectStore %q's guardrails.objectLock.allowedModes %v do not allow",
			r, target.Name, lockModes(rails))
	}
	if limit := rails.MaxRetentionDays; limit != nil && r.RetentionDays() > int64(*limit) {
		return reconcile.Terminalf(bkv1.ReasonObjectLockNotAllowed, "the bucket's default retention (%s) is longer than ObjectStore %q's guardrails.objectLock.maxRetentionDays (%d days; a year counts 365)",
			r, target.Name, *limit)
	}
	return nil
}

func lockModes(rails *bkv1.ObjectLockGuardrails) []bkv1.ObjectLockMode {
	if len(rails.AllowedModes) == 0 {
		return []bkv1.ObjectLockMode{bkv1.ObjectLockGovernance}
	}
	return rails.AllowedModes
}

// moverLockRules are the target's guardrails as the mover holds every version to, nil
// for a bucket without object lock.
func moverLockRules(sb *bkv1.StorageBucket, target *bkv1.ObjectStore) *mover.LockRules {
	if !hasObjectLock(sb) {
		return nil
	}
	rails := &target.Spec.Guardrails.ObjectLock
	rules := &mover.LockRules{}
	for _, m := range lockModes(rails) {
		rules.AllowedModes = append(rules.AllowedModes, s3Retention(&bkv1.ObjectLockRetention{Mode: m}).Mode)
	}
	if rails.MaxRetentionDays != nil {
		rules.MaxRetentionDays = *rails.MaxRetentionDays
	}
	return rules
}

// lockedVersionsRefusal refuses, after the plan and before anything is created, a move
// of versions whose retention the target's guardrails do not allow.
func lockedVersionsRefusal(p *mover.Plan, target *bkv1.ObjectStore) *reconcile.StepError {
	if p.LockRefused.Count == 0 {
		return nil
	}
	return reconcile.Terminalf(bkv1.ReasonMoveNotAllowed, "%d object versions are locked as ObjectStore %q's guardrails.objectLock does not allow (%s); nothing was created there",
		p.LockRefused.Count, target.Name, p.LockRefused)
}

// moveLock reads the source bucket's object lock configuration, which the target
// takes, and refuses, before anything is created, a default retention the target's
// guardrails do not allow (set on the store by hand since the last sync, say).
func moveLock(ctx context.Context, scope *bucketScope, t *moveTargetScope) (s3.ObjectLockConfig, error) {
	want, err := scope.s3.GetObjectLockConfiguration(ctx, scope.bucket)
	if err != nil {
		if !hasObjectLock(scope.sb) && s3.KindOf(err) == s3.KindNotImplemented {
			return s3.ObjectLockConfig{}, nil // a store without object lock, a bucket without it
		}
		return want, reconcile.AsStepError(err, fmt.Sprintf("reading the object lock of bucket %q on ObjectStore %q", scope.bucket, scope.store.Name))
	}
	want.Enabled = want.Enabled || hasObjectLock(scope.sb)
	if d := want.DefaultRetention; d != nil {
		if refusal := checkMoveRetention(lockStatus(want).DefaultRetention, t.store); refusal != nil {
			return want, reconcile.Terminalf(bkv1.ReasonMoveNotAllowed, "ObjectStore %q refuses the bucket (%s): %s; nothing was created there", t.store.Name, refusal.Reason, refusal.Message)
		}
	}
	return want, nil
}

// moveTargetCreator is the call that creates the move's target bucket: locked when the
// bucket is, and a store that cannot create a locked bucket refuses the move.
func moveTargetCreator(t *moveTargetScope, lock s3.ObjectLockConfig) func(ctx context.Context, bucket, region string) error {
	if !lock.Enabled {
		return t.s3.CreateBucket
	}
	return func(ctx context.Context, bucket, region string) error {
		err := t.s3.CreateBucketWithObjectLock(ctx, bucket, region)
		var refused *s3.Error
		if errors.As(err, &refused) && (refused.Kind == s3.KindNotImplemented || refused.Kind == s3.KindInvalid) {
			return reconcile.Terminalf(bkv1.ReasonMoveNotAllowed, "ObjectStore %q cannot create bucket %q with object lock, which the bucket has: %s; nothing was created there",
				t.store.Name, bucket, refused.Summary())
		}
		return err
	}
}

// applyMoveLock gives the target bucket the source's object lock configuration before
// anything is copied into it: object lock on, and the same default retention.
func applyMoveLock(ctx context.Context, t *moveTargetScope, want s3.ObjectLockConfig) error {
	if !want.Enabled {
		return nil
	}
	have, err := t.s3.GetObjectLockConfiguration(ctx, t.bucket)
	if err != nil && s3.KindOf(err) != s3.KindNotImplemented {
		return reconcile.AsStepError(err, fmt.Sprintf("reading the object lock of bucket %q on ObjectStore %q", t.bucket, t.store.Name))
	}
	if err == nil && have.Enabled && sameRetention(have.DefaultRetention, want.DefaultRetention) {
		return nil
	}
	if err == nil {
		err = t.s3.PutObjectLockConfiguration(ctx, t.bucket, want)
	}
	var refused *s3.Error
	if errors.As(err, &refused) && !have.Enabled && (refused.Kind == s3.KindInvalid || refused.Kind == s3.KindNotImplemented) {
		return reconcile.Terminalf(bkv1.ReasonMoveNotAllowed, "ObjectStore %q cannot hold the object lock of bucket %q: %s", t.store.Name, t.bucket, refused.Summary())
	}
	if err != nil {
		return reconcile.AsStepError(err, fmt.Sprintf("setting the object lock of bucket %q on ObjectStore %q", t.bucket, t.store.Name))
	}
	return nil
}
