package integration_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/mover"
	"github.com/bucketkeeper/bucketkeeper/internal/operator"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

// TestMoveLeftoversOfAStrippedClaimAreSwept: a tenant removes the finalizer of a
// StorageBucket whose bucket moves, and deletes it, (1) while the mover copies, (2)
// right after the cutover froze the source, (3) once the move is done and left a
// frozen copy behind. The suite's sweeper (every collector interval) then removes what
// the move left: the movers' ConfigMaps (checkpoints, record) and, in (1), the Job,
// its spec and the Secret with both stores' keys that mover Jobs run with (planted as
// the Jobs runner makes them: the suite runs its movers in process, and has no
// garbage collector, so the Job is only seen being deleted, its pods first); the
// half-copied target bucket, which no claim tracks, is deleted; the frozen source is
// thawed (the operator's key writes to it again) and released; the copy left behind is
// released, frozen as a Retain deletion leaves it. The gone claim's home is left as a
// claim without its finalizer leaves it. On a third store, buckets of the same name
// tagged for another cluster (with the gone claim's tags otherwise), for a live claim,
// or untagged, all frozen, keep their tags, policy and objects, while the sweep passes
// them (a gone claim's copy named after them is released). Source and target are
// SeaweedFS and Ceph RGW both ways, whose bucket policies differ.
func TestMoveLeftoversOfAStrippedClaimAreSwept(t *testing.T) {
	for _, pair := range [][2]*testenv.S3Server{{seaweed, rgw}, {rgw, seaweed}} {
		for _, when := range []string{"mid-copy", "cutover", "after-done"} {
			t.Run(string(pair[0].Kind)+"-to-"+string(pair[1].Kind)+"/"+when, func(t *testing.T) {
				t.Parallel()
				testMoveLeftoversSwept(t, pair[0], pair[1], when)
			})
		}
	}
}

