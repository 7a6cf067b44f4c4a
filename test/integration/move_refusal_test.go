package integration_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// TestMoveRefusedByGuardrails tries, as a tenant with full verbs on its StorageBuckets,
// to move a bucket where the platform team's guardrails do not let it go: into a
// store that forbids moves in, out of one that forbids moves out, into a store its
// namespace may not use, with more data than the target's quota, and a public bucket
// into a store that forbids public buckets, into a store capping mover pods below what
// a mover needs. Each is refused (Stalled, MoveNotAllowed,
// naming the guardrail) with nothing created on the target (no CreateBucket sent
// there, no bucket), while the bucket keeps serving from its store (Ready, its key
// works). Setting the store back ends the refusal.
func TestMoveRefusedByGuardrails(t *testing.T) {
	elsewhere := map[string]string{"team": "elsewhere"}
	for _, tc := range []struct {
		name   string
		source func(*bkv1.ObjectStore)
		target func(*bkv1.ObjectStore)
		claim  func(*bkv1.StorageBucketSpec)
		want   string
		// victim: the target has a bucket of the claim's name, someone else's.
		victim bool
	}{
		{name: "into a store that forbids moves in", want: "guardrails.moves.into",
			target: func(s *bkv1.ObjectStore) { s.Spec.Guardrails.Moves.Into = bkv1.MoveForbidden }},
		{name: "out of a store that forbids moves out", want: "guardrails.moves.outOf",
			source: func(s *bkv1.ObjectStore) { s.Spec.Guardrails.Moves.OutOf = bkv1.MoveForbidden }},
		{name: "into a store the namespace may not use", want: "NamespaceNotAllowed",
			target: func(s *bkv1.ObjectStore) { s.Spec.AllowedNamespaces = &metav1.LabelSelector{MatchLabels: elsewhere} }},
		{name: "more data than the target's quota", want: "more than the quota",
			target: func(s *bkv1.ObjectStore) {
				s.Spec.Guardrails.Quota = &bkv1.StoreQuota{Max: &bkv1.BucketQuota{MaxSize: resource.NewQuantity(1000, resource.BinarySI)}}
			}},
		{name: "a public bucket into a store that forbids them", want: "PublicAccessNotAllowed",
			source: func(s *bkv1.ObjectStore) { s.Spec.Guardrails.AllowPublicBuckets = true },
			claim:  func(s *bkv1.StorageBucketSpec) { s.PublicAccess = bkv1.PublicAccessAllowed }},
		{name: "into a store capping movers below what they need", want: "guardrails.moves.maxMoverMemory",
			target: func(s *bkv1.ObjectStore) {
				s.Spec.Guardrails.Moves.MaxMoverMemory = resource.NewQuantity(32<<20, resource.BinarySI)
			}},
		{name: "into a bucket of the same name the target already has", want: "is not this claim's", victim: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			source := []func(*bkv1.ObjectStore){withIAMOn(seaweed)}
			if tc.source != nil {
				source = append(source, tc.source)
			}
			f := newFixture(t, seaweed, source...)
			target := f.storeOn(rgw, func(s *bkv1.ObjectStore) {
				if tc.target != nil {
					tc.target(s)
				}
			})
			f.waitStoreCondition(bkv1.ConditionAccessProviderReady, metav1.ConditionTrue)
			f.waitNamedStoreCondition(target, bkv1.ConditionReady, metav1.ConditionTrue, "")
			sb := f.waitCondition(f.bucket("data", func(sb *bkv1.StorageBucket) {
				if tc.claim != nil {
					tc.claim(&sb.Spec)
				}
			}), bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
			bucket := sb.Status.BucketName
			f.waitAccessReady(f.access("app", "app-creds", bkv1.BucketGrant{Name: "data", Mode: bkv1.AccessReadWrite}))
			f.seedObjects(f.admin, bucket, 5)
			tgtAdmin := adminOf(t, f.ctx, rgw)
			if tc.victim {
				must(t, tgtAdmin.CreateBucket(f.ctx, bucket, ""))
				must(t, tgtAdmin.PutObject(f.ctx, bucket, "victim", []byte("theirs")))
				must(t, tgtAdmin.PutBucketTagging(f.ctx, bucket, map[string]string{"owner": "someone-else"}))
				t.Cleanup(func() {
					_ = tgtAdmin.DeleteObject(context.Background(), bucket, "victim")
					_ = tgtAdmin.DeleteBucket(context.Background(), bucket)
				})
			}
			before := requests.snapshot(target)

			f.moveTo(sb, target, "")
			refused := f.waitCondition(sb, bkv1.ConditionStalled, metav1.ConditionTrue, bkv1.ReasonMoveNotAllowed)
			if c := findCond(refused, bkv1.ConditionStalled); !strings.Contains(c.Message, tc.want) {
				t.Errorf("refusal %q does not name %q", c.Message, tc.want)
			}
			if !isTrue(refused, bkv1.ConditionReady) || refused.Status.ObjectStore != f.store {
				t.Errorf("the refused move took the bucket from its store: Ready %v, objectStore %q", isTrue(refused, bkv1.ConditionReady), refused.Status.ObjectStore)
			}
			must(t, f.secretClient("app-creds").c.PutObject(f.ctx, bucket, "still-served", []byte("yes")))
			if n := requests.snapshot(target)["CreateBucket"] - before["CreateBucket"]; n != 0 {
				t.Errorf("%d CreateBucket sent to the target of a refused move", n)
			}
			if n := requests.snapshot(target)["PutBucketTagging"] - before["PutBucketTagging"]; n != 0 {
				t.Errorf("%d PutBucketTagging sent to the target of a refused move", n)
			}
			victimUnchanged := func(when string) {
				body, err := tgtAdmin.GetObject(f.ctx, bucket, "victim", 100)
				tags, terr := tgtAdmin.GetBucketTagging(f.ctx, bucket)
				page, lerr := tgtAdmin.ListObjectVersions(f.ctx, bucket, nil)
				if err != nil || string(body) != "theirs" || terr != nil || len(tags) != 1 || tags["owner"] != "someone-else" || lerr != nil || len(page.Versions) != 1 {
					t.Errorf("the victim bucket %s: object %q (%v), tags %v (%v), %d objects (%v)", when, body, err, tags, terr, len(page.Versions), lerr)
				}
			}
			if tc.victim {
				victimUnchanged("after the refused move")
				defer victimUnchanged("after the move was cancelled")
			} else if _, err := tgtAdmin.HeadBucket(f.ctx, bucket); s3.KindOf(err) != s3.KindNotFound {
				t.Errorf("the target of a refused move has bucket %s: %v", bucket, err)
			}

			f.update(k8s, sb, func() { sb.Spec.ObjectStoreRef.Name = f.store })
			back := f.waitMove(sb, bkv1.MoveAborted, time.Minute)
			f.waitCondition(back, bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
			f.eventually(30*time.Second, "Stalled gone once the move is cancelled", func() error {
				got := f.get(sb)
				if c := findCond(got, bkv1.ConditionStalled); c != nil && c.Status == metav1.ConditionTrue {
					return fmt.Errorf("still stalled: %s", c.Message)
				}
				return nil
			})
			f.waitKstatus("StorageBucket", client.ObjectKeyFromObject(sb), "Current")
		})
	}
}

func isTrue(sb *bkv1.StorageBucket, typ string) bool {
	c := findCond(sb, typ)
	return c != nil && c.Status == metav1.ConditionTrue
}

// TestMoveCancelledBeforeCutover cancels a move while it copies (its target's request
// budget keeps it copying for a while), after a quiet tenant's claim on the target
// became Ready meanwhile: the source's objects and policy are as they were at once,
// and the application's key still writes there; the target bucket is kept for the
// keep time, then emptied and deleted, and the move's checkpoints are gone. Then the
// claim is moved again (a new move) and deleted mid-copy: its deletion removes the
// half-copied target too.
func TestMoveCancelledBeforeCutover(t *testing.T) {
	f := newFixture(t, rgw, withIAMOn(rgw))
	target := f.storeOn(seaweed, func(s *bkv1.ObjectStore) { s.Spec.RequestsPerSecond, s.Spec.Burst = 10, 10 })
	f.waitStoreCondition(bkv1.ConditionAccessProviderReady, metav1.ConditionTrue)
	f.waitNamedStoreCondition(target, bkv1.ConditionReady, metav1.ConditionTrue, "")
	sb := f.waitCondition(f.bucket("data"), bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
	bucket := sb.Status.BucketName
	f.waitAccessReady(f.access("app", "app-creds", bkv1.BucketGrant{Name: "data", Mode: bkv1.AccessReadWrite}))
	seeded := f.seedObjects(f.admin, bucket, 150)
	tgtAdmin := adminOf(t, f.ctx, seaweed)

	startMove := func() *bkv1.StorageBucket {
		f.moveTo(sb, target, "")
		copying := f.waitMove(sb, bkv1.MoveCopying, time.Minute)
		f.eventually(time.Minute, "objects arriving on the target", func() error {
			page, err := tgtAdmin.ListObjectVersions(f.ctx, bucket, nil)
			if err != nil || len(page.Versions) == 0 {
				return fmt.Errorf("none yet (%v)", err)
			}
			return nil
		})
		return copying
	}
	copying := startMove()
	if c := findCond(f.get(sb), bkv1.ConditionReconciling); c == nil || c.Status != metav1.ConditionTrue || c.Reason != bkv1.ReasonMoving || !isTrue(f.get(sb), bkv1.ConditionReady) {
		t.Errorf("while it copies: Reconciling %+v, Ready %v; want Reconciling=True (Moving) and Ready", c, isTrue(f.get(sb), bkv1.ConditionReady))
	}
	f.waitKstatus("StorageBucket", client.ObjectKeyFromObject(sb), "InProgress")

	// A quiet tenant's claim on the target converges while the move copies: the
	// mover spends half of the store's request budget, not all of it.
	quietNS := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "sb-quiet-"}}
	must(t, k8s.Create(f.ctx, quietNS))
	quiet := &bkv1.StorageBucket{ObjectMeta: metav1.ObjectMeta{Namespace: quietNS.Name, Name: "quiet"},
		Spec: bkv1.StorageBucketSpec{ObjectStoreRef: bkv1.ObjectStoreReference{Name: target}, DeletionPolicy: bkv1.DeletionPolicyDelete}}
	must(t, k8s.Create(f.ctx, quiet))
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), quiet) })
	f.waitCondition(quiet, bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
	if m := f.get(sb).Status.Move; m.Phase != bkv1.MoveCopying && m.Phase != bkv1.MoveCatchingUp {
		t.Errorf("the quiet claim was Ready only once the move was %s", m.Phase)
	}
	must(t, k8s.Delete(f.ctx, quiet))
	f.waitGone(quiet)

	f.update(k8s, sb, func() { sb.Spec.ObjectStoreRef.Name = f.store })
	aborted := f.waitMove(sb, bkv1.MoveAborted, 2*time.Minute)
	if m := aborted.Status.Move; m.TargetKeptOn != target || m.TargetKeptUntil == nil {
		t.Errorf("the cancelled move keeps its target on %q until %v, want it kept on %s for a while", m.TargetKeptOn, m.TargetKeptUntil, target)
	}
	if aborted.Status.ObjectStore != f.store {
		t.Errorf("a cancelled move left the bucket on %q", aborted.Status.ObjectStore)
	}
	for key, sum := range seeded {
		if body, err := f.admin.GetObject(f.ctx, bucket, key, 1<<20); err != nil || sha256Of(body) != sum {
			t.Fatalf("source object %s after the cancelled move: %v", key, err)
		}
	}
	if policy, err := f.admin.GetBucketPolicy(f.ctx, bucket); err != nil || policy != "" {
		t.Errorf("source policy after the cancelled move: %q (%v), want none", policy, err)
	}
	must(t, f.secretClient("app-creds").c.PutObject(f.ctx, bucket, "after-cancel", []byte("yes")))
	f.waitKstatus("StorageBucket", client.ObjectKeyFromObject(sb), "Current")
	f.waitKeptTargetGone(sb, tgtAdmin, cancelledMoveKeep+time.Minute)
	f.waitNoCheckpoints(copying.Status.Move.ID)

	// Moved again, and deleted mid-copy: no half-copied bucket stays on the target.
	copying = startMove()
	if copying.Status.Move.ID == aborted.Status.Move.ID {
		t.Errorf("the second move reuses the first one's ID %s", copying.Status.Move.ID)
	}
	must(t, k8s.Delete(f.ctx, sb))
	f.eventually(2*time.Minute, "the claim deleted", func() error {
		if err := k8s.Get(f.ctx, client.ObjectKeyFromObject(sb), &bkv1.StorageBucket{}); err == nil {
			return fmt.Errorf("still there")
		}
		return nil
	})
	if _, err := tgtAdmin.HeadBucket(f.ctx, bucket); s3.KindOf(err) != s3.KindNotFound {
		t.Errorf("the deleted claim's half-moved target bucket: %v, want it gone", err)
	}
	if _, err := f.admin.HeadBucket(f.ctx, bucket); err != nil {
		t.Errorf("the source bucket, retained by the deletion policy: %v", err)
	}
	f.waitNoCheckpoints(copying.Status.Move.ID)
}

