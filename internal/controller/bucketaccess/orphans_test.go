package bucketaccess

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/iam"
)

const (
	testCluster = "5f1c7d9e-2a3b-4c4d-9e8f-0a1b2c3d4e5f" // a kube-system UID: hashed names
	uidLive     = "0b6a2f43-9d1e-4c55-8f0a-3e2d1c4b5a69"
	uidGone     = "11111111-2222-4333-8444-555555555555"
)

func testAccess(uid string, mutate ...func(*bkv1.BucketAccess)) bkv1.BucketAccess {
	ba := bkv1.BucketAccess{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "app-" + uid[:4], UID: types.UID(uid), Generation: 1},
		Spec:       bkv1.BucketAccessSpec{Buckets: []bkv1.BucketGrant{{Name: "data"}}, SecretName: "app"},
	}
	for _, m := range mutate {
		m(&ba)
	}
	return ba
}

func testBucket(name, store string, mutate ...func(*bkv1.StorageBucket)) bkv1.StorageBucket {
	sb := bkv1.StorageBucket{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name},
		Spec:       bkv1.StorageBucketSpec{ObjectStoreRef: bkv1.ObjectStoreReference{Name: store}},
	}
	for _, m := range mutate {
		m(&sb)
	}
	return sb
}

// issuedOn gives an access a settled status: Ready with key AK1 on store.
func issuedOn(store string) func(*bkv1.BucketAccess) {
	return func(ba *bkv1.BucketAccess) {
		ba.Status.ObjectStore, ba.Status.AccessKeyID = store, "AK1"
		ba.Status.IdentityName = iam.UserName(testCluster, string(ba.UID))
		ba.Status.Rotation.State = bkv1.RotationIdle
		ba.Status.Conditions = []metav1.Condition{{Type: bkv1.ConditionReady, Status: metav1.ConditionTrue, Reason: bkv1.ReasonReady, ObservedGeneration: ba.Generation}}
	}
}

// ready makes a StorageBucket Ready, named ns-<name>.
func ready(sb *bkv1.StorageBucket) {
	sb.Status.BucketName = sb.Namespace + "-" + sb.Name
	sb.Status.Conditions = []metav1.Condition{{Type: bkv1.ConditionReady, Status: metav1.ConditionTrue, Reason: bkv1.ReasonReady}}
}

func stalled(reason string) func(*bkv1.StorageBucket) {
	return func(sb *bkv1.StorageBucket) {
		sb.Status.Conditions = []metav1.Condition{
			{Type: bkv1.ConditionReady, Status: metav1.ConditionFalse, Reason: reason},
			{Type: bkv1.ConditionStalled, Status: metav1.ConditionTrue, Reason: reason},
		}
	}
}

