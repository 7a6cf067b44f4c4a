package controller

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

// lifecycle is what one kind plugs into the reconcile prologue (runReconcile): how to
// read its status, and what to do when the object is gone, being deleted, suspended or
// to be brought in line with its spec.
type lifecycle[T client.Object] struct {
	// kind names the kind for onWrite (the status-write metric).
	kind string
	// status returns the object's status: what the status patcher compares and writes.
	status func(T) any
	// onWrite is called after every status write, with kind; may be nil.
	onWrite func(kind string)
	// gone runs when the object no longer exists, to drop what is remembered of it;
	// may be nil.
	gone func(types.NamespacedName)
	// deleting carries out the deletion and, once done, removes the finalizer.
	deleting func(context.Context, T, *statusPatcher) (ctrl.Result, error)
	// suspended reports whether reconciliation is suspended (spec.suspend); nil for
	// kinds that cannot be suspended. suspend then records the suspension.
	suspended func(T) bool
	suspend   func(context.Context, T, *statusPatcher) (ctrl.Result, error)
	// normal brings the object in line with its spec.
	normal func(context.Context, T, *statusPatcher) (ctrl.Result, error)
}

// runReconcile is how every reconcile of ours starts: it reads obj afresh (reconciles are
// level-triggered and never depend on which event woke them), takes the status patcher
// whose one deferred write skips a status that did not change, makes sure the finalizer
// is there before anything is created outside the cluster, and then hands over to the
// kind's deleting, suspend or normal step.
func runReconcile[T client.Object](ctx context.Context, c client.Client, req ctrl.Request, obj T, l lifecycle[T]) (result ctrl.Result, retErr error) {
	if err := c.Get(ctx, req.NamespacedName, obj); err != nil {
		if apierrors.IsNotFound(err) && l.gone != nil {
			l.gone(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}

	var onWrite func()
	if l.onWrite != nil {
		onWrite = func() { l.onWrite(l.kind) }
	}
	patcher := newStatusPatcher(c, obj, l.status, onWrite)
	defer func() {
		if err := patcher.patch(ctx); err != nil && retErr == nil {
			result, retErr = retryConflict(err)
		}
	}()

	if !obj.GetDeletionTimestamp().IsZero() {
		return l.deleting(ctx, obj, patcher)
	}
	// Add the finalizer before anything else: from then on nothing can exist outside the
	// cluster without the finalizer that cleans it up. The patch returns the new
	// resourceVersion, so this pass goes on at once rather than waiting for the watch
	// to bring the object back (specOrLifecycleChanged does not wake us for our own
	// finalizer). A conflict (a stale cached copy) is retried soon, not with backoff.
	if !controllerutil.ContainsFinalizer(obj, bkv1.Finalizer) {
		if err := patchMetadata(ctx, c, obj, func(o T) { controllerutil.AddFinalizer(o, bkv1.Finalizer) }); err != nil {
			return retryConflict(err)
		}
	}
	if l.suspended != nil && l.suspended(obj) {
		return l.suspend(ctx, obj, patcher)
	}
	return l.normal(ctx, obj, patcher)
}

// conflictRetryDelay is how soon a write refused for a stale resourceVersion is retried.
// A conflict means the cache had not yet caught up with a write (usually our own, a few
// milliseconds earlier), not that anything failed: it needs the watch to deliver, not
// the 1s-to-5m backoff of a failing bucket.
const conflictRetryDelay = 200 * time.Millisecond

// retryConflict turns a conflict into a prompt requeue that bypasses the rate limiter
// (a RequeueAfter also resets the object's backoff); any other error is returned as is
// and backs off.
func retryConflict(err error) (ctrl.Result, error) {
	if apierrors.IsConflict(err) {
		return ctrl.Result{RequeueAfter: conflictRetryDelay}, nil
	}
	return ctrl.Result{}, err
}
