package integration_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/iam"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
	"github.com/bucketkeeper/bucketkeeper/test/workload"
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

// TestMoveOffMinIOWaitsOutAKeyItDidNotIssue: a writer holding a MinIO key bucketkeeper
// did not issue (a user made through the admin API by hand, with a policy on the
// bucket) writes on through the freeze, so the final passes never find both sides
// equal. After MoveMaxFinalPasses of them the move lifts the freeze (the bucket
// policy's statement gone, and the BucketAccess key, frozen with it, writes again),
// gives its slot back and says WritesDuringFreeze, naming the keys MinIO's freeze does
// not stop and when it tries again; it does not cut over before then. With that writer
// stopped, the retry cuts over, and every write it had acknowledged is on the target.
func TestMoveOffMinIOWaitsOutAKeyItDidNotIssue(t *testing.T) {
	source := testenv.NewS3(t, testenv.MinIO)
	f, target, sb := moveBetween(t, source, seaweed)
	f.longer(10 * time.Minute)
	bucket := sb.Status.BucketName
	f.waitAccessReady(f.access("app", "app-creds", bkv1.BucketGrant{Name: "data", Mode: bkv1.AccessReadWrite}))
	issued := f.secretClient("app-creds")

	driver, err := iam.New(f.ctx, adminIAMConfig(source))
	must(t, err)
	user := "handmade-" + f.ns
	must(t, driver.EnsureUser(f.ctx, user))
	t.Cleanup(func() { _ = driver.DeleteUser(context.Background(), user) })
	must(t, driver.PutPolicy(f.ctx, user, []iam.Grant{{Bucket: bucket, Mode: iam.ReadWrite}}))
	key, err := driver.CreateKey(f.ctx, user)
	must(t, err)
	handmade, err := s3.New(f.ctx, s3.Config{Endpoint: source.Endpoint, Region: source.Region, ForcePathStyle: true,
		AccessKeyID: key.ID, SecretAccessKey: key.Secret, RequestTimeout: 10 * time.Second})
	must(t, err)
	w := &writer{Writer: workload.Start(f.ctx, bucket, func(context.Context) s3.Client { return handmade }), f: f}
	t.Cleanup(func() { w.Stop() })
	w.waitAcks(20)

	f.moveTo(sb, target, "")
	got := &bkv1.StorageBucket{}
	f.eventually(5*time.Minute, "the move's WritesDuringFreeze", func() error {
		if err := k8s.Get(f.ctx, client.ObjectKeyFromObject(sb), got); err != nil {
			return err
		}
		if m := got.Status.Move; m != nil && (m.Phase == bkv1.MoveSwitching || m.Phase == bkv1.MoveDone) {
			t.Fatalf("the move cut over while a key it did not issue wrote: %s", m.Message)
		}
		c := apimeta.FindStatusCondition(got.Status.Conditions, bkv1.ConditionStalled)
		if c == nil || c.Reason != bkv1.ReasonWritesDuringFreeze {
			return fmt.Errorf("conditions: %s; move %+v", describe(got.Status.Conditions), got.Status.Move)
		}
		return nil
	})
	m := got.Status.Move
	stalled := apimeta.FindStatusCondition(got.Status.Conditions, bkv1.ConditionStalled)
	t.Logf("Stalled=%s %s: %s", stalled.Status, stalled.Reason, stalled.Message)
	for _, want := range []string{"writes continued during the freeze", "not issued by bucketkeeper", m.CutoverRetryAt.UTC().Format(time.RFC3339)} {
		if !strings.Contains(stalled.Message, want) {
			t.Errorf("the condition's message does not say %q: %s", want, stalled.Message)
		}
	}
	if m.CutoverAttempts != 1 || m.CutoverRetryAt == nil || m.FrozenAt != nil || m.Phase != bkv1.MoveQueued {
		t.Errorf("after a cutover written under the freeze: attempts %d, retry at %v, frozen at %v, phase %s", m.CutoverAttempts, m.CutoverRetryAt, m.FrozenAt, m.Phase)
	}
	if policy, err := f.admin.GetBucketPolicy(f.ctx, bucket); err != nil || strings.Contains(policy, bkv1.MoveFreezeSid) {
		t.Errorf("the source's policy after the freeze was lifted: %q (%v)", policy, err)
	}
	f.eventually(30*time.Second, "the issued key writing again", func() error {
		return issued.c.PutObject(f.ctx, bucket, "issued-after-the-thaw", []byte("thawed"))
	})

	log := w.Stop()
	moved := f.waitMove(sb, bkv1.MoveDone, 5*time.Minute)
	if !moved.Status.Move.SwitchedAt.After(m.CutoverRetryAt.Time) {
		t.Errorf("switched at %s, before the retry time %s", moved.Status.Move.SwitchedAt, m.CutoverRetryAt)
	}
	tgtAdmin := adminOf(t, f.ctx, seaweed)
	lost := log.LostOn(f.ctx, tgtAdmin, bucket)
	t.Logf("%d puts and %d deletes acknowledged (%d retried) with the hand-made key, %d lost; cut over at attempt %d, write pause %s",
		log.Puts, log.Deletes, log.Retries, len(lost), moved.Status.Move.CutoverAttempts+1, moved.Status.Move.WritePause.Duration)
	if len(lost) > 0 {
		t.Errorf("%d acknowledged writes lost, first: %v", len(lost), lost[:min(5, len(lost))])
	}
	if body, err := tgtAdmin.GetObject(f.ctx, bucket, "issued-after-the-thaw", 100); err != nil || string(body) != "thawed" {
		t.Errorf("the issued key's write after the thaw on the target: %q, %v", body, err)
	}
}
