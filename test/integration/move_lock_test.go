package integration_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// consentsToCompliance is a store whose admin consents to Compliance retentions.
func consentsToCompliance(s *bkv1.ObjectStore) {
	s.Spec.Guardrails.ObjectLock.AllowedModes = []bkv1.ObjectLockMode{bkv1.ObjectLockGovernance, bkv1.ObjectLockCompliance}
}

// TestMoveKeepsObjectLock moves a Purge claim with a Governance default retention of a
// day between every pair of stores, both consenting to Compliance, while its
// application writes, overwrites and deletes (every version it writes locked by the
// default): before the move the store's admin locks a version in Compliance for a few
// minutes (the store allows Compliance) and puts a legal hold on another. On the target every version is there, in order, and
// locked as on the source: the same legal hold, an explicit retention in the same mode
// until the same second, and the versions the default locks locked by the target's
// default, no shorter. The application's key on the target cannot delete the locked
// versions, and the claim's Purge then blocks (DeletionBlocked) as it would have on
// its home store, instead of deleting what the tenant believed kept. Into Versity,
// which cannot hold a key written again after a delete marker in a locked bucket, the
// move fails by name and the source keeps serving (moveFailsOnAHistoryVersityCannotHold).
func TestMoveKeepsObjectLock(t *testing.T) {
	for _, from := range everyStore() {
		for _, to := range everyStore() {
			if from == to {
				continue
			}
			t.Run(string(from.Kind)+"-to-"+string(to.Kind), func(t *testing.T) {
				t.Parallel()
				testMoveKeepsObjectLock(t, from, to)
			})
		}
	}
}

