package integration_test

import (
	"crypto/sha256"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/naming"
)

// TestRetireMovesLegacyNames: a store whose buckets carry legacy names retires into a
// successor that keeps lanes under a prefix and lists one of the names for the
// tenant's namespace (guardrails.legacyBucketNames). Without spec.retire.bucketName the
// listed bucket moves keeping its name and the two others are skipped (MoveNotAllowed,
// nothing created on the successor); with spec.retire.bucketName: Lane, the claim
// that makes no choice of its own moves under its lane name on the successor, every
// object with it, its connection Secret carrying the new name, while the claim whose
// own spec.move.bucketName says Keep stays skipped. No claim's spec changes.
func TestRetireMovesLegacyNames(t *testing.T) {
	t.Parallel()
	const prefix = "lane"
	f := newFixture(t, seaweed, func(s *bkv1.ObjectStore) { s.Spec.Guardrails.AllowAnyBucketName = true })
	f.longer(8 * time.Minute)
	base := "old-" + f.ns
	listed, renamed, kept := base+"-listed", base+"-renamed", base+"-kept"
	successor := f.storeOn(versity, func(s *bkv1.ObjectStore) {
		s.Spec.BucketNamePrefix = prefix
		s.Spec.Guardrails.LegacyBucketNames = []bkv1.LegacyBucketNames{{Names: []string{listed}, Namespaces: []string{f.ns}}}
	})
	f.waitNamedStoreCondition(successor, bkv1.ConditionReady, metav1.ConditionTrue, "")
	tgtAdmin := adminOf(t, f.ctx, versity)

	claims := map[string]*bkv1.StorageBucket{}
	for name, bucket := range map[string]string{"listed": listed, "renamed": renamed, "kept": kept} {
		claims[name] = f.waitCondition(f.bucket(name, func(sb *bkv1.StorageBucket) {
			sb.Spec.BucketName, sb.Spec.DeletionPolicy = bucket, bkv1.DeletionPolicyPurge
			if name == "kept" {
				sb.Spec.Move = &bkv1.MoveSpec{BucketName: bkv1.MoveBucketNameKeep}
			}
		}), bkv1.ConditionReady, metav1.ConditionTrue, bkv1.ReasonReady)
	}
	seeded := f.seedObjects(f.admin, renamed, 40)
	setRetire := func(choice bkv1.MoveBucketName) {
		store := &bkv1.ObjectStore{}
		must(t, k8s.Get(f.ctx, client.ObjectKey{Name: f.store}, store))
		f.update(k8s, store, func() { store.Spec.Retire = &bkv1.RetireSpec{Into: successor, BucketName: choice} })
	}

	setRetire("")
	st := f.waitRetirement(func(st *bkv1.RetirementStatus) bool { return st.Moved == 1 && st.Skipped == 2 })
	for _, skip := range st.SkippedClaims {
		if skip.Reason != bkv1.ReasonMoveNotAllowed {
			t.Errorf("skipped %+v, want MoveNotAllowed", skip)
		}
	}
	if got := f.get(claims["listed"]); got.Status.ObjectStore != successor || got.Status.BucketName != listed {
		t.Errorf("the listed name: on %q as %q, want %q as %q", got.Status.ObjectStore, got.Status.BucketName, successor, listed)
	}
	for name, hint := range map[string]string{"renamed": "spec.retire.bucketName", "kept": "legacyBucketNames"} {
		got := f.wantStoreRetired(f.get(claims[name]), bkv1.ReasonRetirementSkipped)
		if c := findCond(got, bkv1.ConditionStoreRetired); c == nil || !containsAny(c.Message, hint) {
			t.Errorf("%s: StoreRetired %+v does not say %s", name, c, hint)
		}
	}
	lane := naming.BucketName(prefix, f.ns, "renamed")
	for _, bucket := range []string{renamed, kept, lane, naming.BucketName(prefix, f.ns, "kept")} {
		if _, err := tgtAdmin.HeadBucket(f.ctx, bucket); err == nil {
			t.Errorf("bucket %s on the successor while its claim is skipped", bucket)
		}
	}

	setRetire(bkv1.MoveBucketNameLane)
	f.waitRetirement(func(st *bkv1.RetirementStatus) bool { return st.Moved == 2 && st.Skipped == 1 })
	got := f.get(claims["renamed"])
	if got.Status.ObjectStore != successor || got.Status.BucketName != lane || got.Status.Move.SourceBucket != renamed {
		t.Errorf("the renamed claim: on %q as %q (move %+v), want %q as %q", got.Status.ObjectStore, got.Status.BucketName, got.Status.Move, successor, lane)
	}
	for key, sum := range seeded {
		if body, err := tgtAdmin.GetObject(f.ctx, lane, key, 1<<20); err != nil || sha256.Sum256(body) != sum {
			t.Errorf("object %s under %s: %v", key, lane, err)
		}
	}
	f.eventually(time.Minute, "the connection Secret carrying the lane name", func() error {
		got = f.get(claims["renamed"])
		if b := string(f.secretData(got.Status.ConnectionSecretName)[bkv1.SecretKeyBucketName]); b != lane {
			return errf("%s=%q, want %q", bkv1.SecretKeyBucketName, b, lane)
		}
		return nil
	})
	f.wantStoreRetired(f.get(claims["kept"]), bkv1.ReasonRetirementSkipped)
	for name, sb := range claims {
		if got := f.get(sb); got.Generation != sb.Generation || got.Spec.ObjectStoreRef.Name != f.store {
			t.Errorf("%s: spec changed (generation %d, was %d; objectStoreRef %q)", name, got.Generation, sb.Generation, got.Spec.ObjectStoreRef.Name)
		}
	}
}
