package mover_test

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/bucketkeeper/bucketkeeper/internal/mover"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// perVersionDefault says whether a store gives each version written under a bucket's
// default retention a retention of its own (SeaweedFS, RGW); Versity gives none, its
// default locks the whole bucket from when it was set (docs/object-lock.md).
func perVersionDefault(k testenv.S3Kind) bool { return k != testenv.Versity }

// everyPair is every ordered pair of the harness's stores with object lock.
func everyPair() [][2]*testenv.S3Server {
	var out [][2]*testenv.S3Server
	for _, a := range []*testenv.S3Server{seaweed, versity, rgw} {
		for _, b := range []*testenv.S3Server{seaweed, versity, rgw} {
			if a != b {
				out = append(out, [2]*testenv.S3Server{a, b})
			}
		}
	}
	return out
}

// lockedRules allows both retention modes, as a store whose admin allows Compliance.
var lockedRules = &mover.LockRules{AllowedModes: []s3.RetentionMode{s3.RetentionGovernance, s3.RetentionCompliance}}

// TestMoveKeepsObjectLock moves a bucket with object lock between every pair of
// stores: a Governance default retention of a day, a version written before it (no
// lock on the source), a key overwritten under it and then hidden by a delete marker,
// a version of its own in Compliance for three minutes, one under a legal hold,
// a multipart and a streamed one with a Governance retention and a legal hold of their
// own. Every version arrives locked at least as on the source: the same legal hold,
// and where the source has a retention the same mode until the same second (a
// version the store's default locked gets the target's default, from its copy). Then
// someone lifts a legal hold on the target and the source's retention of another
// version is lengthened: a verifying pass finds both keys unequal, a Final pass locks
// them as the source does (still finding them unequal), and the next one verifies.
func TestMoveKeepsObjectLock(t *testing.T) {
	for _, pair := range everyPair() {
		t.Run(string(pair[0].Kind)+"-to-"+string(pair[1].Kind), func(t *testing.T) {
			t.Parallel() // each waits out its Compliance retention at its end
			testMoveKeepsObjectLock(t, pair[0], pair[1])
		})
	}
}

func testMoveKeepsObjectLock(t *testing.T, from, to *testenv.S3Server) {
	ctx := context.Background()
	src := newLockedBucket(t, from)
	must(t, "early", src.putLocked(ctx, "early", 10, s3.ObjectLock{}))
	src.setDefault(t, 1)
	for _, key := range []string{"gov", "gov", "hidden"} {
		must(t, key, src.putLocked(ctx, key, 100, s3.ObjectLock{}))
	}
	if _, err := src.c.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: aws.String(src.bucket), Key: aws.String("hidden")}); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	must(t, "comp", src.putLocked(ctx, "comp", 200, s3.ObjectLock{Mode: s3.RetentionCompliance, RetainUntil: now.Add(3 * time.Minute)}))
	must(t, "held", src.putLocked(ctx, "held", 300, s3.ObjectLock{LegalHold: true}))
	// Longer than the default's day: a Governance retention is lengthened freely.
	own := s3.ObjectLock{Mode: s3.RetentionGovernance, RetainUntil: now.Add(48 * time.Hour).Add(300 * time.Millisecond), LegalHold: true}
	must(t, "big", src.put(ctx, object{key: "big", size: 11 << 20, partSize: 5 << 20}))
	must(t, "big retention", src.lock(ctx, "big", own))
	must(t, "streamed", src.putLocked(ctx, "streamed", 3<<20, own))

	tgt := newLockedBucket(t, to)
	tgt.setDefault(t, 1) // what the controller gives the target before the first pass
	f := newMove(t, src.side, tgt.side, mover.VersionsAll)
	f.spec.ObjectLock = lockedRules
	p := f.run(mover.ModeFinal, 1)
	if !p.Verified || p.Failures.Count != 0 {
		t.Fatalf("final pass: verified %v, failures %s, differences %s", p.Verified, p.Failures, p.Differences)
	}
	expectHistories(t, src.side, tgt.side)
	expectLocks(t, src, tgt)

	// The target's hold lifted by someone, the source's retention lengthened: both
	// keys differ until a pass locks them again.
	must(t, "lifting the hold on the target", tgt.hold(ctx, "held", false))
	longer := own
	longer.RetainUntil = own.RetainUntil.Add(time.Hour)
	must(t, "lengthening the source's retention", src.lock(ctx, "streamed", longer))
	v := f.run(mover.ModeVerify, 2)
	if v.Verified || !differsOn(v.Differences, "held") || !differsOn(v.Differences, "streamed") {
		t.Fatalf("a verifying pass over unequal locks: verified %v, differences %s; want held and streamed", v.Verified, v.Differences)
	}
	// A final pass locks both as on the source and counts them as differences: only
	// the next one, finding every lock covered, verifies.
	p = f.run(mover.ModeFinal, 3)
	if p.Verified || p.Counts.Locked != 2 || p.Counts.CopiedObjects != 0 || !differsOn(p.Differences, "held") || !differsOn(p.Differences, "streamed") {
		t.Fatalf("final pass: verified %v, %d locks set, %d copied (want 2 and 0), differences %s (want held and streamed)", p.Verified, p.Counts.Locked, p.Counts.CopiedObjects, p.Differences)
	}
	expectLocks(t, src, tgt)
	if p = f.run(mover.ModeFinal, 4); !p.Verified || p.Counts.Changes() != 0 {
		t.Fatalf("the next final pass: verified %v, %+v, differences %s", p.Verified, p.Counts, p.Differences)
	}
}