func testMoveKeepsObjectLock(t *testing.T, src, tgt *testenv.S3Server) {
	f := newFixture(t, src, withIAMOn(src), consentsToCompliance)
	// Six moves at once, their purges and a Compliance retention waited out: more than
	// the fixture's three minutes.
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	t.Cleanup(cancel)
	f.ctx = ctx
	target := f.storeOn(tgt, withIAMOn(tgt), consentsToCompliance)
	f.waitStoreCondition(bkv1.ConditionAccessProviderReady, metav1.ConditionTrue)
	f.waitNamedStoreCondition(target, bkv1.ConditionAccessProviderReady, metav1.ConditionTrue, "")
	sb := f.waitCondition(f.bucket("data", func(sb *bkv1.StorageBucket) {
		sb.Spec.ObjectLock, sb.Spec.DeletionPolicy = governance(1), bkv1.DeletionPolicyPurge
	}), bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
	bucket := sb.Status.BucketName
	tgtAdmin := adminOf(t, f.ctx, tgt)
	t.Cleanup(func() { emptyLockedBucket(t, src, bucket); emptyLockedBucket(t, tgt, bucket) })
	f.waitAccessReady(f.access("app", "app-creds", bkv1.BucketGrant{Name: "data", Mode: bkv1.AccessReadWrite}))

	// The store's admin seals a version in Compliance (the store consents to it) and
	// holds another.
	_, err := src.Client().PutObject(f.ctx, &awss3.PutObjectInput{Bucket: &bucket, Key: aws.String("sealed"), Body: strings.NewReader("evidence"),
		ObjectLockMode: types.ObjectLockModeCompliance, ObjectLockRetainUntilDate: aws.Time(time.Now().Add(3 * time.Minute))})
	must(t, err)
	must(t, f.admin.PutObject(f.ctx, bucket, "held", []byte("on hold")))
	must(t, f.admin.PutObjectLegalHold(f.ctx, bucket, "held", "", true))
	f.seedObjects(f.admin, bucket, 20)
	if src.Kind != testenv.Versity {
		// A key deleted and written again: a version after a delete marker. Versity
		// keeps such a write as another delete marker, so it cannot be the source of
		// one.
		must(t, f.admin.PutObject(f.ctx, bucket, "again", []byte("first")))
		must(t, f.admin.DeleteObject(f.ctx, bucket, "again"))
		must(t, f.admin.PutObject(f.ctx, bucket, "again", []byte("second")))
	}

	// Once a second: in a locked bucket every write is a version the move copies (with
	// six requests: the read, its retention, legal hold and tags, the write and its
	// check), so the move catches up pass after pass while the application writes.
	// Twice a second, six of these moves at once kept a loaded 2-core machine's moves
	// catching up past the test's six minutes.
	w := f.startWriterEvery("app-creds", bucket, time.Second)
	w.waitAcks(20)
	f.moveTo(sb, target, "")
	if tgt.Kind == testenv.Versity {
		moveFailsOnAHistoryVersityCannotHold(t, f, src.Kind, sb, w)
		return
	}
	moved := f.waitMove(sb, bkv1.MoveDone, 6*time.Minute)
	w.waitAcksAfter(5, moved.Status.Move.SwitchedAt.Time)
	log := w.Stop()
	if lost := log.LostOn(f.ctx, tgtAdmin, bucket); len(lost) > 0 {
		t.Errorf("%d acknowledged writes lost, first: %v", len(lost), lost[:min(5, len(lost))])
	}

	// Every version the source kept is on the target, locked at least as there. The
	// writer went on writing on the target after the switch: those versions are the
	// target's alone, past the source's, and locked by its default.
	want, got := lockedHistory(t, f.ctx, f.admin, src.Kind, bucket), lockedHistory(t, f.ctx, tgtAdmin, tgt.Kind, bucket)
	compared := 0
	for k, ws := range want {
		gs := got[k]
		if len(gs) < len(ws) {
			t.Errorf("%s: %d versions on the target, %d on the source", k, len(gs), len(ws))
			continue
		}
		for i, w := range ws {
			g := gs[i]
			if g.marker != w.marker {
				t.Errorf("%s entry %d: delete marker %v on the target, %v on the source", k, i, g.marker, w.marker)
				continue
			}
			if w.marker {
				continue
			}
			compared++
			if msg := lockCovers(g.lock, w.lock, tgt.Kind); msg != "" {
				t.Errorf("%s entry %d: %s", k, i, msg)
			}
		}
	}
	if s := want["sealed"]; len(s) != 1 || s[0].lock.Mode != s3.RetentionCompliance {
		t.Fatalf("the source's sealed version: %+v", s)
	}
	if h := got["held"]; len(h) != 1 || !h[0].lock.LegalHold {
		t.Errorf("the held version on the target: %+v", h)
	}
	t.Logf("%s to %s: %d versions compared, %d puts and %d deletes acknowledged", src.Kind, tgt.Kind, compared, log.Puts, log.Deletes)

	// The application's key on the target cannot delete a locked version.
	ba := f.waitAccessReady(&bkv1.BucketAccess{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "app"}})
	if ba.Status.ObjectStore != target {
		t.Fatalf("the access lives on %q, want %q", ba.Status.ObjectStore, target)
	}
	// The store admin's seal is minutes long (the cleanup must outlast it): once it has
	// ended, nothing locks that version, and it is neither checked nor counted.
	sealUntil := want["sealed"][0].lock.RetainUntil
	locked := func(keys ...string) []string {
		if time.Now().Before(sealUntil) {
			return keys
		}
		return slices.DeleteFunc(keys, func(k string) bool { return k == "sealed" })
	}
	newKey := f.rawKeyClient("app-creds")
	for _, k := range locked("sealed", "held", "seed/000") {
		_, err := newKey.DeleteObject(f.ctx, &awss3.DeleteObjectInput{Bucket: &bucket, Key: aws.String(k), VersionId: aws.String(got[k][0].id)})
		wantRawDenied(t, "the key deleting "+k+"'s locked version on the target", err)
	}

	// The claim's Purge blocks on the target as it would have at home.
	must(t, k8s.Delete(f.ctx, sb))
	blocked := f.waitCondition(sb, bkv1.ConditionReady, metav1.ConditionFalse, bkv1.ReasonDeletionBlocked)
	stillLocked := compared
	if !time.Now().Before(sealUntil) {
		stillLocked--
		t.Logf("the seal of %q ended before the purge: %d versions moved, %d still locked", "sealed", compared, stillLocked)
	}
	if b := blocked.Status.DeletionBlocked; b == nil || b.LockedVersions < int64(stillLocked) {
		t.Errorf("status.deletionBlocked %+v, want at least the %d versions moved that a lock still keeps", b, stillLocked)
	}
	for _, k := range locked("sealed", "held") {
		page, err := tgtAdmin.ListObjectVersions(f.ctx, bucket, nil)
		must(t, err)
		if !hasVersion(page, k, got[k][0].id) {
			t.Errorf("the purge deleted %s's locked version on the target", k)
		}
	}
	// Let the claim go: the buckets are kept, and emptied by the cleanup.
	for _, store := range []string{f.store, target} {
		s := &bkv1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Name: store}}
		f.update(k8s, s, func() { s.Spec.Guardrails.ObjectLock.ReleaseBlockedDeletionAfter = &metav1.Duration{} })
	}
	f.waitGone(sb)
}

