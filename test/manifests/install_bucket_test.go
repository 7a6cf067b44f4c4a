package manifests

import (
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
)

// The install test's bucket: provisioned once the operator runs, and checked after
// each step (failover, upgrade, uninstall, reinstall) to still be there.

// provision creates an ObjectStore on the test store, reached through the node, waits
// until it is Ready, creates a StorageBucket on it, waits until the bucket is Ready and
// Available, and returns it.
func (in *installer) provision() *bkv1.StorageBucket {
	in.t.Helper()
	endpoint, err := in.cluster.Expose(strings.TrimPrefix(in.store.Endpoint, "http://"))
	if err != nil {
		in.t.Fatal(err)
	}
	in.create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "store-creds"},
		StringData: map[string]string{bkv1.CredentialsKeyAccessKeyID: in.store.AccessKeyID,
			bkv1.CredentialsKeySecretAccessKey: in.store.SecretAccessKey}})
	in.create(&bkv1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Name: "seaweedfs"}, Spec: bkv1.ObjectStoreSpec{
		Endpoint: "http://" + endpoint, Region: in.store.Region, ForcePathStyle: true,
		CredentialsSecretRef: &bkv1.SecretReference{Namespace: namespace, Name: "store-creds"},
	}})
	in.eventually(3*time.Minute, "ObjectStore seaweedfs Ready", func() error {
		store := &bkv1.ObjectStore{}
		if err := in.c.Get(in.ctx, client.ObjectKey{Name: "seaweedfs"}, store); err != nil {
			return err
		}
		if c := apimeta.FindStatusCondition(store.Status.Conditions, bkv1.ConditionReady); c == nil ||
			c.Status != metav1.ConditionTrue || c.ObservedGeneration != store.Generation {
			return fmt.Errorf("condition Ready: %+v", c)
		}
		return nil
	})
	in.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "apps"}})
	sb := &bkv1.StorageBucket{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "photos"}, Spec: bkv1.StorageBucketSpec{
		ObjectStoreRef: bkv1.ObjectStoreReference{Name: "seaweedfs"}, DeletionPolicy: bkv1.DeletionPolicyRetain,
		Probe: bkv1.ProbeSpec{Interval: &metav1.Duration{Duration: 10 * time.Second}, Timeout: &metav1.Duration{Duration: 5 * time.Second}},
	}}
	in.create(sb)
	in.bucketStays(sb, "after install")
	return sb
}

// bucketStays waits until sb is Ready and Available at its generation and its bucket
// exists on the store.
func (in *installer) bucketStays(sb *bkv1.StorageBucket, when string) {
	in.t.Helper()
	got := &bkv1.StorageBucket{}
	in.eventually(3*time.Minute, "StorageBucket Ready and Available "+when, func() error {
		if err := in.c.Get(in.ctx, client.ObjectKeyFromObject(sb), got); err != nil {
			return err
		}
		for _, typ := range []string{bkv1.ConditionReady, bkv1.ConditionAvailable} {
			c := apimeta.FindStatusCondition(got.Status.Conditions, typ)
			if c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != got.Generation {
				return fmt.Errorf("condition %s: %+v", typ, c)
			}
		}
		return nil
	})
	if _, err := in.store.Client().HeadBucket(in.ctx, &s3.HeadBucketInput{Bucket: &got.Status.BucketName}); err != nil {
		in.t.Errorf("bucket %s %s: %v", got.Status.BucketName, when, err)
	}
}