// TestMoveRefusesLocksTheTargetDoesNot: a target whose guardrails allow Governance
// only, for 30 days at most. The plan of a bucket holding a version in Compliance and
// one retained for a year names both; a copy pass all the same (the controller never
// runs one after such a plan) fails both keys, by name, and writes neither, while the
// Governance version it may hold is copied with its lock.
func TestMoveRefusesLocksTheTargetDoesNot(t *testing.T) {
	ctx := context.Background()
	src := newLockedBucket(t, rgw)
	now := time.Now()
	must(t, "sealed", src.putLocked(ctx, "sealed", 10, s3.ObjectLock{Mode: s3.RetentionCompliance, RetainUntil: now.Add(time.Minute)}))
	must(t, "kept", src.putLocked(ctx, "kept", 10, s3.ObjectLock{Mode: s3.RetentionGovernance, RetainUntil: now.Add(365 * 24 * time.Hour)}))
	must(t, "fine", src.putLocked(ctx, "fine", 10, s3.ObjectLock{Mode: s3.RetentionGovernance, RetainUntil: now.Add(time.Hour)}))
	tgt := newLockedBucket(t, seaweed)
	f := newMove(t, src.side, tgt.side, mover.VersionsAll)
	f.spec.ObjectLock = &mover.LockRules{AllowedModes: []s3.RetentionMode{s3.RetentionGovernance}, MaxRetentionDays: 30}

	plan := f.plan(1, 1)
	if plan.LockRefused.Count != 2 || !differsOn(plan.LockRefused, "sealed") || !differsOn(plan.LockRefused, "kept") {
		t.Errorf("plan: lock refusals %s, want sealed and kept", plan.LockRefused)
	}
	if l := plan.Locks; l == nil || l.Retained != 3 || l.Compliance != 1 {
		t.Errorf("plan: locks %+v, want 3 retained, 1 in Compliance", l)
	}
	p := f.run(mover.ModeCopy, 2)
	if p.Failures.Count != 2 || !differsOn(p.Failures, "sealed") || !differsOn(p.Failures, "kept") {
		t.Errorf("copy pass: failures %s, want sealed and kept", p.Failures)
	}
	keys, err := tgt.keys(ctx)
	if err != nil || strings.Join(keys, " ") != "fine" {
		t.Errorf("target keys %q (%v), want fine alone", keys, err)
	}
	if l := tgt.lockOf(t, "fine"); l.Mode != s3.RetentionGovernance || l.RetainUntil.Before(now.Add(time.Hour)) {
		t.Errorf("the copied version's lock: %s", l)
	}
}

