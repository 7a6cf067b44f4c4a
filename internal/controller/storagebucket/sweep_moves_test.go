package storagebucket

import (
	"context"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/defaults"
	"github.com/bucketkeeper/bucketkeeper/internal/mover"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
	stores "github.com/bucketkeeper/bucketkeeper/internal/store"
)

const (
	sweepCluster = "cluster-a"
	sweepNS      = "ops"
	uidGone      = types.UID("0a1b2c3d-0000-4000-8000-00000000dead")
	uidLive      = types.UID("0a1b2c3d-0000-4000-8000-0000000011fe")
	nsUID        = "9f9f9f9f-0000-4000-8000-000000000001"
)

func hexOf(uid types.UID) string { return strings.ReplaceAll(string(uid), "-", "") }

// sweepRig is a sweeper over a fake API server and in-memory stores, by endpoint.
type sweepRig struct {
	t      *testing.T
	ctx    context.Context
	s      *MoveSweeper
	k8s    client.Client
	clock  *clocktesting.FakeClock
	stores map[string]*memStore
	runner *cancelRunner
}

// cancelRunner is a Runner whose moves run nowhere; it counts Cancel calls, and its
// passes are verified when verified says so.
type cancelRunner struct {
	cancels  map[string]int
	verified bool
}

func (r *cancelRunner) Start(context.Context, mover.Move) error { return nil }
func (r *cancelRunner) Progress(_ context.Context, _ string, pass, shards int) (mover.Progress, error) {
	if r.verified {
		return mover.Progress{Pass: pass, Shards: shards, Done: shards, Verified: true}, nil
	}
	return mover.Progress{}, nil
}
func (r *cancelRunner) Cancel(_ context.Context, id string) error { r.cancels[id]++; return nil }
func (r *cancelRunner) Forget(context.Context, string) error      { return nil }

func newSweepRig(t *testing.T, objs ...client.Object) *sweepRig {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = bkv1.AddToScheme(scheme)
	ready := []metav1.Condition{{Type: bkv1.ConditionReady, Status: metav1.ConditionTrue, Reason: bkv1.ReasonReady}}
	for _, name := range []string{"a", "b"} {
		objs = append(objs, &bkv1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: bkv1.ObjectStoreSpec{Endpoint: "http://" + name}, Status: bkv1.ObjectStoreStatus{Conditions: ready}})
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()
	clock := clocktesting.NewFakeClock(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	rig := &sweepRig{t: t, ctx: context.Background(), k8s: c, clock: clock,
		stores: map[string]*memStore{"http://a": newMemStore(), "http://b": newMemStore()}, runner: &cancelRunner{cancels: map[string]int{}}}
	r := &Reconciler{Client: c, ClusterID: sweepCluster, Clock: clock, Stores: &stores.Registry{}, Recorder: events.NewFakeRecorder(100)}
	rig.s = &MoveSweeper{Reconciler: r, APIReader: c, Direct: c, Namespace: sweepNS, Runner: rig.runner, Clock: clock}
	rig.s.clientFor = func(_ context.Context, store *bkv1.ObjectStore) (s3.Client, error) {
		return rig.stores[store.Spec.Endpoint], nil
	}
	return rig
}

func claimOfUID(name string, uid types.UID, move *bkv1.MoveStatus) *bkv1.StorageBucket {
	sb := &bkv1.StorageBucket{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: uid}}
	sb.Spec.ObjectStoreRef.Name = "a"
	sb.Status.BucketName, sb.Status.Move = name, move
	return sb
}

func ownTags(claim string, uid types.UID) map[string]string {
	return map[string]string{bkv1.TagClaim: "ns/" + claim, bkv1.TagUID: string(uid) + "/" + nsUID, bkv1.TagCluster: sweepCluster}
}

// keptStatement is a statement of the bucket's own, which a thaw must keep.
const keptStatement = `{"Version":"2012-10-17","Statement":[{"Sid":"Keep","Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}]}`

func frozenPolicy(t *testing.T, bucket string) string {
	doc, err := withFreeze(keptStatement, bucket)
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// plantMove makes what a move and the Jobs runner leave in the operator's namespace:
// the move's record, a checkpoint, a Job, its spec and the keys' Secret.
func (r *sweepRig) plantMove(id string, verified bool) {
	r.t.Helper()
	rec := &mover.Recorded{Runner: r.runner, Client: r.k8s, Namespace: sweepNS}
	spec := mover.Spec{MoveID: id, Mode: mover.ModeCopy, Pass: 2,
		Source: mover.Bucket{Endpoint: "http://a", Bucket: "data"}, Target: mover.Bucket{Endpoint: "http://b", Bucket: "data"}}
	must(r.t, rec.Start(r.ctx, mover.Move{Spec: spec}))
	must(r.t, (&mover.ConfigMapCheckpoints{Client: r.k8s, Namespace: sweepNS}).Save(r.ctx, &mover.Checkpoint{MoveID: id, Shard: 0, Pass: 2, Mode: mover.ModeFinal, Verified: verified}))
	if verified { // the controller read the verified pass: the record says so
		r.runner.verified = true
		_, err := rec.Progress(r.ctx, id, 2, 1)
		must(r.t, err)
		r.runner.verified = false
	}
	labels := map[string]string{bkv1.LabelMoveJob: id}
	must(r.t, r.k8s.Create(r.ctx, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: sweepNS, Name: mover.JobName(id, 2), Labels: labels}}))
	must(r.t, r.k8s.Create(r.ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: sweepNS, Name: mover.JobName(id, 2), Labels: labels}}))
	must(r.t, r.k8s.Create(r.ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: sweepNS, Name: bkv1.MoveCheckpointPrefix + id + "-credentials", Labels: labels}}))
}

