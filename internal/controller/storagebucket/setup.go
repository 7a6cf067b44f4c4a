package storagebucket

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/reconcile"
	stores "github.com/bucketkeeper/bucketkeeper/internal/store"
)

// SetupWithManager wires the StorageBucket controller: its own objects (spec changes,
// deletion, finalizers, probe requests), the connection Secrets it owns, the stores,
// credentials and namespaces its verdicts depend on, the queued moves an ended move
// wakes (move_queue.go), and the probe scheduler: this is
// the one place it is run (with the manager, on the leader) and its events watched.
// Each reconcile runs within ReconcileTimeout and inside a slot of its store (see
// store.SlotLimited).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, concurrency int) error {
	b := ctrl.NewControllerManagedBy(mgr).
		For(&bkv1.StorageBucket{}, builder.WithPredicates(reconcile.SpecOrLifecycleChanged(bkv1.AnnotationProbeRequestedAt, bkv1.AnnotationDeletionPolicy))).
		Owns(&corev1.Secret{}, builder.WithPredicates(notCreated())).
		Watches(&bkv1.ObjectStore{}, handler.EnqueueRequestsFromMapFunc(r.bucketsOfStore), builder.WithPredicates(storeVerdictChanged())).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.bucketsOfSecret), builder.WithPredicates(reconcile.CredentialsSecret())).
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(r.bucketsInNamespace), builder.WithPredicates(predicate.LabelChangedPredicate{})).
		WatchesRawSource(r.moveWakeUps()).
		WithOptions(controller.Options{MaxConcurrentReconciles: concurrency, RateLimiter: reconcile.RateLimiter(), ReconciliationTimeout: r.ReconcileTimeout})
	if r.Prober != nil {
		scheduler, ok := r.Prober.Scheduler.(runnableScheduler)
		if !ok {
			return fmt.Errorf("the probe scheduler %T neither runs with the manager nor has a source of events", r.Prober.Scheduler)
		}
		if err := mgr.Add(scheduler); err != nil {
			return err
		}
		b = b.WatchesRawSource(scheduler.Source())
	}
	return b.Complete(&stores.SlotLimited{Reader: mgr.GetClient(), Stores: r.Stores, Inner: r, Workers: concurrency})
}

// runnableScheduler is a ProbeScheduler that runs with the manager and sends its wake-ups
// through a source (probe.Scheduler, or the benchmark baseline's global ticker).
type runnableScheduler interface {
	ProbeScheduler
	manager.Runnable
	Source() source.Source
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

func (r *Reconciler) bucketsOfStore(ctx context.Context, o client.Object) []ctrl.Request {
	return bucketsUsing(ctx, r.Client, o.GetName())
}

func bucketsUsing(ctx context.Context, c client.Reader, store string) []ctrl.Request {
	return listRequests(ctx, c, client.MatchingFields{reconcile.IndexStorageBucketStore: store})
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
func (r *Reconciler) bucketsOfSecret(ctx context.Context, o client.Object) []ctrl.Request {
	var out []ctrl.Request
	for _, store := range reconcile.StoresReferencing(ctx, r.Client, o) {
		out = append(out, bucketsUsing(ctx, r.Client, store.Name)...)
	}
	return out
}

func (r *Reconciler) bucketsInNamespace(ctx context.Context, o client.Object) []ctrl.Request {
	return listRequests(ctx, r.Client, client.InNamespace(o.GetName()))
}
