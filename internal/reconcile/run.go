package reconcile

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
)

// Lifecycle is what one kind plugs into the reconcile prologue (Run): how to
// read its status, and what to do when the object is gone, being deleted, suspended or
// to be brought in line with its spec.
type Lifecycle[T client.Object] struct {
	// Kind names the kind for OnWrite (the status-write metric).
	Kind string
	// Status returns the object's status: what the status patcher compares and writes.
	Status func(T) any
	// OnWrite is called after every status write, with Kind; may be nil.
	OnWrite func(kind string)
	// Vanished runs, before Gone, when the object no longer exists, for what must still
	// be done for an object that went without its deletion step: the API server may
	// remove an object whose finalizer it reported added, when a deletion raced the
	// finalizer (kubernetes/kubernetes#77988). A non-zero result or an error is the
	// reconcile's, and Gone waits for the retry; may be nil.
	Vanished func(context.Context, types.NamespacedName) (ctrl.Result, error)
	// Gone runs when the object no longer exists, to drop what is remembered of it;
	// may be nil.
	Gone func(types.NamespacedName)
	// Deleting carries out the deletion and, once done, removes the finalizer.
	Deleting func(context.Context, T, *StatusPatcher) (ctrl.Result, error)
	// Suspended reports whether reconciliation is suspended (spec.suspend); nil for
	// kinds that cannot be suspended. Suspend then records the suspension.
	Suspended func(T) bool
	Suspend   func(context.Context, T, *StatusPatcher) (ctrl.Result, error)
	// Normal brings the object in line with its spec.
	Normal func(context.Context, T, *StatusPatcher) (ctrl.Result, error)
}

// Run is how every reconcile of ours starts: it reads obj afresh (reconciles are
// level-triggered and never depend on which event woke them), takes the status patcher
// whose one deferred write skips a status that did not change, makes sure the finalizer
// is there before anything is created outside the cluster, and then hands over to the
// kind's deleting, suspend or normal step.
func Run[T client.Object](ctx context.Context, c client.Client, req ctrl.Request, obj T, l Lifecycle[T]) (result ctrl.Result, retErr error) {
	if err := c.Get(ctx, req.NamespacedName, obj); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		if l.Vanished != nil {
			if result, err := l.Vanished(ctx, req.NamespacedName); err != nil || !result.IsZero() {
				return result, err
			}
		}
		if l.Gone != nil {
			l.Gone(req.NamespacedName)
		}
		return ctrl.Result{}, nil
	}

	var onWrite func()
	if l.OnWrite != nil {
		onWrite = func() { l.OnWrite(l.Kind) }
	}
	patcher := NewStatusPatcher(c, obj, l.Status, onWrite)
	defer func() {
		if err := patcher.patch(ctx); err != nil && retErr == nil {
			result, retErr = RetryConflict(err)
		}
	}()

	if !obj.GetDeletionTimestamp().IsZero() {
		return l.Deleting(ctx, obj, patcher)
	}
	// Add the finalizer before anything else: from then on nothing can exist outside the
	// cluster without the finalizer that cleans it up. The patch returns the new
	// resourceVersion, so this pass goes on at once rather than waiting for the watch
	// to bring the object back (specOrLifecycleChanged does not wake us for our own
	// finalizer). A conflict (a stale cached copy) is retried soon, not with backoff.
	if !controllerutil.ContainsFinalizer(obj, bkv1.Finalizer) {
		if err := PatchMetadata(ctx, c, obj, func(o T) { controllerutil.AddFinalizer(o, bkv1.Finalizer) }); err != nil {
			return RetryConflict(err)
		}
	}
	if l.Suspended != nil && l.Suspended(obj) {
		return l.Suspend(ctx, obj, patcher)
	}
	return l.Normal(ctx, obj, patcher)
}

// ConflictRetryDelay is how soon a write refused for a stale resourceVersion is retried.
// A conflict means the cache had not yet caught up with a write (usually our own, a few
// milliseconds earlier), not that anything failed: it needs the watch to deliver, not
// the 1s-to-5m backoff of a failing bucket.
const ConflictRetryDelay = 200 * time.Millisecond

// RetryConflict turns a conflict into a prompt requeue that bypasses the rate limiter
// (a RequeueAfter also resets the object's backoff); any other error is returned as is
// and backs off.
func RetryConflict(err error) (ctrl.Result, error) {
	if apierrors.IsConflict(err) {
		return ctrl.Result{RequeueAfter: ConflictRetryDelay}, nil
	}
	return ctrl.Result{}, err
}
