package controller

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	stores "github.com/bucketkeeper/bucketkeeper/internal/store"
)

// Field indexes: every "which objects use this one" question is an index lookup, never a
// list of everything.
const (
	// IndexStorageBucketStore indexes StorageBuckets by spec.objectStoreRef.name.
	IndexStorageBucketStore = "spec.objectStoreRef.name"
	// IndexStorageBucketBucketName indexes StorageBuckets by status.bucketName, to map
	// S3 event notifications (which name buckets) to objects; only with the probe
	// webhook (see SetupIndexes).
	IndexStorageBucketBucketName = "status.bucketName"
	// IndexObjectStoreSecret indexes ObjectStores by the "namespace/name" of every
	// Secret they reference (operator and application credentials).
	IndexObjectStoreSecret = "spec.secretRefs"
)

// SetupIndexes registers the field indexes both controllers rely on, and with
// byBucketName the status.bucketName index the probe webhook (ProbeRequester) needs.
// That one holds a set of its own per bucket, twice (per namespace and cluster-wide),
// about 1 KiB a bucket: without the webhook it is not built.
func SetupIndexes(ctx context.Context, mgr ctrl.Manager, byBucketName bool) error {
	idx := mgr.GetFieldIndexer()
	if err := idx.IndexField(ctx, &bkv1.StorageBucket{}, IndexStorageBucketStore, func(o client.Object) []string {
		return []string{o.(*bkv1.StorageBucket).Spec.ObjectStoreRef.Name}
	}); err != nil {
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
		for _, ref := range []*bkv1.SecretReference{o.(*bkv1.ObjectStore).Spec.CredentialsSecretRef, o.(*bkv1.ObjectStore).Spec.ApplicationCredentialsSecretRef} {
			if ref != nil {
				refs = append(refs, ref.Namespace+"/"+ref.Name)
			}
		}
		return refs
	})
}

// rateLimiter backs off per object from 1s to 5m: a failing bucket retries soon, then
// rarely, and never in a hot loop (the default starts at 5ms).
func rateLimiter() workqueue.TypedRateLimiter[ctrl.Request] {
	return workqueue.NewTypedItemExponentialFailureRateLimiter[ctrl.Request](time.Second, 5*time.Minute)
}

// SetupWithManager wires the StorageBucket controller: its own objects (spec changes,
// deletion, finalizers, probe requests), the connection Secrets it owns, and the stores,
// credentials and namespaces its verdicts depend on. Each reconcile runs within
// ReconcileTimeout and inside a slot of its store (see storeslots.go).
func (r *StorageBucketReconciler) SetupWithManager(mgr ctrl.Manager, concurrency int) error {
	b := ctrl.NewControllerManagedBy(mgr).
		For(&bkv1.StorageBucket{}, builder.WithPredicates(specOrLifecycleChanged(bkv1.AnnotationProbeRequestedAt, bkv1.AnnotationDeletionPolicy))).
		Owns(&corev1.Secret{}, builder.WithPredicates(notCreated())).
		Watches(&bkv1.ObjectStore{}, handler.EnqueueRequestsFromMapFunc(r.bucketsOfStore), builder.WithPredicates(storeVerdictChanged())).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.bucketsOfSecret), builder.WithPredicates(credentialsSecret())).
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(r.bucketsInNamespace), builder.WithPredicates(predicate.LabelChangedPredicate{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: concurrency, RateLimiter: rateLimiter(), ReconciliationTimeout: r.ReconcileTimeout})
	if r.ProbeEvents != nil {
		b = b.WatchesRawSource(r.ProbeEvents)
	}
	return b.Complete(&stores.SlotLimited{Reader: mgr.GetClient(), Stores: r.Stores, Inner: r, Workers: concurrency})
}

// SetupWithManager wires the ObjectStore controller; a change to a credentials Secret or
// to a StorageBucket using the store (for deletion) re-reconciles it.
func (r *ObjectStoreReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&bkv1.ObjectStore{}, builder.WithPredicates(specOrLifecycleChanged())).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.storesOfSecret), builder.WithPredicates(credentialsSecret())).
		Watches(&bkv1.StorageBucket{}, handler.EnqueueRequestsFromMapFunc(storeOfBucket), builder.WithPredicates(predicate.Funcs{
			CreateFunc: func(event.CreateEvent) bool { return false },
			UpdateFunc: func(event.UpdateEvent) bool { return false },
		})).
		WatchesRawSource(r.Stores.CheckRequests()).
		WithOptions(controller.Options{RateLimiter: rateLimiter(), ReconciliationTimeout: r.ReconcileTimeout}).
		Complete(r)
}

