package integration_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
)

// TestMoveBackToTheStoreItLeft moves a bucket from SeaweedFS to Ceph RGW and back,
// while an application writes through its BucketAccess's Secret the whole time. The
// move back finds the bucket the first move left on SeaweedFS, frozen and tagged
// moved-to, and reuses it: the freeze denies every principal, the operator's own key
// too, so it must be lifted before the mover copies into it. After the move back the
// SeaweedFS bucket has neither the freeze nor the tag and takes the application's
// writes, every seeded object is equal and no acknowledged write is lost, and the RGW
// bucket is the one now frozen and tagged as moved.
func TestMoveBackToTheStoreItLeft(t *testing.T) {
	f, away, sb := moveBetween(t, seaweed, rgw)
	// Two moves may outlast the fixture's three minutes on a loaded machine.
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	t.Cleanup(cancel)
	f.ctx = ctx
	home, bucket := f.store, sb.Status.BucketName
	ba := f.waitAccessReady(f.access("app", "app-creds", bkv1.BucketGrant{Name: "data", Mode: bkv1.AccessReadWrite}))
	seeded := f.seedObjects(f.admin, bucket, 60)
	rgwAdmin := adminOf(t, f.ctx, rgw)

	w := f.startWriter("app-creds", bucket)
	w.waitAcks(20)
	f.moveTo(sb, away, "")
	there := f.waitMove(sb, bkv1.MoveDone, 4*time.Minute)
	w.waitAcksAfter(10, there.Status.Move.SwitchedAt.Time)
	if policy, err := f.admin.GetBucketPolicy(f.ctx, bucket); err != nil || !containsAny(policy, bkv1.MoveFreezeSid) {
		t.Fatalf("setup: the SeaweedFS bucket after the first move has policy %q (%v), want the freeze", policy, err)
	}

	creates := requests.snapshot(home)["CreateBucket"]
	f.moveTo(sb, home, "")
	back := &bkv1.StorageBucket{}
	f.eventually(4*time.Minute, "the move back Done", func() error {
		back = f.get(sb)
		if m := back.Status.Move; m == nil || m.ID == there.Status.Move.ID || m.Phase != bkv1.MoveDone {
			return fmt.Errorf("move %+v; conditions: %s", m, describe(back.Status.Conditions))
		}
		return nil
	})
	if m := back.Status.Move; m.From != away || m.To != home || back.Status.ObjectStore != home {
		t.Errorf("the move back: %+v, objectStore %q", m, back.Status.ObjectStore)
	}
	if n := requests.snapshot(home)["CreateBucket"] - creates; n != 0 {
		t.Errorf("the move back sent %d CreateBucket to SeaweedFS; want the bucket the first move left reused", n)
	}
	w.waitAcksAfter(10, back.Status.Move.SwitchedAt.Time)
	log := w.Stop()

	lost := log.LostOn(f.ctx, f.admin, bucket)
	t.Logf("SeaweedFS to RGW and back: %d puts and %d deletes acknowledged (%d retried), %d lost; write pauses %s and %s",
		log.Puts, log.Deletes, log.Retries, len(lost), there.Status.Move.WritePause.Duration, back.Status.Move.WritePause.Duration)
	if len(lost) > 0 {
		t.Errorf("%d acknowledged writes lost, first: %v", len(lost), lost[:min(5, len(lost))])
	}
	for key, sum := range seeded {
		body, err := f.admin.GetObject(f.ctx, bucket, key, 1<<20)
		if err != nil || sha256.Sum256(body) != sum {
			t.Errorf("seeded object %s back on SeaweedFS: %v (content equal: %v)", key, err, err == nil && sha256.Sum256(body) == sum)
		}
	}

	// The bucket SeaweedFS kept is the claim's again: thawed, untagged, writable.
	f.eventually(90*time.Second, "the access's key issued on SeaweedFS again", func() error {
		ba = f.waitAccessReady(ba)
		if ba.Status.ObjectStore != home {
			return fmt.Errorf("the access is on %q", ba.Status.ObjectStore)
		}
		return nil
	})
	key := f.secretClient("app-creds")
	must(t, key.c.PutObject(f.ctx, bucket, "back-home", []byte("written after the move back")))
	if body, err := f.admin.GetObject(f.ctx, bucket, "back-home", 100); err != nil || string(body) != "written after the move back" {
		t.Errorf("the write through the Secret, read on SeaweedFS: %q (%v)", body, err)
	}
	if policy, err := f.admin.GetBucketPolicy(f.ctx, bucket); err != nil || containsAny(policy, bkv1.MoveFreezeSid) {
		t.Errorf("SeaweedFS bucket policy after the move back %q (%v): want no freeze", policy, err)
	}
	if tags, err := f.admin.GetBucketTagging(f.ctx, bucket); err != nil || tags[bkv1.TagMovedTo] != "" {
		t.Errorf("SeaweedFS bucket tags after the move back %v (%v): want no %s", tags, err, bkv1.TagMovedTo)
	}

	// The RGW bucket is the one left behind now: frozen, tagged where it went.
	if policy, err := rgwAdmin.GetBucketPolicy(f.ctx, bucket); err != nil || !containsAny(policy, bkv1.MoveFreezeSid) {
		t.Errorf("RGW bucket policy after the move back %q (%v): want the freeze", policy, err)
	}
	tags, err := rgwAdmin.GetBucketTagging(f.ctx, bucket)
	if want := home + "/" + bucket; err != nil || tags[bkv1.TagMovedTo] != want {
		t.Errorf("RGW bucket tags after the move back %v (%v): want %s=%s", tags, err, bkv1.TagMovedTo, want)
	}
	f.waitNoCheckpoints(back.Status.Move.ID)
}

