package mover

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// What reading locks costs a move of object lock. A pass under a writer must cost what
// changed since the last one, or it never catches up:
//
//   - a copy pass reads the source's lock of each version it copies (lockToWrite:
//     GetObjectRetention and GetObjectLegalHold, exact, which the write needs) and
//     checks the target's right after the write (checkWritten: one HEAD, which answers
//     the lock with the object). It reads no lock of a version the listings find on
//     both sides: a lock changed on the source after its version was copied is the
//     final pass's to carry.
//   - a final pass, whose source is frozen (the freeze denies s3:PutObjectRetention
//     and s3:PutObjectLegalHold too), and a verifying pass compare every version's
//     lock on both sides (lockDifference), once per version and side.
//
// A HEAD answers a version's lock (its x-amz-object-lock-* headers) in one request
// where GetObjectRetention and GetObjectLegalHold take two, but not every store's HEAD
// answers it exactly: Versity's (1.8.0) drops the fraction of a second of the
// retain-until date, and answers no lock at all for a version that is not the current
// one (it looks the lock up under the key's path, where only the current version's
// is). So each side of a shard's run (lockSide) reads with GetObjectRetention and
// GetObjectLegalHold until a locked version other than its key's current one shows
// what a HEAD answers for it: the same lock, and HEADs from then on, or less, and never
// a HEAD (a HEAD that later answers less than the store holds turns it back too). Even then a HEAD's date without a fraction of a second may
// be one cut to the second, until a HEAD of that side has answered a fraction: where
// that decides (the target's date is within the second of the source's) the source's
// date is asked for (GetObjectRetention). In the tests' stores a final pass reads a
// version's lock with one request on Ceph RGW (a HEAD), two on SeaweedFS (a HEAD and,
// its dates being whole seconds, GetObjectRetention) and two on Versity
// (GetObjectRetention and GetObjectLegalHold).

// lockSide reads the locks of one side's versions, as cheaply as its store allows.
type lockSide struct {
	c      s3.Client
	bucket string
	// head: a HEAD answered a version's lock as the store holds it (as
	// GetObjectRetention and GetObjectLegalHold did); getOnly: a HEAD answered less,
	// so this side is read without one.
	head, getOnly atomic.Bool
	// fractions: a HEAD answered a retain-until date with a fraction of a second, so
	// this side's HEADs do not cut dates to the second.
	fractions atomic.Bool
	// learning: one read is finding out what a HEAD answers; the others read without
	// one meanwhile.
	learning atomic.Bool
}

func newLockSide(c s3.Client, bucket string) *lockSide { return &lockSide{c: c, bucket: bucket} }

// read reads one version's lock (e, as a listing named it), with a HEAD where this
// side's answer it (viaHead).
func (l *lockSide) read(ctx context.Context, key string, e s3.ObjectEntry) (lock s3.ObjectLock, viaHead bool, err error) {
	if l.getOnly.Load() || !l.head.Load() {
		lock, err := lockOf(ctx, l.c, l.bucket, key, e.VersionID)
		// Learnt from a version that is not its key's current one: Versity's HEAD
		// answers the current version's lock alone.
		if err != nil || lock.IsZero() || e.IsLatest || l.getOnly.Load() || l.head.Load() || !l.learning.CompareAndSwap(false, true) {
			return lock, false, err
		}
		// The first such lock this side shows: what does a HEAD answer for it?
		if h, err := l.headLock(ctx, key, e.VersionID); err == nil {
			l.learn(h, lock)
		} else {
			l.learning.Store(false) // another version then
		}
		return lock, false, nil
	}
	lock, err = l.headLock(ctx, key, e.VersionID)
	return lock, true, err
}

// mayBeCut says whether a lock this side answered may have a retain-until date cut
// to the second: one a HEAD answered in whole seconds, on a side whose HEADs have not
// answered a fraction.
func (l *lockSide) mayBeCut(lock s3.ObjectLock, viaHead bool) bool {
	return viaHead && lock.Mode != "" && lock.RetainUntil.Nanosecond() == 0 && !l.fractions.Load()
}

