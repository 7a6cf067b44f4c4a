package integration_test

import (
	"context"
	"maps"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
)

// removeNamespace deletes a namespace and finalizes it as the namespace controller would
// (the test control plane runs none), so that one of the same name can be made again.
// The namespace must hold nothing that matters any more: what is left in it would come
// back with the next namespace of its name.
func removeNamespace(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	ns := &corev1.Namespace{}
	must(t, k8s.Get(ctx, client.ObjectKey{Name: name}, ns))
	must(t, client.IgnoreNotFound(k8s.DeleteAllOf(ctx, &corev1.Secret{}, client.InNamespace(name))))
	must(t, client.IgnoreNotFound(k8s.Delete(ctx, ns)))
	must(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := k8s.Get(ctx, client.ObjectKey{Name: name}, ns); err != nil {
			return client.IgnoreNotFound(err)
		}
		ns.Spec.Finalizers = nil
		return k8s.SubResource("finalize").Update(ctx, ns)
	}))
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := k8s.Get(ctx, client.ObjectKey{Name: name}, &corev1.Namespace{})
		if apierrors.IsNotFound(err) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("namespace %s still there after it was finalized: %v", name, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestRecycledNamespaceDoesNotInheritRetainedBuckets: a tenant retains a bucket with
// data and its namespace is deleted; whoever is later given a namespace of the same name
// creates a claim of the same name. It is refused (OwnedByAnotherClaim) and the old
// tenant's object, tags and policy are unchanged; only when the store admin allows it on
// purpose (guardrails.allowRebindToRecreatedNamespace) is the bucket bound again.
func TestRecycledNamespaceDoesNotInheritRetainedBuckets(t *testing.T) {
	f := newFixture(t, seaweed)
	name := "recycled-" + strings.TrimPrefix(f.ns, "sb-test-")
	old := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	must(t, k8s.Create(f.ctx, old))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = k8s.DeleteAllOf(ctx, &bkv1.StorageBucket{}, client.InNamespace(name))
		if err := k8s.Get(ctx, client.ObjectKey{Name: name}, &corev1.Namespace{}); err == nil {
			removeNamespace(t, ctx, name)
		}
	})
	claim := func() *bkv1.StorageBucket {
		sb := &bkv1.StorageBucket{
			ObjectMeta: metav1.ObjectMeta{Namespace: name, Name: "records"},
			Spec:       bkv1.StorageBucketSpec{ObjectStoreRef: bkv1.ObjectStoreReference{Name: f.store}, DeletionPolicy: bkv1.DeletionPolicyRetain},
		}
		must(t, k8s.Create(f.ctx, sb))
		return sb
	}

	first := f.waitCondition(claim(), bkv1.ConditionReady, metav1.ConditionTrue, "")
	bucket := first.Status.BucketName
	data := []byte("the first tenant's records")
	must(t, f.admin.PutObject(f.ctx, bucket, "2026.csv", data))
	t.Cleanup(func() {
		_ = f.admin.PurgeObject(context.Background(), bucket, "2026.csv")
		_ = f.admin.DeleteBucket(context.Background(), bucket)
	})
	must(t, k8s.Delete(f.ctx, first))
	f.waitGone(first)
	tags, err := f.admin.GetBucketTagging(f.ctx, bucket)
	must(t, err)
	if want := "/" + string(old.UID); tags[bkv1.TagUID] != want {
		t.Fatalf("retained bucket's uid tag = %q, want %q (the namespace's UID)", tags[bkv1.TagUID], want)
	}

	removeNamespace(t, f.ctx, name)
	recycled := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	must(t, k8s.Create(f.ctx, recycled))
	second := claim()
	got := f.waitCondition(second, bkv1.ConditionStalled, metav1.ConditionTrue, bkv1.ReasonOwnedByAnotherClaim)
	if got.Status.BucketName != "" {
		t.Errorf("the refused claim recorded bucket %q", got.Status.BucketName)
	}
	assertUnchanged := func() {
		t.Helper()
		have, err := f.admin.GetObject(f.ctx, bucket, "2026.csv", 1<<10)
		if err != nil || string(have) != string(data) {
			t.Errorf("the first tenant's object = %q, %v; want it unchanged", have, err)
		}
		now, err := f.admin.GetBucketTagging(f.ctx, bucket)
		if err != nil || !maps.Equal(now, tags) {
			t.Errorf("tags = %v, %v; want %v", now, err, tags)
		}
		if policy, err := f.admin.GetBucketPolicy(f.ctx, bucket); err != nil || policy != "" {
			t.Errorf("policy = %q, %v; want none", policy, err)
		}
	}
	assertUnchanged()

	// Handed over on purpose by the store admin.
	f.updateStore(func(s *bkv1.ObjectStoreSpec) { s.Guardrails.AllowRebindToRecreatedNamespace = true })
	bound := f.waitCondition(second, bkv1.ConditionReady, metav1.ConditionTrue, "")
	if bound.Status.BucketName != bucket {
		t.Fatalf("bound bucket %q, want the retained %q", bound.Status.BucketName, bucket)
	}
	now, err := f.admin.GetBucketTagging(f.ctx, bucket)
	must(t, err)
	if want := string(second.UID) + "/" + string(recycled.UID); now[bkv1.TagUID] != want {
		t.Errorf("uid tag after the hand-over = %q, want %q", now[bkv1.TagUID], want)
	}
}
