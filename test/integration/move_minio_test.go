package integration_test

import (
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// TestMoveOffMinIOFreezesItsKeys moves a bucket off MinIO, which applies bucket
// policies to anonymous requests only (minio/minio#10578), while an application writes
// through its BucketAccess's Secret, into each store of the moving table. The cutover
// freezes the key the operator issued (its MinIO user's policy denies the bucket's
// writes): a write with it, made between two reads of the claim that both say the
// source is frozen by the same freeze, is refused; the final pass finds both sides
// equal, and the move cuts over with 0 acknowledged writes lost and everything else
// TestMoveKeepsEveryAcknowledgedWrite holds of a move. MinIO is not one of everyStore:
// this test runs a server of its own.
func TestMoveOffMinIOFreezesItsKeys(t *testing.T) {
	source := testenv.NewS3(t, testenv.MinIO)
	targets := map[testenv.S3Kind]func() *testenv.S3Server{
		testenv.SeaweedFS: func() *testenv.S3Server { return seaweed },
		testenv.Versity:   func() *testenv.S3Server { return versity },
		testenv.RGW:       func() *testenv.S3Server { return rgw },
	}
	for _, to := range moveTableStores {
		t.Run("to-"+string(to), func(t *testing.T) {
			t.Parallel()
			testMoveKeepsWritesWatching(t, source, targets[to](), moveLook{longer: 8 * time.Minute, whileMoving: observeKeyFrozen})
		})
	}
}

// observeKeyFrozen waits for the move's freeze and writes into the source with the
// writer's key while it holds: the write must be refused. A write is taken as made
// under the freeze only if the claim said the source was frozen before it and, by
// the same freeze, after it.
func observeKeyFrozen(f *fixture, sb *bkv1.StorageBucket, key secretKey, bucket string) {
	f.t.Helper()
	frozen := func() (*bkv1.MoveStatus, bool) {
		got := &bkv1.StorageBucket{}
		must(f.t, k8s.Get(f.ctx, client.ObjectKeyFromObject(sb), got))
		m := got.Status.Move
		if m != nil && m.Phase == bkv1.MoveDone {
			f.t.Fatalf("the move ended before a write under its freeze was seen: %s", m.Message)
		}
		return m, m != nil && m.Phase == bkv1.MoveCuttingOver && m.FrozenAt != nil && got.Status.ObjectStore == m.From
	}
	deadline := time.Now().Add(4 * time.Minute)
	for tries := 0; time.Now().Before(deadline); tries++ {
		before, ok := frozen()
		if !ok {
			time.Sleep(20 * time.Millisecond) // polling the claim for its phase, not waiting out time
			continue
		}
		err := key.c.PutObject(f.ctx, bucket, "written-under-the-freeze", []byte("x"))
		after, ok := frozen()
		if !ok || !after.FrozenAt.Equal(before.FrozenAt) {
			continue // the freeze was lifted or made again meanwhile: try again
		}
		switch {
		case err == nil:
			f.t.Errorf("key %s wrote to the source bucket %s under the freeze (frozen since %s)", key.id, bucket, before.FrozenAt.UTC().Format(time.RFC3339))
		case s3.KindOf(err) != s3.KindAccessDenied:
			f.t.Errorf("key %s's write under the freeze: %v, want AccessDenied", key.id, err)
		default:
			f.t.Logf("key %s refused under the freeze (frozen since %s): %v", key.id, before.FrozenAt.UTC().Format(time.RFC3339), err)
		}
		return
	}
	f.t.Fatalf("no write under the freeze was made in 4m: the move never froze its source")
}
