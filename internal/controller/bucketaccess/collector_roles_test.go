package bucketaccess

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/defaults"
	"github.com/bucketkeeper/bucketkeeper/internal/iam"
)

// keylessOn makes an access keyless, its role recorded on store (none: "").
func keylessOn(store, roleARN string) func(*bkv1.BucketAccess) {
	return func(ba *bkv1.BucketAccess) {
		ba.Spec.ServiceAccountName = "app"
		ba.Status.ObjectStore, ba.Status.RoleARN = store, roleARN
		ba.Status.IdentityName = iam.UserName(testCluster, string(ba.UID))
	}
}

// TestJudgeRole is the table of the collector's decision on a role listed on store
// "a": it stays while a keyless access holds it there, or records this very role
// (one IAM account behind two stores), or, freshly made, while its access is being
// issued on another store and has recorded no role yet (it may be making this one
// through the same account); otherwise it goes.
func TestJudgeRole(t *testing.T) {
	now := time.Now()
	deleted := metav1.NewTime(now)
	name := iam.UserName(testCluster, uidLive)
	arn := "arn:aws:iam::ACCOUNT:role/" + name
	fresh, old := now.Add(-5*time.Second), now.Add(-2*defaults.AccessCollectRoleIssuing)
	tests := []struct {
		name     string
		created  time.Time
		accesses []bkv1.BucketAccess
		buckets  []bkv1.StorageBucket
		goes     bool
	}{
		{"held on this store", old, []bkv1.BucketAccess{testAccess(uidLive, keylessOn("a", arn))}, []bkv1.StorageBucket{testBucket("data", "a", ready)}, false},
		{"no access has it", old, nil, nil, true},
		{"its access is being deleted", old, []bkv1.BucketAccess{testAccess(uidLive, keylessOn("a", arn), func(ba *bkv1.BucketAccess) { ba.DeletionTimestamp = &deleted })},
			[]bkv1.StorageBucket{testBucket("data", "a", ready)}, true},
		{"its access asks for a key", old, []bkv1.BucketAccess{testAccess(uidLive)}, []bkv1.StorageBucket{testBucket("data", "a", ready)}, true},
		{"the same role, recorded through another store of the account", old, []bkv1.BucketAccess{testAccess(uidLive, keylessOn("b", arn))},
			[]bkv1.StorageBucket{testBucket("data", "b", ready)}, false},
		{"fresh, its access being issued on another store, nothing recorded yet", fresh, []bkv1.BucketAccess{testAccess(uidLive, keylessOn("", ""))},
			[]bkv1.StorageBucket{testBucket("data", "b", ready)}, false},
		{"old, its access Ready on another store, nothing recorded there", old, []bkv1.BucketAccess{testAccess(uidLive, keylessOn("", ""))},
			[]bkv1.StorageBucket{testBucket("data", "b", ready)}, true},
		{"a store that does not say when it made the role", time.Time{}, []bkv1.BucketAccess{testAccess(uidLive, keylessOn("", ""))},
			[]bkv1.StorageBucket{testBucket("data", "b", ready)}, true},
		{"fresh, its access on another store where its bucket is not Ready", fresh, []bkv1.BucketAccess{testAccess(uidLive, keylessOn("", ""))},
			[]bkv1.StorageBucket{testBucket("data", "b")}, true},
		{"fresh, its access issued on another store under another ARN", fresh, []bkv1.BucketAccess{testAccess(uidLive, keylessOn("b", "arn:aws:iam::OTHER:role/"+name))},
			[]bkv1.StorageBucket{testBucket("data", "b", ready)}, true},
		{"its access grants nowhere", fresh, []bkv1.BucketAccess{testAccess(uidLive, keylessOn("", ""))}, nil, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			x := newAccessIndex(testCluster, tc.accesses, tc.buckets)
			if goes, why, _ := x.judgeRole(iam.RoleRef{Name: name, ARN: arn, Created: tc.created}, "a", now); goes != tc.goes {
				t.Errorf("judgeRole: goes %v (%s), want %v", goes, why, tc.goes)
			}
		})
	}
}
