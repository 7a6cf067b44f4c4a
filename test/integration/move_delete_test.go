package integration_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/controller/storagebucket"
	"github.com/bucketkeeper/bucketkeeper/internal/mover"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
	stores "github.com/bucketkeeper/bucketkeeper/internal/store"
)

// TestMoveCleanupLeavesOthersBucketsAlone: three claims move from SeaweedFS to Ceph RGW,
// and the copy each left on SeaweedFS is then replaced by a bucket of the same name that
// is not the claim's: another live claim's of this cluster, an untagged one, another
// cluster's. Each holds objects and a policy with the move's freeze statement (as a
// bucket frozen by its own move would). Then every path that cleans up after a move
// runs on them: the source's deletion after spec.move.deleteSourceAfter, the
// cancelled move back onto the old store (which puts the copy's freeze and moved-to tag
// back), the Purge of a claim with its copies. None thaws, freezes, tags or empties
// the bucket: no write reaches SeaweedFS from the moment they were replaced, and each
// bucket's tags, policy and objects are as they were.
func TestMoveCleanupLeavesOthersBucketsAlone(t *testing.T) {
	f := newFixture(t, seaweed)
	f.longer(6 * time.Minute)
	target := f.storeOn(rgw)
	targetAdmin := adminOf(t, f.ctx, rgw)
	source := f.bucket("source")
	back := f.bucket("back")
	purged := f.bucket("purged", func(sb *bkv1.StorageBucket) { sb.Spec.DeletionPolicy = bkv1.DeletionPolicyPurge })
	claims := []*bkv1.StorageBucket{source, back, purged}
	buckets := map[string]string{}
	for _, sb := range claims {
		buckets[sb.Name] = f.waitCondition(sb, bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady).Status.BucketName
		f.seedObjects(f.admin, buckets[sb.Name], 3)
		f.moveTo(sb, target, "")
	}
	for _, sb := range claims {
		f.waitMove(sb, bkv1.MoveDone, 3*time.Minute)
	}

	// Another live claim of this cluster: a bucket tagged for a gone claim's and frozen
	// is the sweep's to thaw and release (sweep_buckets.go's judgeGone), as the source
	// of a move its claim left during the cutover.
	someoneElse := f.bucket("someone-else", func(sb *bkv1.StorageBucket) { sb.Spec.ObjectStoreRef.Name = "no-such-store" })
	impostors := map[string]map[string]string{
		"source": {bkv1.TagClaim: f.ns + "/someone-else", bkv1.TagUID: string(someoneElse.UID) + "/" + f.nsUID(), bkv1.TagCluster: clusterID},
		"back":   {},
		"purged": {bkv1.TagClaim: f.ns + "/purged", bkv1.TagUID: "0c0ffee0-0000-4000-8000-000000000002", bkv1.TagCluster: "another-cluster"},
	}
	before := map[string]bucketState{}
	for name, tags := range impostors {
		bucket := buckets[name]
		emptyAndDelete(f.ctx, f.admin, bucket)
		must(t, f.admin.CreateBucket(f.ctx, bucket, ""))
		if len(tags) > 0 {
			must(t, f.admin.PutBucketTagging(f.ctx, bucket, tags))
		}
		must(t, f.admin.PutObject(f.ctx, bucket, "theirs", []byte("not the claim's")))
		must(t, f.admin.PutBucketPolicy(f.ctx, bucket, frozenPolicy(t, bucket)))
		before[name] = f.stateOf(f.admin, bucket)
		t.Cleanup(func() { emptyAndDelete(context.Background(), f.admin, bucket) })
	}
	writes := requests.snapshot(f.store)

	// The source's deletion, asked for after the move.
	f.update(k8s, source, func() { source.Spec.Move.DeleteSourceAfter = &metav1.Duration{Duration: time.Second} })
	f.eventually(time.Minute, "the source's deletion to be done with", func() error {
		if m := f.get(source).Status.Move; !m.SourceDeleted {
			return fmt.Errorf("move %+v", m)
		}
		return nil
	})

	// A move back onto the old store, refused there, then cancelled.
	f.moveTo(back, f.store, "")
	f.waitCondition(back, bkv1.ConditionStalled, metav1.ConditionTrue, bkv1.ReasonMoveNotAllowed)
	f.moveTo(back, target, "")
	f.waitMove(back, bkv1.MoveAborted, time.Minute)

	// The Purge of a claim whose move left a copy.
	must(t, k8s.Delete(f.ctx, purged))
	f.waitGone(purged)
	if _, err := targetAdmin.HeadBucket(f.ctx, buckets["purged"]); s3.KindOf(err) != s3.KindNotFound {
		t.Errorf("the purged claim's bucket on its home: %v, want it gone", err)
	}

	if _, mutating, ops := since(writes, requests.snapshot(f.store)); mutating > 0 {
		t.Errorf("%d writes reached SeaweedFS, where no bucket is the claims' any more: %v", mutating, ops)
	}
	for name := range impostors {
		if after := f.stateOf(f.admin, buckets[name]); !after.equal(before[name]) {
			t.Errorf("the bucket that replaced %s's copy changed:\nbefore %+v\nafter  %+v", name, before[name], after)
		}
	}
}