// moveFailsOnAHistoryVersityCannotHold: moved into Versity, the bucket's key written
// again after a delete marker fails the move by name (Versity refuses such a version
// written with its retention, and keeps it as another delete marker): the claim
// stalls MoveFailed saying the target cannot hold the bucket's history, the bucket
// does not cut over, and the source keeps serving the application, every
// acknowledged write there and every lock as it was.
func moveFailsOnAHistoryVersityCannotHold(t *testing.T, f *fixture, kind testenv.S3Kind, sb *bkv1.StorageBucket, w *writer) {
	bucket := sb.Status.BucketName
	before := lockedHistory(t, f.ctx, f.admin, kind, bucket)
	var stuck *bkv1.StorageBucket
	f.eventually(4*time.Minute, "the move stalled MoveFailed", func() error {
		stuck = &bkv1.StorageBucket{}
		if err := k8s.Get(f.ctx, client.ObjectKeyFromObject(sb), stuck); err != nil {
			return err
		}
		if c := findCond(stuck, bkv1.ConditionStalled); c == nil || c.Status != metav1.ConditionTrue || c.Reason != bkv1.ReasonMoveFailed {
			return fmt.Errorf("move %+v; conditions: %s", stuck.Status.Move, describe(stuck.Status.Conditions))
		}
		return nil
	})
	msg := findCond(stuck, bkv1.ConditionStalled).Message
	if !strings.Contains(msg, "cannot hold this bucket's history") || !strings.Contains(msg, `"again"`) {
		t.Errorf("MoveFailed message %q: want the key named and the target said unable to hold the history", msg)
	}
	if m := stuck.Status.Move; stuck.Status.ObjectStore != f.store || m == nil || m.SwitchedAt != nil || m.FrozenAt != nil {
		t.Errorf("the failed move cut over or froze the source: objectStore %q, move %+v", stuck.Status.ObjectStore, m)
	}
	failed := time.Now()
	w.waitAcksAfter(5, failed)
	log := w.Stop()
	if lost := log.LostOn(f.ctx, f.admin, bucket); len(lost) > 0 {
		t.Errorf("%d acknowledged writes lost on the source, first: %v", len(lost), lost[:min(5, len(lost))])
	}
	after := lockedHistory(t, f.ctx, f.admin, kind, bucket)
	for _, k := range []string{"again", "sealed", "held", "seed/000"} {
		if fmt.Sprint(after[k]) != fmt.Sprint(before[k]) {
			t.Errorf("the source's %s after the failed move: %+v, was %+v", k, after[k], before[k])
		}
	}
	if a := after["again"]; len(a) != 3 || !a[1].marker || a[2].marker {
		t.Errorf("the source's again: %+v, want a version, a delete marker, a version", a)
	}
	t.Logf("into Versity: %s; %d puts and %d deletes acknowledged on the source", msg, log.Puts, log.Deletes)
}

// lockedEntry is one version or delete marker with its lock, as the store's admin
// reads it.
type lockedEntry struct {
	id     string
	marker bool
	lock   s3.ObjectLock
}

