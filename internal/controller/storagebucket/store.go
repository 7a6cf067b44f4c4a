package storagebucket

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	bkv1 "github.com/bucketkeeper/bucketkeeper/api/v1alpha1"
	"github.com/bucketkeeper/bucketkeeper/internal/naming"
	"github.com/bucketkeeper/bucketkeeper/internal/reconcile"
	"github.com/bucketkeeper/bucketkeeper/internal/s3"
	stores "github.com/bucketkeeper/bucketkeeper/internal/store"
)

// reconcileStore says where the bucket should live (the store the spec names, or its
// successor where it retires: retire.go), finds the ObjectStore it lives on, checks
// that this namespace may use it and that it is healthy, and picks the bucket name and
// region.
func (r *Reconciler) reconcileStore(ctx context.Context, scope *bucketScope) error {
	sb := scope.sb
	dest, err := r.destinationOf(ctx, sb)
	if err != nil {
		return err
	}
	scope.dest = dest
	store, err := r.usableStore(ctx, sb, sb.HomeStore())
	if err != nil {
		return err
	}
	c, region, err := r.bucketClient(ctx, sb, store)
	if err != nil {
		return err
	}
	me, err := r.ownerOf(ctx, sb)
	if err != nil {
		return err
	}
	scope.store, scope.s3, scope.owner = store, c, me
	scope.bucket = bucketNameFor(sb, store)
	scope.region = region
	return nil
}

// usableStore reads the bucket's ObjectStore from the cache and checks that it may be
// used now: it exists, is not being deleted, admits the namespace and is healthy. The
// full pass (reconcileStore) and the probe's short cut (unchangedScope) both start here.
func (r *Reconciler) usableStore(ctx context.Context, sb *bkv1.StorageBucket, name string) (*bkv1.ObjectStore, error) {
	store := &bkv1.ObjectStore{}
	if err := r.Get(ctx, types.NamespacedName{Name: name}, store); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, reconcile.Terminalf(bkv1.ReasonObjectStoreNotFound, "ObjectStore %q does not exist", name)
		}
		return nil, err
	}
	if !store.DeletionTimestamp.IsZero() {
		return nil, reconcile.Terminalf(bkv1.ReasonObjectStoreNotReady, "ObjectStore %q is being deleted", store.Name)
	}
	if err := r.checkNamespaceAllowed(ctx, store, sb.Namespace); err != nil {
		return nil, err
	}
	if err := storeHealth(store); err != nil {
		return nil, err
	}
	return store, nil
}

// bucketClient is the store's client for the bucket's region (the claim's, else the
// store's): requests for a bucket are signed for its own region. Building it sends
// nothing.
func (r *Reconciler) bucketClient(ctx context.Context, sb *bkv1.StorageBucket, store *bkv1.ObjectStore) (s3.Client, string, error) {
	region := sb.Spec.Region
	if region == "" {
		region = stores.Region(store)
	}
	c, err := r.Stores.ClientForRegion(ctx, store, region, sb.Namespace)
	return c, region, err
}

func (r *Reconciler) checkNamespaceAllowed(ctx context.Context, store *bkv1.ObjectStore, namespace string) error {
	if store.Spec.AllowedNamespaces == nil {
		return nil
	}
	ok, err := r.namespaceSelected(ctx, store.Spec.AllowedNamespaces, namespace)
	if err != nil {
		return reconcile.Terminalf(bkv1.ReasonNamespaceNotAllowed, "ObjectStore %q has an invalid allowedNamespaces selector: %v", store.Name, err)
	}
	if !ok {
		return reconcile.Terminalf(bkv1.ReasonNamespaceNotAllowed, "namespace %q is not allowed to use ObjectStore %q (allowedNamespaces)", namespace, store.Name)
	}
	return nil
}

// namespaceSelected says whether the namespace's labels match sel. Namespaces are
// cluster-scoped and their labels are the platform team's, not the tenant's.
func (r *Reconciler) namespaceSelected(ctx context.Context, sel *metav1.LabelSelector, namespace string) (bool, error) {
	selector, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return false, err
	}
	ns := &corev1.Namespace{}
	if err := r.Get(ctx, types.NamespacedName{Name: namespace}, ns); err != nil {
		return false, err
	}
	return selector.Matches(labels.Set(ns.Labels)), nil
}

// storeHealth reads the verdict of the store's own health check, so that when a store is
// down its buckets say so without each sending a failing request of its own. The store's
// message (endpoint addresses, TLS chain text) is the platform team's to read: tenants
// see the reason and where to look, not the store's internals.
func storeHealth(store *bkv1.ObjectStore) error {
	ready := reconcile.FindCondition(store.Status.Conditions, bkv1.ConditionReady)
	switch {
	case ready == nil || ready.ObservedGeneration != store.Generation:
		// Nothing is known yet of the store as it is now (an edit of its spec is
		// checked within moments): the store's status update wakes its buckets.
		err := reconcile.Waitingf(bkv1.ReasonObjectStoreNotReady, "waiting for ObjectStore %q to be checked", store.Name)
		err.KeepsVerdict = true
		return err
	case ready.Status == metav1.ConditionTrue:
		return nil
	}
	verdict := reconcile.StoreVerdictOf(ready.Reason)
	if verdict.Terminal {
		return reconcile.Terminalf(ready.Reason, "ObjectStore %q is not usable (%s); its status has the details", store.Name, ready.Reason)
	}
	state := verdict.BucketMessage
	if state == "" {
		state = fmt.Sprintf("is not ready (%s)", ready.Reason)
	}
	return reconcile.Waitingf(verdict.BucketReason, "ObjectStore %q %s; its status has the details", store.Name, state)
}

// bucketNameFor keeps a name once recorded, so a later change of the store's prefix
// never moves an existing claim to another bucket. The recorded name comes first, before
// spec.bucketName (immutable, so the two differ only there): a move under
// spec.move.bucketName: Lane gave the bucket a name in its new home's lane.
func bucketNameFor(sb *bkv1.StorageBucket, store *bkv1.ObjectStore) string {
	switch {
	case sb.Status.BucketName != "":
		return sb.Status.BucketName
	case sb.Spec.BucketName != "":
		return sb.Spec.BucketName
	default:
		return naming.BucketName(store.Spec.BucketNamePrefix, sb.Namespace, sb.Name)
	}
}