// specOrLifecycleChanged passes creations, deletions, spec changes, the loss of our
// finalizer and changes of the named annotations, but not status writes nor our own
// finalizer's addition: the reconcile that added it went on without waiting (see
// reconcile.Run), and being woken by its own writes would only send a second pass to a
// cache that may not have caught up with them. Other controllers' finalizers are none of
// our business.
func specOrLifecycleChanged(annotations ...string) predicate.Predicate {
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

// notCreated passes changes and deletions of the connection Secrets, which must be
// repaired, but not their creation: that is our own write in the pass that provisions
// the bucket, and a second pass woken by it would mostly find a cache that has the new
// Secret but not yet the status written right after it, and redo the whole sync only to
// fail that status write with a conflict. At start-up every StorageBucket is enqueued by
// its own creation event anyway.
func notCreated() predicate.Predicate {
	return predicate.Funcs{CreateFunc: func(event.CreateEvent) bool { return false }}
}

// storeVerdictChanged passes store updates that can change a bucket's verdict: a new
// spec, or a different Ready status or reason.
func storeVerdictChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, n := e.ObjectOld.(*bkv1.ObjectStore), e.ObjectNew.(*bkv1.ObjectStore)
		if o.Generation != n.Generation || !o.DeletionTimestamp.Equal(n.DeletionTimestamp) {
			return true
		}
		before, after := apimeta.FindStatusCondition(o.Status.Conditions, bkv1.ConditionReady), apimeta.FindStatusCondition(n.Status.Conditions, bkv1.ConditionReady)
		if (before == nil) != (after == nil) {
			return true
		}
		return before != nil && (before.Status != after.Status || before.Reason != after.Reason || before.ObservedGeneration != after.ObservedGeneration)
	}}
}

func credentialsSecret() predicate.Predicate {
	return predicate.NewPredicateFuncs(func(o client.Object) bool {
		return o.GetLabels()[bkv1.LabelSecretRole] == bkv1.SecretRoleCredentials
	})
}

func (r *StorageBucketReconciler) bucketsOfStore(ctx context.Context, o client.Object) []ctrl.Request {
	return bucketsUsing(ctx, r.Client, o.GetName())
}

func bucketsUsing(ctx context.Context, c client.Reader, store string) []ctrl.Request {
	return listRequests(ctx, c, client.MatchingFields{IndexStorageBucketStore: store})
}

// listRequests turns the StorageBuckets a list selects into reconcile requests.
func listRequests(ctx context.Context, c client.Reader, opts ...client.ListOption) []ctrl.Request {
	list := &bkv1.StorageBucketList{}
	if err := c.List(ctx, list, opts...); err != nil {
		return nil
	}
	out := make([]ctrl.Request, 0, len(list.Items))
	for _, sb := range list.Items {
		out = append(out, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(&sb)})
	}
	return out
}

// bucketsOfSecret: an application-credentials Secret changes the connection Secrets of
// every bucket on the stores that name it.
func (r *StorageBucketReconciler) bucketsOfSecret(ctx context.Context, o client.Object) []ctrl.Request {
	var out []ctrl.Request
	for _, store := range storesReferencing(ctx, r.Client, o) {
		out = append(out, bucketsUsing(ctx, r.Client, store.Name)...)
	}
	return out
}

func (r *StorageBucketReconciler) bucketsInNamespace(ctx context.Context, o client.Object) []ctrl.Request {
	return listRequests(ctx, r.Client, client.InNamespace(o.GetName()))
}

func (r *ObjectStoreReconciler) storesOfSecret(ctx context.Context, o client.Object) []ctrl.Request {
	var out []ctrl.Request
	for _, store := range storesReferencing(ctx, r.Client, o) {
		out = append(out, ctrl.Request{NamespacedName: types.NamespacedName{Name: store.Name}})
	}
	return out
}

func storesReferencing(ctx context.Context, c client.Reader, secret client.Object) []bkv1.ObjectStore {
	list := &bkv1.ObjectStoreList{}
	if err := c.List(ctx, list, client.MatchingFields{IndexObjectStoreSecret: secret.GetNamespace() + "/" + secret.GetName()}); err != nil {
		return nil
	}
	return list.Items
}

func storeOfBucket(_ context.Context, o client.Object) []ctrl.Request {
	return []ctrl.Request{{NamespacedName: types.NamespacedName{Name: o.(*bkv1.StorageBucket).Spec.ObjectStoreRef.Name}}}
}
