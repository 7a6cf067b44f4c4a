package integration_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
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
