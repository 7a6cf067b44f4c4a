package main

import (
	"bytes"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
)

// TestRetirementGolden holds the format of status's retirement section, from a store
// and claims whose fields are set by hand: one claim moved, one copying with a rate and
// time left, one queued, one skipped with its condition's message, and one of another
// store that must not count.
func TestRetirementGolden(t *testing.T) {
	store := &bkv1.ObjectStore{}
	store.Name = "minio"
	store.Spec.Retire = &bkv1.RetireSpec{Into: "ceph", Versions: bkv1.MoveVersions("All")}
	store.Status.Retirement = &bkv1.RetirementStatus{Into: "ceph", Moved: 1, Moving: 1, Queued: 1, Skipped: 1,
		SkippedClaims: []bkv1.RetirementSkip{{Claim: "team-c/audit", Reason: bkv1.ReasonMoveNotAllowed}}}
	store.Status.Conditions = []metav1.Condition{{Type: bkv1.ConditionRetired, Status: metav1.ConditionFalse, Reason: bkv1.ReasonRetiring,
		Message: "3 buckets still use the store"}}

	claim := func(ns, name string, rec bkv1.ClaimRetirement, move *bkv1.MoveStatus, conds ...metav1.Condition) bkv1.StorageBucket {
		sb := bkv1.StorageBucket{}
		sb.Namespace, sb.Name = ns, name
		sb.Status.Retirement, sb.Status.Move, sb.Status.Conditions = &rec, move, conds
		// The claim names the retiring store; its bucket is there until its move is done.
		sb.Spec.ObjectStoreRef.Name, sb.Status.ObjectStore = rec.From, rec.From
		if move != nil && move.Phase == bkv1.MoveDone {
			sb.Status.ObjectStore = move.To
		}
		return sb
	}
	rec := bkv1.ClaimRetirement{From: "minio", Into: "ceph"}
	skipped := rec
	skipped.Skipped = bkv1.ReasonMoveNotAllowed
	claims := []bkv1.StorageBucket{
		claim("team-a", "photos", rec, &bkv1.MoveStatus{From: "minio", To: "ceph", Phase: bkv1.MoveDone, CopiedBytes: 3 << 20}),
		claim("team-a", "logs", rec, &bkv1.MoveStatus{From: "minio", To: "ceph", Phase: bkv1.MoveCopying, CopiedBytes: 256 << 20,
			TotalBytes: 1 << 30, BytesPerSecond: 8 << 20, Remaining: &metav1.Duration{Duration: 96 * time.Second}}),
		claim("team-b", "reports", rec, &bkv1.MoveStatus{From: "minio", To: "ceph", Phase: bkv1.MoveQueued}),
		claim("team-c", "audit", skipped, nil, metav1.Condition{Type: bkv1.ConditionStoreRetired, Status: metav1.ConditionTrue,
			Reason: bkv1.ReasonRetirementSkipped, Message: `ObjectStore "ceph" does not allow namespace "team-c"`}),
		claim("team-d", "elsewhere", bkv1.ClaimRetirement{From: "other", Into: "ceph"},
			&bkv1.MoveStatus{From: "other", To: "ceph", Phase: bkv1.MoveCopying, CopiedBytes: 1}),
	}
	r := retirementOf(store, claims, true)
	var out bytes.Buffer
	printRetirement(&out, r)
	golden(t, "retirement.golden", out.String())

	// Paused, the claims unreadable: the store's own list of skipped claims.
	store.Spec.Retire.Paused = true
	out.Reset()
	printRetirement(&out, retirementOf(store, nil, false))
	golden(t, "retirement-paused.golden", out.String())

	store.Spec.Retire, store.Status.Retirement = nil, nil
	if r := retirementOf(store, claims, true); r != nil {
		t.Errorf("a store not retiring: %+v", r)
	}
}
