package integration_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

// adminLifecycle and adminTags are what the store's admin set on a bucket by hand,
// beside storedCORS: settings no claim's spec declares.
var (
	adminLifecycle = []s3.LifecycleRule{{ID: "expire-tmp", Prefix: "tmp/", ExpirationDays: ptr32(7)}}
	adminTags      = map[string]string{"cost-center": "cc-7"}
)

// TestMoveWaitsForAChoiceOfUndeclaredSettings moves buckets adopted on SeaweedFS, with
// a lifecycle rule, a tag and CORS their claims' specs do not declare, to Ceph RGW.
// Without spec.move.undeclaredSettings the move waits, Stalled (UndeclaredSettings)
// naming the three, and sends no CreateBucket to the target; set to Carry, the move
// ends Done with the three on the target, recorded in status.carried, and a later
// configuration pass there (a spec change) leaves them. A move with Drop ends Done
// without them, saying what it left. The attack: a bucket whose source policy grants
// the public, moved with Carry onto a target whose guardrails allow no public bucket,
// is refused naming the guardrail, and nothing is created there.
func TestMoveWaitsForAChoiceOfUndeclaredSettings(t *testing.T) {
	f := newFixture(t, seaweed, allowAdoption)
	f.longer(8 * time.Minute)
	target := f.storeOn(rgw)
	tgtAdmin := adminOf(t, f.ctx, rgw)
	adopted := func(name string) *bkv1.StorageBucket {
		bucket := f.ns + "-" + name
		must(t, f.admin.CreateBucket(f.ctx, bucket, ""))
		must(t, f.admin.PutBucketTagging(f.ctx, bucket, adminTags))
		must(t, f.admin.PutBucketLifecycle(f.ctx, bucket, adminLifecycle))
		must(t, f.admin.PutBucketCors(f.ctx, bucket, storedCORS))
		sb := f.bucket(name, func(sb *bkv1.StorageBucket) {
			sb.Spec.BucketName, sb.Spec.Adoption = bucket, bkv1.AdoptionIfUnowned
			sb.Spec.DeletionPolicy = bkv1.DeletionPolicyPurge
		})
		sb = f.waitCondition(sb, bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
		f.seedObjects(f.admin, bucket, 3)
		return sb
	}
	carry, drop, public := adopted("carry"), adopted("drop"), adopted("public")
	publicPolicy := fmt.Sprintf(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::%s/*"}]}`, public.Status.BucketName)
	must(t, f.admin.PutBucketPolicy(f.ctx, public.Status.BucketName, publicPolicy))
	before := requests.snapshot(target)

	f.update(k8s, carry, func() { // no choice
		carry.Spec.Move, carry.Spec.ObjectStoreRef.Name = &bkv1.MoveSpec{}, target
	})
	f.update(k8s, drop, func() {
		drop.Spec.Move, drop.Spec.ObjectStoreRef.Name = &bkv1.MoveSpec{UndeclaredSettings: bkv1.UndeclaredSettingsDrop}, target
	})

	f.update(k8s, public, func() {
		public.Spec.Move, public.Spec.ObjectStoreRef.Name = &bkv1.MoveSpec{UndeclaredSettings: bkv1.UndeclaredSettingsCarry}, target
	})

	waiting := f.waitStalled(carry, bkv1.ReasonUndeclaredSettings, "spec.move.undeclaredSettings")
	msg := findCond(waiting, bkv1.ConditionStalled).Message
	for _, name := range []string{"tags (1)", "lifecycle (1 rule)", "CORS (2 rules)"} {
		if !strings.Contains(msg, name) {
			t.Errorf("Stalled does not name %s: %s", name, msg)
		}
	}
	if strings.Contains(msg, "cc-7") || strings.Contains(msg, "tmp/") {
		t.Errorf("Stalled holds a setting's value: %s", msg)
	}
	if m := waiting.Status.Move; m == nil || len(m.Undeclared) != 3 || m.UndeclaredSettings != "" {
		t.Errorf("status.move = %+v, want the three undeclared and no choice", m)
	}
	if _, err := tgtAdmin.HeadBucket(f.ctx, carry.Status.BucketName); s3.KindOf(err) != s3.KindNotFound {
		t.Errorf("the waiting move's bucket on the target: %v, want none", err)
	}

	// Drop goes on meanwhile, without them.
	dropped := f.waitMove(drop, bkv1.MoveDone, 4*time.Minute)
	if m := dropped.Status.Move; m.UndeclaredSettings != bkv1.UndeclaredSettingsDrop || len(m.Undeclared) != 3 || !strings.Contains(m.Message, "Drop") {
		t.Errorf("status.move after Drop = %+v", m)
	}
	if dropped.Status.Carried != nil {
		t.Errorf("Drop carried %+v", dropped.Status.Carried)
	}
	f.targetHas(tgtAdmin, dropped.Status.BucketName, false)

	f.waitStalled(public, bkv1.ReasonMoveNotAllowed, bkv1.ReasonPublicAccessNotAllowed)
	if _, err := tgtAdmin.HeadBucket(f.ctx, public.Status.BucketName); s3.KindOf(err) != s3.KindNotFound {
		t.Errorf("the refused move's bucket on the target: %v, want none", err)
	}

	// Only the dropping move's CreateBucket reached the target.
	_, _, ops := since(before, requests.snapshot(target))
	if ops["CreateBucket"] != 1 {
		t.Errorf("CreateBucket requests to the target = %d, want 1 (the Drop move's only: none of the waiting or the refused one)", ops["CreateBucket"])
	}
	if _, err := tgtAdmin.HeadBucket(f.ctx, carry.Status.BucketName); s3.KindOf(err) != s3.KindNotFound {
		t.Errorf("the waiting move's bucket on the target: %v, want none", err)
	}

	f.update(k8s, carry, func() { carry.Spec.Move.UndeclaredSettings = bkv1.UndeclaredSettingsCarry })
	carried := f.waitMove(carry, bkv1.MoveDone, 4*time.Minute)
	f.waitCondition(carried, bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
	c := carried.Status.Carried
	if c == nil || c.ObjectStore != target || !slices.Equal(c.TagKeys, []string{"cost-center"}) || !slices.Equal(c.LifecycleRules, []string{"expire-tmp"}) || !c.CORS || c.Policy {
		t.Errorf("status.carried = %+v", c)
	}
	f.targetHas(tgtAdmin, carried.Status.BucketName, true)

	// A spec change configures the bucket on its new home again: the carried
	// settings are the bucket's, not drift.
	gen := f.updateSpec(carried, func(s *bkv1.StorageBucketSpec) { s.Tags = map[string]string{"team": "data"} })
	f.eventually(time.Minute, "the spec change configured on the target", func() error {
		got := f.get(carried)
		if cond := findCond(got, bkv1.ConditionConfigured); cond == nil || cond.ObservedGeneration != gen || cond.Status != metav1.ConditionTrue {
			return fmt.Errorf("conditions: %s", describe(got.Status.Conditions))
		}
		return nil
	})
	f.targetHas(tgtAdmin, carried.Status.BucketName, true)
}

// targetHas checks whether the bucket on the move's target has the admin's tag,
// lifecycle rule and CORS (want), or none of them.
func (f *fixture) targetHas(c s3.Client, bucket string, want bool) {
	f.t.Helper()
	tags, err := c.GetBucketTagging(f.ctx, bucket)
	must(f.t, err)
	rules, err := c.GetBucketLifecycle(f.ctx, bucket)
	must(f.t, err)
	cors, err := c.GetBucketCors(f.ctx, bucket)
	must(f.t, err)
	has := map[string]bool{
		"tag":       tags["cost-center"] == "cc-7",
		"lifecycle": slices.ContainsFunc(rules, func(r s3.LifecycleRule) bool { return r.ID == "expire-tmp" }),
		"CORS":      sameCORSOnStore(cors, storedCORS),
	}
	for what, ok := range has {
		if ok != want {
			f.t.Errorf("bucket %s on the target: has the admin's %s = %v, want %v (tags %v, rules %+v, CORS %+v)", bucket, what, ok, want, tags, rules, cors)
		}
	}
}