// TestOrphanMidMoveSendsNothing: a claim whose move has cut over as far as its source's
// freeze (the target made and filled, the source's writes denied) is annotated
// bucketkeeper.io/deletion-policy=Orphan and deleted. Its deletion stops the mover and
// lets the claim go in one pass without a single request to either store, counted at
// both for the reconciler and the mover: the source stays frozen, the target stays with
// what was copied into it.
func TestOrphanMidMoveSendsNothing(t *testing.T) {
	f := newFixture(t, seaweed)
	f.longer(5 * time.Minute)
	target := f.storeOn(rgw)
	targetAdmin := adminOf(t, f.ctx, rgw)
	sent := &requestLog{}
	runner := &mover.InProcess{Checkpoints: &mover.ConfigMapCheckpoints{Client: k8s, Namespace: moverNamespace},
		Observe: func(side, op string, status int, err error) { sent.observe("mover "+side, op, status, err) }}
	t.Cleanup(runner.Close)
	r := &storagebucket.Reconciler{Client: movesIndexed{k8sWatch}, Recorder: events.NewFakeRecorder(1000), Clock: clock.RealClock{}, SyncInterval: time.Hour,
		Stores: &stores.Registry{Client: k8s, APIReader: k8s, Factory: s3.New, Observer: sent.observe}, ClusterID: clusterID, Mover: runner}
	sb := f.bucket("moving", func(sb *bkv1.StorageBucket) { sb.Labels = map[string]string{isolatedLabel: f.ns} })
	req := ctrl.Request{NamespacedName: objKey(sb)}
	f.waitStoreCondition(bkv1.ConditionReady, metav1.ConditionTrue)
	f.waitNamedStoreCondition(target, bkv1.ConditionReady, metav1.ConditionTrue, "")
	pass := func() {
		t.Helper()
		if _, err := r.Reconcile(f.ctx, req); err != nil {
			t.Logf("reconcile: %v", err) // a pass the next one retries, as the controller would
		}
	}
	f.eventually(time.Minute, "the claim Ready", func() error {
		pass()
		if c := findCond(f.get(sb), bkv1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("conditions %s", describe(f.get(sb).Status.Conditions))
		}
		return nil
	})
	bucket := f.get(sb).Status.BucketName
	f.seedObjects(f.admin, bucket, 5)
	f.moveTo(sb, target, "")
	var m *bkv1.MoveStatus
	f.eventually(3*time.Minute, "the source frozen for the final pass", func() error {
		pass()
		if m = f.get(sb).Status.Move; m == nil || m.FrozenAt == nil || m.TargetBucket == "" {
			return fmt.Errorf("move %+v", m)
		}
		return nil
	})
	must(t, runner.Cancel(f.ctx, m.ID)) // the final pass stopped: nothing of the move runs
	t.Cleanup(func() {
		emptyAndDelete(context.Background(), targetAdmin, bucket)
		emptyAndDelete(context.Background(), f.admin, bucket)
	})
	copied := f.stateOf(targetAdmin, bucket)
	frozen := f.stateOf(f.admin, bucket)
	if !containsAny(frozen.Policy, bkv1.MoveFreezeSid) || len(copied.Objects) == 0 {
		t.Fatalf("before the deletion: source %+v, target %+v; want the source frozen and the target filled", frozen, copied)
	}

	f.update(k8s, sb, func() { sb.Annotations = map[string]string{bkv1.AnnotationDeletionPolicy: bkv1.DeletionPolicyOrphan} })
	must(t, k8s.Delete(f.ctx, sb))
	quiet := map[string]map[string]int{}
	for _, side := range []string{f.store, target, "mover source", "mover target"} {
		quiet[side] = sent.snapshot(side)
	}
	pass()
	if err := k8s.Get(f.ctx, objKey(sb), &bkv1.StorageBucket{}); client.IgnoreNotFound(err) != nil || err == nil {
		t.Errorf("the claim after its deletion's pass: %v, want it gone", err)
	}
	for side, was := range quiet {
		if n, _, ops := since(was, sent.snapshot(side)); n > 0 {
			t.Errorf("%d requests reached %s: %v", n, side, ops)
		}
	}
	if after := f.stateOf(f.admin, bucket); !after.equal(frozen) {
		t.Errorf("the source changed:\nbefore %+v\nafter  %+v", frozen, after)
	}
	if after := f.stateOf(targetAdmin, bucket); !after.equal(copied) {
		t.Errorf("the target changed:\nbefore %+v\nafter  %+v", copied, after)
	}
}

// frozenPolicy is a bucket policy with the move's freeze statement, as a bucket frozen
// by a move of its own has.
func frozenPolicy(t *testing.T, bucket string) string {
	t.Helper()
	doc, err := json.Marshal(map[string]any{"Version": "2012-10-17", "Statement": []any{map[string]any{
		"Sid": bkv1.MoveFreezeSid, "Effect": "Deny", "Principal": "*",
		"Action": []string{"s3:PutObject", "s3:DeleteObject"}, "Resource": []string{"arn:aws:s3:::" + bucket + "/*"},
	}}})
	must(t, err)
	return string(doc)
}

// bucketState is what a bucket's owner would miss: its tags, its policy and its objects.
type bucketState struct {
	Tags    map[string]string
	Policy  string
	Objects []string
}

func (f *fixture) stateOf(c s3.Client, bucket string) bucketState {
	f.t.Helper()
	tags, err := c.GetBucketTagging(f.ctx, bucket)
	must(f.t, err)
	policy, err := c.GetBucketPolicy(f.ctx, bucket)
	must(f.t, err)
	page, err := c.ListObjectVersions(f.ctx, bucket, nil)
	must(f.t, err)
	st := bucketState{Tags: tags, Policy: policy}
	for _, v := range page.Versions {
		st.Objects = append(st.Objects, fmt.Sprintf("%s@%s(marker %v)", v.Key, v.VersionID, v.IsDeleteMarker))
	}
	return st
}

func (s bucketState) equal(o bucketState) bool {
	return maps.Equal(s.Tags, o.Tags) && s.Policy == o.Policy && fmt.Sprint(s.Objects) == fmt.Sprint(o.Objects)
}

// nsUID is the UID of the fixture's namespace.
func (f *fixture) nsUID() string {
	f.t.Helper()
	return f.releasedUIDTag()[1:]
}
