package objectstore

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
)

// TestRetirementCounts sorts a retiring store's claims: moved (the spec still naming
// the store, the bucket elsewhere: no longer a user, so the store's deletion does not
// wait for it), moving, queued, skipped (named, with the reason) and remaining; a
// claim the retirement has not taken away holds the store, a stranger's does not.
func TestRetirementCounts(t *testing.T) {
	store := &bkv1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Name: "minio"}, Spec: bkv1.ObjectStoreSpec{Retire: &bkv1.RetireSpec{Into: "ceph"}}}
	rec := func(skipped string) *bkv1.ClaimRetirement {
		return &bkv1.ClaimRetirement{From: "minio", Into: "ceph", Skipped: skipped}
	}
	claim := func(name, named, home string, r *bkv1.ClaimRetirement, m *bkv1.MoveStatus) bkv1.StorageBucket {
		return bkv1.StorageBucket{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
			Spec:   bkv1.StorageBucketSpec{ObjectStoreRef: bkv1.ObjectStoreReference{Name: named}},
			Status: bkv1.StorageBucketStatus{ObjectStore: home, Retirement: r, Move: m}}
	}
	move := func(phase bkv1.MovePhase) *bkv1.MoveStatus {
		return &bkv1.MoveStatus{From: "minio", To: "ceph", Phase: phase}
	}
	claims := []bkv1.StorageBucket{
		claim("moved", "minio", "ceph", rec(""), move(bkv1.MoveDone)),
		claim("switching", "minio", "ceph", rec(""), move(bkv1.MoveSwitching)),
		claim("copying", "minio", "minio", rec(""), move(bkv1.MoveCopying)),
		claim("queued", "minio", "minio", rec(""), move(bkv1.MoveQueued)),
		claim("refused", "minio", "minio", rec(bkv1.ReasonMoveNotAllowed), move(bkv1.MoveQueued)),
		claim("new", "minio", "", nil, nil),
		claim("tenant-left", "ceph", "ceph", nil, move(bkv1.MoveDone)),
	}
	st, users := bkv1.CountRetirement(store, claims)
	want := bkv1.RetirementStatus{Into: "ceph", Moved: 1, Moving: 2, Queued: 1, Skipped: 1, Remaining: 1}
	if st.Moved != want.Moved || st.Moving != want.Moving || st.Queued != want.Queued || st.Skipped != want.Skipped || st.Remaining != want.Remaining || st.Into != "ceph" {
		t.Errorf("counts %+v, want %+v", *st, want)
	}
	if users != 5 {
		t.Errorf("%d claims hold the store, want 5 (all but the moved one and the stranger)", users)
	}
	if len(st.SkippedClaims) != 1 || st.SkippedClaims[0] != (bkv1.RetirementSkip{Claim: "ns/refused", Reason: bkv1.ReasonMoveNotAllowed}) {
		t.Errorf("skipped claims %+v", st.SkippedClaims)
	}
	if claims[0].UsesStore("minio") || !claims[0].UsesStore("ceph") {
		t.Error("the moved claim: want it on ceph, not on minio")
	}
	if st.Paused {
		t.Error("counted as paused, spec.retire.paused unset")
	}
	store.Spec.Retire.Paused = true
	if st, _ := bkv1.CountRetirement(store, claims); !st.Paused {
		t.Error("not counted as paused under spec.retire.paused")
	}
}
