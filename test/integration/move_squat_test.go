package integration_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// TestMoveNeverTakesABucketMadeInItsWindow: a move records its target bucket in status
// before it creates it there. Someone else with the store's credentials creates a
// bucket of that name, untagged, and puts an object in it, in that window: just before
// the move's CreateBucket reaches the store (which then answers
// BucketAlreadyOwnedByYou on SeaweedFS and Versity, 200 OK on Ceph RGW), or while
// that CreateBucket is lost (answered 500, never carried out: the next pass finds the
// bucket untagged, as after a crash). The move is refused MoveNotAllowed and never
// takes that bucket: no request of the operator's but the CreateBucket itself writes
// to it (no tags, no versioning, no object, no deletion: counted at a proxy in front
// of the target), its object and its lack of tags stay, and so after the move is
// cancelled. The claim's bucket keeps serving from its store. On every store as the
// target.
func TestMoveNeverTakesABucketMadeInItsWindow(t *testing.T) {
	for tgt, src := range moveSources() {
		for _, lost := range []bool{false, true} {
			name := string(tgt.Kind) + "/answered"
			if lost {
				name = string(tgt.Kind) + "/lost"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				testMoveNeverTakesABucketMadeInItsWindow(t, src, tgt, lost)
			})
		}
	}
}

func testMoveNeverTakesABucketMadeInItsWindow(t *testing.T, src, tgt *testenv.S3Server, lost bool) {
	f := newFixture(t, src)
	proxy := newTargetProxy(t, tgt.Endpoint)
	target := f.storeOn(tgt, func(s *bkv1.ObjectStore) { s.Spec.Endpoint = proxy.URL })
	sb := f.waitCondition(f.bucket("data", func(sb *bkv1.StorageBucket) { sb.Spec.DeletionPolicy = bkv1.DeletionPolicyDelete }),
		bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
	bucket := sb.Status.BucketName
	f.seedObjects(f.admin, bucket, 5)
	tgtAdmin := adminOf(t, f.ctx, tgt)
	t.Cleanup(func() { emptyAndDelete(context.Background(), tgtAdmin, bucket) })

	recorded := make(chan bool, 1)
	key := client.ObjectKeyFromObject(sb) // sb is the test's to update meanwhile
	proxy.squatOn(bucket, func() {
		// The move's target is in its status by now; someone else's bucket comes first.
		got := &bkv1.StorageBucket{}
		recorded <- k8s.Get(f.ctx, key, got) == nil && got.Status.Move != nil && got.Status.Move.TargetBucket == bucket
		if err := tgtAdmin.CreateBucket(f.ctx, bucket, ""); err != nil {
			t.Errorf("someone else's CreateBucket: %v", err)
		}
		if err := tgtAdmin.PutObject(f.ctx, bucket, "theirs", []byte("someone else's")); err != nil {
			t.Errorf("someone else's object: %v", err)
		}
	}, lost)
	f.moveTo(sb, target, "")

	refused := f.waitMoveRefusedOrDone(sb)
	select {
	case ok := <-recorded:
		if !ok {
			t.Errorf("the move's CreateBucket came before its target was recorded")
		}
	default:
		t.Fatalf("no CreateBucket of the move reached the target: %v", proxy.sent(bucket))
	}
	if refused.Status.Move.Phase == bkv1.MoveDone {
		t.Errorf("moved into someone else's bucket")
	} else {
		t.Logf("refused: %s", findCond(refused, bkv1.ConditionStalled).Message)
	}
	if !isTrue(refused, bkv1.ConditionReady) || refused.Status.ObjectStore != f.store || refused.Status.Move.TargetBucket != "" {
		t.Errorf("after the refusal: Ready %v, objectStore %q, move %+v; want the bucket on its store and no target recorded",
			isTrue(refused, bkv1.ConditionReady), refused.Status.ObjectStore, refused.Status.Move)
	}
	untouched := func(when string) {
		t.Helper()
		body, err := tgtAdmin.GetObject(f.ctx, bucket, "theirs", 64)
		tags, terr := tgtAdmin.GetBucketTagging(f.ctx, bucket)
		page, lerr := tgtAdmin.ListObjectVersions(f.ctx, bucket, nil)
		if err != nil || string(body) != "someone else's" || terr != nil || len(tags) != 0 || lerr != nil || len(page.Versions) != 1 {
			t.Errorf("someone else's bucket %s: object %q (%v), tags %v (%v), %d versions (%v)", when, body, err, tags, terr, len(page.Versions), lerr)
		}
		if v, err := tgtAdmin.GetBucketVersioning(f.ctx, bucket); err != nil || v != s3.VersioningOff {
			t.Errorf("someone else's bucket %s: versioning %q (%v), want never set", when, v, err)
		}
		for _, req := range proxy.sent(bucket) {
			if method, _, _ := strings.Cut(req, " "); method != http.MethodGet && method != http.MethodHead && !isCreateOf(req, bucket) {
				t.Errorf("the operator wrote to someone else's bucket %s: %s", when, req)
			}
		}
	}
	untouched("after the refused move")
	if refused.Status.Move.Phase == bkv1.MoveDone {
		return // nothing to cancel
	}

	f.update(k8s, sb, func() { sb.Spec.ObjectStoreRef.Name = f.store })
	f.waitMove(sb, bkv1.MoveAborted, time.Minute)
	f.waitCondition(sb, bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
	untouched("after the move was cancelled")
	t.Logf("requests for the bucket at the target: %v", proxy.sent(bucket))
}

// isCreateOf says whether req, as targetProxy.sent gives it, is a CreateBucket of
// bucket: a PUT on the bucket with no subresource (the SDK adds only x-id).
func isCreateOf(req, bucket string) bool {
	method, uri, _ := strings.Cut(req, " ")
	u, err := url.Parse(uri)
	if err != nil || method != http.MethodPut || strings.Trim(u.Path, "/") != bucket {
		return false
	}
	for k := range u.Query() {
		if k != "x-id" {
			return false
		}
	}
	return true
}
