package bucketaccess

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
)

// TestFreezeFollowsTheClaim: while a move of the claim has its source frozen (on the
// store the key was issued on), the access writes its grant frozen, which the MinIO
// driver renders as a Deny of the bucket's writes: at once, and from a fresh process
// that never wrote the policy, so drift correction and restarts keep the freeze. Once
// the freeze is lifted the grant is written unfrozen again.
func TestFreezeFollowsTheClaim(t *testing.T) {
	rig := newAccessRig(t)
	rig.settle("")
	rec := rig.reconciler()
	frozen := func() bool {
		t.Helper()
		rig.mem.mu.Lock()
		defer rig.mem.mu.Unlock()
		grants := rig.mem.grants[rigUser]
		if len(grants) != 1 || grants[0].Bucket != "ns-data" {
			t.Fatalf("grants %+v, want one on ns-data", grants)
		}
		return grants[0].Frozen
	}
	setFrozen := func(on bool) {
		t.Helper()
		sb := &bkv1.StorageBucket{}
		if err := rig.c.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "data"}, sb); err != nil {
			t.Fatal(err)
		}
		now := metav1.Now()
		sb.Status.ObjectStore = "store"
		sb.Status.Move = &bkv1.MoveStatus{ID: "m", From: "store", To: "elsewhere", Phase: bkv1.MoveCuttingOver, Pass: 5}
		if on {
			sb.Status.Move.FrozenAt = &now
		}
		if err := rig.c.Status().Update(context.Background(), sb); err != nil {
			t.Fatal(err)
		}
	}
	if frozen() {
		t.Fatal("a grant frozen before any move")
	}
	setFrozen(true)
	rig.reconcileOnce(rec)
	if !frozen() {
		t.Error("the grant is not frozen while the claim's source is")
	}
	rig.mem.mu.Lock()
	rig.mem.grants[rigUser][0].Frozen = false // as a restart would find a policy written without it
	rig.mem.mu.Unlock()
	rig.reconcileOnce(rig.reconciler())
	if !frozen() {
		t.Error("a fresh process wrote the grant without the freeze")
	}
	setFrozen(false)
	rig.reconcileOnce(rec)
	if frozen() {
		t.Error("the grant stays frozen after the freeze was lifted")
	}
}
