package reconcile

import (
	"context"
	"slices"
	"time"

	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
)

// Field indexes: every "which objects use this one" question is an index lookup, never a
// list of everything.
const (
	// IndexStorageBucketStore indexes StorageBuckets in the cache by every store they
	// are on (StoresOfBucket): the one they live on and, while they move, the other.
	IndexStorageBucketStore = "spec.objectStoreRef.name"
	// IndexStorageBucketBucketName indexes StorageBuckets by status.bucketName, to map
	// S3 event notifications (which name buckets) to objects; only with the probe
	// webhook (see SetupIndexes).
	IndexStorageBucketBucketName = "status.bucketName"
	// IndexStorageBucketMoving indexes the StorageBuckets whose move is unfinished
	// (status.move neither Done nor Aborted) by both its stores, and all of them by
	// MovingAll: the moves queue for their slots from the cache, and wake the moves
	// waiting on a store, without a list of every claim.
	IndexStorageBucketMoving = "status.move.stores"
	// IndexObjectStoreSecret indexes ObjectStores by the "namespace/name" of every
	// Secret they reference (operator and application credentials).
	IndexObjectStoreSecret = "spec.secretRefs"
)

// Field selectors the API server answers for StorageBuckets (the CRD's
// selectableFields), for the questions the cache cannot answer in full (with sharding
// it holds only this instance's buckets). Each selects on one field: the store a
// bucket lives on and the one its spec names differ while it moves, so "every
// StorageBucket on this store" is the union of both.
const (
	// FieldStorageBucketStoreRef selects by spec.objectStoreRef.name, the store the
	// claim wants.
	FieldStorageBucketStoreRef = "spec.objectStoreRef.name"
	// FieldStorageBucketHomeStore selects by status.objectStore, the store the bucket
	// lives on.
	FieldStorageBucketHomeStore = "status.objectStore"
	// FieldStorageBucketKeptTarget selects by status.move.targetKeptOn, the store a
	// cancelled move keeps its target bucket on for a while.
	FieldStorageBucketKeptTarget = "status.move.targetKeptOn"
	// FieldStorageBucketRetiringInto selects by status.retirement.into, the successor
	// a retirement moves the bucket to, which the spec does not name.
	FieldStorageBucketRetiringInto = "status.retirement.into"
)

// StoreFields are the fields that, together, select every StorageBucket on a store.
var StoreFields = []string{FieldStorageBucketStoreRef, FieldStorageBucketHomeStore, FieldStorageBucketKeptTarget, FieldStorageBucketRetiringInto}

// MovingAll is the IndexStorageBucketMoving value of every unfinished move.
const MovingAll = "*"

// SetupIndexes registers the field indexes both controllers rely on, and with
// byBucketName the status.bucketName index the probe webhook (ProbeRequester) needs.
// That one holds a set of its own per bucket, twice (per namespace and cluster-wide),
// about 1 KiB a bucket: without the webhook it is not built.
func SetupIndexes(ctx context.Context, mgr ctrl.Manager, byBucketName bool) error {
	idx := mgr.GetFieldIndexer()
	if err := idx.IndexField(ctx, &bkv1.StorageBucket{}, IndexStorageBucketStore, func(o client.Object) []string {
		return StoresOfBucket(o.(*bkv1.StorageBucket))
	}); err != nil {
		return err
	}
	if err := idx.IndexField(ctx, &bkv1.StorageBucket{}, IndexStorageBucketMoving, MovingStores); err != nil {
		return err
	}
	if byBucketName {
		if err := idx.IndexField(ctx, &bkv1.StorageBucket{}, IndexStorageBucketBucketName, func(o client.Object) []string {
			if name := o.(*bkv1.StorageBucket).Status.BucketName; name != "" {
				return []string{name}
			}
			return nil
		}); err != nil {
			return err
		}
	}
	return idx.IndexField(ctx, &bkv1.ObjectStore{}, IndexObjectStoreSecret, func(o client.Object) []string {
		var refs []string
		spec := &o.(*bkv1.ObjectStore).Spec
		named := []*bkv1.SecretReference{spec.CredentialsSecretRef, spec.ApplicationCredentialsSecretRef}
		if spec.AdminAPI != nil {
			named = append(named, &spec.AdminAPI.CredentialsSecretRef)
		}
		for _, ref := range named {
			if ref != nil {
				refs = append(refs, ref.Namespace+"/"+ref.Name)
			}
		}
		return refs
	})
}