// lockedHistory reads every key's history, oldest first, with each version's lock.
func lockedHistory(t *testing.T, ctx context.Context, c s3.Client, kind testenv.S3Kind, bucket string) map[string][]lockedEntry {
	t.Helper()
	out := map[string][]lockedEntry{}
	var page *s3.PageToken
	for {
		res, err := c.ListRange(ctx, bucket, s3.RangeOptions{Versions: true}, page)
		if err != nil {
			t.Fatalf("listing %s on %s: %v", bucket, kind, err)
		}
		for _, e := range res.Entries {
			v := lockedEntry{id: e.VersionID, marker: e.IsDeleteMarker}
			if !v.marker {
				r, err := c.GetObjectRetention(ctx, bucket, e.Key, e.VersionID)
				must(t, err)
				hold, err := c.GetObjectLegalHold(ctx, bucket, e.Key, e.VersionID)
				must(t, err)
				v.lock = s3.ObjectLock{Mode: r.Mode, RetainUntil: r.Until, LegalHold: hold}
			}
			out[e.Key] = append([]lockedEntry{v}, out[e.Key]...) // listed newest first
		}
		if page = res.Next; page == nil {
			return out
		}
	}
}

// lockCovers says how a target version's lock falls short of its source's, "" when
// it does not: the same legal hold; a retention of the source's own in the same mode
// until the same second; one the source's default gave (or none, Versity's versions
// having none of their own) covered by the target's default of a day, which on Versity
// locks the bucket rather than the version. A retention of the source's own that has
// ended (the admin's minutes-long seal, on a machine loaded enough that the move
// copied its version later) locks nothing: the target's version holds it as it was
// when copied, or, copied after its end, none of its own.
func lockCovers(tgt, src s3.ObjectLock, kind testenv.S3Kind) string {
	if tgt.LegalHold != src.LegalHold {
		return fmt.Sprintf("legal hold %v on the target, %v on the source", tgt.LegalHold, src.LegalHold)
	}
	if src.Mode != "" && !src.RetainUntil.After(time.Now()) {
		if tgt.Mode == src.Mode && !tgt.RetainUntil.Before(src.RetainUntil) && tgt.RetainUntil.Sub(src.RetainUntil) < time.Second {
			return ""
		}
		src.Mode, src.RetainUntil = "", time.Time{}
	}
	switch {
	case src.Mode == s3.RetentionCompliance || src.Mode != "" && src.RetainUntil.After(time.Now().Add(24*time.Hour)):
		if tgt.Mode != src.Mode || tgt.RetainUntil.Before(src.RetainUntil) || tgt.RetainUntil.Sub(src.RetainUntil) >= time.Second {
			return fmt.Sprintf("retention %s on the target, %s on the source", tgt, src)
		}
	case kind == testenv.Versity:
		if tgt.Mode != "" && (tgt.Mode != src.Mode || tgt.RetainUntil.Before(src.RetainUntil)) {
			return fmt.Sprintf("retention %s on the target, %s on the source", tgt, src)
		}
	default:
		if tgt.Mode != s3.RetentionGovernance || tgt.RetainUntil.Before(src.RetainUntil) || tgt.RetainUntil.Before(time.Now().Add(23*time.Hour)) {
			return fmt.Sprintf("retention %s on the target, %s on the source: want a day's Governance at least", tgt, src)
		}
	}
	return ""
}

func hasVersion(page s3.ObjectVersionPage, key, id string) bool {
	for _, v := range page.Versions {
		if v.Key == key && v.VersionID == id {
			return true
		}
	}
	return false
}

