package objectstore

import (
	"context"
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/defaults"
	"github.com/bucketkeeper/bucketkeeper/internal/reconcile"
)

// A retiring store (spec.retire) reports how far its retirement got: its buckets
// counted by where they are (status.retirement), and the Retired condition, True once
// no bucket lives on the store nor moves to or from it, which is when its deletion goes
// through (usersOf). The StorageBucket reconciler moves the buckets (its retire.go);
// here they are only counted, from the API server as usersOf reads them, so that every
// shard's claims count, at most once per defaults.RetirementCountGap per store.

// reportRetirement counts the retiring store's buckets into its status, or removes
// what an earlier retirement recorded. wait says when to count again, where this
// reconcile came too soon after the last count.
func (r *Reconciler) reportRetirement(ctx context.Context, store *bkv1.ObjectStore) (wait time.Duration, err error) {
	conds := &store.Status.Conditions
	if store.Spec.Retire == nil {
		store.Status.Retirement = nil
		reconcile.RemoveCondition(conds, bkv1.ConditionRetired)
		if r.OnRetirement != nil {
			r.OnRetirement(store.Name, nil)
		}
		return 0, nil
	}
	now := r.Clock.Now()
	if last, ok := r.lastCounted.Get(store.Name); ok && now.Sub(last) < defaults.RetirementCountGap {
		return defaults.RetirementCountGap - now.Sub(last), nil
	}
	claims, err := r.claimsOf(ctx, store.Name)
	if err != nil {
		return 0, err
	}
	r.lastCounted.Set(store.Name, now)
	st, users := bkv1.CountRetirement(store, claims)
	store.Status.Retirement = st
	if r.OnRetirement != nil {
		r.OnRetirement(store.Name, st)
	}
	if users == 0 {
		msg := fmt.Sprintf("no bucket lives on this store any more: deleting it is safe. %d buckets moved to %s", st.Moved, st.Into)
		if st.Moved > 0 {
			msg += "; their claims may still name this store, and keep their buckets where they are once it is gone"
		}
		reconcile.SetCondition(conds, store.Generation, bkv1.ConditionRetired, metav1.ConditionTrue, bkv1.ReasonRetired, msg)
		return 0, nil
	}
	msg := fmt.Sprintf("%d StorageBuckets still use this store: %d moving to %s, %d queued, %d skipped, %d not started yet; %d moved",
		users, st.Moving, st.Into, st.Queued, st.Skipped, st.Remaining, st.Moved)
	if store.Spec.Retire.Paused {
		msg += "; the retirement is paused (spec.retire.paused): no new move starts"
	}
	reconcile.SetCondition(conds, store.Generation, bkv1.ConditionRetired, metav1.ConditionFalse, bkv1.ReasonRetiring, msg)
	return 0, nil
}

// claimsOf lists the StorageBuckets on store, as usersOf names them (StoreFields),
// from the API server (every shard's), each once.
func (r *Reconciler) claimsOf(ctx context.Context, store string) ([]bkv1.StorageBucket, error) {
	var out []bkv1.StorageBucket
	for _, field := range reconcile.StoreFields {
		list := &bkv1.StorageBucketList{}
		if err := r.APIReader.List(ctx, list, client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector(field, store)}); err != nil {
			return nil, err
		}
		for _, sb := range list.Items {
			if !slices.ContainsFunc(out, func(o bkv1.StorageBucket) bool { return o.UID == sb.UID }) {
				out = append(out, sb)
			}
		}
	}
	return out, nil
}

// retirementChanged says whether a StorageBucket a retirement concerns changed in a
// way its store's counts read: its retirement record, its move's phase or stores, or
// its Stalled condition. Other claims wake no store: their changes are counted at the
// store's next health check, which reads them too.
func retirementChanged(o, n client.Object) bool {
	a, b := o.(*bkv1.StorageBucket), n.(*bkv1.StorageBucket)
	if a.Status.Retirement == nil && b.Status.Retirement == nil {
		return false
	}
	ma, mb := a.Status.Move, b.Status.Move
	movedOn := (ma == nil) != (mb == nil) || (ma != nil && (ma.Phase != mb.Phase || ma.From != mb.From || ma.To != mb.To))
	return movedOn || !equality.Semantic.DeepEqual(a.Status.Retirement, b.Status.Retirement) ||
		reconcile.ConditionIsTrue(a.Status.Conditions, bkv1.ConditionStalled) != reconcile.ConditionIsTrue(b.Status.Conditions, bkv1.ConditionStalled)
}