// TestJudgeUser is the table of the collector's one decision: is this user ours,
// and does any live grant still need it on this store?
func TestJudgeUser(t *testing.T) {
	now := metav1.Now()
	live := iam.UserName(testCluster, uidLive)
	legacyLive := iam.LegacyUserName(testCluster, uidLive)
	legacyGone := iam.LegacyUserName(testCluster, uidGone)
	onA := []bkv1.StorageBucket{testBucket("data", "a")}
	tests := []struct {
		name       string
		user       string
		accesses   []bkv1.BucketAccess
		buckets    []bkv1.StorageBucket
		remembered map[string]types.UID
		want       userVerdict
	}{
		{"a live access on this store", live, []bkv1.BucketAccess{testAccess(uidLive)}, onA, nil, verdictInUse},
		{"its access is gone", iam.UserName(testCluster, uidGone), []bkv1.BucketAccess{testAccess(uidLive)}, onA, nil, verdictOrphan},
		{"no access at all", live, nil, nil, nil, verdictOrphan},
		{"finalizer stripped, access deleting", live, []bkv1.BucketAccess{testAccess(uidLive, func(ba *bkv1.BucketAccess) { ba.DeletionTimestamp = &now })}, onA, nil, verdictAccessDeleting},
		{"its bucket is gone", live, []bkv1.BucketAccess{testAccess(uidLive)}, nil, nil, verdictNoGrant},
		{"its bucket is being deleted", live, []bkv1.BucketAccess{testAccess(uidLive)},
			[]bkv1.StorageBucket{testBucket("data", "a", func(sb *bkv1.StorageBucket) { sb.DeletionTimestamp = &now })}, nil, verdictNoGrant},
		{"its bucket is refused by a guardrail", live, []bkv1.BucketAccess{testAccess(uidLive)},
			[]bkv1.StorageBucket{testBucket("data", "a", stalled(bkv1.ReasonNamespaceNotAllowed))}, nil, verdictNoGrant},
		{"its bucket is merely not Ready", live, []bkv1.BucketAccess{testAccess(uidLive)},
			[]bkv1.StorageBucket{testBucket("data", "a", stalled(bkv1.ReasonCredentialsInvalid))}, nil, verdictInUse},
		{"its buckets are on two stores", live, []bkv1.BucketAccess{testAccess(uidLive, func(ba *bkv1.BucketAccess) {
			ba.Spec.Buckets = append(ba.Spec.Buckets, bkv1.BucketGrant{Name: "other"})
		})}, []bkv1.StorageBucket{testBucket("data", "a"), testBucket("other", "b")}, nil, verdictNoGrant},
		{"re-pointed at a bucket not yet Ready on the new store", live, []bkv1.BucketAccess{testAccess(uidLive, issuedOn("a"))},
			[]bkv1.StorageBucket{testBucket("data", "b")}, nil, verdictLeft},
		{"re-pointed at a Ready bucket, not yet issued on the new store", live, []bkv1.BucketAccess{testAccess(uidLive, issuedOn("a"))},
			[]bkv1.StorageBucket{testBucket("data", "b", ready)}, nil, verdictIssuing},
		{"re-pointed at a bucket that is not Ready, on a store that does not exist", live, []bkv1.BucketAccess{testAccess(uidLive, issuedOn("a"), func(ba *bkv1.BucketAccess) {
			ba.Generation = 2 // the edit: Ready is of the generation before
		})}, []bkv1.StorageBucket{testBucket("data", "no-such-store", stalled(bkv1.ReasonObjectStoreNotFound))}, nil, verdictLeft},
		{"re-pointed, the new store's issue begun (status names it, no key yet)", live, []bkv1.BucketAccess{testAccess(uidLive, issuedOn("b"), func(ba *bkv1.BucketAccess) {
			ba.Status.AccessKeyID = ""
		})}, []bkv1.StorageBucket{testBucket("data", "b", ready)}, nil, verdictIssuing},
		{"new, its first issue under way on another store", live, []bkv1.BucketAccess{testAccess(uidLive)},
			[]bkv1.StorageBucket{testBucket("data", "b", ready)}, nil, verdictIssuing},
		{"new, on another store, its bucket not Ready", live, []bkv1.BucketAccess{testAccess(uidLive)},
			[]bkv1.StorageBucket{testBucket("data", "b")}, nil, verdictLeft},
		{"re-pointed and issued on the new store", live, []bkv1.BucketAccess{testAccess(uidLive, issuedOn("b"))},
			[]bkv1.StorageBucket{testBucket("data", "b")}, nil, verdictCheckKeys},
		{"re-pointed, rotation under way", live, []bkv1.BucketAccess{testAccess(uidLive, issuedOn("b"), func(ba *bkv1.BucketAccess) {
			ba.Status.Rotation.State = bkv1.RotationVerifying
		})}, []bkv1.StorageBucket{testBucket("data", "b")}, nil, verdictCheckKeys},
		{"re-pointed, its spec edited since the issue", live, []bkv1.BucketAccess{testAccess(uidLive, issuedOn("b"), func(ba *bkv1.BucketAccess) {
			ba.Generation = 3
		})}, []bkv1.StorageBucket{testBucket("data", "b")}, nil, verdictCheckKeys},
		{"its bucket on this store is not Ready", live, []bkv1.BucketAccess{testAccess(uidLive, issuedOn("a"))},
			[]bkv1.StorageBucket{testBucket("data", "a", stalled(bkv1.ReasonObjectStoreNotReady))}, nil, verdictInUse},
		{"legacy name of a live legacy access", legacyLive, []bkv1.BucketAccess{testAccess(uidLive, func(ba *bkv1.BucketAccess) {
			ba.Status.IdentityName = legacyLive
		})}, onA, nil, verdictInUse},
		{"legacy name of an access issued under the new name", legacyLive, []bkv1.BucketAccess{testAccess(uidLive)}, onA, nil, verdictOrphan},
		{"legacy name of a gone access, remembered", legacyGone, nil, nil, map[string]types.UID{legacyGone: uidGone}, verdictOrphan},
		{"legacy name of a gone access, unknown", legacyGone, nil, nil, nil, verdictNotOurs},
		{"another cluster's hashed user", iam.UserName("other-cluster-"+testCluster, uidGone), nil, nil, nil, verdictNotOurs},
		{"another cluster's user of a live uid", iam.UserName("other-cluster-"+testCluster, uidLive), []bkv1.BucketAccess{testAccess(uidLive)}, onA, nil, verdictNotOurs},
		{"a hand-made bk- user", "bk-admin", nil, nil, nil, verdictNotOurs},
		{"the operator's own user", "admin", nil, nil, nil, verdictNotOurs},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			x := newAccessIndex(testCluster, tc.accesses, tc.buckets)
			got, _ := x.judge(tc.user, "a", tc.remembered)
			if got != tc.want {
				t.Errorf("judge(%s) = %s, want %s", tc.user, got, tc.want)
			}
		})
	}
}

// TestHoldsAccessKey: a user of an access issued on another store is in use only if
// it holds the access's current or previous key (the stores share one account).
func TestHoldsAccessKey(t *testing.T) {
	f := &accessFacts{keyIDs: []string{"AK2", "AK1"}}
	for _, tc := range []struct {
		keys []iam.AccessKey
		want bool
	}{
		{nil, false},
		{[]iam.AccessKey{{ID: "AK9"}}, false},
		{[]iam.AccessKey{{ID: "AK9"}, {ID: "AK1"}}, true},
		{[]iam.AccessKey{{ID: "AK2"}}, true},
	} {
		if got := holdsAccessKey(f, tc.keys); got != tc.want {
			t.Errorf("holdsAccessKey(%v) = %v, want %v", tc.keys, got, tc.want)
		}
	}
}

// TestAccessIdentityKeepsLegacyNames: an access an earlier version issued under the
// legacy hashed name keeps it; every other access gets the tagged name.
func TestAccessIdentityKeepsLegacyNames(t *testing.T) {
	ba := testAccess(uidLive)
	if got, want := accessIdentity(testCluster, &ba), iam.UserName(testCluster, uidLive); got != want {
		t.Errorf("new access: %s, want %s", got, want)
	}
	ba.Status.IdentityName = iam.LegacyUserName(testCluster, uidLive)
	if got := accessIdentity(testCluster, &ba); got != ba.Status.IdentityName {
		t.Errorf("legacy access: %s, want %s", got, ba.Status.IdentityName)
	}
	ba.Status.IdentityName = "bk-somebody-else"
	if got, want := accessIdentity(testCluster, &ba), iam.UserName(testCluster, uidLive); got != want {
		t.Errorf("a status naming another user: %s, want %s", got, want)
	}
}
