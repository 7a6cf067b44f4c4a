package integration_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// TestStoreDeletionWaitsForABucketMovingOut deletes the store a bucket still lives on
// while its claim names another store: a move the target's guardrails refuse, so
// spec.objectStoreRef names the target and status.objectStore the source for as long
// as the claim's owner leaves it so. The source's deletion waits (finalizer kept,
// Ready=False InUse naming both of its claims, the moving one and one that never
// moved, each counted once), the bucket and its objects untouched; once the move is
// cancelled and the claims deleted, their Purge policy is carried out on the source
// and the source goes. The target's deletion, waiting meanwhile for the claim that
// names it, ends with the cancel.
func TestStoreDeletionWaitsForABucketMovingOut(t *testing.T) {
	f := newFixture(t, seaweed)
	target := f.storeOn(rgw, func(s *bkv1.ObjectStore) { s.Spec.Guardrails.Moves.Into = bkv1.MoveForbidden })
	f.waitNamedStoreCondition(target, bkv1.ConditionReady, metav1.ConditionTrue, "")
	purged := func(sb *bkv1.StorageBucket) { sb.Spec.DeletionPolicy = bkv1.DeletionPolicyPurge }
	sb := f.waitCondition(f.bucket("data", purged), bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
	plain := f.waitCondition(f.bucket("plain", purged), bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
	bucket := sb.Status.BucketName
	seeded := f.seedObjects(f.admin, bucket, 5)

	f.moveTo(sb, target, "")
	refused := f.waitCondition(sb, bkv1.ConditionStalled, metav1.ConditionTrue, bkv1.ReasonMoveNotAllowed)
	if refused.Spec.ObjectStoreRef.Name != target || refused.Status.ObjectStore != f.store {
		t.Fatalf("setup: the claim names %q and lives on %q, want %q and %q", refused.Spec.ObjectStoreRef.Name, refused.Status.ObjectStore, target, f.store)
	}

	source := &bkv1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Name: f.store}}
	// waitInUse waits until the source's deletion waits for exactly the claims named.
	waitInUse := func(claims ...string) {
		t.Helper()
		count := fmt.Sprintf("%d StorageBuckets", len(claims))
		f.eventually(30*time.Second, "the source store InUse by "+strings.Join(claims, ", "), func() error {
			if err := k8s.Get(f.ctx, objKey(source), source); apierrors.IsNotFound(err) {
				t.Fatalf("ObjectStore %s was deleted while bucket %s lives on it", f.store, bucket)
			} else if err != nil {
				return err
			}
			c := findStoreCond(source, bkv1.ConditionReady)
			if c == nil || c.Status != metav1.ConditionFalse || c.Reason != bkv1.ReasonInUse || !strings.Contains(c.Message, count) {
				return fmt.Errorf("want Ready=False (InUse) counting %s; conditions: %s", count, describe(source.Status.Conditions))
			}
			for _, name := range claims {
				if !strings.Contains(c.Message, f.ns+"/"+name) {
					return fmt.Errorf("InUse does not name %s: %s", name, c.Message)
				}
			}
			return nil
		})
		if !controllerutil.ContainsFinalizer(source, bkv1.Finalizer) {
			t.Errorf("the source store lost its finalizer: %v", source.Finalizers)
		}
	}
	must(t, k8s.Delete(f.ctx, source))
	waitInUse("data", "plain")
	for key, sum := range seeded {
		if body, err := f.admin.GetObject(f.ctx, bucket, key, 1<<20); err != nil || sha256Of(body) != sum {
			t.Errorf("object %s on the source while its store's deletion waits: %v (content equal: %v)", key, err, err == nil && sha256Of(body) == sum)
		}
	}

	// The target's deletion waits as well while the claim names it; cancelling the
	// move, which deletes no claim, lets it go.
	tgt := &bkv1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Name: target}}
	must(t, k8s.Delete(f.ctx, tgt))
	f.waitNamedStoreCondition(target, bkv1.ConditionReady, metav1.ConditionFalse, bkv1.ReasonInUse)
	f.update(k8s, sb, func() { sb.Spec.ObjectStoreRef.Name = f.store })
	f.waitGone(tgt)

	must(t, k8s.Delete(f.ctx, plain))
	f.waitGone(plain)
	waitInUse("data")
	must(t, k8s.Delete(f.ctx, sb))
	f.waitGone(sb)
	f.waitGone(source)
	if _, err := f.admin.HeadBucket(f.ctx, bucket); s3.KindOf(err) != s3.KindNotFound {
		t.Errorf("bucket %s after its claim's Purge policy: %v, want it gone", bucket, err)
	}
}
