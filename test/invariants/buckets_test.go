package invariants

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
)

// TestBucketOfGoneClaim: the claim went (its finalizer stripped, or a deletion that did
// not release the bucket) and the bucket still names its UID.
func TestBucketOfGoneClaim(t *testing.T) {
	w := newWorld(t)
	w.without(string(w.sb.UID), "data-bucket")
	w.ba.Spec.Buckets = nil // the access would otherwise grant nowhere
	w.without(string(w.ba.UID), "app-key")
	delete(w.iam.users, userOf(w.ba))
	expectOnly(t, w.check(t), BucketOwned, "bucket "+store+"/bk-tenant-a-data", "no longer exists", "not released")
}

// TestBucketOfRetainedClaim: a gone claim deleted with Retain while its store was
// unreachable, or whose finalizer its tenant stripped, left its bucket as it was, which
// is no breach; any other gone claim's bucket (Delete, Purge) still is.
func TestBucketOfRetainedClaim(t *testing.T) {
	w := newWorld(t)
	gone := w.sb.UID
	w.without(string(w.sb.UID), "data-bucket")
	w.ba.Spec.Buckets = nil
	w.without(string(w.ba.UID), "app-key")
	delete(w.iam.users, userOf(w.ba))
	kept := func(uid types.UID) bool { return uid == gone }
	expectNone(t, Check(t.Context(), fakeClient(w), viewsOf(w), cluster, Retained(kept)))

	other := func(uid types.UID) bool { return uid == "some-other-claim" }
	expectOnly(t, Check(t.Context(), fakeClient(w), viewsOf(w), cluster, Retained(other)),
		BucketOwned, "bucket "+store+"/bk-tenant-a-data", "no longer exists")
}

func TestBucketOfClaimOnAnotherStore(t *testing.T) {
	w := newWorld(t)
	w.s3.buckets["second"] = map[string]string{bkv1.TagCluster: cluster, bkv1.TagClaim: tenant + "/data", bkv1.TagUID: string(w.sb.UID) + "/ns-uid"}
	expectOnly(t, w.check(t), BucketOwned, "bucket "+store+"/second", "one claim, two buckets")

	w = newWorld(t)
	w.sb.Spec.ObjectStoreRef.Name = "store-b"
	got := w.check(t)
	if len(got) == 0 || got[0].Invariant != BucketOwned {
		t.Fatalf("violations = %v, want BucketOwned first", got)
	}
}

func TestBucketClaimTagDisagrees(t *testing.T) {
	w := newWorld(t)
	w.s3.buckets["bk-tenant-a-data"][bkv1.TagClaim] = "tenant-b/data"
	expectOnly(t, w.check(t), BucketOwned, "bucket "+store+"/bk-tenant-a-data", "claim tag says")
}

// TestReadyClaimWithoutItsBucket: ClaimBound, for a bucket gone and for one re-tagged.
func TestReadyClaimWithoutItsBucket(t *testing.T) {
	w := newWorld(t)
	delete(w.s3.buckets, "bk-tenant-a-data")
	expectOnly(t, w.check(t), ClaimBound, "storagebucket tenant-a/data", "not on store")

	w = newWorld(t)
	w.s3.buckets["bk-tenant-a-data"][bkv1.TagUID] = "/ns-uid" // released under a live claim
	expectOnly(t, w.check(t), ClaimBound, "storagebucket tenant-a/data", "tagged for uid")

	// Not Ready: no bucket is promised (but its access no longer grants it either).
	w.sb.Status.Conditions[0].Status = metav1.ConditionFalse
	expectOnly(t, w.check(t), IdentityGranted, "user "+store+"/"+userOf(w.ba), "grants now (nothing)")
}

// TestUntaggedBucket: on a store whose foreign buckets the view knows, an untagged
// bucket is the operator's, and must be a live claim's, still to be tagged.
func TestUntaggedBucket(t *testing.T) {
	w := newWorld(t)
	w.s3.buckets["bk-tenant-a-early"] = map[string]string{}
	views := viewsOf(w)
	views[0].Foreign = func(b string) bool { return b == "someone-elses" }
	got := Check(t.Context(), fakeClient(w), views, cluster)
	expectOnly(t, got, BucketOwned, "bucket "+store+"/bk-tenant-a-early", "no ownership tags")

	// A claim that recorded its intent to create it (and has not tagged it yet).
	early := w.sb.DeepCopy()
	early.Name, early.UID, early.Status = "early", "77777777-7777-7777-7777-777777777777", bkv1.StorageBucketStatus{
		CreateIntent: &bkv1.CreateIntent{BucketName: "bk-tenant-a-early", UID: "77777777-7777-7777-7777-777777777777"}}
	w.objects = append(w.objects, early)
	expectNone(t, Check(t.Context(), fakeClient(w), views, cluster))

	// Without Foreign, untagged buckets are not judged.
	w.without("early")
	expectNone(t, w.check(t))
}

