package mover_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/bucketkeeper/bucketkeeper/internal/mover"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// lockReads are the requests that read a version's lock.
var lockReads = []string{"HeadObject", "GetObjectRetention", "GetObjectLegalHold"}

// TestMoveReadsTheLocksOfWhatChangedOnly moves a locked bucket of 40 versions between
// every pair of stores and counts the requests that read a version's lock on each
// side, pass by pass: a copy pass reads the source's lock of each version it copies
// and checks the target's right after the write (at most two requests each side per
// copied version), none for a version already there, so a pass under a writer costs
// what changed; a final pass reads every version's lock once per side (at most two
// requests per version, one where the store answers the lock on a HEAD to the
// fraction of a second), and verifies.
func TestMoveReadsTheLocksOfWhatChangedOnly(t *testing.T) {
	for _, pair := range everyPair() {
		t.Run(string(pair[0].Kind)+"-to-"+string(pair[1].Kind), func(t *testing.T) {
			t.Parallel()
			testMoveReadsTheLocksOfWhatChangedOnly(t, pair[0], pair[1])
		})
	}
}

func testMoveReadsTheLocksOfWhatChangedOnly(t *testing.T, from, to *testenv.S3Server) {
	ctx := context.Background()
	src := newLockedBucket(t, from)
	src.setDefault(t, 1)
	const keys = 38
	for i := range keys {
		key := fmt.Sprintf("k/%02d", i)
		must(t, key, src.putLocked(ctx, key, 10, s3.ObjectLock{}))
	}
	must(t, "held", src.putLocked(ctx, "held", 10, s3.ObjectLock{LegalHold: true}))
	must(t, "own", src.putLocked(ctx, "own", 10, s3.ObjectLock{Mode: s3.RetentionGovernance, RetainUntil: time.Now().Add(30 * time.Hour).Add(250 * time.Millisecond)}))
	versions := keys + 2
	tgt := newLockedBucket(t, to)
	tgt.setDefault(t, 1)
	f := newMove(t, src.side, tgt.side, mover.VersionsAll)
	f.spec.ObjectLock = lockedRules

	atMost := func(pass string, side string, limit int) {
		t.Helper()
		n := f.requests.of(side, lockReads...)
		t.Logf("%s: %d requests read locks on the %s (at most %d)", pass, n, side, limit)
		if n > limit {
			t.Errorf("%s: %d requests read locks on the %s, want at most %d", pass, n, side, limit)
		}
	}
	if p := f.run(mover.ModeCopy, 1); p.Counts.CopiedObjects != int64(versions) || p.Failures.Count != 0 {
		t.Fatalf("first pass: %d copied, failures %s", p.Counts.CopiedObjects, p.Failures)
	}
	atMost("the first pass", mover.SideSource, 2*versions)
	atMost("the first pass", mover.SideTarget, 2*versions)

	f.requests.reset()
	if p := f.run(mover.ModeCopy, 2); p.Counts.Changes() != 0 || p.Failures.Count != 0 {
		t.Fatalf("a pass over an unchanged bucket: %+v, failures %s", p.Counts, p.Failures)
	}
	atMost("a pass over an unchanged bucket", mover.SideSource, 0)
	atMost("a pass over an unchanged bucket", mover.SideTarget, 0)

	must(t, "k/03 again", src.putLocked(ctx, "k/03", 20, s3.ObjectLock{}))
	must(t, "new", src.putLocked(ctx, "new", 20, s3.ObjectLock{}))
	versions += 2
	f.requests.reset()
	if p := f.run(mover.ModeCopy, 3); p.Counts.CopiedObjects != 2 || p.Failures.Count != 0 {
		t.Fatalf("a pass after two writes: %d copied, failures %s", p.Counts.CopiedObjects, p.Failures)
	}
	atMost("a pass after two writes", mover.SideSource, 4)
	atMost("a pass after two writes", mover.SideTarget, 4)

	f.requests.reset()
	if p := f.run(mover.ModeFinal, 4); !p.Verified || p.Counts.Changes() != 0 {
		t.Fatalf("final pass: verified %v, %+v, differences %s", p.Verified, p.Counts, p.Differences)
	}
	// One HEAD each where the store answers the lock on it to the fraction of a second;
	// two requests where it does not, and one more for finding out which.
	atMost("the final pass", mover.SideSource, 2*versions+1)
	atMost("the final pass", mover.SideTarget, 2*versions+1)
	expectLocks(t, src, tgt)
}
