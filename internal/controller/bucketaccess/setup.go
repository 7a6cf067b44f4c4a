package bucketaccess

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/reconcile"
)

// IndexBucketAccessBucket indexes BucketAccesses by the StorageBuckets they name.
const IndexBucketAccessBucket = "spec.buckets.name"

// IndexBucketAccessKeyless indexes the BucketAccesses that name a ServiceAccount
// (value "true"), which wait for their store's trust in the cluster's tokens.
const IndexBucketAccessKeyless = "spec.serviceAccountName.set"

// SetupIndexes registers the indexes the BucketAccess controller uses to find the
// accesses of a StorageBucket, and the keyless ones.
func SetupIndexes(ctx context.Context, mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(ctx, &bkv1.BucketAccess{}, IndexBucketAccessBucket, func(o client.Object) []string {
		var names []string
		for _, b := range o.(*bkv1.BucketAccess).Spec.Buckets {
			names = append(names, b.Name)
		}
		return names
	}); err != nil {
		return err
	}
	return mgr.GetFieldIndexer().IndexField(ctx, &bkv1.BucketAccess{}, IndexBucketAccessKeyless, func(o client.Object) []string {
		if keyless(o.(*bkv1.BucketAccess)) {
			return []string{"true"}
		}
		return nil
	})
}

// SetupWithManager wires the BucketAccess controller: its own objects (spec,
// deletion, the rotate annotation), the Secrets it owns, the StorageBuckets it
// waits for, and, for keyless accesses, their stores' trust in the cluster's tokens. It runs concurrency workers, as many as the StorageBucket controller
// (--concurrency): a reconcile waits on its store's IAM endpoint, and with a single
// worker one tenant's access on a slow or hung store would hold up every other
// tenant's.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, concurrency int) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&bkv1.BucketAccess{}, builder.WithPredicates(reconcile.SpecOrLifecycleChanged(bkv1.AnnotationRotateRequestedAt))).
		Owns(&corev1.Secret{}).
		Watches(&bkv1.StorageBucket{}, handler.EnqueueRequestsFromMapFunc(r.accessesOfBucket), builder.WithPredicates(bucketUsableChanged())).
		Watches(&bkv1.ObjectStore{}, handler.EnqueueRequestsFromMapFunc(r.keylessAccessesOfStore), builder.WithPredicates(storeTrustChanged())).
		WithOptions(controller.Options{MaxConcurrentReconciles: concurrency, RateLimiter: reconcile.RateLimiter()}).
		Complete(r)
}

// bucketUsableChanged passes StorageBucket changes that can change an access's
// verdict: creation, deletion, a new bucket name, Ready status, a guardrail's
// refusal (which a bucket that was never Ready gets without a Ready flip), or a move's
// freeze put or lifted (the keys' policies carry it where bucket policies bind no key).
func bucketUsableChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, n := e.ObjectOld.(*bkv1.StorageBucket), e.ObjectNew.(*bkv1.StorageBucket)
		return o.Status.BucketName != n.Status.BucketName || o.HomeStore() != n.HomeStore() || !o.DeletionTimestamp.Equal(n.DeletionTimestamp) ||
			reconcile.ConditionIsTrue(o.Status.Conditions, bkv1.ConditionReady) != reconcile.ConditionIsTrue(n.Status.Conditions, bkv1.ConditionReady) ||
			guardrailRefusal(o) != guardrailRefusal(n) || o.WritesFrozen() != n.WritesFrozen()
	}}
}

func (r *Reconciler) accessesOfBucket(ctx context.Context, o client.Object) []ctrl.Request {
	list := &bkv1.BucketAccessList{}
	if err := r.List(ctx, list, client.InNamespace(o.GetNamespace()), client.MatchingFields{IndexBucketAccessBucket: o.GetName()}); err != nil {
		return nil
	}
	out := make([]ctrl.Request, 0, len(list.Items))
	for _, ba := range list.Items {
		out = append(out, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ba.Namespace, Name: ba.Name}})
	}
	return out
}

// storeTrustChanged passes ObjectStore changes that can change a keyless access's
// verdict: creation, and a new WebIdentityReady verdict or registration.
func storeTrustChanged() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, n := e.ObjectOld.(*bkv1.ObjectStore), e.ObjectNew.(*bkv1.ObjectStore)
			oc := reconcile.FindCondition(o.Status.Conditions, bkv1.ConditionWebIdentityReady)
			nc := reconcile.FindCondition(n.Status.Conditions, bkv1.ConditionWebIdentityReady)
			if (oc == nil) != (nc == nil) || (nc != nil && (oc.Status != nc.Status || oc.Reason != nc.Reason || oc.ObservedGeneration != nc.ObservedGeneration)) {
				return true
			}
			return !equality.Semantic.DeepEqual(o.Status.WebIdentity, n.Status.WebIdentity)
		},
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}

// keylessAccessesOfStore enqueues the keyless accesses that may wait for the store:
// those issued on it, or on none yet.
func (r *Reconciler) keylessAccessesOfStore(ctx context.Context, o client.Object) []ctrl.Request {
	list := &bkv1.BucketAccessList{}
	if err := r.List(ctx, list, client.MatchingFields{IndexBucketAccessKeyless: "true"}); err != nil {
		return nil
	}
	var out []ctrl.Request
	for _, ba := range list.Items {
		if ba.Status.ObjectStore == "" || ba.Status.ObjectStore == o.GetName() {
			out = append(out, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ba.Namespace, Name: ba.Name}})
		}
	}
	return out
}
