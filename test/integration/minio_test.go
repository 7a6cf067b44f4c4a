package integration_test

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// TestMinIOStorageBucketLifecycle: StorageBuckets on a MinIO ObjectStore that declares
// no IAM (accessProvider None) become Ready with what MinIO holds of their
// configuration applied (versioning, tags, lifecycle; MinIO has no public-access block,
// which the Configured condition says, and the operator writes none: MinIO would take a
// DELETE of one for a DeleteBucket), their read-write probe healthy. Deleted, a Purge
// claim's bucket goes with every version and delete marker, and a Retain claim's stays
// with its data, released. A rule MinIO takes and keeps part of (no
// AbortIncompleteMultipartUpload beside an expiration) is NotSupportedByStore, by name,
// not a Configured claim whose rule each sync writes again. MinIO is not one of everyStore: this one test runs a server
// of its own for the whole path, so the suite's time does not grow by a fourth store.
func TestMinIOStorageBucketLifecycle(t *testing.T) {
	server := testenv.NewS3(t, testenv.MinIO)
	f := newFixture(t, server, func(store *bkv1.ObjectStore) {
		store.Spec.AccessProvider = &bkv1.AccessProvider{Type: bkv1.AccessProviderNone}
	})
	rules := []bkv1.LifecycleRule{{ID: "expire-logs", Prefix: "logs/", ExpirationDays: ptr32(30), NoncurrentVersionExpirationDays: ptr32(7)}}
	sb := f.bucket("minio", func(sb *bkv1.StorageBucket) {
		sb.Spec.Versioning = bkv1.VersioningEnabled
		sb.Spec.Tags = map[string]string{"team": "media"}
		sb.Spec.Lifecycle = &bkv1.Lifecycle{Rules: rules}
		sb.Spec.DeletionPolicy = bkv1.DeletionPolicyPurge
		probeEvery(10*time.Second, bkv1.ProbeModeReadWrite)(sb) // the shortest interval admission takes
	})
	kept := f.bucket("kept", func(sb *bkv1.StorageBucket) { sb.Spec.DeletionPolicy = bkv1.DeletionPolicyRetain })
	// MinIO takes an AbortIncompleteMultipartUpload beside an expiration and drops it.
	abort := f.bucket("abort", func(sb *bkv1.StorageBucket) {
		sb.Spec.Tags = map[string]string{"team": "media"}
		sb.Spec.Lifecycle = &bkv1.Lifecycle{Rules: []bkv1.LifecycleRule{{ID: "tmp", Prefix: "tmp/", ExpirationDays: ptr32(1), AbortIncompleteMultipartUploadDays: ptr32(2)}}}
		sb.Spec.DeletionPolicy = bkv1.DeletionPolicyPurge
	})
	got := f.waitCondition(sb, bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
	if c := findCond(got, bkv1.ConditionConfigured); c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "the store has no public access block") {
		t.Errorf("Configured: %s", describe(got.Status.Conditions))
	}
	got = f.waitCondition(sb, bkv1.ConditionAvailable, metav1.ConditionTrue, bkv1.ReasonProbeSucceeded)
	if got.Status.Available == nil || !*got.Status.Available || got.Status.LastProbeTime == nil {
		t.Errorf("probe status: available=%v lastProbeTime=%v", got.Status.Available, got.Status.LastProbeTime)
	}
	kept = f.waitCondition(kept, bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
	abort = f.waitCondition(abort, bkv1.ConditionReady, metav1.ConditionFalse, bkv1.ReasonNotSupportedByStore)
	if c := findCond(abort, bkv1.ConditionReady); !strings.Contains(c.Message, `lifecycle (it keeps no abortIncompleteMultipartUploadDays of rule "tmp")`) {
		t.Errorf("Ready of a claim whose rule MinIO keeps part of: %s", c.Message)
	}
	if tags, err := f.admin.GetBucketTagging(f.ctx, abort.Status.BucketName); err != nil || tags["team"] != "media" {
		t.Errorf("the other settings of a claim whose rule MinIO keeps part of: tags %v, %v", tags, err)
	}
	wantKept := []s3.LifecycleRule{{ID: "tmp", Prefix: "tmp/", ExpirationDays: ptr32(1)}}
	if have, err := f.admin.GetBucketLifecycle(f.ctx, abort.Status.BucketName); err != nil || !reflect.DeepEqual(have, wantKept) {
		t.Errorf("lifecycle MinIO kept: %+v, %v; want %+v", have, err, wantKept)
	}
	must(t, k8s.Delete(f.ctx, abort))
	f.waitGone(abort)

	bucket := got.Status.BucketName
	if _, err := f.admin.HeadBucket(f.ctx, bucket); err != nil {
		t.Fatalf("bucket %s on MinIO: %v", bucket, err)
	}
	if tags, err := f.admin.GetBucketTagging(f.ctx, bucket); err != nil || tags["team"] != "media" || tags[bkv1.TagClaim] != f.ns+"/minio" || tags[bkv1.TagUID] != f.uidTagOf(got) {
		t.Errorf("tags on MinIO: %v, %v", tags, err)
	}
	if v, err := f.admin.GetBucketVersioning(f.ctx, bucket); err != nil || v != s3.VersioningEnabled {
		t.Errorf("versioning on MinIO: %q, %v", v, err)
	}
	want := []s3.LifecycleRule{{ID: "expire-logs", Prefix: "logs/", ExpirationDays: ptr32(30), NoncurrentVersionExpirationDays: ptr32(7)}}
	if have, err := f.admin.GetBucketLifecycle(f.ctx, bucket); err != nil || !reflect.DeepEqual(have, want) {
		t.Errorf("lifecycle on MinIO: %+v, %v; want %+v", have, err, want)
	}
	if _, err := f.admin.GetPublicAccessBlock(f.ctx, bucket); s3.KindOf(err) != s3.KindNotImplemented {
		t.Errorf("MinIO's public-access block: %v, want NotImplemented (the store table says so)", err)
	}

	// Purge: versions and delete markers go, then the bucket.
	for i := range 6 {
		must(t, f.admin.PutObject(f.ctx, bucket, fmt.Sprintf("obj-%d", i%3), []byte(fmt.Sprint(i))))
	}
	must(t, f.admin.DeleteObject(f.ctx, bucket, "obj-0")) // a delete marker
	must(t, k8s.Delete(f.ctx, got))
	f.waitGone(got)
	if _, err := f.admin.HeadBucket(f.ctx, bucket); s3.KindOf(err) != s3.KindNotFound {
		t.Fatalf("bucket still on MinIO after its purge: %v", err)
	}

	// Retain: the bucket and its object stay, released (the claim's UID off its tags).
	keptBucket := kept.Status.BucketName
	must(t, f.admin.PutObject(f.ctx, keptBucket, "data", []byte("kept")))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		emptyAndDelete(ctx, f.admin, keptBucket)
	})
	must(t, k8s.Delete(f.ctx, kept))
	f.waitGone(kept)
	if body, err := f.admin.GetObject(f.ctx, keptBucket, "data", 16); err != nil || string(body) != "kept" {
		t.Errorf("the Retain claim's object after its deletion: %q, %v", body, err)
	}
	if tags, err := f.admin.GetBucketTagging(f.ctx, keptBucket); err != nil || tags[bkv1.TagClaim] != f.ns+"/kept" || strings.Contains(tags[bkv1.TagUID], string(kept.UID)) {
		t.Errorf("the Retain claim's bucket after its deletion: tags %v (%v); want it released", tags, err)
	}
}

