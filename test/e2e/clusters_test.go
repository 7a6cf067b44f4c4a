package e2e_test

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/operator"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// TestOtherClusterNeverRebinds runs two control planes, each with its operator at its
// default cluster id, on one S3 server. A bucket retained by cluster A is never bound
// by cluster B, even by a claim with the same namespace, name and store prefix (so the
// same derived bucket name): before cluster tags, B would have re-bound A's data.
// Cluster A's own later claim of that namespace and name still binds it again.
func TestOtherClusterNeverRebinds(t *testing.T) {
	startManager(t, cfg, operator.Options{})
	prefix := "cl-" + randomSuffix(t)
	withPrefix := func(s *bkv1.ObjectStore) { s.Spec.BucketNamePrefix = prefix }
	f := newFixture(t, "", withPrefix)

	retained := &bkv1.StorageBucket{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "data"},
		Spec: bkv1.StorageBucketSpec{ObjectStoreRef: bkv1.ObjectStoreReference{Name: f.store}, DeletionPolicy: bkv1.DeletionPolicyRetain}}
	must(t, k8s.Create(f.ctx, retained))
	got := f.waitCondition(retained, bkv1.ConditionReady, metav1.ConditionTrue, "", 90*time.Second)
	bucket := got.Status.BucketName
	payload := []byte("cluster A's data")
	must(t, f.s3.PutObject(f.ctx, bucket, "report.csv", payload))
	t.Cleanup(func() { // the bucket is retained on purpose; the test removes it at the end
		_ = f.s3.DeleteObjects(context.Background(), bucket, []s3.ObjectID{{Key: "report.csv"}})
		_ = f.s3.DeleteBucket(context.Background(), bucket)
	})
	must(t, k8s.Delete(f.ctx, got))
	f.waitGone(got, 90*time.Second)
	releasedTags, err := f.s3.GetBucketTagging(f.ctx, bucket)
	must(t, err)
	if claimUID, _, _ := strings.Cut(releasedTags[bkv1.TagUID], "/"); releasedTags[bkv1.TagCluster] == "" || claimUID != "" {
		t.Fatalf("retained bucket's tags = %v: want released (cluster tag, no claim uid)", releasedTags)
	}

	// Cluster B: its own control plane and operator, the same namespace, store prefix
	// and claim name.
	cpB, err := testenv.StartControlPlane()
	must(t, err)
	t.Cleanup(func() { stop("second control plane", cpB.Stop) })
	k8sB, err := client.New(cpB.Config, client.Options{Scheme: operator.Scheme()})
	must(t, err)
	startManager(t, cpB.Config, operator.Options{})
	must(t, k8sB.Create(f.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.ns}}))
	must(t, k8sB.Create(f.ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "creds"},
		StringData: map[string]string{bkv1.CredentialsKeyAccessKeyID: seaweed.AccessKeyID, bkv1.CredentialsKeySecretAccessKey: seaweed.SecretAccessKey}}))
	storeB := &bkv1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Name: f.store}, Spec: bkv1.ObjectStoreSpec{
		Endpoint: seaweed.Endpoint, Region: seaweed.Region, ForcePathStyle: true, BucketNamePrefix: prefix,
		CredentialsSecretRef: &bkv1.SecretReference{Namespace: f.ns, Name: "creds"},
		HealthCheck:          bkv1.StoreHealthCheck{Interval: &metav1.Duration{Duration: 5 * time.Second}},
	}}
	must(t, k8sB.Create(f.ctx, storeB))
	twin := &bkv1.StorageBucket{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "data"},
		Spec: bkv1.StorageBucketSpec{ObjectStoreRef: bkv1.ObjectStoreReference{Name: f.store}, DeletionPolicy: bkv1.DeletionPolicyPurge, Adoption: bkv1.AdoptionIfUnowned}}
	must(t, k8sB.Create(f.ctx, twin))
	fB := &fixture{t: t, ctx: f.ctx, ns: f.ns, store: f.store, s3: f.s3}
	stalled := &bkv1.StorageBucket{}
	fB.eventually(90*time.Second, "cluster B's claim to stall with "+bkv1.ReasonOwnedByAnotherCluster, func() error {
		if err := k8sB.Get(f.ctx, client.ObjectKeyFromObject(twin), stalled); err != nil {
			return err
		}
		if c := findCondition(stalled, bkv1.ConditionStalled); c == nil || c.Reason != bkv1.ReasonOwnedByAnotherCluster {
			return errorf("conditions: %s", testenv.DescribeConditions(stalled.Status.Conditions))
		}
		return nil
	})
	// Its deletion (Purge) leaves A's bucket alone.
	must(t, k8sB.Delete(f.ctx, stalled))
	fB.eventually(90*time.Second, "cluster B's claim to go", func() error {
		return ignoreGone(k8sB.Get(f.ctx, client.ObjectKeyFromObject(twin), &bkv1.StorageBucket{}))
	})
	if tags, err := f.s3.GetBucketTagging(f.ctx, bucket); err != nil || !maps.Equal(tags, releasedTags) {
		t.Errorf("cluster B changed the tags of cluster A's bucket: %v, %v; want %v", tags, err, releasedTags)
	}
	if data, err := f.s3.GetObject(f.ctx, bucket, "report.csv", 1<<20); err != nil || !bytes.Equal(data, payload) {
		t.Errorf("cluster A's data after cluster B's attempt: %q, %v", data, err)
	}
	must(t, k8sB.Delete(f.ctx, storeB))

	// Cluster A binds its retained bucket again, data and all.
	again := &bkv1.StorageBucket{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "data"},
		Spec: bkv1.StorageBucketSpec{ObjectStoreRef: bkv1.ObjectStoreReference{Name: f.store}, DeletionPolicy: bkv1.DeletionPolicyRetain}}
	must(t, k8s.Create(f.ctx, again))
	if got := f.waitCondition(again, bkv1.ConditionReady, metav1.ConditionTrue, "", 90*time.Second); got.Status.BucketName != bucket {
		t.Fatalf("cluster A's new claim bound %q, want its retained %q", got.Status.BucketName, bucket)
	}
}

func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }

func ignoreGone(err error) error {
	if err == nil {
		return errorf("still there")
	}
	return client.IgnoreNotFound(err)
}