// emptyLockedBucket deletes a test's bucket with object lock as the store's admin:
// its policy (a move's freeze) removed, legal holds lifted, Governance bypassed,
// Compliance waited out (minutes at most).
func emptyLockedBucket(t *testing.T, srv *testenv.S3Server, bucket string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := srv.Client()
	// The copy a finished move left is frozen: its policy denies every deletion.
	_, _ = c.DeleteBucketPolicy(ctx, &awss3.DeleteBucketPolicyInput{Bucket: &bucket})
	for ctx.Err() == nil {
		out, err := c.ListObjectVersions(ctx, &awss3.ListObjectVersionsInput{Bucket: &bucket})
		if err != nil {
			return // gone, or never made
		}
		var ids []types.ObjectIdentifier
		for _, v := range out.Versions {
			_, _ = c.PutObjectLegalHold(ctx, &awss3.PutObjectLegalHoldInput{Bucket: &bucket, Key: v.Key, VersionId: v.VersionId,
				LegalHold: &types.ObjectLockLegalHold{Status: types.ObjectLockLegalHoldStatusOff}})
			ids = append(ids, types.ObjectIdentifier{Key: v.Key, VersionId: v.VersionId})
		}
		for _, m := range out.DeleteMarkers {
			ids = append(ids, types.ObjectIdentifier{Key: m.Key, VersionId: m.VersionId})
		}
		if len(ids) == 0 {
			break
		}
		res, err := c.DeleteObjects(ctx, &awss3.DeleteObjectsInput{Bucket: &bucket, BypassGovernanceRetention: aws.Bool(true),
			Delete: &types.Delete{Objects: ids, Quiet: aws.Bool(true)}})
		if err == nil && len(res.Errors) == 0 {
			continue
		}
		select { // a Compliance retention of the test's, minutes long
		case <-ctx.Done():
		case <-time.After(2 * time.Second):
		}
	}
	if _, err := c.DeleteBucket(ctx, &awss3.DeleteBucketInput{Bucket: &bucket}); err != nil && s3.KindOf(err) != s3.KindNotFound {
		t.Logf("cleanup: bucket %s on %s: %v", bucket, srv.Kind, err)
	}
}

// TestMoveRefusedForObjectLock: a bucket with object lock moves from SeaweedFS, whose
// admin allows Compliance, to RGW, whose admin allows Governance alone and for 30 days
// at most: a Compliance default retention, a Governance one of 60 days, and a
// Governance default of a day with a version sealed in Compliance, or retained for a
// year, by the keys' own retention. Each move is refused (Stalled, MoveNotAllowed,
// naming the guardrail, and for a version its key) with nothing created on the target
// (no CreateBucket sent there, no bucket), the bucket still serving from its store.
func TestMoveRefusedForObjectLock(t *testing.T) {
	for _, tc := range []struct {
		name    string
		lock    *bkv1.ObjectLock
		version *s3.ObjectRetention // a version's own retention, written by the store's admin
		want    string
	}{
		{name: "a Compliance default retention", lock: compliance(1), want: "allowedModes"},
		{name: "a default retention past the target's longest", lock: governance(60), want: "maxRetentionDays"},
		{name: "a version in Compliance", lock: governance(1), want: `"sealed"`,
			version: &s3.ObjectRetention{Mode: s3.RetentionCompliance, Until: time.Now().Add(2 * time.Minute)}},
		{name: "a version retained past the target's longest", lock: governance(1), want: `"sealed"`,
			version: &s3.ObjectRetention{Mode: s3.RetentionGovernance, Until: time.Now().Add(365 * 24 * time.Hour)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, seaweed, consentsToCompliance)
			target := f.storeOn(rgw, func(s *bkv1.ObjectStore) { s.Spec.Guardrails.ObjectLock.MaxRetentionDays = ptr.To(int32(30)) })
			f.waitStoreCondition(bkv1.ConditionReady, metav1.ConditionTrue)
			f.waitNamedStoreCondition(target, bkv1.ConditionReady, metav1.ConditionTrue, "")
			sb := f.waitCondition(f.bucket("data", func(sb *bkv1.StorageBucket) { sb.Spec.ObjectLock = tc.lock }),
				bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
			bucket := sb.Status.BucketName
			if d := tc.lock.DefaultRetention; d.Mode != bkv1.ObjectLockCompliance {
				// A Compliance default keeps the version a day: nothing could empty the
				// bucket before the suite's store goes, and waiting would only cost time.
				t.Cleanup(func() { emptyLockedBucket(t, seaweed, bucket) })
			}
			in := &awss3.PutObjectInput{Bucket: &bucket, Key: aws.String("sealed"), Body: strings.NewReader("x")}
			if v := tc.version; v != nil {
				in.ObjectLockMode, in.ObjectLockRetainUntilDate = types.ObjectLockMode(v.Mode), aws.Time(v.Until)
			}
			_, err := seaweed.Client().PutObject(f.ctx, in)
			must(t, err)
			tgtAdmin := adminOf(t, f.ctx, rgw)
			before := requests.snapshot(target)

			f.moveTo(sb, target, "")
			refused := f.waitCondition(sb, bkv1.ConditionStalled, metav1.ConditionTrue, bkv1.ReasonMoveNotAllowed)
			if c := findCond(refused, bkv1.ConditionStalled); !strings.Contains(c.Message, tc.want) || !strings.Contains(c.Message, "nothing was created there") {
				t.Errorf("refusal %q does not name %q, or says something was created", c.Message, tc.want)
			}
			if !isTrue(refused, bkv1.ConditionReady) || refused.Status.ObjectStore != f.store {
				t.Errorf("the refused move took the bucket from its store: Ready %v, objectStore %q", isTrue(refused, bkv1.ConditionReady), refused.Status.ObjectStore)
			}
			_, _, ops := since(before, requests.snapshot(target))
			for op := range ops {
				if s3.IsMutating(op) {
					t.Errorf("%d %s sent to the target of a refused move", ops[op], op)
				}
			}
			if _, err := tgtAdmin.HeadBucket(f.ctx, bucket); s3.KindOf(err) != s3.KindNotFound {
				t.Errorf("the target of a refused move has bucket %s: %v", bucket, err)
			}
			f.update(k8s, sb, func() { sb.Spec.ObjectStoreRef.Name = f.store })
			f.waitMove(sb, bkv1.MoveAborted, time.Minute)
		})
	}
}

