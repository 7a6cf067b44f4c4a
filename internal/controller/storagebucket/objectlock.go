package storagebucket

import (
	"context"
	"errors"
	"fmt"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/reconcile"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// Object lock (spec.objectLock) is configuration like versioning, bounded by the store
// admin's guardrails.objectLock: a mode the admin has not allowed, or a retention longer
// than the admin's longest, is refused before anything is sent. A bucket is created
// locked when the claim asks for it; an existing one is locked where its store can,
// after versioning is enabled. The default retention is read, written only when it
// differs, put back when changed by hand, and recorded in status.applied under the rule
// for settings the spec leaves out. What a deletion does with locked versions is in
// purge_lock.go.

// checkObjectLock is the store's object lock guardrail's verdict on the claim.
func checkObjectLock(sb *bkv1.StorageBucket, store *bkv1.ObjectStore) *reconcile.StepError {
	if sb.Spec.ObjectLock == nil || sb.Spec.ObjectLock.DefaultRetention == nil {
		return nil
	}
	rails := &store.Spec.Guardrails.ObjectLock
	r := sb.Spec.ObjectLock.DefaultRetention
	if !rails.ModeAllowed(r.Mode) {
		allowed := rails.AllowedModes
		if len(allowed) == 0 {
			allowed = []bkv1.ObjectLockMode{bkv1.ObjectLockGovernance}
		}
		why := ""
		if r.Mode == bkv1.ObjectLockCompliance {
			why = ": a Compliance retention cannot be lifted by anyone, the store's admin included, so only the admin can allow it"
		}
		return reconcile.Terminalf(bkv1.ReasonObjectLockNotAllowed, "objectLock.defaultRetention mode %s is not among ObjectStore %q's guardrails.objectLock.allowedModes %v%s",
			r.Mode, store.Name, allowed, why)
	}
	if limit := rails.MaxRetentionDays; limit != nil && r.RetentionDays() > int64(*limit) {
		return reconcile.Terminalf(bkv1.ReasonObjectLockNotAllowed, "objectLock.defaultRetention (%s) is longer than ObjectStore %q's guardrails.objectLock.maxRetentionDays (%d days; a year counts 365)",
			r, store.Name, *limit)
	}
	return nil
}

// createBucketCall is the call that creates the claim's bucket: with object lock when
// the claim asks for it, since S3 turns it on most surely at creation.
func createBucketCall(scope *bucketScope) func(ctx context.Context, bucket, region string) error {
	if scope.sb.Spec.ObjectLock != nil {
		return scope.s3.CreateBucketWithObjectLock
	}
	return scope.s3.CreateBucket
}

// desiredVersioning is the versioning the spec asks for: object lock needs it Enabled
// (admission refuses Suspended with it).
func desiredVersioning(sb *bkv1.StorageBucket) s3.VersioningStatus {
	if sb.Spec.ObjectLock != nil {
		return s3.VersioningEnabled
	}
	return s3.VersioningStatus(sb.Spec.Versioning)
}

// objectLockSettings is the object lock setting of a spec, if the operator has anything
// to read or write: a spec asking for object lock, a default retention the operator
// set, or a bucket it did not create, whose object lock status reports (adopted with a
// lock, it keeps it). A bucket this claim created without object lock has none.
func objectLockSettings(sb *bkv1.StorageBucket, managed managedConfig) []setting {
	spec := sb.Spec.ObjectLock
	if spec == nil && managed.exclusive && !managed.applied.ObjectLockRetention {
		sb.Status.ObjectLock = nil
		return nil
	}
	var want *bkv1.ObjectLockRetention
	if spec != nil {
		want = spec.DefaultRetention
	}
	mine := managed.exclusive || managed.applied.ObjectLockRetention
	return []setting{{name: "object lock", apply: objectLockSetting(sb, want, mine),
		record: func(a *bkv1.AppliedConfiguration) { a.ObjectLockRetention = want != nil && !managed.exclusive }}}
}

// objectLockSetting brings the bucket's object lock in line: on where the spec asks for
// it, the default retention the spec's (or, when the spec has none, removed if it is
// the operator's and kept otherwise). What the bucket then has goes to status.objectLock.
// A store that cannot lock this bucket (no object lock, or none on a bucket created
// without it) is reported as not supporting it.
func objectLockSetting(sb *bkv1.StorageBucket, want *bkv1.ObjectLockRetention, mine bool) func(context.Context, s3.Client, string) (bool, error) {
	asked := sb.Spec.ObjectLock != nil
	return func(ctx context.Context, c s3.Client, bucket string) (bool, error) {
		have, err := c.GetObjectLockConfiguration(ctx, bucket)
		if err != nil {
			if !asked && s3.KindOf(err) == s3.KindNotImplemented {
				sb.Status.ObjectLock = nil
				return false, nil // nothing asked, nothing the store could hold
			}
			return false, err
		}
		next := have
		switch {
		case !have.Enabled && !asked:
			sb.Status.ObjectLock = nil
			return false, nil
		case want != nil:
			next.DefaultRetention = s3Retention(want)
		case mine:
			next.DefaultRetention = nil
		}
		next.Enabled = true
		if have.Enabled && sameRetention(have.DefaultRetention, next.DefaultRetention) {
			sb.Status.ObjectLock = lockStatus(have)
			return false, nil
		}
		if err := c.PutObjectLockConfiguration(ctx, bucket, next); err != nil {
			var refused *s3.Error
			if !have.Enabled && errors.As(err, &refused) && (refused.Kind == s3.KindInvalid || refused.Kind == s3.KindNotImplemented) {
				// The store keeps this bucket unlocked (its versioning is enabled by
				// now): it cannot turn object lock on for a bucket that exists.
				unsupported := *refused
				unsupported.Kind = s3.KindNotImplemented
				return false, &unsupported
			}
			return false, err
		}
		sb.Status.ObjectLock = lockStatus(next)
		return true, nil
	}
}

// s3Retention is a spec's retention as S3 names it.
func s3Retention(r *bkv1.ObjectLockRetention) *s3.DefaultRetention {
	out := &s3.DefaultRetention{Mode: s3.RetentionGovernance}
	if r.Mode == bkv1.ObjectLockCompliance {
		out.Mode = s3.RetentionCompliance
	}
	if r.Years != nil {
		out.Years = *r.Years
	} else if r.Days != nil {
		out.Days = *r.Days
	}
	return out
}

func sameRetention(a, b *s3.DefaultRetention) bool {
	return a == nil && b == nil || a != nil && b != nil && *a == *b
}

// lockStatus is what status.objectLock says of a bucket's configuration.
func lockStatus(cfg s3.ObjectLockConfig) *bkv1.BucketObjectLock {
	if !cfg.Enabled {
		return nil
	}
	out := &bkv1.BucketObjectLock{}
	if d := cfg.DefaultRetention; d != nil {
		r := &bkv1.ObjectLockRetention{Mode: bkv1.ObjectLockGovernance}
		if d.Mode == s3.RetentionCompliance {
			r.Mode = bkv1.ObjectLockCompliance
		}
		if d.Years > 0 {
			r.Years = &d.Years
		} else {
			r.Days = &d.Days
		}
		out.DefaultRetention = r
	}
	return out
}

// objectLockNote ends the Configured message of a locked bucket with its lock, as found
// at this sync.
func objectLockNote(sb *bkv1.StorageBucket) string {
	lock := sb.Status.ObjectLock
	switch {
	case lock == nil:
		return ""
	case lock.DefaultRetention == nil:
		return "; object lock is on, without a default retention"
	}
	return fmt.Sprintf("; object lock is on, default retention %s", lock.DefaultRetention)
}

// lockedByDefault says whether the bucket's default retention would lock whatever is
// written to it, as its last sync found: a ReadWrite probe's canaries would pile up
// there, locked, so the probe only reads (HeadBucket).
func lockedByDefault(sb *bkv1.StorageBucket) bool {
	return sb.Status.ObjectLock != nil && sb.Status.ObjectLock.DefaultRetention != nil
}