// TestMoveIntoVersityFailsAHistoryItCannotHold moves locked histories with a delete
// marker followed by a version into Versity, which answers 405 to the write of a
// version with a retention onto a key whose current version is a delete marker, and
// lists what it wrote as another delete marker; written without a lock (a version
// from before the default retention), the write succeeds and is listed as a delete
// marker all the same. Each such key fails by name in the pass that meets it, saying
// the target cannot hold the bucket's history, instead of being copied again in every
// pass; the other keys are copied with their locks, and the source is as it was.
func TestMoveIntoVersityFailsAHistoryItCannotHold(t *testing.T) {
	for _, from := range []*testenv.S3Server{seaweed, rgw} {
		t.Run(string(from.Kind), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			src := newLockedBucket(t, from)
			deleted := func(key string) {
				t.Helper()
				if _, err := src.c.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: aws.String(src.bucket), Key: aws.String(key)}); err != nil {
					t.Fatal(err)
				}
			}
			must(t, "quiet", src.putLocked(ctx, "quiet", 10, s3.ObjectLock{}))
			deleted("quiet")
			must(t, "quiet again", src.putLocked(ctx, "quiet", 11, s3.ObjectLock{}))
			src.setDefault(t, 1)
			must(t, "again", src.putLocked(ctx, "again", 10, s3.ObjectLock{}))
			deleted("again")
			must(t, "again again", src.putLocked(ctx, "again", 11, s3.ObjectLock{}))
			must(t, "plain", src.putLocked(ctx, "plain", 10, s3.ObjectLock{LegalHold: true}))
			before := history(t, src.side)

			tgt := newLockedBucket(t, versity)
			tgt.setDefault(t, 1)
			f := newMove(t, src.side, tgt.side, mover.VersionsAll)
			f.spec.ObjectLock = lockedRules
			for pass := 1; pass <= 2; pass++ {
				p := f.run(mover.ModeCopy, pass)
				if p.Failures.Count != 2 || !differsOn(p.Failures, "again") || !differsOn(p.Failures, "quiet") {
					t.Fatalf("pass %d: failures %s, want again and quiet", pass, p.Failures)
				}
				for _, x := range p.Failures.First {
					if !strings.Contains(x.Reason, "cannot hold this bucket's history") || !strings.Contains(x.Reason, strconv.Quote(x.Key)) {
						t.Errorf("pass %d: failure of %q says %q: want the key named and why", pass, x.Key, x.Reason)
					}
				}
			}
			if l := tgt.lockOf(t, "plain"); !l.LegalHold || l.Mode != s3.RetentionGovernance {
				t.Errorf("plain on the target: %s, want its hold and retention", l)
			}
			after := history(t, src.side)
			for key, vs := range before {
				if fmt.Sprint(after[key]) != fmt.Sprint(vs) {
					t.Errorf("the source's %s: %+v, was %+v", key, after[key], vs)
				}
			}
		})
	}
}

// differsOn says whether f names key.
func differsOn(f mover.Failures, key string) bool {
	for _, x := range f.First {
		if x.Key == key {
			return true
		}
	}
	return false
}