// RateLimiter backs off per object from 1s to 5m: a failing bucket retries soon, then
// rarely, and never in a hot loop (the default starts at 5ms).
func RateLimiter() workqueue.TypedRateLimiter[ctrl.Request] {
	return workqueue.NewTypedItemExponentialFailureRateLimiter[ctrl.Request](time.Second, 5*time.Minute)
}

// SpecOrLifecycleChanged passes creations, deletions, spec changes, the loss of our
// finalizer and changes of the named annotations, but not status writes nor our own
// finalizer's addition: the reconcile that added it went on without waiting (see
// reconcile.Run), and being woken by its own writes would only send a second pass to a
// cache that may not have caught up with them. Other controllers' finalizers are none of
// our business.
func SpecOrLifecycleChanged(annotations ...string) predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, n := e.ObjectOld, e.ObjectNew
		lostFinalizer := controllerutil.ContainsFinalizer(o, bkv1.Finalizer) && !controllerutil.ContainsFinalizer(n, bkv1.Finalizer)
		if o.GetGeneration() != n.GetGeneration() || !o.GetDeletionTimestamp().Equal(n.GetDeletionTimestamp()) || lostFinalizer {
			return true
		}
		for _, a := range annotations {
			if o.GetAnnotations()[a] != n.GetAnnotations()[a] {
				return true
			}
		}
		return false
	}}
}

// CredentialsSecret passes the Secrets ObjectStores name for the operator's credentials.
func CredentialsSecret() predicate.Predicate {
	return predicate.NewPredicateFuncs(func(o client.Object) bool {
		return o.GetLabels()[bkv1.LabelSecretRole] == bkv1.SecretRoleCredentials
	})
}

// StoresReferencing lists the ObjectStores that name secret (IndexObjectStoreSecret).
func StoresReferencing(ctx context.Context, c client.Reader, secret client.Object) []bkv1.ObjectStore {
	list := &bkv1.ObjectStoreList{}
	if err := c.List(ctx, list, client.MatchingFields{IndexObjectStoreSecret: secret.GetNamespace() + "/" + secret.GetName()}); err != nil {
		return nil
	}
	return list.Items
}

// MovingStores are the IndexStorageBucketMoving values of a StorageBucket: MovingAll
// and both stores of its move while it is unfinished, none otherwise.
func MovingStores(o client.Object) []string {
	if m := o.(*bkv1.StorageBucket).Status.Move; !m.Terminal() {
		return []string{MovingAll, m.From, m.To}
	}
	return nil
}

// StoresOfBucket names the stores a bucket is on: the one it lives on and, while it
// moves, the one it moves to (or the one its spec names, before it lived anywhere),
// the one its spec names (which a retirement may have taken it from: its changes decide
// where the bucket goes), the successor a retirement takes it to (status.retirement),
// and the one a cancelled move keeps its target bucket on for a while.
func StoresOfBucket(sb *bkv1.StorageBucket) []string {
	stores := []string{sb.Spec.ObjectStoreRef.Name}
	if home := sb.HomeStore(); home != stores[0] {
		stores = []string{home, stores[0]}
	}
	if rec := sb.Status.Retirement; rec != nil && !slices.Contains(stores, rec.Into) {
		stores = append(stores, rec.Into) // a retirement's successor, which the spec does not name
	}
	if m := sb.Status.Move; m.KeptTarget() && !slices.Contains(stores, m.TargetKeptOn) {
		stores = append(stores, m.TargetKeptOn)
	}
	return stores
}
