package integration_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// TestRetainReleasesForTheSameClaimOnly: a retained bucket keeps its data and can be
// bound again by a StorageBucket with the same namespace and name, by nobody else.
func TestRetainReleasesForTheSameClaimOnly(t *testing.T) {
	f := newFixture(t, seaweed)
	sb := f.bucket("keeper")
	got := f.waitCondition(sb, bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
	bucket := got.Status.BucketName
	must(t, f.admin.PutObject(f.ctx, bucket, "data.txt", []byte("kept")))

	must(t, k8s.Delete(f.ctx, got))
	f.waitGone(got)
	tags, err := f.admin.GetBucketTagging(f.ctx, bucket)
	must(t, err)
	if tags[bkv1.TagClaim] != f.ns+"/keeper" || tags[bkv1.TagUID] != f.releasedUIDTag() {
		t.Fatalf("released bucket tags = %v, want the claim and the namespace's UID without the claim's", tags)
	}

	// Another namespace names the bucket explicitly: refused, as outside its lane.
	other := newFixture(t, seaweed)
	intruder := other.bucket("keeper", func(sb *bkv1.StorageBucket) { sb.Spec.BucketName = bucket })
	other.waitCondition(intruder, bkv1.ConditionStalled, metav1.ConditionTrue, bkv1.ReasonBucketNameNotAllowed)
	// With lanes switched off the store decides by the tags: still refused.
	shared := newFixture(t, seaweed, func(s *bkv1.ObjectStore) { s.Spec.Guardrails.AllowBucketNamesOutsideNamespace = true })
	intruder = shared.bucket("keeper", func(sb *bkv1.StorageBucket) { sb.Spec.BucketName = bucket })
	shared.waitCondition(intruder, bkv1.ConditionStalled, metav1.ConditionTrue, bkv1.ReasonOwnedByAnotherClaim)

	// The same namespace and name binds it again, data intact.
	again := f.bucket("keeper")
	rebound := f.waitCondition(again, bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
	if rebound.Status.BucketName != bucket {
		t.Fatalf("re-created claim got bucket %q, want %q", rebound.Status.BucketName, bucket)
	}
	if body, err := f.admin.GetObject(f.ctx, bucket, "data.txt", 64); err != nil || string(body) != "kept" {
		t.Fatalf("retained data: %q, %v", body, err)
	}
	if tags, _ := f.admin.GetBucketTagging(f.ctx, bucket); tags[bkv1.TagUID] != f.uidTagOf(rebound) {
		t.Fatalf("re-bound bucket tags = %v", tags)
	}
}

// TestDeleteWaitsUntilEmpty: Delete never empties a bucket; it waits, on every store,
// until the bucket is empty.
func TestDeleteWaitsUntilEmpty(t *testing.T) {
	for _, server := range everyStore() {
		t.Run(string(server.Kind), func(t *testing.T) {
			t.Parallel()
			deleteWaitsUntilEmpty(t, newFixture(t, server))
		})
	}
}

func deleteWaitsUntilEmpty(t *testing.T, f *fixture) {
	sb := f.bucket("tidy", func(sb *bkv1.StorageBucket) { sb.Spec.DeletionPolicy = bkv1.DeletionPolicyDelete })
	got := f.waitCondition(sb, bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
	bucket := got.Status.BucketName
	must(t, f.admin.PutObject(f.ctx, bucket, "left-over", []byte("x")))

	must(t, k8s.Delete(f.ctx, got))
	f.eventually(30e9, "deletion to be blocked", func() error {
		cur := f.get(sb)
		if c := findCond(cur, bkv1.ConditionReady); c == nil || c.Reason != bkv1.ReasonBucketNotEmpty {
			return errf("conditions %s", describe(cur.Status.Conditions))
		}
		return nil
	})
	if _, err := f.admin.HeadBucket(f.ctx, bucket); err != nil {
		t.Fatalf("a non-empty bucket was deleted: %v", err)
	}
	f.waitEvent(got, bkv1.ReasonBucketNotEmpty)

	must(t, f.admin.DeleteObject(f.ctx, bucket, "left-over"))
	f.waitGone(got)
	if _, err := f.admin.HeadBucket(f.ctx, bucket); s3.KindOf(err) != s3.KindNotFound {
		t.Fatalf("bucket still there after deletion: %v", err)
	}
}

// TestPurgeDeletesVersionsAndMarkers: Purge empties a versioned bucket of every
// version and delete marker, on every store, and then deletes it.
func TestPurgeDeletesVersionsAndMarkers(t *testing.T) {
	for _, server := range everyStore() {
		t.Run(string(server.Kind), func(t *testing.T) {
			t.Parallel()
			purgeDeletesVersionsAndMarkers(t, newFixture(t, server))
		})
	}
}

func purgeDeletesVersionsAndMarkers(t *testing.T, f *fixture) {
	sb := f.bucket("purge", func(sb *bkv1.StorageBucket) {
		sb.Spec.DeletionPolicy = bkv1.DeletionPolicyPurge
		sb.Spec.Versioning = bkv1.VersioningEnabled
	})
	got := f.waitCondition(sb, bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
	bucket := got.Status.BucketName
	for i := range 30 {
		key := fmt.Sprintf("obj-%d", i%10)
		must(t, f.admin.PutObject(f.ctx, bucket, key, []byte(fmt.Sprint(i))))
	}
	for i := range 5 {
		must(t, f.admin.DeleteObject(f.ctx, bucket, fmt.Sprintf("obj-%d", i))) // delete markers
	}
	page, err := f.admin.ListObjectVersions(f.ctx, bucket, nil)
	must(t, err)
	markers := 0
	for _, v := range page.Versions {
		if v.IsDeleteMarker {
			markers++
		}
	}
	if len(page.Versions) < 35 || markers != 5 {
		t.Fatalf("setup: %d versions, %d delete markers", len(page.Versions), markers)
	}

	must(t, k8s.Delete(f.ctx, got))
	f.waitGone(got)
	if _, err := f.admin.HeadBucket(f.ctx, bucket); s3.KindOf(err) != s3.KindNotFound {
		t.Fatalf("bucket still there after purge: %v", err)
	}
}

// TestStoreDeletionWaitsForItsBuckets: a store cannot disappear from under buckets whose
// deletion policy still needs it.
func TestStoreDeletionWaitsForItsBuckets(t *testing.T) {
	f := newFixture(t, seaweed)
	sb := f.bucket("user")
	f.waitCondition(sb, bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
	store := &bkv1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Name: f.store}}
	must(t, k8s.Delete(f.ctx, store))
	f.eventually(30e9, "the store to report InUse", func() error {
		must(t, k8s.Get(f.ctx, objKey(store), store))
		c := findStoreCond(store, bkv1.ConditionReady)
		if c == nil || c.Reason != bkv1.ReasonInUse {
			return errf("store conditions %v", store.Status.Conditions)
		}
		return nil
	})
	must(t, k8s.Delete(f.ctx, sb))
	f.waitGone(sb)
	f.waitGone(store)
}

// TestDeletionWhenTheStoreRefusesUs: with the operator's credentials revoked, a Retain
// claim is deleted at once (the bucket stays, as it would anyway); a Delete claim waits
// and says how to abandon the bucket, and the Orphan annotation lets it go without
// touching the store. Once the credentials are back, new claims of the same namespace
// and names bind both buckets again.
func TestDeletionWhenTheStoreRefusesUs(t *testing.T) {
	f := newFixture(t, seaweed)
	kept := f.bucket("kept")
	doomed := f.bucket("doomed", func(sb *bkv1.StorageBucket) { sb.Spec.DeletionPolicy = bkv1.DeletionPolicyDelete })
	keptBucket := f.waitCondition(kept, bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady).Status.BucketName
	doomedBucket := f.waitCondition(doomed, bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady).Status.BucketName

	secret := &corev1.Secret{}
	must(t, k8s.Get(f.ctx, client.ObjectKey{Namespace: f.ns, Name: "store-credentials"}, secret))
	secret.Data[bkv1.CredentialsKeySecretAccessKey] = []byte("revoked-secret-value")
	must(t, k8s.Update(f.ctx, secret))
	store := &bkv1.ObjectStore{}
	f.eventually(60*time.Second, "the store to see the revoked credentials", func() error {
		must(t, k8s.Get(f.ctx, client.ObjectKey{Name: f.store}, store))
		if c := findStoreCond(store, bkv1.ConditionReady); c == nil || c.Reason != bkv1.ReasonCredentialsInvalid {
			return errf("store conditions %v", store.Status.Conditions)
		}
		return nil
	})

	must(t, k8s.Delete(f.ctx, f.get(kept)))
	must(t, k8s.Delete(f.ctx, f.get(doomed)))
	f.waitGone(kept)
	f.eventually(60*time.Second, "the Delete claim to wait with the way out", func() error {
		cur := f.get(doomed)
		if c := findCond(cur, bkv1.ConditionReady); c == nil || c.Reason != bkv1.ReasonCredentialsInvalid ||
			!strings.Contains(c.Message, bkv1.AnnotationDeletionPolicy+"="+bkv1.DeletionPolicyOrphan) {
			return errf("conditions %s", describe(cur.Status.Conditions))
		}
		return nil
	})
	cur := doomed.DeepCopy()
	f.update(k8s, cur, func() { cur.Annotations = map[string]string{bkv1.AnnotationDeletionPolicy: bkv1.DeletionPolicyOrphan} })
	f.waitGone(doomed)
	for _, b := range []string{keptBucket, doomedBucket} {
		if _, err := f.admin.HeadBucket(f.ctx, b); err != nil {
			t.Fatalf("bucket %s is gone after its claim was deleted without reaching the store: %v", b, err)
		}
	}

	must(t, k8s.Get(f.ctx, client.ObjectKeyFromObject(secret), secret))
	secret.Data[bkv1.CredentialsKeySecretAccessKey] = []byte(seaweed.SecretAccessKey)
	must(t, k8s.Update(f.ctx, secret))
	for name, bucket := range map[string]string{"kept": keptBucket, "doomed": doomedBucket} {
		again := f.bucket(name, func(sb *bkv1.StorageBucket) { sb.Spec.DeletionPolicy = bkv1.DeletionPolicyDelete })
		if got := f.waitCondition(again, bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady); got.Status.BucketName != bucket {
			t.Errorf("new claim %s bound %q, want the earlier claim's %q", name, got.Status.BucketName, bucket)
		}
	}
	if log := logs.String(); strings.Contains(log, "revoked-secret-value") {
		t.Fatal("a credential value appears in the manager log")
	}
}