// TestPacedMoveBackCancelled: a move back onto the copy an earlier move left on
// SeaweedFS lifts that copy's freeze and moved-to tag before it copies; cancelled mid-copy,
// the copy is frozen and tagged as moved again, still listed in status.leftBehind,
// while the bucket goes on living on Ceph RGW.
func TestPacedMoveBackCancelled(t *testing.T) {
	t.Parallel() // mostly waiting on the paced copy: see the package doc in suite_test.go
	f := newFixture(t, seaweed, func(s *bkv1.ObjectStore) { s.Spec.RequestsPerSecond, s.Spec.Burst = 10, 10 })
	home := f.store
	away := f.storeOn(rgw, func(s *bkv1.ObjectStore) { s.Spec.RequestsPerSecond, s.Spec.Burst = 10, 10 })
	sb := f.waitCondition(f.bucket("data"), bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
	bucket := sb.Status.BucketName
	f.seedObjects(f.admin, bucket, 100)
	f.moveTo(sb, away, "")
	there := f.waitMove(sb, bkv1.MoveDone, 4*time.Minute)

	f.moveTo(sb, home, "")
	f.eventually(2*time.Minute, "the move back copying into the thawed copy", func() error {
		got := f.get(sb)
		if m := got.Status.Move; m == nil || m.ID == there.Status.Move.ID || m.Phase != bkv1.MoveCopying {
			return fmt.Errorf("move %+v", m)
		}
		if policy, err := f.admin.GetBucketPolicy(f.ctx, bucket); err != nil || containsAny(policy, bkv1.MoveFreezeSid) {
			return fmt.Errorf("the copy's policy %q (%v): still frozen", policy, err)
		}
		return nil
	})
	f.update(k8s, sb, func() { sb.Spec.ObjectStoreRef.Name = away })
	f.eventually(2*time.Minute, "the move back cancelled", func() error {
		got := f.get(sb)
		if m := got.Status.Move; m == nil || m.ID == there.Status.Move.ID || m.Phase != bkv1.MoveAborted {
			return fmt.Errorf("move %+v", m)
		}
		return nil
	})
	got := f.get(sb)
	if got.Status.ObjectStore != away || len(got.Status.LeftBehind) != 1 || got.Status.LeftBehind[0] != home {
		t.Errorf("after the cancel: objectStore %q, leftBehind %v; want %q and [%s]", got.Status.ObjectStore, got.Status.LeftBehind, away, home)
	}
	if policy, err := f.admin.GetBucketPolicy(f.ctx, bucket); err != nil || !containsAny(policy, bkv1.MoveFreezeSid) {
		t.Errorf("the copy on SeaweedFS after the cancel: policy %q (%v), want the freeze", policy, err)
	}
	if tags, err := f.admin.GetBucketTagging(f.ctx, bucket); err != nil || tags[bkv1.TagMovedTo] != away+"/"+bucket {
		t.Errorf("the copy on SeaweedFS after the cancel: tags %v (%v), want %s=%s/%s", tags, err, bkv1.TagMovedTo, away, bucket)
	}
}