// expectLocks compares every version's lock on both sides, oldest first: the same
// legal hold; a retention of its own on the source kept to the second in the same
// mode; a version the default locks (or nothing: written before it) locked on the
// target at least until the target's default, counted from the copy, ends.
func expectLocks(t *testing.T, src, tgt lockedSide) {
	t.Helper()
	want, got := history(t, src.side), history(t, tgt.side)
	for key, ws := range want {
		for i, w := range ws {
			if w.marker || i >= len(got[key]) {
				continue
			}
			sl, tl := src.versionLock(t, key, w.id), tgt.versionLock(t, key, got[key][i].id)
			if sl.LegalHold != tl.LegalHold {
				t.Errorf("%s version %d: legal hold %v on the target, %v on the source", key, i, tl.LegalHold, sl.LegalHold)
			}
			switch {
			case sl.Mode != "" && sl.RetainUntil.After(time.Now()):
				if tl.Mode != sl.Mode || tl.RetainUntil.Before(sl.RetainUntil) || tl.RetainUntil.Sub(sl.RetainUntil) >= time.Second {
					t.Errorf("%s version %d: the target's retention %s, the source's %s", key, i, tl, sl)
				}
			case perVersionDefault(tgt.srv.Kind):
				if tl.Mode != s3.RetentionGovernance || tl.RetainUntil.Before(time.Now().Add(23*time.Hour)) {
					t.Errorf("%s version %d: the target's retention %s, want its default's (source %s)", key, i, tl, sl)
				}
			default:
				// Versity locks the bucket by its default, from when it was set.
				if tl.Mode != "" {
					t.Errorf("%s version %d: Versity gave the version a retention of its own: %s", key, i, tl)
				}
			}
		}
	}
}

// lockedSide is a bucket with object lock of a test.
type lockedSide struct{ side }

// newLockedBucket creates a bucket with object lock, emptied (waiting out what a
// Compliance retention keeps, lifting legal holds, bypassing Governance) and deleted
// when the test ends.
func newLockedBucket(t *testing.T, srv *testenv.S3Server) lockedSide {
	t.Helper()
	s := lockedSide{side{srv: srv, bucket: "mv-lock-" + randomHex(6), c: srv.Client()}}
	ctx := context.Background()
	if _, err := s.c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String(s.bucket), ObjectLockEnabledForBucket: aws.Bool(true)}); err != nil {
		t.Fatalf("create %s on %s: %v", s.bucket, srv.Kind, err)
	}
	t.Cleanup(func() { s.destroyLocked(t) })
	return s
}

// setDefault gives the bucket a Governance default retention of days.
func (s lockedSide) setDefault(t *testing.T, days int32) {
	t.Helper()
	_, err := s.c.PutObjectLockConfiguration(context.Background(), &awss3.PutObjectLockConfigurationInput{Bucket: aws.String(s.bucket),
		ObjectLockConfiguration: &types.ObjectLockConfiguration{ObjectLockEnabled: types.ObjectLockEnabledEnabled,
			Rule: &types.ObjectLockRule{DefaultRetention: &types.DefaultRetention{Mode: types.ObjectLockRetentionModeGovernance, Days: aws.Int32(days)}}}})
	if err != nil {
		t.Fatalf("default retention on %s: %v", s.srv.Kind, err)
	}
}

// putLocked writes a version of size bytes with a lock of its own.
func (s lockedSide) putLocked(ctx context.Context, key string, size int64, l s3.ObjectLock) error {
	body := bytes.Repeat([]byte{byte(len(key))}, int(size))
	in := &awss3.PutObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(key), Body: bytes.NewReader(body)}
	if l.Mode != "" {
		in.ObjectLockMode, in.ObjectLockRetainUntilDate = types.ObjectLockMode(l.Mode), aws.Time(l.RetainUntil)
	}
	if l.LegalHold {
		in.ObjectLockLegalHoldStatus = types.ObjectLockLegalHoldStatusOn
	}
	_, err := s.c.PutObject(ctx, in)
	return err
}

// lock sets the current version's retention and legal hold.
func (s lockedSide) lock(ctx context.Context, key string, l s3.ObjectLock) error {
	_, err := s.c.PutObjectRetention(ctx, &awss3.PutObjectRetentionInput{Bucket: aws.String(s.bucket), Key: aws.String(key),
		Retention: &types.ObjectLockRetention{Mode: types.ObjectLockRetentionMode(l.Mode), RetainUntilDate: aws.Time(l.RetainUntil)}})
	if err != nil {
		return err
	}
	return s.hold(ctx, key, l.LegalHold)
}