// learn compares what a HEAD answered with what the version holds.
func (l *lockSide) learn(head, holds s3.ObjectLock) {
	if !sameLock(head, holds) {
		l.getOnly.Store(true)
		return
	}
	l.head.Store(true)
	if head.Mode != "" && head.RetainUntil.Nanosecond() != 0 {
		l.fractions.Store(true)
	}
}

// exact reads a version's lock as the store holds it, and learns from what a HEAD
// answered for it (read), if one did.
func (l *lockSide) exact(ctx context.Context, key, versionID string, read s3.ObjectLock, fromHead bool) (s3.ObjectLock, error) {
	lock, err := lockOf(ctx, l.c, l.bucket, key, versionID)
	if err == nil && fromHead && !sameLock(read, lock) {
		l.getOnly.Store(true)
	}
	return lock, err
}

// exactUntil is a lock a HEAD answered with the version's retention as the store
// holds it (GetObjectRetention): the HEAD's legal hold stands.
func (l *lockSide) exactUntil(ctx context.Context, key, versionID string, read s3.ObjectLock) (s3.ObjectLock, error) {
	var r s3.ObjectRetention
	err := retryTransient(ctx, func() error {
		var err error
		r, err = l.c.GetObjectRetention(ctx, l.bucket, key, versionID)
		return err
	})
	if err != nil {
		return read, err
	}
	lock := s3.ObjectLock{Mode: r.Mode, RetainUntil: r.Until, LegalHold: read.LegalHold}
	if lock.Mode == "" || lock.RetainUntil.IsZero() {
		lock.Mode, lock.RetainUntil = "", time.Time{}
	}
	if !sameLock(read, lock) {
		l.getOnly.Store(true)
	}
	return lock, nil
}

func (l *lockSide) headLock(ctx context.Context, key, versionID string) (s3.ObjectLock, error) {
	var info s3.ObjectInfo
	err := retryTransient(ctx, func() error {
		var err error
		info, err = l.c.HeadObject(ctx, l.bucket, key, s3.ReadRequest{VersionID: versionID})
		return err
	})
	return info.Lock, err
}

func sameLock(a, b s3.ObjectLock) bool {
	return a.Mode == b.Mode && a.RetainUntil.Equal(b.RetainUntil) && a.LegalHold == b.LegalHold
}

// written is what a copy wrote on the target: its version, and the lock it carried.
type written struct {
	versionID string
	lock      s3.ObjectLock
}

// checkWritten reads the lock of a version a copy just wrote on the target (a HEAD;
// GetObjectRetention and GetObjectLegalHold where a HEAD does not answer it): one
// that holds less than was written (a store that dropped the headers) is given it in
// place. A target that made the write something else, a delete marker (Versity after
// a delete marker: the HEAD answers 405), fails here.
func (s *shard) checkWritten(ctx context.Context, key string, w written) error {
	t := s.tgtLocks
	now := s.opts.Now()
	var have s3.ObjectLock
	var err error
	if t.getOnly.Load() {
		have, err = t.exact(ctx, key, w.versionID, have, false)
	} else if have, err = t.headLock(ctx, key, w.versionID); err == nil && !covers(have, w.lock, now) {
		// Less than was written: the HEAD may not tell it (or cut it).
		have, err = t.exact(ctx, key, w.versionID, have, true)
	}
	if err != nil {
		return onTarget(err)
	}
	if covers(have, w.lock, now) {
		return nil
	}
	return s.lockTarget(ctx, key, w.versionID, have, w.lock)
}