// left lists the objects of move id in the operator's namespace.
func (r *sweepRig) left(id string) []string {
	r.t.Helper()
	moves, err := mover.ListMoves(r.ctx, r.k8s, sweepNS)
	must(r.t, err)
	l := moves[id]
	if l == nil {
		return nil
	}
	out := append(append([]string{}, l.ConfigMaps...), l.Secrets...)
	for _, j := range l.Jobs {
		out = append(out, "job "+j.Name)
	}
	return out
}

// sweepUntilQuiet runs the movers' sweep, stepping the clock past each wait, until a
// sweep has nothing unfinished.
func (r *sweepRig) sweepUntilQuiet() {
	r.t.Helper()
	for range 20 {
		pass, err := r.s.sweepMoves(r.ctx)
		must(r.t, err)
		if pass.failed > 0 {
			r.t.Fatalf("a move failed to be swept: %+v", pass)
		}
		if pass.unfinished == 0 {
			return
		}
		r.clock.Step(10 * time.Second)
	}
	r.t.Fatal("the sweep does not finish")
}

// TestMoveSweepRemovesAGoneClaimsMove: a claim stripped mid-move leaves its Job, the
// Job's spec, the Secret with both stores' keys, its checkpoints and record, a half-copied
// target and (past the cutover) a frozen source. The sweep stops the mover (the runner
// and the Job, its pods first), deletes the target with every version, thaws only the
// freeze out of the source's policy and releases it, then deletes the objects. A live
// claim's current move is left alone; the objects of its earlier move go only once
// two sweeps MoveSweepStaleGrace apart found them stale.
func TestMoveSweepRemovesAGoneClaimsMove(t *testing.T) {
	live := hexOf(uidLive) + "-2"
	earlier := hexOf(uidLive) + "-1"
	r := newSweepRig(t, claimOfUID("live", uidLive, &bkv1.MoveStatus{ID: live, Phase: bkv1.MoveCopying}))
	gone := hexOf(uidGone) + "-1"
	r.plantMove(gone, false)
	// Its final pass verified after the claim went: the controller never heard.
	must(t, (&mover.ConfigMapCheckpoints{Client: r.k8s, Namespace: sweepNS}).Save(r.ctx, &mover.Checkpoint{MoveID: gone, Shard: 1, Pass: 3, Mode: mover.ModeFinal, Verified: true}))
	r.plantMove(live, false)
	must(t, (&mover.ConfigMapCheckpoints{Client: r.k8s, Namespace: sweepNS}).Save(r.ctx, &mover.Checkpoint{MoveID: earlier, Shard: 0, Pass: 9}))
	src := r.stores["http://a"].add("data", ownTags("data", uidGone), frozenPolicy(t, "data"), "k1")
	tgt := r.stores["http://b"].add("data", ownTags("data", uidGone), "", "k1", "k2")
	_ = tgt

	r.sweepUntilQuiet()
	if left := r.left(gone); len(left) > 0 {
		t.Errorf("left of the gone claim's move: %v", left)
	}
	if r.runner.cancels[gone] == 0 {
		t.Error("the runner was never told to stop the gone claim's move")
	}
	if _, there := r.stores["http://b"].buckets["data"]; there {
		t.Error("the gone move's target bucket is still there")
	}
	if src.policy != keptStatement && !strings.Contains(src.policy, `"Keep"`) || strings.Contains(src.policy, bkv1.MoveFreezeSid) {
		t.Errorf("source policy after the sweep: %s; want only its own statement", src.policy)
	}
	if src.tags[bkv1.TagUID] != "/"+nsUID || src.tags[bkv1.TagClaim] != "ns/data" || src.tags[bkv1.TagCluster] != sweepCluster {
		t.Errorf("source tags after the sweep: %v; want it released", src.tags)
	}
	if len(src.versions) != 1 {
		t.Errorf("the source lost objects: %v", src.versions)
	}
	if left := r.left(live); len(left) != 5 || r.runner.cancels[live] > 0 {
		t.Errorf("the live move: %v left (want its 5 objects), %d cancels", left, r.runner.cancels[live])
	}
	if len(r.left(earlier)) != 1 {
		t.Fatal("the earlier move's checkpoint went on one sighting")
	}
	r.clock.Step(defaults.MoveSweepStaleGrace)
	r.sweepUntilQuiet()
	if left := r.left(earlier); len(left) > 0 {
		t.Errorf("the earlier move's objects after the grace: %v", left)
	}
	if len(r.left(live)) != 5 {
		t.Error("the live move's objects went with its earlier move's")
	}
}

