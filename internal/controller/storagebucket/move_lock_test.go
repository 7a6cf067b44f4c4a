package storagebucket

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/utils/ptr"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/mover"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
)

func lockStore(name string, maxDays *int32, modes ...bkv1.ObjectLockMode) *bkv1.ObjectStore {
	s := &bkv1.ObjectStore{}
	s.Name = name
	s.Spec.Guardrails.ObjectLock.AllowedModes = modes
	s.Spec.Guardrails.ObjectLock.MaxRetentionDays = maxDays
	return s
}

func TestCheckMoveLockHoldsWhatTheStoreReportedToTheTarget(t *testing.T) {
	sb := &bkv1.StorageBucket{}
	if refusal := checkMoveLock(sb, lockStore("t", nil)); refusal != nil {
		t.Errorf("a bucket without object lock: %v", refusal)
	}
	// An adopted bucket whose Compliance default retention the spec does not name.
	sb.Status.ObjectLock = &bkv1.BucketObjectLock{DefaultRetention: &bkv1.ObjectLockRetention{Mode: bkv1.ObjectLockCompliance, Days: ptr.To(int32(10))}}
	for _, tc := range []struct {
		target *bkv1.ObjectStore
		want   string
	}{
		{lockStore("gov", nil), "allowedModes [Governance]"},
		{lockStore("short", ptr.To(int32(5)), bkv1.ObjectLockGovernance, bkv1.ObjectLockCompliance), "maxRetentionDays (5 days"},
		{lockStore("fine", ptr.To(int32(30)), bkv1.ObjectLockCompliance), ""},
	} {
		refusal := checkMoveLock(sb, tc.target)
		switch {
		case tc.want == "" && refusal != nil:
			t.Errorf("%s: %v, want none", tc.target.Name, refusal)
		case tc.want != "" && (refusal == nil || refusal.Reason != bkv1.ReasonObjectLockNotAllowed || !strings.Contains(refusal.Message, tc.want) || !strings.Contains(refusal.Message, tc.target.Name)):
			t.Errorf("%s: %v, want ObjectLockNotAllowed naming the store and %q", tc.target.Name, refusal, tc.want)
		}
	}
}

func TestMoverLockRulesAreTheTargetsGuardrails(t *testing.T) {
	sb := &bkv1.StorageBucket{}
	if r := moverLockRules(sb, lockStore("t", nil)); r != nil {
		t.Errorf("rules for a bucket without object lock: %+v", r)
	}
	sb.Spec.ObjectLock = &bkv1.ObjectLock{}
	r := moverLockRules(sb, lockStore("t", nil))
	if r == nil || !slices.Equal(r.AllowedModes, []s3.RetentionMode{s3.RetentionGovernance}) || r.MaxRetentionDays != 0 {
		t.Errorf("rules of a store with the default guardrails: %+v, want Governance alone", r)
	}
	r = moverLockRules(sb, lockStore("t", ptr.To(int32(30)), bkv1.ObjectLockGovernance, bkv1.ObjectLockCompliance))
	if r == nil || !slices.Equal(r.AllowedModes, []s3.RetentionMode{s3.RetentionGovernance, s3.RetentionCompliance}) || r.MaxRetentionDays != 30 {
		t.Errorf("rules: %+v", r)
	}
	if !copiesVersions(&bucketScope{sb: sb}) {
		t.Error("a bucket with object lock moves without its every version")
	}
}

func TestLockedVersionsRefusalNamesTheVersions(t *testing.T) {
	p := &mover.Plan{}
	if refusal := lockedVersionsRefusal(p, lockStore("t", nil)); refusal != nil {
		t.Errorf("a plan without refused locks: %v", refusal)
	}
	p.LockRefused = mover.Failures{Count: 1, First: []mover.Failure{{Key: "sealed", Reason: "COMPLIANCE"}}}
	refusal := lockedVersionsRefusal(p, lockStore("t", nil))
	if refusal == nil || refusal.Reason != bkv1.ReasonMoveNotAllowed || !strings.Contains(refusal.Message, `"sealed"`) || !strings.Contains(refusal.Message, "nothing was created") {
		t.Errorf("refusal %v, want MoveNotAllowed naming the version", refusal)
	}
}