// lockDifference compares the locks of the versions a verifying listing found equal,
// pair by pair (delete markers have none), and describes the first whose target lock
// falls short of the source's, "" when every one is covered. In a final pass (fix)
// each such version is given the source's lock in place; it still counts as a
// difference, so that only a pass finding every lock covered verifies.
func (s *shard) lockDifference(ctx context.Context, key string, src, tgt []s3.ObjectEntry, fix bool) (string, error) {
	now := s.opts.Now()
	why := ""
	for i := range src {
		if src[i].IsDeleteMarker {
			continue
		}
		sl, tl, ok, err := s.versionLocks(ctx, key, src[i], tgt[i], now)
		if err != nil {
			return why, err
		}
		if ok {
			continue
		}
		if why == "" {
			why = fmt.Sprintf("lock differs: source %s, target %s", sl, tl)
		}
		if !fix {
			return why, nil
		}
		if err := s.spec.ObjectLock.check(key, sl, now); err != nil {
			return why, err
		}
		if err := s.lockTarget(ctx, key, tgt[i].VersionID, tl, writeLock(sl, now)); err != nil {
			return why, err
		}
	}
	if why != "" {
		why += " (locked as on the source now)"
	}
	return why, nil
}

// versionLocks reads one version's lock on both sides and says whether the target's
// covers the source's. When it does not, both are the locks the stores hold, read
// exactly, for the fix.
func (s *shard) versionLocks(ctx context.Context, key string, src, tgt s3.ObjectEntry, now time.Time) (sl, tl s3.ObjectLock, ok bool, err error) {
	srcID, tgtID := src.VersionID, tgt.VersionID
	// A HEAD never answers more than a version holds: a target lock read so that
	// covers the source's does.
	tl, tHead, err := s.tgtLocks.read(ctx, key, tgt)
	if err != nil {
		return sl, tl, false, onTarget(err)
	}
	sl, sHead, err := s.srcLocks.read(ctx, key, src)
	if err != nil {
		return sl, tl, false, onSource(err)
	}
	if covers(tl, sl, now) {
		if !s.srcLocks.mayBeCut(sl, sHead) || !tl.RetainUntil.Before(sl.RetainUntil.Add(time.Second)) {
			return sl, tl, true, nil
		}
		// The source's date may be cut to the second, and the target's is within it.
		if sl, err = s.srcLocks.exactUntil(ctx, key, srcID, sl); err != nil {
			return sl, tl, false, onSource(err)
		}
		if covers(tl, sl, now) {
			return sl, tl, true, nil
		}
	}
	if sl, err = s.srcLocks.exact(ctx, key, srcID, sl, sHead); err != nil {
		return sl, tl, false, onSource(err)
	}
	if tl, err = s.tgtLocks.exact(ctx, key, tgtID, tl, tHead); err != nil {
		return sl, tl, false, onTarget(err)
	}
	return sl, tl, covers(tl, sl, now), nil
}

// lockTarget gives a target version want's lock where have, its own, falls short: a
// retention only ever lengthened (Compliance stays Compliance), the legal hold set or
// lifted as want's.
func (s *shard) lockTarget(ctx context.Context, key, versionID string, have, want s3.ObjectLock) error {
	if r := strongerRetention(have, want); r != nil {
		// Only turning a Governance retention into Compliance needs the bypass;
		// lengthening one never does.
		bypass := have.Mode == s3.RetentionGovernance && r.Mode == s3.RetentionCompliance
		err := retryTransient(ctx, func() error {
			return s.stores.Target.PutObjectRetention(ctx, s.spec.Target.Bucket, key, versionID, *r, bypass)
		})
		if err != nil {
			return onTarget(err)
		}
	}
	if have.LegalHold != want.LegalHold {
		err := retryTransient(ctx, func() error {
			return s.stores.Target.PutObjectLegalHold(ctx, s.spec.Target.Bucket, key, versionID, want.LegalHold)
		})
		if err != nil {
			return onTarget(err)
		}
	}
	s.update(func(cp *Checkpoint) { cp.Counts.Locked++ })
	return nil
}