// TestBucketsOfAMovingClaim: mid-move the claim names the target while it lives on its
// old home, where its bucket is bound; once moved, the frozen copy its move left there
// is no breach while status.leftBehind lists it, nor the target a cancelled move keeps
// while status.move says so, and one otherwise.
func TestBucketsOfAMovingClaim(t *testing.T) {
	w := newWorld(t)
	w.sb.Status.ObjectStore = store
	w.sb.Spec.ObjectStoreRef.Name = "store-b"
	w.sb.Spec.Move = &bkv1.MoveSpec{}
	expectNone(t, w.check(t))

	// Moved: the claim lives on store-b, and its access grants there.
	w.sb.Status.ObjectStore = "store-b"
	w.ba.Spec.Buckets = nil
	w.without(string(w.ba.UID), "app-key")
	delete(w.iam.users, userOf(w.ba))
	w.sb.Status.LeftBehind = []string{store}
	expectNone(t, w.check(t))

	w.sb.Status.LeftBehind = nil
	expectOnly(t, w.check(t), BucketOwned, "bucket "+store+"/bk-tenant-a-data", "whose store is store-b")

	// A move back cancelled keeps its target there for a while: no breach while
	// status.move says so, one once it no longer does.
	until := metav1.Now()
	w.sb.Status.Move = &bkv1.MoveStatus{ID: "m", From: "store-b", To: store, Phase: bkv1.MoveAborted, TargetKeptOn: store, TargetKeptUntil: &until}
	expectNone(t, w.check(t))
	w.sb.Status.Move.TargetKeptOn, w.sb.Status.Move.TargetKeptUntil = "", nil
	expectOnly(t, w.check(t), BucketOwned, "bucket "+store+"/bk-tenant-a-data", "whose store is store-b")
}

// TestFrozenOrMovedCopies: a bucket a move froze, or tagged as moved, of a claim that is
// gone and not released (its finalizer stripped mid-move, or after it) is reported,
// whatever the caller says of the claim's deletion policy; one the live claim records
// as left behind on this store, or as the source it moves out of, is not, nor a
// released one.
func TestFrozenOrMovedCopies(t *testing.T) {
	freeze := `{"Version":"2012-10-17","Statement":[{"Sid":"` + bkv1.MoveFreezeSid + `","Effect":"Deny","Principal":"*","Action":"s3:PutObject","Resource":"arn:aws:s3:::b/*"}]}`
	bucket := "bk-tenant-a-data"
	for _, tc := range []struct {
		name     string
		plant    func(w *world)
		fragment string // "" for no finding
	}{
		{"gone claim's frozen source", func(w *world) {
			w.policies(bucket, freeze)
			w.goneClaim()
		}, "frozen by a move"},
		{"gone claim's copy left behind", func(w *world) {
			w.s3.buckets[bucket][bkv1.TagMovedTo] = "store-b/" + bucket
			w.policies(bucket, freeze)
			w.goneClaim()
		}, "which no longer exists"},
		{"live claim records no copy here", func(w *world) {
			w.s3.buckets[bucket][bkv1.TagMovedTo] = "store-b/" + bucket
		}, "records no copy left on this store"},
		{"live claim's copy left behind", func(w *world) {
			w.s3.buckets[bucket][bkv1.TagMovedTo] = "store-b/" + bucket
			w.policies(bucket, freeze)
			w.sb.Status.LeftBehind = []string{store}
			w.sb.Status.ObjectStore, w.sb.Spec.ObjectStoreRef.Name = "store-b", "store-b"
			w.sb.Status.Conditions = nil // Ready on store-b, not judged here
		}, ""},
		{"live claim's source at its cutover", func(w *world) {
			w.policies(bucket, freeze)
			w.sb.Status.Move = &bkv1.MoveStatus{ID: moveIDOf(w.sb, "1"), From: store, To: "store-b", Phase: bkv1.MoveCuttingOver}
			w.sb.Spec.ObjectStoreRef.Name = "store-b"
		}, ""},
		{"released copy", func(w *world) {
			w.s3.buckets["released"][bkv1.TagMovedTo] = "store-b/released"
			w.policies("released", freeze)
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			tc.plant(w)
			var got []Violation
			for _, v := range Check(t.Context(), fakeClient(w), viewsOf(w), cluster, Retained(func(types.UID) bool { return true })) {
				if v.Invariant == CopyAccounted {
					got = append(got, v)
				}
			}
			if tc.fragment == "" {
				expectNone(t, got)
				return
			}
			expectOnly(t, got, CopyAccounted, "bucket "+store+"/"+bucket, tc.fragment)
		})
	}
}

func (w *world) policies(bucket, doc string) {
	if w.s3.policies == nil {
		w.s3.policies = map[string]string{}
	}
	w.s3.policies[bucket] = doc
}

// goneClaim removes the claim (its finalizer stripped) and what only it kept alive.
func (w *world) goneClaim() {
	w.without(string(w.sb.UID), "data-bucket")
	w.ba.Spec.Buckets = nil
	w.without(string(w.ba.UID), "app-key")
	delete(w.iam.users, userOf(w.ba))
}