// hold turns the current version's legal hold on or off.
func (s lockedSide) hold(ctx context.Context, key string, on bool) error {
	return s.holdVersion(ctx, key, "", on)
}

func (s lockedSide) holdVersion(ctx context.Context, key, versionID string, on bool) error {
	status := types.ObjectLockLegalHoldStatusOff
	if on {
		status = types.ObjectLockLegalHoldStatusOn
	}
	_, err := s.c.PutObjectLegalHold(ctx, &awss3.PutObjectLegalHoldInput{Bucket: aws.String(s.bucket), Key: aws.String(key), VersionId: nonEmpty(versionID),
		LegalHold: &types.ObjectLockLegalHold{Status: status}})
	return err
}

// versionLock reads a version's retention and legal hold as the store's admin.
func (s lockedSide) versionLock(t *testing.T, key, versionID string) s3.ObjectLock {
	t.Helper()
	c := storeClient(t, s.srv)
	ctx := context.Background()
	r, err := c.GetObjectRetention(ctx, s.bucket, key, versionID)
	if err != nil {
		t.Fatalf("retention of %s %s on %s: %v", key, versionID, s.srv.Kind, err)
	}
	hold, err := c.GetObjectLegalHold(ctx, s.bucket, key, versionID)
	if err != nil {
		t.Fatalf("legal hold of %s %s on %s: %v", key, versionID, s.srv.Kind, err)
	}
	return s3.ObjectLock{Mode: r.Mode, RetainUntil: r.Until, LegalHold: hold}
}

// lockOf is the current version's lock.
func (s lockedSide) lockOf(t *testing.T, key string) s3.ObjectLock { return s.versionLock(t, key, "") }

// destroyLocked empties the bucket as its admin may: legal holds lifted, Governance
// bypassed, and what Compliance keeps deleted once it ends.
func (s lockedSide) destroyLocked(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for ctx.Err() == nil {
		out, err := s.c.ListObjectVersions(ctx, &awss3.ListObjectVersionsInput{Bucket: aws.String(s.bucket)})
		if err != nil {
			t.Errorf("cleanup of %s on %s: %v", s.bucket, s.srv.Kind, err)
			return
		}
		var ids []types.ObjectIdentifier
		for _, v := range out.Versions {
			_ = s.holdVersion(ctx, aws.ToString(v.Key), aws.ToString(v.VersionId), false)
			ids = append(ids, types.ObjectIdentifier{Key: v.Key, VersionId: v.VersionId})
		}
		for _, m := range out.DeleteMarkers {
			ids = append(ids, types.ObjectIdentifier{Key: m.Key, VersionId: m.VersionId})
		}
		if len(ids) == 0 {
			break
		}
		res, err := s.c.DeleteObjects(ctx, &awss3.DeleteObjectsInput{Bucket: aws.String(s.bucket), BypassGovernanceRetention: aws.Bool(true),
			Delete: &types.Delete{Objects: ids, Quiet: aws.Bool(true)}})
		if err == nil && len(res.Errors) == 0 {
			continue
		}
		select { // a Compliance retention of the test's: it ends within minutes
		case <-ctx.Done():
		case <-time.After(2 * time.Second):
		}
	}
	ups, err := s.c.ListMultipartUploads(ctx, &awss3.ListMultipartUploadsInput{Bucket: aws.String(s.bucket)})
	if err == nil {
		for _, u := range ups.Uploads {
			_, _ = s.c.AbortMultipartUpload(ctx, &awss3.AbortMultipartUploadInput{Bucket: aws.String(s.bucket), Key: u.Key, UploadId: u.UploadId})
		}
	}
	if _, err := s.c.DeleteBucket(ctx, &awss3.DeleteBucketInput{Bucket: aws.String(s.bucket)}); err != nil {
		t.Errorf("cleanup of %s on %s: %v", s.bucket, s.srv.Kind, err)
	}
}

func must(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}