// TestMoveStopsOnAKeyThatReadsAsAnotherPath moves an RGW bucket holding "b" and
// "a/../b" (RGW keeps such a key as it is) to Versity, which would write "a/../b" as
// "b": the move stops before its cutover naming the key (MoveFailed), Versity's "b"
// is the source's "b", and no other key is there. Once the key is deleted on the
// source, the move finishes.
func TestMoveStopsOnAKeyThatReadsAsAnotherPath(t *testing.T) {
	f, target, sb := moveBetween(t, rgw, versity)
	bucket := sb.Status.BucketName
	must(t, f.admin.PutObject(f.ctx, bucket, "b", []byte("the real b")))
	must(t, f.admin.PutObject(f.ctx, bucket, "a/../b", []byte("not b")))

	f.moveTo(sb, target, "")
	stuck := f.waitCondition(sb, bkv1.ConditionStalled, metav1.ConditionTrue, bkv1.ReasonMoveFailed)
	if msg := findCond(stuck, bkv1.ConditionStalled).Message; !strings.Contains(msg, "1 objects could not be copied") || !strings.Contains(msg, `"a/../b"`) {
		t.Errorf("MoveFailed message %q: want the one key counted and named", msg)
	}
	if stuck.Status.ObjectStore != f.store || stuck.Status.Move.SwitchedAt != nil {
		t.Errorf("a move with an uncopied key cut over: objectStore %q", stuck.Status.ObjectStore)
	}
	tgtAdmin := adminOf(t, f.ctx, versity)
	if body, err := tgtAdmin.GetObject(f.ctx, bucket, "b", 100); err != nil || string(body) != "the real b" {
		t.Errorf("b on the target: %q, %v; want the source's b", body, err)
	}
	if page, err := tgtAdmin.ListObjectVersions(f.ctx, bucket, nil); err != nil || len(page.Versions) != 1 {
		t.Errorf("the target holds %+v (%v), want b alone", page.Versions, err)
	}

	must(t, f.admin.DeleteObject(f.ctx, bucket, "a/../b"))
	done := f.waitMove(sb, bkv1.MoveDone, 2*time.Minute)
	if done.Status.ObjectStore != target {
		t.Errorf("after the move: objectStore %q, want %q", done.Status.ObjectStore, target)
	}
}
