package mover

import (
	"context"
	"testing"
	"time"

	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// lockStore is a store's versions' locks behind s3.Client: GetObjectRetention and
// GetObjectLegalHold answer them exactly, a HEAD as the store's HEAD does. Any other
// method panics on the nil embedded interface.
type lockStore struct {
	s3.Client
	locks  map[string]s3.ObjectLock // by version ID
	latest map[string]bool
	// cut: the HEAD drops the fraction of a second; blindOld: it answers no lock for
	// a version that is not the current one (Versity 1.8.0 does both).
	cut, blindOld bool
	calls         map[string]int
}

func (f *lockStore) HeadObject(_ context.Context, _, _ string, req s3.ReadRequest) (s3.ObjectInfo, error) {
	f.calls["HeadObject"]++
	l := f.locks[req.VersionID]
	if f.blindOld && !f.latest[req.VersionID] {
		l = s3.ObjectLock{}
	}
	if f.cut {
		l.RetainUntil = l.RetainUntil.Truncate(time.Second)
	}
	return s3.ObjectInfo{ObjectMeta: s3.ObjectMeta{Lock: l}}, nil
}

func (f *lockStore) GetObjectRetention(_ context.Context, _, _, versionID string) (s3.ObjectRetention, error) {
	f.calls["GetObjectRetention"]++
	l := f.locks[versionID]
	return s3.ObjectRetention{Mode: l.Mode, Until: l.RetainUntil}, nil
}

func (f *lockStore) GetObjectLegalHold(_ context.Context, _, _, versionID string) (bool, error) {
	f.calls["GetObjectLegalHold"]++
	return f.locks[versionID].LegalHold, nil
}

func (f *lockStore) reads() int {
	return f.calls["HeadObject"] + f.calls["GetObjectRetention"] + f.calls["GetObjectLegalHold"]
}

var lockNow = time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC)

func gov(d time.Duration) s3.ObjectLock {
	return s3.ObjectLock{Mode: s3.RetentionGovernance, RetainUntil: lockNow.Add(d)}
}

// A side reads with GetObjectRetention and GetObjectLegalHold until a locked version
// other than its key's current one shows what a HEAD answers: the same lock, fraction
// included, and it reads with one HEAD from then on; less (a fraction dropped, or no
// lock for an older version), and it never asks a HEAD again.
func TestLockSideLearnsWhatAHeadAnswers(t *testing.T) {
	entry := func(id string, latest bool) s3.ObjectEntry { return s3.ObjectEntry{VersionID: id, IsLatest: latest} }
	for _, tc := range []struct {
		name          string
		cut, blindOld bool
		wantHead      bool
	}{
		{name: "a HEAD answering the lock exactly", wantHead: true},
		{name: "a HEAD dropping the fraction of a second", cut: true},
		{name: "a HEAD answering no lock for an older version", blindOld: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := &lockStore{cut: tc.cut, blindOld: tc.blindOld, calls: map[string]int{},
				locks:  map[string]s3.ObjectLock{"cur": gov(time.Hour + 250*time.Millisecond), "old": gov(2*time.Hour + 500*time.Millisecond), "next": gov(3 * time.Hour)},
				latest: map[string]bool{"cur": true}}
			side := newLockSide(store, "b")
			ctx := context.Background()
			// A current version teaches nothing: Versity's HEAD answers it alone.
			if l, viaHead, err := side.read(ctx, "k", entry("cur", true)); err != nil || viaHead || !sameLock(l, store.locks["cur"]) {
				t.Fatalf("the current version: %s via HEAD %v (%v)", l, viaHead, err)
			}
			if side.head.Load() || side.getOnly.Load() || store.calls["HeadObject"] != 0 {
				t.Fatalf("learnt from the current version: head %v, getOnly %v, %d HEADs", side.head.Load(), side.getOnly.Load(), store.calls["HeadObject"])
			}
			if l, _, err := side.read(ctx, "k", entry("old", false)); err != nil || !sameLock(l, store.locks["old"]) {
				t.Fatalf("the older version: %s (%v)", l, err)
			}
			if side.head.Load() != tc.wantHead || side.getOnly.Load() == tc.wantHead {
				t.Fatalf("after an older version: head %v, getOnly %v; want head %v", side.head.Load(), side.getOnly.Load(), tc.wantHead)
			}
			before := store.reads()
			l, viaHead, err := side.read(ctx, "k2", entry("next", false))
			if err != nil || viaHead != tc.wantHead || store.reads()-before != map[bool]int{true: 1, false: 2}[tc.wantHead] {
				t.Errorf("the next version: via HEAD %v with %d requests (%v)", viaHead, store.reads()-before, err)
			}
			if !sameLock(l, store.locks["next"]) {
				t.Errorf("the next version read as %s, holds %s", l, store.locks["next"])
			}
		})
	}
}

// A final pass's comparison is exact where a HEAD may have cut the source's date: a
// target date of the same second as the source's HEAD answer sends for the source's
// own (GetObjectRetention), which finds the target short by half a second; a target a
// second later is covered without it.
func TestVersionLocksAsksForADateAHeadMayHaveCut(t *testing.T) {
	src := &lockStore{cut: true, calls: map[string]int{}, locks: map[string]s3.ObjectLock{"s": gov(time.Hour + 500*time.Millisecond)}}
	tgt := &lockStore{calls: map[string]int{}, locks: map[string]s3.ObjectLock{"same": gov(time.Hour), "later": gov(time.Hour + time.Second)}}
	s := &shard{spec: &Spec{}, opts: Options{Now: func() time.Time { return lockNow }}, srcLocks: newLockSide(src, "a"), tgtLocks: newLockSide(tgt, "b")}
	s.srcLocks.head.Store(true) // as if a HEAD had answered a whole-second date as the store held it
	s.tgtLocks.head.Store(true)
	ctx := context.Background()
	sl, tl, ok, err := s.versionLocks(ctx, "k", s3.ObjectEntry{VersionID: "s"}, s3.ObjectEntry{VersionID: "later"}, lockNow)
	if err != nil || !ok || src.calls["GetObjectRetention"] != 0 {
		t.Errorf("a target a second past the source's HEAD date: covered %v, %d GetObjectRetention (%v)", ok, src.calls["GetObjectRetention"], err)
	}
	sl, tl, ok, err = s.versionLocks(ctx, "k", s3.ObjectEntry{VersionID: "s"}, s3.ObjectEntry{VersionID: "same"}, lockNow)
	if err != nil || ok || !sl.RetainUntil.Equal(src.locks["s"].RetainUntil) || !tl.RetainUntil.Equal(lockNow.Add(time.Hour)) {
		t.Errorf("a target of the source's HEAD second: covered %v, source %s, target %s (%v); want short", ok, sl, tl, err)
	}
	if !s.srcLocks.getOnly.Load() {
		t.Error("a HEAD found to cut a date is still asked")
	}
}