// TestMoveSweepKeepsAVerifiedTarget: a move whose verified final pass the controller
// was told of may have switched the claim's home to the target (and applications
// written there): the target stays, the frozen source is thawed and released, the
// objects go. A pass that verified after the claim went (its checkpoints say so, its
// record does not) leaves the target to be deleted (TestMoveSweepRemovesAGoneClaimsMove
// plants such checkpoints on the other side).
func TestMoveSweepKeepsAVerifiedTarget(t *testing.T) {
	r := newSweepRig(t)
	gone := hexOf(uidGone) + "-3"
	r.plantMove(gone, true)
	src := r.stores["http://a"].add("data", ownTags("data", uidGone), frozenPolicy(t, "data"), "k1")
	tgt := r.stores["http://b"].add("data", ownTags("data", uidGone), "", "k1")
	r.sweepUntilQuiet()
	if r.stores["http://b"].buckets["data"] == nil || len(tgt.versions) != 1 || tgt.tags[bkv1.TagUID] != string(uidGone)+"/"+nsUID {
		t.Errorf("the verified target: %+v; want it left as it was", tgt)
	}
	if strings.Contains(src.policy, bkv1.MoveFreezeSid) || src.tags[bkv1.TagUID] != "/"+nsUID {
		t.Errorf("the source: policy %s, tags %v; want it thawed and released", src.policy, src.tags)
	}
	if left := r.left(gone); len(left) > 0 {
		t.Errorf("left: %v", left)
	}
}

// TestMoveSweepKeepsALockedTarget: a target whose versions object lock keeps is never
// emptied of them: what may go goes, the bucket is kept, released and tagged
// deletion-blocked, and the sweep of the move ends.
func TestMoveSweepKeepsALockedTarget(t *testing.T) {
	r := newSweepRig(t)
	gone := hexOf(uidGone) + "-1"
	r.plantMove(gone, false)
	r.stores["http://a"].add("data", ownTags("data", uidGone), "", "k1")
	tgt := r.stores["http://b"].add("data", ownTags("data", uidGone), "", "k1", "locked")
	tgt.lock, tgt.locked["locked"] = true, true
	r.sweepUntilQuiet()
	if r.stores["http://b"].buckets["data"] == nil || len(tgt.versions) != 1 || tgt.versions[0].Key != "locked" {
		t.Fatalf("the locked target: %+v; want it kept with its locked version alone", tgt)
	}
	if tgt.tags[bkv1.TagDeletionBlocked] == "" || tgt.tags[bkv1.TagUID] != "/"+nsUID {
		t.Errorf("the locked target's tags %v: want it released and tagged %s", tgt.tags, bkv1.TagDeletionBlocked)
	}
	if left := r.left(gone); len(left) > 0 {
		t.Errorf("left: %v", left)
	}
}

// TestMoveSweepTouchesOnlyTheGoneClaimsBuckets: at the endpoints a gone move's record
// names, buckets of that name tagged for another cluster, for another claim, or not
// tagged, are left exactly as they are.
func TestMoveSweepTouchesOnlyTheGoneClaimsBuckets(t *testing.T) {
	for name, tags := range map[string]map[string]string{
		"another cluster": {bkv1.TagClaim: "ns/data", bkv1.TagUID: string(uidGone) + "/" + nsUID, bkv1.TagCluster: "cluster-b"},
		"another claim":   ownTags("other", uidLive),
		"untagged":        nil,
	} {
		t.Run(name, func(t *testing.T) {
			r := newSweepRig(t, claimOfUID("other", uidLive, nil))
			gone := hexOf(uidGone) + "-1"
			r.plantMove(gone, false)
			src := r.stores["http://a"].add("data", tags, frozenPolicy(t, "data"), "k1")
			tgt := r.stores["http://b"].add("data", tags, "", "k1")
			r.sweepUntilQuiet()
			for side, m := range map[string]*memStore{"source": r.stores["http://a"], "target": r.stores["http://b"]} {
				if n := m.writes(); n != 0 {
					t.Errorf("%d writes to the %s's store", n, side)
				}
			}
			if len(src.versions) != 1 || len(tgt.versions) != 1 || !strings.Contains(src.policy, bkv1.MoveFreezeSid) {
				t.Errorf("source %+v, target %+v changed", src, tgt)
			}
			if left := r.left(gone); len(left) > 0 {
				t.Errorf("left: %v", left)
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