// TestKeptTargetGoesWithTheClaim deletes a claim whose cancelled move keeps its
// half-copied target: the target and the move's checkpoints go with the claim.
func TestKeptTargetGoesWithTheClaim(t *testing.T) {
	f := newFixture(t, seaweed)
	target := f.storeOn(rgw, func(s *bkv1.ObjectStore) { s.Spec.RequestsPerSecond, s.Spec.Burst = 10, 10 })
	f.waitNamedStoreCondition(target, bkv1.ConditionReady, metav1.ConditionTrue, "")
	sb := f.waitCondition(f.bucket("data"), bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
	bucket := sb.Status.BucketName
	f.seedObjects(f.admin, bucket, 100)
	tgtAdmin := adminOf(t, f.ctx, rgw)
	f.moveTo(sb, target, "")
	f.eventually(2*time.Minute, "objects arriving on the target", func() error {
		if m := f.get(sb).Status.Move; m == nil || m.CopiedObjects == 0 {
			return fmt.Errorf("move %+v", m)
		}
		return nil
	})
	f.update(k8s, sb, func() { sb.Spec.ObjectStoreRef.Name = f.store })
	aborted := f.waitMove(sb, bkv1.MoveAborted, 2*time.Minute)
	if m := aborted.Status.Move; m.TargetKeptOn != target {
		t.Fatalf("the cancelled move keeps no target: %+v", m)
	}
	if _, err := tgtAdmin.HeadBucket(f.ctx, bucket); err != nil {
		t.Fatalf("the kept target bucket: %v", err)
	}
	must(t, k8s.Delete(f.ctx, sb))
	f.waitGone(sb)
	if _, err := tgtAdmin.HeadBucket(f.ctx, bucket); s3.KindOf(err) != s3.KindNotFound {
		t.Errorf("the kept target of the deleted claim: %v, want it gone", err)
	}
	f.waitNoCheckpoints(aborted.Status.Move.ID)
}

// waitKeptTargetGone waits until the target a cancelled move of sb kept is emptied and
// deleted, and status.move no longer says it is kept.
func (f *fixture) waitKeptTargetGone(sb *bkv1.StorageBucket, tgt s3.Client, timeout time.Duration) {
	f.t.Helper()
	f.eventually(timeout, "the kept target of the cancelled move of "+sb.Name+" removed", func() error {
		got := f.get(sb)
		if m := got.Status.Move; m == nil || m.TargetKeptOn != "" || m.TargetKeptUntil != nil {
			return fmt.Errorf("move %+v", m)
		}
		if _, err := tgt.HeadBucket(f.ctx, got.Status.BucketName); s3.KindOf(err) != s3.KindNotFound {
			return fmt.Errorf("the target bucket: %v, want it gone", err)
		}
		return nil
	})
}

// TestMoveStopsOnAnObjectTheTargetRefuses moves from Ceph RGW to Versity a bucket
// holding both "dir" and "dir/x", which Versity (objects as files) cannot hold
// together: the move stops before its cutover (Stalled, MoveFailed, naming the key),
// the bucket stays on its store with its Secret, and once the owner deletes one of
// the two the next pass copies the rest and the move is done.
func TestMoveStopsOnAnObjectTheTargetRefuses(t *testing.T) {
	f, target, sb := moveBetween(t, rgw, versity)
	bucket := sb.Status.BucketName
	f.seedObjects(f.admin, bucket, 20)
	must(t, f.admin.PutObject(f.ctx, bucket, "dir", []byte("a file")))
	must(t, f.admin.PutObject(f.ctx, bucket, "dir/x", []byte("under it")))

	f.moveTo(sb, target, "")
	stuck := f.waitCondition(sb, bkv1.ConditionStalled, metav1.ConditionTrue, bkv1.ReasonMoveFailed)
	msg := findCond(stuck, bkv1.ConditionStalled).Message
	if !strings.Contains(msg, "1 objects could not be copied") || !strings.Contains(msg, `"dir`) {
		t.Errorf("MoveFailed message %q: want the one key counted and named", msg)
	}
	if stuck.Status.ObjectStore != f.store || stuck.Status.Endpoint != rgw.Endpoint || stuck.Status.Move.SwitchedAt != nil {
		t.Errorf("a move with an uncopied object cut over: objectStore %q, endpoint %q", stuck.Status.ObjectStore, stuck.Status.Endpoint)
	}

	must(t, f.admin.DeleteObject(f.ctx, bucket, "dir/x"))
	done := f.waitMove(sb, bkv1.MoveDone, 2*time.Minute)
	if body, err := adminOf(t, f.ctx, versity).GetObject(f.ctx, bucket, "dir", 100); err != nil || string(body) != "a file" {
		t.Errorf("dir on the target: %q, %v", body, err)
	}
	if done.Status.ObjectStore != target {
		t.Errorf("after the move: objectStore %q, want %q", done.Status.ObjectStore, target)
	}
}