// TestMinIOObjectLockPurge is TestObjectLockPurge on a MinIO of its own: MinIO refuses
// to delete a locked version with InvalidRequest ("Object is WORM protected"), not
// AccessDenied, and a Purge still deletes what no lock keeps, reports DeletionBlocked
// with the date the retention ends, completes once the admin allows the Governance
// bypass, and keeps a Compliance bucket, released, when the admin's wait ends.
func TestMinIOObjectLockPurge(t *testing.T) {
	testObjectLockPurge(t, testenv.NewS3(t, testenv.MinIO))
}

// TestMinIOAdoptionIsRefused: MinIO's bucket ACLs name no owner, so without the store
// admin's statement that the store has one account (guardrails.adoptionSingleAccount)
// the adoption guardrail finds no bucket there to be the operator's account's. A
// tenant's claim adopting an untagged bucket of the operator's own, in a namespace the
// store allows to adopt, is refused (BucketNameTaken), and the bucket keeps its data and
// tags and gets no policy.
func TestMinIOAdoptionIsRefused(t *testing.T) {
	server := testenv.NewS3(t, testenv.MinIO)
	f := newFixture(t, server, func(store *bkv1.ObjectStore) {
		store.Spec.AccessProvider = &bkv1.AccessProvider{Type: bkv1.AccessProviderNone}
		store.Spec.Guardrails.AdoptionAllowedNamespaces = &metav1.LabelSelector{}
	})
	bucket := f.ns + "-mine"
	must(t, f.admin.CreateBucket(f.ctx, bucket, ""))
	must(t, f.admin.PutObject(f.ctx, bucket, "ledger", []byte("the platform team's")))
	tags := map[string]string{"owner": "platform"}
	must(t, f.admin.PutBucketTagging(f.ctx, bucket, tags))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		emptyAndDelete(ctx, f.admin, bucket)
	})

	sb := &bkv1.StorageBucket{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "mine"},
		Spec: bkv1.StorageBucketSpec{ObjectStoreRef: bkv1.ObjectStoreReference{Name: f.store}, BucketName: bucket,
			Adoption: bkv1.AdoptionIfUnowned, DeletionPolicy: bkv1.DeletionPolicyPurge}}
	must(t, asTenant(t, f).Create(f.ctx, sb))
	f.waitCondition(sb, bkv1.ConditionStalled, metav1.ConditionTrue, bkv1.ReasonBucketNameTaken)
	if got, err := f.admin.GetBucketTagging(f.ctx, bucket); err != nil || !reflect.DeepEqual(got, tags) {
		t.Errorf("the refused bucket's tags: %v, %v; want %v", got, err, tags)
	}
	if body, err := f.admin.GetObject(f.ctx, bucket, "ledger", 64); err != nil || string(body) != "the platform team's" {
		t.Errorf("the refused bucket's object: %q, %v", body, err)
	}
	if p, err := f.admin.GetBucketPolicy(f.ctx, bucket); err != nil || p != "" {
		t.Errorf("the refused bucket's policy: %q, %v; want none", p, err)
	}
	must(t, k8s.Delete(f.ctx, sb))
	f.waitGone(sb)
	if _, err := f.admin.HeadBucket(f.ctx, bucket); err != nil {
		t.Errorf("the refused bucket after its claim's deletion (Purge): %v, want it kept", err)
	}
}