func testMoveLeftoversSwept(t *testing.T, src, tgt *testenv.S3Server, when string) {
	// The source's request budget slows its mover (half of it) enough that the
	// copy and the final pass take seconds: the claim is stripped within them.
	f := newFixture(t, src, func(s *bkv1.ObjectStore) {
		s.Spec.RequestsPerSecond, s.Spec.Burst = 4, 4
		s.Spec.Guardrails.AdoptionAllowedNamespaces = &metav1.LabelSelector{}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	t.Cleanup(cancel)
	f.ctx = ctx
	target := f.storeOn(tgt)
	f.storeOn(versity) // the bystanders' store: the sweep lists its buckets
	f.waitNamedStoreCondition(target, bkv1.ConditionReady, metav1.ConditionTrue, "")
	// The claim adopts a bucket made beforehand: the operator that creates a claim's
	// bucket remembers the claim, and carries out its deletion policy itself if it
	// vanishes while that operator runs (creates.go), from what it was when the bucket
	// was made; what a claim gone after a restart or failover leaves is the sweep's alone.
	must(t, f.admin.CreateBucket(f.ctx, f.ns+"-data", ""))
	sb := f.waitCondition(f.bucket("data", func(sb *bkv1.StorageBucket) {
		sb.Spec.BucketName, sb.Spec.Adoption = f.ns+"-data", bkv1.AdoptionIfUnowned
	}), bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
	other := f.waitCondition(f.bucket("other"), bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
	bucket := sb.Status.BucketName
	// Mid-copy, enough objects that the copy at the source's budget takes minutes.
	seed := 40
	if when == "mid-copy" {
		seed = 150
	}
	f.seedObjects(f.admin, bucket, seed)
	tenant := f.stripper() // ready before the move: the strip follows the fact it waits for at once
	claimUID := f.uidTagOf(sb)
	bystanders := plantBystanders(t, f, bucket, claimUID, f.uidTagOf(other))

	f.moveTo(sb, target, "")
	var moveID string
	switch when {
	case "mid-copy":
		moving := f.waitMoveFact(sb, "copying", func(m *bkv1.MoveStatus) bool {
			return (m.Phase == bkv1.MoveCopying || m.Phase == bkv1.MoveCatchingUp) && m.TargetBucket != "" && m.CopiedObjects > 0
		})
		moveID = moving.ID
		plantJobsOf(t, f, moveID, src, tgt, bucket)
	case "cutover":
		moveID = f.waitMoveFact(sb, "frozen", func(m *bkv1.MoveStatus) bool { return m.FrozenAt != nil && m.Phase == bkv1.MoveCuttingOver }).ID
	case "after-done":
		moveID = f.waitMove(sb, bkv1.MoveDone, 4*time.Minute).Status.Move.ID
		f.waitNoCheckpoints(moveID)
	}
	tgtAdmin := adminOf(t, f.ctx, tgt)
	from := logs.Len()
	t.Cleanup(func() {
		if t.Failed() { // what the operator said of this move since the strip
			for _, line := range strings.Split(logs.From(from), "\n") {
				if strings.Contains(line, moveID) || strings.Contains(line, bucket) {
					t.Log(line)
				}
			}
		}
	})
	f.stripAndDelete(tenant, sb)
	t.Logf("stripped %s/%s at %s of move %s", f.ns, sb.Name, when, moveID)
	if when == "cutover" {
		// The sweep deletes the record only once the target is gone: it still says
		// whether the controller heard of a verified final pass (then the move may have
		// switched, and the target is kept).
		moves, err := mover.ListMoves(f.ctx, k8s, moverNamespace)
		must(t, err)
		if l := moves[moveID]; l != nil && l.Record != nil && l.Record.Verified {
			t.Fatalf("move %s: its final pass was seen verified before the claim was stripped: the strip came too late to test the cutover", moveID)
		}
	}

	// The movers' objects go.
	f.eventually(4*time.Minute, "the objects of move "+moveID+" removed", func() error {
		return moveObjectsLeft(f.ctx, moveID)
	})
	released := f.releasedUIDTag()
	switch when {
	case "mid-copy", "cutover":
		f.eventually(2*time.Minute, "the move's target bucket deleted", func() error {
			if _, err := tgtAdmin.HeadBucket(f.ctx, bucket); s3.KindOf(err) != s3.KindNotFound {
				return fmt.Errorf("bucket %s still on the target: %v", bucket, err)
			}
			return nil
		})
	}
	switch when {
	case "mid-copy":
		// The source never froze: it is the gone claim's home, left as it was.
		tags, err := f.admin.GetBucketTagging(f.ctx, bucket)
		must(t, err)
		if tags[bkv1.TagUID] != claimUID {
			t.Errorf("the gone claim's home: uid tag %q, want it left %q", tags[bkv1.TagUID], claimUID)
		}
	case "cutover":
		f.eventually(time.Minute, "the frozen source thawed and released", func() error {
			policy, err := f.admin.GetBucketPolicy(f.ctx, bucket)
			if err != nil || containsAny(policy, bkv1.MoveFreezeSid) {
				return fmt.Errorf("source policy %q (%v)", policy, err)
			}
			tags, err := f.admin.GetBucketTagging(f.ctx, bucket)
			if err != nil || tags[bkv1.TagUID] != released || tags[bkv1.TagClaim] != f.ns+"/data" || tags[bkv1.TagCluster] != clusterID {
				return fmt.Errorf("source tags %v (%v), want released (%s=%s)", tags, err, bkv1.TagUID, released)
			}
			return nil
		})
		f.eventually(30*time.Second, "the operator's key writing to the source again", func() error {
			return f.admin.PutObject(f.ctx, bucket, "after-sweep", []byte("writable"))
		})
	case "after-done":
		f.eventually(3*time.Minute, "the copy left behind released", func() error {
			tags, err := f.admin.GetBucketTagging(f.ctx, bucket)
			if err != nil || tags[bkv1.TagUID] != released || tags[bkv1.TagMovedTo] != target+"/"+bucket {
				return fmt.Errorf("left-behind tags %v (%v), want released and still moved-to", tags, err)
			}
			return nil
		})
		if policy, err := f.admin.GetBucketPolicy(f.ctx, bucket); err != nil || !containsAny(policy, bkv1.MoveFreezeSid) {
			t.Errorf("the copy left behind: policy %q (%v), want it frozen still, as Retain keeps it", policy, err)
		}
		tags, err := tgtAdmin.GetBucketTagging(f.ctx, bucket)
		if err != nil || tags[bkv1.TagUID] != claimUID {
			t.Errorf("the gone claim's home on the target: tags %v (%v), want them left", tags, err)
		}
	}
	bystanders.check(t, f)
}

// waitMoveFact waits until the claim's move satisfies fact and returns it.
func (f *fixture) waitMoveFact(sb *bkv1.StorageBucket, what string, fact func(*bkv1.MoveStatus) bool) *bkv1.MoveStatus {
	f.t.Helper()
	var m *bkv1.MoveStatus
	f.eventually(4*time.Minute, "move "+what, func() error {
		got := &bkv1.StorageBucket{}
		if err := k8s.Get(f.ctx, client.ObjectKeyFromObject(sb), got); err != nil {
			return err
		}
		if m = got.Status.Move; m == nil || !fact(m) {
			return fmt.Errorf("move %+v", got.Status.Move)
		}
		return nil
	})
	return m
}

// stripAndDelete removes the claim's finalizers and deletes it at exactly that version,
// as a tenant with full verbs on storagebuckets (finalizers included) can: if the
// operator put its finalizer back in between, the delete fails its precondition and the
// tenant tries again. So the claim goes without the operator ever seeing a deletion.
func (f *fixture) stripAndDelete(tenant client.Client, sb *bkv1.StorageBucket) {
	f.t.Helper()
	f.eventually(30*time.Second, "claim "+sb.Name+" deleted without its finalizer", func() error {
		got := &bkv1.StorageBucket{}
		if err := tenant.Get(f.ctx, client.ObjectKeyFromObject(sb), got); err != nil {
			return err
		}
		got.Finalizers = nil
		if err := tenant.Update(f.ctx, got); err != nil {
			return err
		}
		return tenant.Delete(f.ctx, got, client.Preconditions{UID: &got.UID, ResourceVersion: &got.ResourceVersion})
	})
	if err := k8s.Get(f.ctx, client.ObjectKeyFromObject(sb), &bkv1.StorageBucket{}); !apierrors.IsNotFound(err) {
		f.t.Fatalf("the claim is still there after its deletion: %v", err)
	}
}

// stripper is a tenant with full verbs on storagebuckets, finalizers included, once the
// API server's authorizer knows its Role.
func (f *fixture) stripper() client.Client {
	f.t.Helper()
	all := []string{"get", "list", "watch", "create", "update", "patch", "delete"}
	tenant, err := testenv.ServiceAccountClient(f.ctx, k8s, cfg, operator.Scheme(), f.ns, "strip-tenant", []rbacv1.PolicyRule{
		{APIGroups: []string{bkv1.GroupVersion.Group}, Resources: []string{"storagebuckets", "storagebuckets/finalizers"}, Verbs: all},
	})
	must(f.t, err)
	f.eventually(30*time.Second, "the tenant's Role in force", func() error {
		return tenant.List(f.ctx, &bkv1.StorageBucketList{}, client.InNamespace(f.ns))
	})
	return tenant
}

// plantJobsOf makes, for move id, what the Jobs runner makes for a pass: the Job, its
// spec ConfigMap and the Secret of both stores' keys (placeholders here).
func plantJobsOf(t *testing.T, f *fixture, id string, src, tgt *testenv.S3Server, bucket string) {
	t.Helper()
	jobs := &mover.Jobs{Client: k8s, Checkpoints: &mover.ConfigMapCheckpoints{Client: k8s, Namespace: moverNamespace},
		Namespace: moverNamespace, Image: "bucketkeeper:test", ServiceAccount: "movers"}
	spec := mover.Spec{MoveID: id, Mode: mover.ModeCopy, Pass: 99,
		Source: mover.Bucket{Endpoint: src.Endpoint, Bucket: bucket}, Target: mover.Bucket{Endpoint: tgt.Endpoint, Bucket: bucket}}
	keys := mover.Credentials{AccessKeyID: "placeholder", SecretAccessKey: "placeholder"}
	must(t, jobs.Start(f.ctx, mover.Move{Spec: spec, Source: keys, Target: keys}))
	if err := moveObjectsLeft(f.ctx, id); err == nil || !strings.Contains(err.Error(), "Secret") {
		t.Fatalf("planting the Jobs runner's objects of move %s: %v", id, err)
	}
}

// moveObjectsLeft says what of move id is still in the movers' namespace: a
// ConfigMap or Secret named for it, or a Job not being deleted (the harness has no
// garbage collector to finish a deletion).
func moveObjectsLeft(ctx context.Context, id string) error {
	var left []string
	cms := &corev1.ConfigMapList{}
	secrets := &corev1.SecretList{}
	jobs := &batchv1.JobList{}
	for _, l := range []client.ObjectList{cms, secrets, jobs} {
		if err := k8s.List(ctx, l, client.InNamespace(moverNamespace)); err != nil {
			return err
		}
	}
	for _, cm := range cms.Items {
		if strings.Contains(cm.Name, id) {
			left = append(left, "ConfigMap "+cm.Name)
		}
	}
	for _, s := range secrets.Items {
		if strings.Contains(s.Name, id) {
			left = append(left, "Secret "+s.Name)
		}
	}
	for _, j := range jobs.Items {
		if strings.Contains(j.Name, id) && j.DeletionTimestamp.IsZero() {
			left = append(left, "Job "+j.Name)
		}
	}
	if len(left) > 0 {
		return fmt.Errorf("left: %s", strings.Join(left, ", "))
	}
	return nil
}

// bystanders are buckets on Versity the sweep must leave as they are, and a canary it
// must release, which it reaches after them (name order).
type bystanders struct {
	admin  s3.Client
	before map[string]bystanderState
	canary string
}

type bystanderState struct {
	tags    map[string]string
	policy  string
	objects []string
}

func plantBystanders(t *testing.T, f *fixture, bucket, goneUID, liveUID string) *bystanders {
	t.Helper()
	admin := adminOf(t, f.ctx, versity)
	freeze, err := json.Marshal(map[string]any{"Version": "2012-10-17", "Statement": []any{map[string]any{
		"Sid": bkv1.MoveFreezeSid, "Effect": "Deny", "Principal": "*", "Action": []string{"s3:PutObject", "s3:DeleteObject"},
		"Resource": []string{"arn:aws:s3:::" + bucket + "/*"}}}})
	must(t, err)
	b := &bystanders{admin: admin, before: map[string]bystanderState{}, canary: bucket + "-zz-canary"}
	plant := func(name string, tags map[string]string, frozen bool) {
		must(t, admin.CreateBucket(f.ctx, name, ""))
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			emptyAndDelete(ctx, admin, name)
		})
		must(t, admin.PutObject(f.ctx, name, "kept", []byte("bystander")))
		if len(tags) > 0 {
			must(t, admin.PutBucketTagging(f.ctx, name, tags))
		}
		if frozen {
			must(t, admin.PutBucketPolicy(f.ctx, name, strings.ReplaceAll(string(freeze), bucket+"/*", name+"/*")))
		}
	}
	claim := f.ns + "/data"
	// The gone claim's own tags, but another cluster's.
	plant(bucket, map[string]string{bkv1.TagClaim: claim, bkv1.TagUID: goneUID, bkv1.TagCluster: "another-cluster", bkv1.TagMovedTo: "x/" + bucket}, true)
	plant(bucket+"-live", map[string]string{bkv1.TagClaim: f.ns + "/other", bkv1.TagUID: liveUID, bkv1.TagCluster: clusterID, bkv1.TagMovedTo: "x/" + bucket}, true)
	plant(bucket+"-untagged", nil, true)
	for _, name := range []string{bucket, bucket + "-live", bucket + "-untagged"} {
		b.before[name] = b.state(t, f.ctx, name)
	}
	// A copy of a claim that is gone (its UID no claim's): the sweep releases it.
	plant(b.canary, map[string]string{bkv1.TagClaim: f.ns + "/gone", bkv1.TagUID: string(uuid.NewUUID()) + "/" + strings.TrimPrefix(f.releasedUIDTag(), "/"),
		bkv1.TagCluster: clusterID, bkv1.TagMovedTo: "x/" + b.canary}, true)
	return b
}

func (b *bystanders) state(t *testing.T, ctx context.Context, name string) bystanderState {
	t.Helper()
	tags, err := b.admin.GetBucketTagging(ctx, name)
	must(t, err)
	policy, err := b.admin.GetBucketPolicy(ctx, name)
	must(t, err)
	page, err := b.admin.ListObjectVersions(ctx, name, nil)
	must(t, err)
	var objects []string
	for _, v := range page.Versions {
		objects = append(objects, v.Key+"@"+v.VersionID)
	}
	slices.Sort(objects)
	return bystanderState{tags: tags, policy: policy, objects: objects}
}

// check waits for the canary's release, then finds every bystander as it was.
func (b *bystanders) check(t *testing.T, f *fixture) {
	t.Helper()
	f.eventually(3*time.Minute, "the sweep passing the bystanders (the canary released)", func() error {
		tags, err := b.admin.GetBucketTagging(f.ctx, b.canary)
		if err != nil || strings.Split(tags[bkv1.TagUID], "/")[0] != "" {
			return fmt.Errorf("canary tags %v (%v)", tags, err)
		}
		return nil
	})
	for name, before := range b.before {
		after := b.state(t, f.ctx, name)
		if !maps.Equal(before.tags, after.tags) || before.policy != after.policy || !slices.Equal(before.objects, after.objects) {
			t.Errorf("bystander %s changed: %+v, was %+v", name, after, before)
		}
	}
}
