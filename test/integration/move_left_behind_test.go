package integration_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/metrics"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// TestDeletionReachesWhatMovesLeftBehind: a bucket moved twice (SeaweedFS to Ceph RGW
// to Versity) left a frozen copy on each old home, listed in status.leftBehind. Its
// claim's deletion with Purge deletes all three buckets, not only the one it lives in,
// so no bucket tagged for a gone claim is left; a claim deleted with Retain after a
// move releases both its bucket and the copy it left (tagged for its namespace, no
// longer for its UID), the copy still tagged as moved.
func TestDeletionReachesWhatMovesLeftBehind(t *testing.T) {
	f := newFixture(t, seaweed)
	rgwStore, versityStore := f.storeOn(rgw), f.storeOn(versity)
	admins := map[string]s3.Client{f.store: f.admin, rgwStore: adminOf(t, f.ctx, rgw), versityStore: adminOf(t, f.ctx, versity)}
	purged := f.waitCondition(f.bucket("purged", func(sb *bkv1.StorageBucket) { sb.Spec.DeletionPolicy = bkv1.DeletionPolicyPurge }),
		bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
	kept := f.waitCondition(f.bucket("kept", func(sb *bkv1.StorageBucket) { sb.Spec.DeletionPolicy = bkv1.DeletionPolicyRetain }),
		bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
	f.seedObjects(f.admin, purged.Status.BucketName, 5)
	f.seedObjects(f.admin, kept.Status.BucketName, 5)

	f.moveTo(purged, rgwStore, "")
	f.moveTo(kept, rgwStore, "")
	f.waitMove(purged, bkv1.MoveDone, 2*time.Minute)
	kept = f.waitMove(kept, bkv1.MoveDone, 2*time.Minute)
	f.moveTo(purged, versityStore, "")
	f.eventually(2*time.Minute, "the second move Done", func() error {
		purged = f.get(purged)
		if m := purged.Status.Move; m == nil || m.To != versityStore || m.Phase != bkv1.MoveDone {
			return fmt.Errorf("move %+v", m)
		}
		return nil
	})
	if want := []string{f.store, rgwStore}; !slices.Equal(purged.Status.LeftBehind, want) {
		t.Errorf("status.leftBehind %v after two moves, want %v", purged.Status.LeftBehind, want)
	}
	if want := []string{f.store}; !slices.Equal(kept.Status.LeftBehind, want) {
		t.Errorf("status.leftBehind %v after one move, want %v", kept.Status.LeftBehind, want)
	}

	// Purge: every copy goes with the claim.
	must(t, k8s.Delete(f.ctx, purged))
	f.waitGone(purged)
	for store, c := range admins {
		if _, err := c.HeadBucket(f.ctx, purged.Status.BucketName); s3.KindOf(err) != s3.KindNotFound {
			t.Errorf("bucket %s on %s after the Purge of its claim: %v, want it gone", purged.Status.BucketName, store, err)
		}
	}

	// Retain: the bucket and its copy stay, released.
	bucket := kept.Status.BucketName
	t.Cleanup(func() {
		for _, c := range []s3.Client{admins[f.store], admins[rgwStore]} {
			emptyAndDelete(context.Background(), c, bucket)
		}
	})
	must(t, k8s.Delete(f.ctx, kept))
	f.waitGone(kept)
	for store, moved := range map[string]bool{f.store: true, rgwStore: false} {
		tags, err := admins[store].GetBucketTagging(f.ctx, bucket)
		if err != nil || strings.Contains(tags[bkv1.TagUID], string(kept.UID)) || tags[bkv1.TagClaim] == "" || (tags[bkv1.TagMovedTo] != "") != moved {
			t.Errorf("bucket %s on %s after its claim's deletion with Retain: tags %v (%v); want it released, tagged as moved: %v", bucket, store, tags, err, moved)
		}
	}
}

// emptyAndDelete deletes bucket and every version in it, as the store's admin; a
// bucket's freeze stands in the way of none of it once the policy is gone.
func emptyAndDelete(ctx context.Context, c s3.Client, bucket string) {
	_ = c.DeleteBucketPolicy(ctx, bucket)
	for {
		page, err := c.ListObjectVersions(ctx, bucket, nil)
		if err != nil || len(page.Versions) == 0 {
			break
		}
		ids := make([]s3.ObjectID, 0, len(page.Versions))
		for _, v := range page.Versions {
			ids = append(ids, s3.ObjectID{Key: v.Key, VersionID: v.VersionID})
		}
		if c.DeleteObjects(ctx, bucket, ids) != nil {
			break
		}
	}
	_ = c.DeleteBucket(ctx, bucket)
}

// TestLockedCopiesAMoveLeftBehind, from each store: two claims with deletionPolicy Purge
// and a Governance default retention of a day hold a locked version each and move to
// another store, the stores' releaseBlockedDeletionAfter being lockBound; one asks for
// its source to be deleted a second after the cutover. That deletion meets the lock:
// the source keeps its version, frozen and listed in status.leftBehind, the move's
// message says so and a DeletionBlocked Event, and it waits for the lock (the date the
// store gives, or a minute where it gives none). Then the other claim's namespace is
// deleted, and later the first claim: each reports DeletionBlocked for its copy on the
// old store, with the metric. While they wait, the old store gets at most a pass
// (lockPassRequests) of each waiting claim a minute, besides the pass that releases it
// and one a wake-up scheduled before brings: a second the claims waited cost it about
// five requests a claim before. Each claim goes
// within the bound, its copy kept with its locked version, frozen, released and tagged
// for the store's admin, still tagged as moved; the bucket on the new home is purged,
// or kept the same way where the lock holds there too.
func TestLockedCopiesAMoveLeftBehind(t *testing.T) {
	for _, pair := range []struct{ src, tgt *testenv.S3Server }{{seaweed, rgw}, {versity, seaweed}, {rgw, versity}} {
		t.Run(string(pair.src.Kind)+"-to-"+string(pair.tgt.Kind), func(t *testing.T) {
			t.Parallel()
			testLockedCopies(t, pair.src, pair.tgt)
		})
	}
}

// lockPassRequests bounds the requests one pass of a blocked deletion sends a store:
// the bucket's head and tags, its freeze lifted and put back, a listing of uploads and
// of versions, a deletion, and what locks the version (retention, legal hold, default).
const lockPassRequests = 15

func testLockedCopies(t *testing.T, src, tgt *testenv.S3Server) {
	f := newFixture(t, src, withLockBound)
	f.longer(10 * time.Minute)
	target := f.storeOn(tgt, withLockBound)
	targetAdmin := adminOf(t, f.ctx, tgt)
	tenant := f.tenantNamespace("sb-lock-moved-")
	locked := func(sb *bkv1.StorageBucket) {
		sb.Spec.DeletionPolicy = bkv1.DeletionPolicyPurge
		sb.Spec.ObjectLock = governance(1)
	}
	vault, archive := f.bucket("vault", locked), f.bucketIn(tenant.Name, "archive", locked)
	claims := []*bkv1.StorageBucket{vault, archive}
	buckets := map[string]string{}
	for _, sb := range claims {
		buckets[sb.Name] = f.waitCondition(sb, bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady).Status.BucketName
		must(t, f.admin.PutObject(f.ctx, buckets[sb.Name], "kept", []byte("locked for a day")))
	}
	f.update(k8s, vault, func() {
		vault.Spec.Move = &bkv1.MoveSpec{DeleteSourceAfter: &metav1.Duration{Duration: time.Second}}
		vault.Spec.ObjectStoreRef.Name = target
	})
	f.moveTo(archive, target, "")
	for _, sb := range claims {
		f.waitMove(sb, bkv1.MoveDone, 4*time.Minute)
	}

	// The source's deletion meets the lock and waits for it.
	f.waitEvent(vault, bkv1.ReasonDeletionBlocked)
	got := f.get(vault)
	if m := got.Status.Move; m.SourceDeleted || !slices.Contains(got.Status.LeftBehind, f.store) || !strings.Contains(m.Message, "an object lock keeps") {
		t.Errorf("after the source's deletion met the lock: move %+v, status.leftBehind %v", m, got.Status.LeftBehind)
	}
	if c := findCond(got, bkv1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("Ready while the source waits: %s", describe(got.Status.Conditions))
	}

	// The other claim's namespace is deleted, while the source's deletion waits; then
	// the claim itself.
	must(t, k8s.Delete(f.ctx, tenant))
	must(t, k8s.DeleteAllOf(f.ctx, &bkv1.StorageBucket{}, client.InNamespace(tenant.Name)))
	f.waitLockedCopyReleased(archive, 2)
	must(t, k8s.Delete(f.ctx, vault))
	f.waitLockedCopyReleased(vault, 1)
	f.waitEvent(vault, bkv1.EventReasonBucketReleased) // a namespace being deleted takes no new Events

	for _, sb := range claims {
		bucket := buckets[sb.Name]
		if left := f.versionsOf(bucket); left != "kept" {
			t.Errorf("%s: the copy on the old store holds %q, want its locked version", sb.Name, left)
		}
		tags, err := f.admin.GetBucketTagging(f.ctx, bucket)
		must(t, err)
		if strings.Contains(tags[bkv1.TagUID], string(sb.UID)) || !strings.HasPrefix(tags[bkv1.TagDeletionBlocked], "Purge blocked by 1 locked object versions") || tags[bkv1.TagMovedTo] == "" {
			t.Errorf("%s: the copy's tags %v; want it released, tagged %s and still as moved", sb.Name, tags, bkv1.TagDeletionBlocked)
		}
		if policy, err := f.admin.GetBucketPolicy(f.ctx, bucket); err != nil || !strings.Contains(policy, bkv1.MoveFreezeSid) {
			t.Errorf("%s: the kept copy's policy %q (%v), want its writes still denied", sb.Name, policy, err)
		}
		if _, err := targetAdmin.HeadBucket(f.ctx, bucket); s3.KindOf(err) != s3.KindNotFound {
			// Kept on the new home too only where the lock holds there.
			tags, err := targetAdmin.GetBucketTagging(f.ctx, bucket)
			if err != nil || tags[bkv1.TagDeletionBlocked] == "" || strings.Contains(tags[bkv1.TagUID], string(sb.UID)) {
				t.Errorf("%s: the bucket on the new home is still there with tags %v (%v); want it purged, or kept, released and tagged %s", sb.Name, tags, err, bkv1.TagDeletionBlocked)
			}
		} else if !retentionPerVersion(tgt.Kind) {
			t.Errorf("%s: the bucket on %s is gone, though its default retention locks what was copied into it", sb.Name, tgt.Kind)
		}
	}
	removeNamespace(t, f.ctx, tenant.Name)
}

// waitLockedCopyReleased waits for a claim being deleted, whose copy on the fixture's
// store holds a locked version, to report DeletionBlocked for that copy (with the
// metric), then to go within lockBound of when it blocked. From when it blocked until
// it goes, the store may get a pass of each of the waiting claims a minute, the pass
// that releases it, and one that a wake-up scheduled before it blocked brings.
func (f *fixture) waitLockedCopyReleased(sb *bkv1.StorageBucket, waiting int) {
	f.t.Helper()
	got := f.waitCondition(sb, bkv1.ConditionReady, metav1.ConditionFalse, bkv1.ReasonDeletionBlocked)
	from, before := time.Now(), requests.snapshot(f.store)
	b := got.Status.DeletionBlocked
	if b == nil || b.LockedVersions != 1 || !b.ReleaseAt.Time.Equal(b.Since.Add(lockBound)) {
		f.t.Fatalf("%s: status.deletionBlocked %+v, want the copy's locked version and the claim released %s after it blocked", sb.Name, b, lockBound)
	}
	msg := findCond(got, bkv1.ConditionReady).Message
	for _, want := range []string{fmt.Sprintf("on ObjectStore %q", f.store), "a copy a move left behind", "releaseBlockedDeletionAfter", bkv1.AnnotationDeletionPolicy} {
		if !strings.Contains(msg, want) {
			f.t.Errorf("%s: DeletionBlocked message lacks %q: %s", sb.Name, want, msg)
		}
	}
	if since, ok := series(f.t, metrics.BucketDeletionBlocked, map[string]string{"namespace": sb.Namespace, "name": sb.Name}); !ok || int64(since) != b.Since.Unix() {
		f.t.Errorf("%s: deletion-blocked metric %v (present %v), want %d", sb.Name, since, ok, b.Since.Unix())
	}

	f.eventually(lockBound+lockBoundSlack+time.Minute, "the release of "+sb.Name, func() error {
		err := k8s.Get(f.ctx, objKey(sb), &bkv1.StorageBucket{})
		if err == nil {
			return fmt.Errorf("still there")
		}
		return client.IgnoreNotFound(err)
	})
	waited := time.Since(from)
	_, _, ops := since(before, requests.snapshot(f.store))
	delete(ops, "ListBuckets") // the store's health check, every five seconds
	sent := 0
	for _, n := range ops {
		sent += n
	}
	if allowed := lockPassRequests * (2 + waiting*(1+int(waited/time.Minute))); sent > allowed {
		f.t.Errorf("%s: ObjectStore %s got %d requests in the %s it waited blocked (%.0f a minute), more than %d: %v", sb.Name, f.store, sent, waited.Round(time.Second), float64(sent)/waited.Minutes(), allowed, ops)
	} else {
		f.t.Logf("%s: ObjectStore %s got %d requests in the %s it waited blocked (%.0f a minute): %v", sb.Name, f.store, sent, waited.Round(time.Second), float64(sent)/waited.Minutes(), ops)
	}
	if late := time.Since(b.ReleaseAt.Time); late > lockBoundSlack {
		f.t.Errorf("%s went %s after its releaseAt, more than %s", sb.Name, late.Round(time.Second), lockBoundSlack)
	}
	if _, ok := series(f.t, metrics.BucketDeletionBlocked, map[string]string{"namespace": sb.Namespace, "name": sb.Name}); ok {
		f.t.Errorf("%s: the deletion-blocked metric outlives the claim", sb.Name)
	}
}
