package objectstore

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/reconcile"
)

// reconcileDelete refuses to let a store go while buckets still use it: their deletion
// policies need the store to be carried out, and so does a move off it.
func (r *Reconciler) reconcileDelete(ctx context.Context, store *bkv1.ObjectStore, patcher *reconcile.StatusPatcher) (ctrl.Result, error) {
	users, err := r.usersOf(ctx, store.Name)
	if err != nil {
		return ctrl.Result{}, err
	}
	if n := len(users); n > 0 {
		more := ""
		if n > 5 {
			more = fmt.Sprintf(" and %d more", n-5)
		}
		msg := fmt.Sprintf("deletion waits: %d StorageBuckets still use this store (%s%s); delete them first", n, strings.Join(users[:min(n, 5)], ", "), more)
		if c := reconcile.FindCondition(store.Status.Conditions, bkv1.ConditionReady); c == nil || c.Reason != bkv1.ReasonInUse {
			patcher.AfterWrite(func() { r.Recorder.Eventf(store, nil, corev1.EventTypeWarning, bkv1.ReasonInUse, "Delete", "%s", msg) })
		}
		reconcile.SetCondition(&store.Status.Conditions, store.Generation, bkv1.ConditionReady, metav1.ConditionFalse, bkv1.ReasonInUse, msg)
		return ctrl.Result{}, nil // a StorageBucket going away re-enqueues the store
	}
	r.Stores.Forget(store.Name)
	if r.Access != nil {
		r.Access.Forget(store.Name)
	}
	r.lastChecked.Delete(store.Name)
	r.lastCounted.Delete(store.Name)
	if r.OnRetirement != nil {
		r.OnRetirement(store.Name, nil)
	}
	r.webIdentity.Delete(store.Name)
	r.issuerUnread.Delete(store.Name)
	if r.OnHealth != nil {
		r.OnHealth(store.Name, nil)
	}
	err = reconcile.PatchMetadata(ctx, r.Client, store, func(o *bkv1.ObjectStore) { controllerutil.RemoveFinalizer(o, bkv1.Finalizer) })
	return ctrl.Result{}, client.IgnoreNotFound(err)
}

// usersOf names ("namespace/name", sorted) the StorageBuckets on store: those whose
// spec names it and those whose bucket lives on it (status.objectStore), which differ
// while a bucket moves, or while its move is refused, and those whose cancelled move
// keeps its target bucket there for a while (status.move.targetKeptOn), and those a
// retirement moves there (status.retirement.into, while the move runs or is refused),
// but for claims whose spec names it and whose bucket its retirement took away
// (StorageBucket.UsesStore). Asked of the
// API server, not the cache: with sharding (--watch-label-selector) the cache holds
// only this instance's buckets, and every shard's must be gone.
func (r *Reconciler) usersOf(ctx context.Context, store string) ([]string, error) {
	var names []string
	for _, field := range reconcile.StoreFields {
		list := &bkv1.StorageBucketList{}
		if err := r.APIReader.List(ctx, list, client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector(field, store)}); err != nil {
			return nil, err
		}
		for _, sb := range list.Items {
			if sb.UsesStore(store) {
				names = append(names, sb.Namespace+"/"+sb.Name)
			}
		}
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}
