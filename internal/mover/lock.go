package mover

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// Object lock. A bucket with object lock (Spec.ObjectLock) moves with what locks each
// version: its retention (mode and retain-until date) and its legal hold. The
// controller gives the target bucket the source's object lock configuration, default
// retention included, before the first pass writes into it; the mover then:
//
//   - writes every version with the source's lock in the same request (the
//     x-amz-object-lock-* headers of PutObject and CreateMultipartUpload), so no
//     version exists on the target without it, its retain-until date rounded up to a
//     whole second so that a store keeping seconds never shortens it;
//   - refuses, as a failure of its key, a version whose lock the target's guardrails
//     do not allow (LockRules): the plan pass reads every version's lock before
//     anything is created, and the controller refuses such a move then;
//   - checks the lock of each version it writes right after the write, and compares
//     every version's lock on both sides only in a final pass, whose source is frozen
//     (lockread.go): a target version whose lock holds less than the source's (a
//     retention shorter or weaker, a legal hold the source has or has lifted) is
//     given the source's in place (PutObjectRetention, PutObjectLegalHold) and counted
//     as a difference, so a final pass verifies only when every version is locked on
//     the target at least as long as on the source.
//
// A target may lock a version longer than its source does: a version written before
// the bucket's default retention is unlocked on the source, yet the target applies
// its default retention to its copy (S3 has no way to write a version without it).
// Versity S3 Gateway gives versions written under its default retention no retention
// of their own (its default locks the whole bucket from when it was set), so a version
// read from it shows none: on the target it gets the default retention from the copy,
// later than the source's started.

// LockRules are what the target store's guardrails (guardrails.objectLock) let a
// version moved into it be locked with.
type LockRules struct {
	// AllowedModes are the retention modes the target allows ("GOVERNANCE",
	// "COMPLIANCE"); a version retained in another fails.
	AllowedModes []s3.RetentionMode `json:"allowedModes"`
	// MaxRetentionDays is the longest retention the target allows, counted from the
	// write; 0: S3's own.
	MaxRetentionDays int32 `json:"maxRetentionDays,omitempty"`
}

// lockRefused is a version whose lock the target's guardrails do not allow: its key's
// failure, which no retry fixes.
type lockRefused struct{ msg string }

func (e *lockRefused) Error() string { return e.msg }

// check refuses a lock the target may not hold. An ended retention is none.
func (r *LockRules) check(key string, l s3.ObjectLock, now time.Time) error {
	if r == nil || l.Mode == "" || !l.RetainUntil.After(now) {
		return nil
	}
	if !slices.Contains(r.AllowedModes, l.Mode) {
		return &lockRefused{fmt.Sprintf("key %s is retained in %s mode until %s, which the target's guardrails.objectLock.allowedModes %v do not allow",
			quoteKey(key), l.Mode, l.RetainUntil.UTC().Format(time.RFC3339), r.AllowedModes)}
	}
	if max := time.Duration(r.MaxRetentionDays) * 24 * time.Hour; r.MaxRetentionDays > 0 && l.RetainUntil.Sub(now) > max {
		return &lockRefused{fmt.Sprintf("key %s is retained until %s, longer than the target's guardrails.objectLock.maxRetentionDays (%d days)",
			quoteKey(key), l.RetainUntil.UTC().Format(time.RFC3339), r.MaxRetentionDays)}
	}
	return nil
}

// writeLock is the lock a copy is written with: the source's retention while it
// lasts, its date rounded up to a whole second, and its legal hold.
func writeLock(l s3.ObjectLock, now time.Time) s3.ObjectLock {
	out := s3.ObjectLock{LegalHold: l.LegalHold}
	if l.Mode != "" && l.RetainUntil.After(now.Add(time.Second)) {
		out.Mode, out.RetainUntil = l.Mode, ceilSecond(l.RetainUntil)
	}
	return out
}

func ceilSecond(t time.Time) time.Time {
	if c := t.Truncate(time.Second); !c.Equal(t) {
		return c.Add(time.Second)
	}
	return t
}

// covers says whether the target's lock of a version holds it at least as the
// source's does: the same legal hold, and while the source's retention lasts, one
// as strong (Compliance for Compliance) until no earlier.
func covers(tgt, src s3.ObjectLock, now time.Time) bool {
	if tgt.LegalHold != src.LegalHold {
		return false
	}
	if src.Mode == "" || !src.RetainUntil.After(now) {
		return true
	}
	if tgt.Mode == "" || (src.Mode == s3.RetentionCompliance && tgt.Mode != s3.RetentionCompliance) {
		return false
	}
	return !tgt.RetainUntil.Before(src.RetainUntil)
}

// lockToWrite is the lock a copy of a source version is written with: the source's,
// read exactly (lockOf), refused where the target's rules do not allow it.
func (s *shard) lockToWrite(ctx context.Context, key, versionID string) (s3.ObjectLock, error) {
	lock, err := lockOf(ctx, s.stores.Source, s.spec.Source.Bucket, key, versionID)
	if err != nil {
		return lock, onSource(err)
	}
	now := s.opts.Now()
	if err := s.spec.ObjectLock.check(key, lock, now); err != nil {
		return lock, err
	}
	return writeLock(lock, now), nil
}

// lockOf reads what locks one version with GetObjectRetention and GetObjectLegalHold,
// which every store answers to the second or better (a HEAD tells it in one request
// where the store answers it exactly: lockread.go; Versity's GET tells nothing).
func lockOf(ctx context.Context, c s3.Client, bucket, key, versionID string) (s3.ObjectLock, error) {
	var l s3.ObjectLock
	err := retryTransient(ctx, func() error {
		r, err := c.GetObjectRetention(ctx, bucket, key, versionID)
		if err != nil {
			return err
		}
		hold, err := c.GetObjectLegalHold(ctx, bucket, key, versionID)
		l = s3.ObjectLock{Mode: r.Mode, RetainUntil: r.Until, LegalHold: hold}
		return err
	})
	if l.Mode != "" && l.RetainUntil.IsZero() {
		l.Mode = "" // a retention without a date holds nothing
	}
	return l, err
}

// strongerRetention is the retention that holds a target version as long as both its
// own and want do (retentions are only ever lengthened, and Compliance stays
// Compliance), nil when its own already does.
func strongerRetention(have, want s3.ObjectLock) *s3.ObjectRetention {
	if want.Mode == "" {
		return nil
	}
	mode, until := want.Mode, want.RetainUntil
	if have.Mode == s3.RetentionCompliance {
		mode = s3.RetentionCompliance
	}
	if have.Mode != "" && have.RetainUntil.After(until) {
		until = have.RetainUntil
	}
	if mode == have.Mode && until.Equal(have.RetainUntil) {
		return nil
	}
	return &s3.ObjectRetention{Mode: mode, Until: until}
}
